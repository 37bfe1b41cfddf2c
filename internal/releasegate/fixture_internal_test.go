package releasegate

import (
	"strings"
	"testing"

	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/JorisJonkers-dev/delivery/internal/release"
)

const (
	rev     = "sha256:b87d7fecf08d4ac6b91ac3ca9ac84b10a193d9a90a32929e194a2650ea2e8cca"
	tag     = "b87d7fecf08d"
	prevRev = "sha256:2f4a6c8e0b2d4f6a8c0e2b4d6f8a0c2e4b6d8f0a2c4e6b8d0f2a4c6e8b0d2f4a"
)

var ask = release.Question{Namespace: "auth-system", Application: "auth", Process: "auth-api", Revision: rev}

func inputs(migration bool) *release.Inputs {
	in := &release.Inputs{
		Endpoint: "http://release-gate.delivery-system.svc.cluster.local:8080",
		Deadline: "1800s",
		Analysis: release.Analysis{Interval: "30s", Iterations: 4, Threshold: 3},
		Members: []release.Member{
			{Process: "auth-api", Readiness: release.Readiness{Path: "/ready", Port: 8081}, Checks: []string{"error-rate", "latency"}},
			{Process: "auth-ui", Readiness: release.Readiness{Path: "/", Port: 8080}},
		},
	}
	if migration {
		in.Migration = &release.Migration{Identity: "auth-migration", TestedAgainst: prevRev}
	}
	return in
}

func hooks(app, revision string) []map[string]string {
	md := map[string]string{"application": app, "process": "x", "revision": revision}
	return []map[string]string{md, md, md}
}

func canary(name string, phase flaggerv1.CanaryPhase) release.Canary {
	return release.Canary{Name: name, Webhooks: hooks("auth", rev), Phase: phase, LastAppliedSpec: "a", LastPromotedSpec: "a"}
}

func want(t *testing.T, got Answer, outcome Outcome, reason string) {
	t.Helper()
	if got.Outcome != outcome || !strings.Contains(got.Reason, reason) {
		t.Fatalf("answer %d %q, want %d containing %q", got.Outcome, got.Reason, outcome, reason)
	}
}

func pod(name string, ready bool, restarts int) release.Pod {
	return release.Pod{Name: name, Ready: ready, Restarts: restarts, Running: true, Labels: map[string]string{"app.kubernetes.io/instance": "auth-api"}}
}

// deleting is p with a deletion timestamp: Terminating until its kubelet confirms.
func deleting(p release.Pod) release.Pod { p.Terminating = true; return p }

func container(image string, env ...release.EnvVar) release.Container {
	return release.Container{Name: "app", Image: image, Command: []string{"/app"}, Args: []string{"serve"}, Env: env}
}

func deployment(name string, cs ...release.Container) *release.Deployment {
	return &release.Deployment{Name: name, Selector: labels.SelectorFromSet(labels.Set{"app.kubernetes.io/instance": name}), Containers: cs}
}
