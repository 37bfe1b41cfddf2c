package releasegate

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// leader1 is the leader series of a replica that leads.
const leader1 = `# HELP release_gate_leader 1 while this replica holds the Lease and runs the rounds, 0 while another does.
# TYPE release_gate_leader gauge
release_gate_leader 1
`

func TestMetricsBeforeAndAfterARound(t *testing.T) {
	reconciler := NewReconciler(nil, "delivery-system", nil, nil, nil)
	// A gate with no Lease is the only replica: it leads.
	if err := testutil.CollectAndCompare(roundCollector{reconciler}, strings.NewReader(`
`+leader1+`# HELP release_gate_tended_timestamp_seconds When the last round over every gated Application finished; 0 before the first.
# TYPE release_gate_tended_timestamp_seconds gauge
release_gate_tended_timestamp_seconds 0
`)); err != nil {
		t.Fatalf("before the first round: %v", err)
	}
	reconciler.last = RoundResult{Reconciled: t0, Applications: []Reconciled{
		{Namespace: "auth-system", Application: "auth", Held: &Held{Reason: HeldStaleProof, Serving: prevRev, Pinned: rev, Since: t0.Add(-time.Hour), Deadline: 30 * time.Minute}},
		{Namespace: "pay-system", Application: "pay", NotUndone: &NotUndone{Tag: "2f4a6c8e0b2d", Condition: UndoNewCopyRunning}, Unanswerable: "x"},
		{Namespace: "ok-system", Application: "ok"},
	}}
	if err := testutil.CollectAndCompare(roundCollector{reconciler}, strings.NewReader(`
# HELP release_gate_held_deadline_seconds The gate deadline of a held release, from its inputs.
# TYPE release_gate_held_deadline_seconds gauge
release_gate_held_deadline_seconds{application="auth",namespace="auth-system",pinned="`+rev+`",reason="stale-proof",serving="`+prevRev+`"} 1800
# HELP release_gate_held_since_timestamp_seconds When the gate first saw the pinned revision of a held release.
# TYPE release_gate_held_since_timestamp_seconds gauge
release_gate_held_since_timestamp_seconds{application="auth",namespace="auth-system",pinned="`+rev+`",reason="stale-proof",serving="`+prevRev+`"} `+fmt.Sprint(float64(t0.Add(-time.Hour).Unix()))+`
`+leader1+`# HELP release_gate_tended_timestamp_seconds When the last round over every gated Application finished; 0 before the first.
# TYPE release_gate_tended_timestamp_seconds gauge
release_gate_tended_timestamp_seconds `+fmt.Sprint(float64(t0.Unix()))+`
# HELP release_gate_unanswerable An Application the last round could not read or decide for.
# TYPE release_gate_unanswerable gauge
release_gate_unanswerable{application="pay",namespace="pay-system"} 1
# HELP release_gate_undo_refused A migration left applied: the tag the down would return to and the condition that failed.
# TYPE release_gate_undo_refused gauge
release_gate_undo_refused{application="pay",condition="new-copy-running",namespace="pay-system",tag="2f4a6c8e0b2d"} 1
`)); err != nil {
		t.Fatalf("after a round: %v", err)
	}
	// Its term over, a replica says another leads and reports no round's
	// findings: they are the new leader's.
	reconciler.LeadWith(func() bool { return false })
	reconciler.Forget()
	if err := testutil.CollectAndCompare(roundCollector{reconciler}, strings.NewReader(`
# HELP release_gate_leader 1 while this replica holds the Lease and runs the rounds, 0 while another does.
# TYPE release_gate_leader gauge
release_gate_leader 0
# HELP release_gate_tended_timestamp_seconds When the last round over every gated Application finished; 0 before the first.
# TYPE release_gate_tended_timestamp_seconds gauge
release_gate_tended_timestamp_seconds 0
`)); err != nil {
		t.Fatalf("following: %v", err)
	}
}
