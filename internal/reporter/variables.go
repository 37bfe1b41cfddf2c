package reporter

import (
	"slices"

	"github.com/JorisJonkers-dev/delivery/internal/githubapp"
	"github.com/JorisJonkers-dev/delivery/internal/kubeclient"
	"github.com/JorisJonkers-dev/delivery/internal/settings"
)

// DefaultGateURL is the Release Gate in the worked estate.
const DefaultGateURL = "http://release-gate.delivery-system.svc.cluster.local:8080"

// Variables are the variables the Reporter's binary reads, for its --help
// and for the manifests' tests, which hold what a Deployment sets to them.
var Variables = slices.Concat(githubapp.Variables, []settings.Variable{
	{Name: "FLUX_NAMESPACE", Default: "flux-system", Meaning: "where the units project-<project> are"},
	{Name: "INTERVAL", Default: "30s", Meaning: "time between passes (Go duration)"},
	{Name: "ADDR", Default: ":8080", Meaning: "where /flux, /fresh, /healthz and /readyz are served"},
	{Name: "GATE_URL", Default: DefaultGateURL, Meaning: "the Release Gate's root"},
}, kubeclient.Variables)
