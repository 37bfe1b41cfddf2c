package releaserecord

import (
	"slices"

	"github.com/JorisJonkers-dev/delivery/internal/kubeclient"
	"github.com/JorisJonkers-dev/delivery/internal/settings"
)

// DefaultGateURL is the Release Gate in the worked estate.
const DefaultGateURL = "http://release-gate.delivery-system.svc.cluster.local:8080"

// Variables are the variables the release record's service reads, for its
// --help and for the manifests' tests, which hold what a Deployment sets to
// them.
var Variables = slices.Concat([]settings.Variable{
	{Name: "CLUSTER_NAME", Default: settings.Required, Meaning: "the cluster every release id it records names (a DNS label)"},
	{Name: "ENVIRONMENT", Default: settings.Required, Meaning: "the env every release id it records names (a DNS label)"},
	{Name: "RECORD_NAMESPACE", Default: "delivery-system", Meaning: "where the records (ConfigMaps release-<hash>) are kept"},
	{Name: "FACTS_MODE", Default: "emit", Meaning: "emit sends the events to CDEVENTS_SINK; shadow logs each as shadow-event and sends nothing"},
	{Name: "CDEVENTS_SINK", Default: "required in emit mode", Meaning: "the http(s) URL the CloudEvents are posted to"},
	{Name: "FACTS_TOKEN", Default: settings.Unset, Meaning: "the bearer token of POST /facts/<cluster> and /argocd/<cluster>; unset, both answer 401"},
	{Name: "ALLOWED_NAMESPACES", Default: ".*", Meaning: "a pushed fact's namespace must match this regular expression whole, else it is ignored"},
	{Name: "FLUX_OBSERVE", Default: "true", Meaning: "look at the Flux units (true) or take pushed facts alone (false)"},
	{Name: "FLUX_NAMESPACE", Default: "flux-system", Meaning: "where the units project-<project> are"},
	{Name: "FLUX_WEBHOOK_HMAC_KEY", Default: settings.Unset, Meaning: "set, POST /flux needs the generic-hmac X-Signature under this key, else 401"},
	{Name: "GATE_URL", Default: DefaultGateURL, Meaning: "the Release Gate's root, for its warmups"},
	{Name: "GATE_NAMESPACE", Default: "delivery-system", Meaning: "where the Release Gate keeps its records, read for why it holds a release"},
	{Name: "INTERVAL", Default: "30s", Meaning: "time between looks at the units (Go duration)"},
	{Name: "ADDR", Default: ":8080", Meaning: "where the facts, the prompts, /fresh, /healthz and /readyz are served"},
}, kubeclient.Variables)
