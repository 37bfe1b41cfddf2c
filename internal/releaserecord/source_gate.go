package releaserecord

import (
	"context"
	"fmt"
	"time"

	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/JorisJonkers-dev/delivery/internal/kubeclient"
	"github.com/JorisJonkers-dev/delivery/internal/release"
	"github.com/JorisJonkers-dev/delivery/internal/releasepath"
)

// HeldAnalysisFailed is the gate's reason for a release Flagger failed after
// the gate first saw it pinned, as the gate's log and metrics name it.
const HeldAnalysisFailed = "analysis-failed"

// GateRecords reads the Release Gate's word from its own record of each
// Application: the ConfigMap <namespace>.<application>-release-record in
// the gate's namespace, which names the revision applied but not serving
// yet (pinned), when the gate first saw it (since) and, from a gate that
// records it, why it holds it (held). What it says with the Canaries is
// decided by HeldOf.
type GateRecords struct {
	// Namespace is the gate's, where it keeps its records.
	Namespace string
	client    client.Reader
}

var _ Holds = (*GateRecords)(nil)

// NewGateRecords reads the gate's records in namespace, with uncached gets.
func NewGateRecords(cfg *rest.Config, namespace string) (*GateRecords, error) {
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	c, err := client.New(kubeclient.Paced(cfg), client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return &GateRecords{Namespace: namespace, client: c}, nil
}

// Name is "release-gate".
func (g *GateRecords) Name() string { return "release-gate" }

// Held gets the record of the Application the members' Canaries carry and
// decides from it and them. No record is no release pinned: not held.
func (g *GateRecords) Held(ctx context.Context, members []releasepath.Member) (string, bool, error) {
	app, ok := ApplicationOf(members)
	if !ok {
		return "", false, nil
	}
	name := release.RecordConfigMap(app.Namespace, app.Name)
	var cm corev1.ConfigMap
	err := g.client.Get(ctx, types.NamespacedName{Namespace: g.Namespace, Name: name}, &cm)
	switch {
	case apierrors.IsNotFound(err):
		return HeldOf(nil, members), true, nil
	case err != nil:
		return "", false, fmt.Errorf("read the gate's record %s/%s: %w", g.Namespace, name, err)
	}
	rec, decodeErr := release.DecodeRecord(app.Namespace, app.Name, cm.Data)
	if decodeErr != nil {
		// A record the gate cannot answer from either, which it reports
		// itself: its word is not known, and no look fails for it.
		return "", false, nil //nolint:nilerr // an unreadable record is no word, not a failed read
	}
	return HeldOf(&rec, members), true, nil
}

// Application is a gated Application: the namespace of its Canaries and the
// name their webhooks carry.
type Application struct{ Namespace, Name string }

// ApplicationOf is the one Application every member's Canary carries; ok is
// false when a member has no Canary, carries none, or they disagree.
func ApplicationOf(members []releasepath.Member) (Application, bool) {
	var app Application
	for i, m := range members {
		if !m.State.HasCanary {
			return Application{}, false
		}
		name, _, err := release.CanaryRelease(m.State.Canary)
		this := Application{Namespace: m.Namespace, Name: name}
		if err != nil || name == "" || (i > 0 && this != app) {
			return Application{}, false
		}
		app = this
	}
	return app, len(members) > 0
}

// HeldOf is the reason the gate holds the release its members carry, from
// its record (nil: none): "" when it does not hold it for a reason the
// record and the Canaries show. The gate holds only a release it has pinned
// (applied, not serving) and writes its reason into the record (stale-proof,
// migration-failed or analysis-failed): that word is said while every
// member's Canary carries the pinned revision, as the gate decides only
// then; once they carry another, the hold is the release before's.
//
// A gate older than the recorded hold wrote none, so for a record without
// one the reason is inferred as before: analysis-failed when Flagger failed
// a member carrying the pinned revision at or after the second the gate
// first saw it (the gate's own rule, releasegate.FailedSince: an earlier
// failure is the release before's). A newer gate's record without a hold
// reads the same way: the rule is the one the gate holds by, so it says no
// more than the gate's next round decides and writes. The older
// gate's other reasons rest on its inputs and Jobs, which its record does
// not carry: they are not said.
func HeldOf(rec *release.Record, members []releasepath.Member) string {
	if rec == nil || rec.Pinned == "" || rec.Since == nil {
		return ""
	}
	if rec.Held != nil {
		if !allCarry(members, rec.Pinned) {
			return ""
		}
		return rec.Held.Reason
	}
	for _, m := range members {
		if !m.State.HasCanary || m.State.Canary.Phase != flaggerv1.CanaryPhaseFailed {
			continue
		}
		if _, rev, err := release.CanaryRelease(m.State.Canary); err != nil || rev != rec.Pinned {
			continue
		}
		if !m.ChangedAt.Before(rec.Since.Truncate(time.Second)) {
			return HeldAnalysisFailed
		}
	}
	return ""
}

// allCarry reports whether every member's Canary carries revision.
func allCarry(members []releasepath.Member, revision string) bool {
	for _, m := range members {
		if !m.State.HasCanary {
			return false
		}
		if _, rev, err := release.CanaryRelease(m.State.Canary); err != nil || rev != revision {
			return false
		}
	}
	return len(members) > 0
}
