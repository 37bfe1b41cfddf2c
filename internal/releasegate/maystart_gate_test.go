package releasegate_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/release"
	"github.com/JorisJonkers-dev/delivery/internal/releasegate"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
)

const prevTag = "2f4a6c8e0b2d"

// TestMayStartWaitsForTheRenderInFluxsOrder applies a release as Flux does,
// Deployments before custom resources, and asks in between: while the
// Deployment holds the new template and its Canary still carries the revision
// that serves, whose steps all completed, a yes would start new code on the
// old schema.
func TestMayStartWaitsForTheRenderInFluxsOrder(t *testing.T) {
	cp, gate, ns := gateAndNamespace(t)

	a := authApp(ns)
	a.migration = true
	a.record = &release.Record{Namespace: ns, Application: a.name, Serving: prevRev}
	api := a.member("auth-api")
	api.image = "api:1" // what its primary runs: prevRev serves
	for i := range a.members {
		a.members[i].canaryRev = prevRev
	}
	a.jobs = []job{{name: "auth-migration-" + prevTag, identity: "auth-migration", complete: true}}
	a.apply(t, cp)
	wantAnswer(t, gate, ns, prevRev, http.StatusOK, "every step of "+prevTag+" completed")

	// Flux applies rev's Deployments and its suspended migration Job; the
	// Canaries come in a later apply.
	api.image = "api:2"
	// Each apply writes only the Jobs it names: a Job's status is not
	// rewritten once it completed.
	a.jobs = []job{{name: "auth-migration-" + tag, identity: "auth-migration", suspended: true}}
	a.noCanaries = true
	a.apply(t, cp)
	wantAnswer(t, gate, ns, prevRev, http.StatusConflict,
		"waiting for the render: auth-api changed but its Canary still carries "+prevTag+", which serves")

	// The Canaries reach rev: its own steps now decide.
	a.noCanaries, a.jobs = false, nil
	for i := range a.members {
		a.members[i].canaryRev = ""
	}
	a.apply(t, cp)
	wantAnswer(t, gate, ns, rev, http.StatusConflict, "waiting for job auth-migration-"+tag+" not complete")
	a.jobs = []job{{name: "auth-migration-" + tag, identity: "auth-migration", complete: true}}
	a.apply(t, cp)
	wantAnswer(t, gate, ns, rev, http.StatusOK, "every step of "+tag+" completed")
}

// TestMayStartHoldsANewerRenderOverAWaitingRelease: a release waits at
// may-start for its migration when a newer render's Deployment lands over it,
// its Canary still a Flux apply behind. The template is not the waiting
// revision's, so its migration completing must not start it.
func TestMayStartHoldsANewerRenderOverAWaitingRelease(t *testing.T) {
	cp, gate, ns := gateAndNamespace(t)

	a := authApp(ns)
	a.migration = true
	since := time.Now().Add(-time.Minute).UTC()
	a.record = &release.Record{Namespace: ns, Application: a.name, Serving: prevRev, Pinned: rev, Since: &since}
	a.member("auth-api").phase = "Waiting"
	a.jobs = []job{{name: "auth-migration-" + tag, identity: "auth-migration", complete: true}}
	a.apply(t, cp)
	wantAnswer(t, gate, ns, rev, http.StatusOK, "every step of "+tag+" completed")

	// The API server stamps writes to the second: the newer render lands a
	// second after the Canary was last written, as any later apply does.
	hooked := webhooksWrittenAt(t, cp, ns, "auth-api")
	for deadline := time.Now().Add(5 * time.Second); !time.Now().UTC().Truncate(time.Second).After(hooked); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the clock did not pass %s", hooked)
		}
	}
	a.member("auth-api").image = "api:3"
	a.noCanaries, a.jobs = true, nil
	a.apply(t, cp)
	wantAnswer(t, gate, ns, rev, http.StatusConflict, "waiting for the render: auth-api's template was written after its Canary carried "+tag)
}

// gateAndNamespace serves a gate under its grant, answering a Flagger pod
// of a namespace of its own, and makes the namespace of the test's
// Application.
func gateAndNamespace(t *testing.T) (*testenv.ControlPlane, *running, string) {
	t.Helper()
	cp := testenv.Shared(t)
	flaggerNS := cp.Namespace(t)
	flaggerPod(t, cp, flaggerNS, "flagger-0", flagger)
	return cp, serve(t, cp.Grant(t, gateRBAC, gateNS, gateSA), flaggerNS), cp.Namespace(t)
}

// webhooksWrittenAt is when the API server last recorded a write of process's
// Canary's spec.
func webhooksWrittenAt(t *testing.T, cp *testenv.ControlPlane, ns, process string) time.Time {
	t.Helper()
	kube, err := releasegate.NewKube(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kube.CanariesIn(context.Background(), ns)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		if c.Name == process && !c.WebhooksWrittenAt.IsZero() {
			return c.WebhooksWrittenAt
		}
	}
	t.Fatalf("no Canary %s/%s with a recorded write of its webhooks", ns, process)
	return time.Time{}
}

// wantAnswer asks /may-start for auth-api at revision and holds the answer
// to status and a reason containing reason.
func wantAnswer(t *testing.T, gate *running, ns, revision string, status int, reason string) {
	t.Helper()
	code, got := gate.ask(t, flagger, "/may-start", payload(ns, "auth-api", revision))
	if code != status || !strings.Contains(got, reason) {
		t.Fatalf("may-start at %s: %d %q, want %d containing %q\nlog:\n%s", release.RevisionTag(revision), code, got, status, reason, gate.logs.String())
	}
}
