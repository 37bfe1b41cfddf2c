package wholepath_test

import (
	"fmt"
	"strings"
	"time"
)

// repository is the GitHub repository the Application's releases come
// from, as its unit's annotation names it.
func (a *app) repository() string { return "example-org/" + a.ns }

// expectStatus waits until the Reporter, running as pods beside the gate,
// has given version's GitHub Deployment a status in state whose
// description holds says.
func (a *app) expectStatus(version, state, says string) {
	a.t.Helper()
	id, ok := a.deployments[version]
	if !ok {
		a.t.Fatalf("no GitHub Deployment of %s was made", version)
	}
	a.waitFor(fmt.Sprintf("the Reporter to say %s of %s (%q)", state, version, says), 3*time.Minute, func() (bool, string) {
		var seen []string
		for _, st := range a.e.GitHub.Statuses(a.repository(), id) {
			if st.State == state && strings.Contains(st.Description, says) {
				return true, ""
			}
			seen = append(seen, st.State+": "+st.Description)
		}
		return false, fmt.Sprintf("statuses %q\nReporter:\n%s", seen, tail(a.e.Node.PodLogs(gateNS, "reporter")))
	})
	// The Reporter's and the Collector's pods call GitHub as it is
	// described; the double records every call that is not.
	for _, v := range a.e.GitHub.Violations() {
		a.t.Errorf("a call GitHub's description refuses: %v", v)
	}
}
