package release

import (
	"time"

	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"
	"k8s.io/apimachinery/pkg/labels"
)

const (
	rev     = "sha256:b87d7fecf08d4ac6b91ac3ca9ac84b10a193d9a90a32929e194a2650ea2e8cca"
	tag     = "b87d7fecf08d"
	prevRev = "sha256:2f4a6c8e0b2d4f6a8c0e2b4d6f8a0c2e4b6d8f0a2c4e6b8d0f2a4c6e8b0d2f4a"
)

var t0 = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

func container(image string, env ...EnvVar) Container {
	return Container{Name: "app", Image: image, Command: []string{"/app"}, Args: []string{"serve"}, Env: env}
}

func deployment(name string, cs ...Container) *Deployment {
	return &Deployment{Name: name, Selector: labels.SelectorFromSet(labels.Set{"app.kubernetes.io/instance": name}), Containers: cs}
}

// unchangedUI is auth-ui as Flagger leaves a member the release did not
// change: settled, its primary running what its Deployment holds.
func unchangedUI() MemberState {
	return MemberState{
		Process:   "auth-ui",
		Canary:    Canary{Name: "auth-ui", Phase: flaggerv1.CanaryPhaseSucceeded, LastAppliedSpec: "a", LastPromotedSpec: "a"},
		HasCanary: true,
		Target:    deployment("auth-ui", container("ui:1")),
		Primary:   deployment("auth-ui-primary", container("ui:1")),
	}
}
