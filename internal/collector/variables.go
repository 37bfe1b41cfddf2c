package collector

import (
	"slices"

	"github.com/JorisJonkers-dev/delivery/internal/githubapp"
	"github.com/JorisJonkers-dev/delivery/internal/kubeclient"
	"github.com/JorisJonkers-dev/delivery/internal/settings"
)

// Variables are the variables the Collector's binary reads, for its --help
// and for the manifests' tests, which hold what a Deployment sets to them.
var Variables = slices.Concat([]settings.Variable{
	{Name: "CLUSTER_NAME", Default: settings.Required, Meaning: "the cluster the snapshot names; a snapshot of another cluster is never overwritten"},
	{Name: "ESTATE_REPOSITORY", Default: settings.Required, Meaning: "owner/name of the Estate repository"},
	{Name: "ESTATE_PATH", Default: "cluster-state.yml", Meaning: "the file's path in that repository"},
	{Name: "ESTATE_BRANCH", Default: "the default branch", Meaning: "the branch read and committed to"},
}, githubapp.Variables, []settings.Variable{
	{Name: "INTERVAL", Default: "10m", Meaning: "time between captures (Go duration)"},
	{Name: "ADDR", Default: ":8080", Meaning: "where /fresh, /healthz and /readyz are served"},
}, kubeclient.Variables)
