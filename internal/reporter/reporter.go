package reporter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/githubapp"

	"github.com/JorisJonkers-dev/delivery/internal/releasepath"
)

// maxDeploymentPages is how far back the Reporter looks for a Rollout's
// Deployment: the workflow creates it when it moves the pin, so it is among a
// repository's newest; 5 pages are its 500 newest.
const maxDeploymentPages = 5

// unseenRetry is how long a repository the installation cannot see, or a
// Deployment GitHub refused a read or a write of, is left alone: GitHub
// charges the refusal, and a quiet pass costs nothing.
const unseenRetry = 10 * time.Minute

// ErrNotFound marks what a pass skips rather than fails on: a unit's source
// that is not there, or a repository the installation cannot see. It is the
// path's own mark (releasepath.ErrNotFound), so a pass skips either alike.
var ErrNotFound = releasepath.ErrNotFound

// GateReader reads the Release Gate's warmup records (releasepath.GateClient
// reads them over the gate's GET /releases).
type GateReader interface {
	Releases(ctx context.Context) (map[string]releasepath.Warmup, error)
}

// Reporter keeps the Deployments of the units in Namespace current.
type Reporter struct {
	Namespace   string
	Cluster     Cluster
	Deployments Deployments
	Gate        GateReader
	Logger      *slog.Logger
	// Now is the clock; time.Now when nil.
	Now func() time.Time

	mu sync.Mutex
	// unseen holds when each repository the installation could not see was
	// last asked for.
	unseen backoff[githubapp.Repository]
	// skipped keeps, per unit, why it was last skipped, so the reason is
	// logged once rather than every pass.
	skipped map[string]string
	// refused holds, per unit, the Deployment GitHub last refused a read or
	// a write of, and when.
	refused backoff[string]
}

// backoff holds, per key, a refusal GitHub charged for, and when it came,
// so that the same question is not asked again for unseenRetry.
type backoff[K comparable] map[K]charged

type charged struct {
	// deployment is what was asked of the key: a Deployment's id, 0 for a
	// repository's list.
	deployment int64
	at         time.Time
	err        error
}

// still returns the refusal k met when asked for deployment less than
// unseenRetry before now, and nil when it may be asked again.
func (b backoff[K]) still(k K, deployment int64, now time.Time) error {
	ref, ok := b[k]
	if !ok || ref.deployment != deployment || now.Sub(ref.at) >= unseenRetry {
		delete(b, k)
		return nil
	}
	return ref.err
}

func (b *backoff[K]) mark(k K, deployment int64, now time.Time, err error) {
	if *b == nil {
		*b = backoff[K]{}
	}
	(*b)[k] = charged{deployment: deployment, at: now, err: err}
}

// Pass looks at every unit once and writes every status that moved. A unit
// that cannot be read or written does not stop the others; the pass then
// fails naming the first such unit. A unit GitHub refuses for what it is
// (ErrRefused) is skipped and logged once instead: failing every pass for
// it would only get the Reporter restarted by its liveness probe.
func (r *Reporter) Pass(ctx context.Context) error {
	units, err := r.Cluster.Units(ctx, r.Namespace)
	if err != nil {
		return err
	}
	p := &pass{r: r, lists: map[githubapp.Repository]*repoDeployments{}}
	var errs, refused []error
	for _, u := range units {
		if err := p.unit(ctx, u); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if errors.Is(err, ErrRefused) {
				r.skip(u.Name, err.Error())
				refused = append(refused, fmt.Errorf("unit %s: %w", u.Name, err))
				continue
			}
			r.Logger.Error("cannot report on a unit", slog.String("unit", u.Name), slog.String("error", err.Error()))
			errs = append(errs, fmt.Errorf("unit %s: %w", u.Name, err))
		}
	}
	r.forgetGone(units)
	if len(refused) > 0 && len(refused) == len(units) {
		// Every unit refused is the App's doing (a permission it lacks),
		// not each unit's: the pass fails so that it shows.
		return fmt.Errorf("GitHub refused every unit, first: %w", refused[0])
	}
	if len(errs) > 0 {
		return fmt.Errorf("%d of %d units not reported on, first: %w", len(errs), len(units), errs[0])
	}
	return nil
}

// pass holds what one pass read once and shares between units: each
// repository's Deployments, and the gate's answer.
type pass struct {
	r     *Reporter
	lists map[githubapp.Repository]*repoDeployments

	gateAsked bool
	gate      releasepath.Gate
}

type repoDeployments struct {
	seen []Deployment
	next int
	// err is what reading the next page met; every unit of the repository
	// meets it for the rest of the pass.
	err error
}

func (p *pass) unit(ctx context.Context, u releasepath.UnitObject) error {
	rollout, err := releasepath.RolloutOf(u.Annotations)
	if err != nil {
		p.r.skip(u.Name, err.Error())
		return nil
	}
	if u.SourceKind != "OCIRepository" {
		p.r.skip(u.Name, "it applies a "+u.SourceKind+", not an OCIRepository pin")
		return nil
	}
	source, err := p.r.Cluster.Source(ctx, u.Source.Namespace, u.Source.Name)
	if errors.Is(err, ErrNotFound) {
		p.r.skip(u.Name, err.Error())
		return nil
	}
	if err != nil {
		return err
	}
	d, found, err := p.find(ctx, rollout.Repository, u.Project, rollout.Version)
	if errors.Is(err, ErrNotFound) {
		p.r.skip(u.Name, err.Error())
		return nil
	}
	if err != nil {
		return err
	}
	if !found {
		p.r.skip(u.Name, fmt.Sprintf("%s has no Deployment whose payload names project %s version %s",
			rollout.Repository, u.Project, rollout.Version))
		return nil
	}
	if err := p.report(ctx, u, rollout, source, d); err != nil {
		return err
	}
	// Reported on: a later skip is news again. A unit GitHub refuses is
	// not, so its skip is logged once however many passes meet it.
	p.r.reporting(u.Name)
	return nil
}

