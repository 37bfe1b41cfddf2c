package releasegate

import (
	"fmt"
	"maps"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Outcome is how the gate answers a question.
type Outcome int

// The three outcomes; the HTTP handlers map them to 200, 409 and 503.
const (
	Yes Outcome = iota
	NotYet
	Unanswerable
)

// Answer is a decision: its outcome and one line saying why. For Unanswerable
// the reason is the cause the gate logs; the caller is told only that the gate
// could not answer.
type Answer struct {
	Outcome Outcome
	Reason  string
}

func yes(format string, args ...any) Answer {
	return Answer{Outcome: Yes, Reason: fmt.Sprintf(format, args...)}
}

func notYet(format string, args ...any) Answer {
	return Answer{Outcome: NotYet, Reason: fmt.Sprintf(format, args...)}
}

func unanswerable(format string, args ...any) Answer {
	return Answer{Outcome: Unanswerable, Reason: fmt.Sprintf(format, args...)}
}

// Flagger's Canary phases the gate reads.
const (
	PhaseInitialized      = "Initialized"
	PhaseWaiting          = "Waiting"
	PhaseProgressing      = "Progressing"
	PhaseWaitingPromotion = "WaitingPromotion"
	PhasePromoting        = "Promoting"
	PhaseFinalising       = "Finalising"
	PhaseSucceeded        = "Succeeded"
	PhaseFailed           = "Failed"
)

// RollbackRestarts is how many restarts of one pod of a new copy mean the
// release can no longer pass.
const RollbackRestarts = 3

// Labels deploy-kit puts on every object it renders.
const (
	LabelName      = "app.kubernetes.io/name"
	LabelInstance  = "app.kubernetes.io/instance"
	LabelPartOf    = "app.kubernetes.io/part-of"
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "deploy-kit"
)

// FlaggerIdentity says which pods are Flagger: the only callers the gate answers.
type FlaggerIdentity struct {
	Namespace      string
	Selector       string
	ServiceAccount string
}

// IsFlagger reports whether addr, a connection's source address, belongs to a
// pod of Flagger among pods (the pods of Flagger's namespace its selector
// matches): Running, not terminating, not on the host network (where its
// address would be the node's, shared with everything else there) and under
// Flagger's ServiceAccount.
func IsFlagger(addr netip.Addr, pods []Pod, serviceAccount string) bool {
	addr = addr.Unmap()
	if !addr.IsValid() {
		return false
	}
	for _, p := range pods {
		if !p.Running || p.Terminating || p.HostNetwork || p.ServiceAccount != serviceAccount {
			continue
		}
		for _, ip := range p.IPs {
			if a, err := netip.ParseAddr(ip); err == nil && a.Unmap() == addr {
				return true
			}
		}
	}
	return false
}

// CheckInputs holds the inputs ConfigMap to the render's labels: inputs that
// do not say they are this Application's are not its inputs.
func CheckInputs(application string, cm ConfigMap) (*Inputs, error) {
	if cm.Labels[LabelPartOf] != application || cm.Labels[LabelManagedBy] != ManagedBy {
		return nil, fmt.Errorf("ConfigMap %s is not labelled %s=%s, %s=%s",
			InputsConfigMap(application), LabelPartOf, application, LabelManagedBy, ManagedBy)
	}
	raw, ok := cm.Data[InputsKey]
	if !ok {
		return nil, fmt.Errorf("ConfigMap %s has no key %s", InputsConfigMap(application), InputsKey)
	}
	in, err := DecodeInputs([]byte(raw))
	if err != nil {
		return nil, fmt.Errorf("ConfigMap %s: %w", InputsConfigMap(application), err)
	}
	return in, nil
}

// CanaryRelease is the Application and revision a Canary's webhooks carry.
// A Canary whose webhooks disagree names no one release, and the gate cannot
// answer for it.
func CanaryRelease(c Canary) (application, revision string, err error) {
	for _, md := range c.Webhooks {
		app, rev := md["application"], md["revision"]
		if app == "" && rev == "" {
			continue // a webhook that is not the gate's
		}
		if application == "" && revision == "" {
			application, revision = app, rev
			continue
		}
		if app != application || rev != revision {
			return "", "", fmt.Errorf("Canary %s carries two releases in its webhooks: %s@%s and %s@%s",
				c.Name, application, revision, app, rev)
		}
	}
	return application, revision, nil
}

// staleReason is the one refusal for a question about a Canary that is not
// there and one about a render that has been replaced: they read the same, so
// an answer says nothing about which Canaries exist.
func staleReason(q Question) string {
	return fmt.Sprintf("Canary %s does not carry revision %s", q.Process, q.Tag())
}

// Identify decides whether a question is about the asking member's current
// release: its Canary must be there, be this Application's and carry this
// revision. found is false when the Canary was not there.
func Identify(q Question, in *Inputs, c Canary, found bool) (Answer, bool) {
	if _, ok := in.Member(q.Process); !ok {
		return unanswerable("process %s is no member of Application %s", q.Process, q.Application), false
	}
	if !found {
		return notYet("%s", staleReason(q)), false
	}
	app, rev, err := CanaryRelease(c)
	if err != nil {
		return unanswerable("%v", err), false
	}
	if app != "" && app != q.Application {
		return unanswerable("Canary %s belongs to Application %s, not %s", c.Name, app, q.Application), false
	}
	if app == "" || rev != q.Revision {
		return notYet("%s", staleReason(q)), false
	}
	return Answer{}, true
}

// jobTag matches the 12 hex digits a release Job's name ends in.
var jobTag = regexp.MustCompile(`^[a-f0-9]{12}$`)

// isReleaseJob reports whether j is a release Job of its identity, named
// <identity>-<tag>; down Jobs (<identity>-down-<tag>) and scheduled ones are not.
func isReleaseJob(j Job) bool {
	if j.Scheduled || j.Identity == "" {
		return false
	}
	tag, ok := strings.CutPrefix(j.Name, j.Identity+"-")
	return ok && jobTag.MatchString(tag)
}

// MayStart answers confirm-rollout: yes once the member's Deployment holds
// this revision's template (TemplateOfRevision) and every step of this
// revision has completed. Every identity that has a release Job of the
// Application is a step, and so is the inputs' migration before its first
// Job exists; each step's Job of this revision must be there and complete.
func MayStart(q Question, in *Inputs, jobs []Job, render Render) Answer {
	if a, ok := TemplateOfRevision(q, render); !ok {
		return a
	}
	steps := map[string]bool{}
	if in.Migration != nil {
		steps[in.Migration.Identity] = true
	}
	byName := make(map[string]Job, len(jobs))
	for _, j := range jobs {
		byName[j.Name] = j
		if isReleaseJob(j) {
			steps[j.Identity] = true
		}
	}
	if len(steps) == 0 {
		return yes("Application %s has no release step", q.Application)
	}
	identities := make([]string, 0, len(steps))
	for id := range steps {
		identities = append(identities, id)
	}
	slices.Sort(identities)
	var waiting []string
	for _, id := range identities {
		name := id + "-" + q.Tag()
		j, ok := byName[name]
		switch {
		case !ok || j.Identity != id:
			waiting = append(waiting, "job "+name+" not applied")
		case j.Failed:
			waiting = append(waiting, "job "+name+" failed")
		case !j.Complete:
			waiting = append(waiting, "job "+name+" not complete")
		}
	}
	if len(waiting) > 0 {
		return notYet("waiting for %s", list(waiting))
	}
	return yes("every step of %s completed (%s)", q.Tag(), list(identities))
}

// CopyState is what a member's new copy shows: how many pods, how many ready
// and the pod that restarted most.
type CopyState struct {
	Pods, Ready   int
	MostRestarted string
	MostRestarts  int
	FirstNotReady string
}

// ReadCopy sums up the pods of a new copy. A pod being deleted is no pod of
// the copy, as a ReplicaSet does not count it ready: it stays until its
// kubelet confirms, and will serve no one. Its restarts still count, since
// they say how the new code ran.
func ReadCopy(pods []Pod) CopyState {
	var s CopyState
	for _, p := range pods {
		if p.Restarts > s.MostRestarts {
			s.MostRestarts, s.MostRestarted = p.Restarts, p.Name
		}
		if p.Terminating {
			continue
		}
		s.Pods++
		if p.Ready {
			s.Ready++
		} else if s.FirstNotReady == "" {
			s.FirstNotReady = p.Name
		}
	}
	return s
}

// ready is a new copy with at least one pod, every one of them ready.
func (s CopyState) ready() bool { return s.Pods > 0 && s.Ready == s.Pods }

// Checks answers rollout, once per analysis iteration: yes when the member's
// new copy has a pod, every pod is ready and none has restarted.
func Checks(q Question, pods []Pod) Answer {
	s := ReadCopy(pods)
	switch {
	case s.Pods == 0:
		return notYet("new copy %s has no pod", q.Process)
	case s.Ready < s.Pods:
		return notYet("new copy %s: pod %s not ready (%d of %d ready)", q.Process, s.FirstNotReady, s.Ready, s.Pods)
	case s.MostRestarts > 0:
		return notYet("new copy %s: pod %s restarted %d times", q.Process, s.MostRestarted, s.MostRestarts)
	}
	return yes("new copy %s: %d pods ready, none restarted", q.Process, s.Pods)
}

// MemberState is what the gate read of one member for the barrier or the
// rollback: its Canary, its Deployments where it needed them, and the
// revision it last asked at.
type MemberState struct {
	Process string
	Canary  Canary
	// HasCanary is false when the member's Canary is not there.
	HasCanary bool
	// Target and Primary are the Deployments <process> and <process>-primary;
	// nil when not read or not there.
	Target, Primary *Deployment
	// Pods are the new copy's pods, for the rollback.
	Pods []Pod
	// Asked is the revision the member last asked the gate at; "" when it has
	// not asked since the gate started.
	Asked string
	// MovedConfigs are the ConfigMaps the new copy takes environment from
	// whose data Flagger's copy for the primary does not hold yet
	// (MovedConfigs); nil when not read.
	MovedConfigs []string
}

// passedPhase is a Canary that waits for promotion or is past it.
func passedPhase(phase string) bool {
	switch phase {
	case PhaseWaitingPromotion, PhasePromoting, PhaseFinalising, PhaseSucceeded:
		return true
	}
	return false
}

// PassedOnRecord reports whether a member counts as passed from its Canary
// and the gate's notes alone: it waits for promotion or is past it, and it
// asked at this revision, so the phase is not the previous release's.
func PassedOnRecord(q Question, m MemberState) bool {
	return m.HasCanary && passedPhase(m.Canary.Phase) && m.Asked == q.Revision
}

// memberOfRelease reports why a member's Canary is not part of this release,
// or "" when it is.
func memberOfRelease(q Question, m MemberState) (Answer, bool) {
	if !m.HasCanary {
		return notYet("%s has no Canary", m.Process), false
	}
	app, rev, err := CanaryRelease(m.Canary)
	if err != nil {
		return unanswerable("%v", err), false
	}
	if app != "" && app != q.Application {
		return unanswerable("Canary %s belongs to Application %s, not %s", m.Process, app, q.Application), false
	}
	if rev != q.Revision {
		return notYet("%s does not carry revision %s yet", m.Process, q.Tag()), false
	}
	return Answer{}, true
}

// Unchanged reports whether a member did not change in the release: Flagger
// records it as serving what it last saw, and its primary runs what its
// Deployment holds. Flagger's record alone is a tick behind a Deployment that
// just changed, so both must hold. The reason says which does not.
func Unchanged(m MemberState) (bool, string) {
	c := m.Canary
	if c.Phase != PhaseInitialized && c.Phase != PhaseSucceeded {
		return false, "is " + phaseName(c.Phase)
	}
	if c.LastAppliedSpec != c.LastPromotedSpec {
		return false, "has a spec Flagger has not promoted"
	}
	if m.Target == nil {
		return false, "has no Deployment " + m.Process
	}
	if m.Primary == nil {
		return false, "has no primary " + m.Process + "-primary"
	}
	if diff := SameProgram(*m.Target, *m.Primary); diff != "" {
		return false, "primary does not run what its Deployment holds (" + diff + ")"
	}
	if len(m.MovedConfigs) > 0 {
		return false, "primary does not run what its Deployment holds (configMap " + strings.Join(m.MovedConfigs, ", ") + " changed)"
	}
	return true, ""
}

// ConfigsByName keys a namespace's ConfigMaps by name, as MovedConfigs
// reads them.
func ConfigsByName(cms []ConfigMap) map[string]ConfigMap {
	byName := make(map[string]ConfigMap, len(cms))
	for _, cm := range cms {
		byName[cm.Name] = cm
	}
	return byName
}

// MovedConfigs names the ConfigMaps target takes environment from, by
// reference or whole, whose data differs from the copy Flagger keeps for the
// primary (<name>-primary, which the primary refers to instead): Flagger
// copies a tracked ConfigMap's data only when it promotes, so a release that
// changes a ConfigMap alone leaves the pod template as it was, and a tick
// passes before Flagger's record shows it. A copy that is not there counts
// as moved; a ConfigMap the primary refers to by its own name is shared and
// cannot differ. configs are the namespace's ConfigMaps by name.
func MovedConfigs(target, primary Deployment, configs map[string]ConfigMap) []string {
	tracked := map[string]bool{}
	for _, pair := range [][2][]Container{{target.InitContainers, primary.InitContainers}, {target.Containers, primary.Containers}} {
		for i := range min(len(pair[0]), len(pair[1])) {
			for _, ref := range configRefs(pair[0][i], pair[1][i]) {
				tracked[ref] = true
			}
		}
	}
	var moved []string
	for name := range tracked {
		own, ownFound := configs[name]
		copied, copyFound := configs[name+primarySuffix]
		// Flagger copies data alone, never binaryData, so that is what is
		// compared.
		if !ownFound || !copyFound || !maps.Equal(own.Data, copied.Data) {
			moved = append(moved, name)
		}
	}
	slices.Sort(moved)
	return moved
}

// configRefs are the ConfigMaps a target container takes environment from
// that the primary's container refers to as Flagger's copy.
func configRefs(target, primary Container) []string {
	var out []string
	for i := range min(len(target.Env), len(primary.Env)) {
		w, g := target.Env[i].From, primary.Env[i].From
		if w != nil && g != nil && w.Kind == "configMap" && g.Name == w.Name+primarySuffix {
			out = append(out, w.Name)
		}
	}
	for i := range min(len(target.EnvFrom), len(primary.EnvFrom)) {
		w, g := target.EnvFrom[i], primary.EnvFrom[i]
		if w.Kind == "configMap" && g.Name == w.Name+primarySuffix {
			out = append(out, w.Name)
		}
	}
	return out
}

func phaseName(phase string) string {
	if phase == "" {
		return "without a phase"
	}
	return phase
}

// MayPromote answers confirm-promotion, the barrier: yes when every member
// has passed its analysis for this revision or did not change in it. The
// asking member is held to its own record: waiting for promotion, or
// analysed with every iteration counted.
func MayPromote(q Question, in *Inputs, members []MemberState) Answer {
	var waiting []string
	for _, m := range members {
		if m.Process == q.Process {
			c := m.Canary
			analysed := c.Phase == PhaseProgressing && c.Iterations >= in.Analysis.Iterations
			if c.Phase != PhaseWaitingPromotion && !analysed {
				waiting = append(waiting, fmt.Sprintf("%s is %s (%d of %d iterations)",
					m.Process, phaseName(c.Phase), c.Iterations, in.Analysis.Iterations))
			}
			continue
		}
		if a, ok := memberOfRelease(q, m); !ok {
			if a.Outcome == Unanswerable {
				return a
			}
			waiting = append(waiting, a.Reason)
			continue
		}
		if PassedOnRecord(q, m) {
			continue
		}
		if ok, why := Unchanged(m); !ok {
			// A Succeeded member is either unchanged or promoted at this
			// revision; Unchanged says best why it is neither.
			if passedPhase(m.Canary.Phase) && m.Canary.Phase != PhaseSucceeded {
				why = "is " + m.Canary.Phase + " but has not asked at " + q.Tag()
			}
			waiting = append(waiting, m.Process+" "+why)
		}
	}
	if len(waiting) > 0 {
		return notYet("barrier closed: %s", list(waiting))
	}
	return yes("barrier open: every member of %s passed %s or did not change", q.Application, q.Tag())
}

// RollbackEligible reports whether the asking member may be rolled back at
// all: while it is analysed, or while it waits at the barrier with its new
// copy ready. Otherwise the answer is no without reading anything more.
func RollbackEligible(own MemberState, ownCopy CopyState) (bool, string) {
	switch own.Canary.Phase {
	case PhaseProgressing:
		return true, ""
	case PhaseWaitingPromotion:
		if ownCopy.ready() {
			return true, ""
		}
		return false, fmt.Sprintf("%s waits at the barrier without a ready new copy", own.Process)
	}
	return false, fmt.Sprintf("%s is %s, neither analysed nor at the barrier", own.Process, phaseName(own.Canary.Phase))
}

// Rollback answers rollback: yes when the release can no longer pass, because
// a pod of the member's new copy restarted RollbackRestarts times or more, or
// another member's Canary carries this revision and has failed or has such a
// pod. Any other answer leaves the release where it is.
func Rollback(q Question, own MemberState, others []MemberState) Answer {
	ownCopy := ReadCopy(own.Pods)
	if ok, why := RollbackEligible(own, ownCopy); !ok {
		return notYet("no rollback: %s", why)
	}
	if ownCopy.MostRestarts >= RollbackRestarts {
		return yes("roll back: pod %s of new copy %s restarted %d times", ownCopy.MostRestarted, own.Process, ownCopy.MostRestarts)
	}
	for _, m := range others {
		if a, ok := memberOfRelease(q, m); !ok {
			if a.Outcome == Unanswerable {
				return a // a Canary of another Application, as for the barrier
			}
			continue // not in this release: its state says nothing about it
		}
		if m.Canary.Phase == PhaseFailed {
			return yes("roll back: %s failed its analysis at %s", m.Process, q.Tag())
		}
		if s := ReadCopy(m.Pods); s.MostRestarts >= RollbackRestarts {
			return yes("roll back: pod %s of new copy %s restarted %d times", s.MostRestarted, m.Process, s.MostRestarts)
		}
	}
	return notYet("no rollback: the release can still pass")
}

// SameProgram compares what two Deployments run, container by container:
// images, commands, arguments and environment. It returns "" when they are the
// same, or what differs first. Flagger renames the ConfigMaps and Secrets it
// tracks to <name>-primary in the primary, so a reference to X in the
// Deployment and to X-primary in the primary are the same.
func SameProgram(target, primary Deployment) string {
	if d := sameContainers("init container", target.InitContainers, primary.InitContainers); d != "" {
		return d
	}
	return sameContainers("container", target.Containers, primary.Containers)
}

func sameContainers(kind string, want, got []Container) string {
	if len(want) != len(got) {
		return fmt.Sprintf("%d %ss, primary has %d", len(want), kind, len(got))
	}
	for i := range want {
		w, g := want[i], got[i]
		switch {
		case w.Name != g.Name:
			return fmt.Sprintf("%s %d is %s, primary has %s", kind, i, w.Name, g.Name)
		case w.Image != g.Image:
			return fmt.Sprintf("%s %s image", kind, w.Name)
		case !slices.Equal(w.Command, g.Command):
			return fmt.Sprintf("%s %s command", kind, w.Name)
		case !slices.Equal(w.Args, g.Args):
			return fmt.Sprintf("%s %s arguments", kind, w.Name)
		case !sameEnv(w.Env, g.Env) || !sameEnvFrom(w.EnvFrom, g.EnvFrom):
			return fmt.Sprintf("%s %s environment", kind, w.Name)
		}
	}
	return ""
}

func sameEnv(want, got []EnvVar) bool {
	return slices.EqualFunc(want, got, func(w, g EnvVar) bool {
		if w.Name != g.Name || w.Value != g.Value || (w.From == nil) != (g.From == nil) {
			return false
		}
		return w.From == nil || sameSource(*w.From, *g.From)
	})
}

func sameEnvFrom(want, got []EnvSource) bool { return slices.EqualFunc(want, got, sameSource) }

func sameSource(w, g EnvSource) bool {
	if w.Kind != g.Kind || w.Key != g.Key || w.Prefix != g.Prefix {
		return false
	}
	if w.Name == g.Name {
		return true
	}
	tracked := w.Kind == "configMap" || w.Kind == "secret"
	return tracked && g.Name == w.Name+"-primary"
}

// list joins what a reason names, keeping the reply to one short line.
func list(items []string) string {
	const most = 5
	if len(items) > most {
		return strings.Join(items[:most], "; ") + "; and " + strconv.Itoa(len(items)-most) + " more"
	}
	return strings.Join(items, "; ")
}
