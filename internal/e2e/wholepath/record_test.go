package wholepath_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rr "github.com/JorisJonkers-dev/delivery/internal/releaserecord"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
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
	store, err := rr.NewKubeStore(a.e.Node.Config, gateNS)
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
			fmt.Sprintf("%q, sent %v\nrelease record:\n%s", rec.State, rec.EmittedShadow, tail(a.e.Node.PodLogs(gateNS, "release-record")))
	})
	return rec
}

// TestNotificationsThatNeverArrive delivers a release while
// notification-controller's Alerts are suspended, so no event of Flux
// reaches the release record or the Reporter: each still follows the
// release by its own look at the units (every 5 s here), and says it
// healthy and promoted. Other tests' releases meanwhile go without prompts
// too, which they may: the prompts only hasten a look.
func TestNotificationsThatNeverArrive(t *testing.T) {
	t.Parallel()
	a := newApp(t)
	a.suspendAlerts(true)
	t.Cleanup(func() { a.suspendAlerts(false) })
	a.initialized(first)
	a.expectRecord(first.Version, rr.StateHealthy, evDeployed)
	a.expectStatus(first.Version, "success", "promoted and warmed up")
}

// suspendAlerts suspends or resumes the Alerts that prompt the release
// record and the Reporter.
func (a *app) suspendAlerts(suspend bool) {
	a.t.Helper()
	for _, name := range []string{"release-record", "reporter"} {
		patch := []byte(fmt.Sprintf(`{"spec":{"suspend":%t}}`, suspend))
		alert := &unstructured.Unstructured{}
		alert.SetGroupVersionKind(schema.GroupVersionKind{Group: "notification.toolkit.fluxcd.io", Version: "v1beta3", Kind: "Alert"})
		alert.SetNamespace(testenv.FluxNamespace)
		alert.SetName(name)
		if err := a.e.Node.Client.Patch(context.Background(), alert, client.RawPatch(types.MergePatchType, patch)); err != nil {
			a.t.Fatalf("suspend the Alert %s: %v", name, err)
		}
	}
}
