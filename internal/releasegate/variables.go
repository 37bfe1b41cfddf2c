package releasegate

import (
	"slices"
	"strconv"

	"github.com/JorisJonkers-dev/delivery/internal/kubeclient"
	"github.com/JorisJonkers-dev/delivery/internal/podcallers"
	"github.com/JorisJonkers-dev/delivery/internal/settings"
)

// Variables are the variables the gate's binary reads, for its --help and
// for the manifests' tests, which hold what a Deployment sets to them.
var Variables = slices.Concat([]settings.Variable{
	{Name: "ADDR", Default: ":8080", Meaning: "address to serve on"},
}, kubeclient.Variables, []settings.Variable{
	{Name: "FLAGGER_NAMESPACE", Default: "delivery-system", Meaning: "namespace of Flagger's pods"},
	{Name: "FLAGGER_SELECTOR", Default: "app.kubernetes.io/instance=flagger", Meaning: "label selector of Flagger's pods (one that selects everything is refused)"},
	{Name: "FLAGGER_SERVICE_ACCOUNT", Default: "flagger", Meaning: "ServiceAccount Flagger's pods run under"},
	{Name: "GATE_NAMESPACE", Default: DefaultGateNamespace, Meaning: "the gate's own namespace, where it keeps the release records"},
	{Name: "OWN_TRAFFIC_ERROR_RATE", Default: strconv.FormatFloat(DefaultOwnTraffic.ErrorRate, 'g', -1, 64),
		Meaning: "largest failed share of the own traffic that passes, from 0 to 1, where the inputs carry no errorRate"},
	{Name: "OWN_TRAFFIC_LATENCY", Default: DefaultOwnTraffic.Latency.String(),
		Meaning: "largest p95 of answered own requests that passes, where the inputs carry no latency"},
}, podcallers.ScrapeVariables, []settings.Variable{
	{Name: "POD_NAME", Default: "the host name and a random suffix", Meaning: "this replica's name on the Lease, unique per replica"},
	{Name: "LEADER_LEASE_DURATION", Default: DefaultLeader.LeaseDuration.String(), Meaning: "how long a Lease not renewed keeps the other replicas from the rounds"},
	{Name: "LEADER_RENEW_DEADLINE", Default: DefaultLeader.RenewDeadline.String(), Meaning: "how long the leader tries to renew before it stops acting (under the lease duration)"},
	{Name: "LEADER_RETRY_PERIOD", Default: DefaultLeader.RetryPeriod.String(), Meaning: "how often every replica tries to take or renew the Lease"},
})
