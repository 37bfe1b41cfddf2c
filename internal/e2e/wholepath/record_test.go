package wholepath_test

import (
	"context"
	"fmt"
	"slices"
	"time"

	rr "github.com/JorisJonkers-dev/delivery/internal/releaserecord"
)

// The events the release record keeps as sent, in shadow mode, that the
// tests look for, as its sent sets hold them.
var (
	evFailed   = rr.Event{Type: rr.EventFailed, Outcome: "aborted"}.Key()
	evDeployed = rr.Event{Type: rr.EventDeployed}.Key()
	evUpgraded = rr.Event{Type: rr.EventUpgraded}.Key()
)

// expectRecord waits until the release record, running as pods beside the
// gate and prompted by notification-controller, holds version's release
// in state with event among the events it kept as sent.
func (a *app) expectRecord(version string, state rr.State, event string) rr.Record {
	a.t.Helper()
	store, err := rr.NewKubeStore(a.e.n.Config, gateNS)
	if err != nil {
		a.t.Fatal(err)
	}
	id := a.ns + "@" + version + ":" + recordCluster + "/" + recordEnv
	var rec rr.Record
	a.waitFor(fmt.Sprintf("the record of %s to be %s", id, state), 3*time.Minute, func() (bool, string) {
		s, err := store.Get(context.Background(), id)
		if err != nil {
			return false, err.Error()
		}
		rec = s.Record
		return rec.State == state && (event == "" || slices.Contains(rec.EmittedShadow, event)),
			fmt.Sprintf("%q, sent %v\nrelease record:\n%s", rec.State, rec.EmittedShadow, tail(a.e.n.PodLogs(gateNS, "release-record")))
	})
	return rec
}