// report reads the Rollout's Deployment's statuses and the members, and
// writes the status the cluster shows when it moved.
func (p *pass) report(ctx context.Context, u releasepath.UnitObject, rollout releasepath.Rollout, source releasepath.Source, d Deployment) error {
	if err := p.r.stillRefused(u.Name, d.ID); err != nil {
		return err
	}
	statuses, err := p.r.Deployments.Statuses(ctx, rollout.Repository, d.ID)
	if err != nil {
		p.r.markRefused(u.Name, d.ID, err)
		return err
	}
	in := releasepath.Input{
		Project: u.Project, Version: rollout.Version, RolloutDigest: rollout.Digest, Pin: source.Pin, Source: source.Ready, Unit: u.Unit,
		DeploymentCreated: d.CreatedAt, RolloutURL: rollout.URL, Latest: statuses.Latest,
	}
	if releasepath.Final(in.Latest) {
		return nil // nothing more to read: the Deployment takes nothing
	}
	if in.Applied() {
		for _, c := range u.Canaries {
			m, err := p.r.Cluster.Member(ctx, c)
			if err != nil {
				return err
			}
			in.Members = append(in.Members, m)
		}
		in.Gate = p.gateAnswer(ctx)
	}
	decision := releasepath.Decide(in)
	if !decision.Write {
		return nil
	}
	if err := p.r.Deployments.Write(ctx, rollout.Repository, d.ID, decision.Status, statuses.LogURL); err != nil {
		p.r.markRefused(u.Name, d.ID, err)
		return err
	}
	p.r.Logger.Info("deployment status written", slog.String("unit", u.Name), slog.String("repository", rollout.Repository.String()),
		slog.Int64("deployment", d.ID), slog.String("state", decision.Status.State), slog.String("description", decision.Status.Description))
	return nil
}

// find looks for the newest Deployment of repo whose payload names project
// and version, reading the repository's pages only as far as needed, once per pass.
func (p *pass) find(ctx context.Context, repo githubapp.Repository, project, version string) (Deployment, bool, error) {
	list, ok := p.lists[repo]
	if !ok {
		if err := p.r.stillUnseen(repo); err != nil {
			return Deployment{}, false, err
		}
		list = &repoDeployments{next: 1}
		p.lists[repo] = list
	}
	for i := 0; ; {
		for ; i < len(list.seen); i++ {
			if PayloadNames(list.seen[i].Payload, project, version) {
				return list.seen[i], true, nil
			}
		}
		if list.err != nil {
			return Deployment{}, false, list.err
		}
		if list.next == 0 || list.next > maxDeploymentPages {
			return Deployment{}, false, nil
		}
		page, next, err := p.r.Deployments.List(ctx, repo, list.next)
		if err != nil {
			if errors.Is(err, ErrNotFound) {
				p.r.markUnseen(repo, err)
			}
			list.err = err
			return Deployment{}, false, err
		}
		list.seen = append(list.seen, page...)
		list.next = next
	}
}

// gateAnswer asks the gate once per pass, and only when a released unit
// needs it; a gate that does not answer is logged and counts as not answered.
func (p *pass) gateAnswer(ctx context.Context) releasepath.Gate {
	if !p.gateAsked {
		p.gateAsked = true
		warmups, err := p.r.Gate.Releases(ctx)
		if err != nil {
			p.r.Logger.Warn("the Release Gate did not answer; promoted releases stay in progress", slog.String("error", err.Error()))
		} else {
			p.gate = releasepath.Gate{Answered: true, Warmups: warmups}
		}
	}
	return p.gate
}

func (r *Reporter) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// stillUnseen returns the error a repository met when it was last asked
// for less than unseenRetry ago, and nil when it may be asked again.
func (r *Reporter) stillUnseen(repo githubapp.Repository) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.unseen.still(repo, 0, r.now())
}

func (r *Reporter) markUnseen(repo githubapp.Repository, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.unseen.mark(repo, 0, r.now(), err)
}

// stillRefused returns the refusal the unit's Deployment id met less than
// unseenRetry ago, and nil when it may be asked again. A new release's
// Deployment is asked at once.
func (r *Reporter) stillRefused(unit string, id int64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.refused.still(unit, id, r.now())
}

// markRefused remembers err when GitHub refused the unit's Deployment id.
func (r *Reporter) markRefused(unit string, id int64, err error) {
	if !errors.Is(err, ErrRefused) {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.refused.mark(unit, id, r.now(), err)
}

// skip logs why a unit is not reported on, once per reason.
func (r *Reporter) skip(unit, why string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.skipped == nil {
		r.skipped = map[string]string{}
	}
	if r.skipped[unit] == why {
		return
	}
	r.skipped[unit] = why
	level := slog.LevelWarn
	if why == releasepath.ErrNoRollout.Error() {
		level = slog.LevelInfo
	}
	r.Logger.Log(context.Background(), level, "unit skipped", slog.String("unit", unit), slog.String("reason", why))
}

// reporting forgets a unit's skip reason, so that a later one is logged again.
func (r *Reporter) reporting(unit string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.skipped, unit)
}

func (r *Reporter) forgetGone(units []releasepath.UnitObject) {
	r.mu.Lock()
	defer r.mu.Unlock()
	present := make(map[string]bool, len(units))
	for _, u := range units {
		present[u.Name] = true
	}
	for name := range r.skipped {
		if !present[name] {
			delete(r.skipped, name)
		}
	}
	for name := range r.refused {
		if !present[name] {
			delete(r.refused, name)
		}
	}
}
