package releaserecord_test

import (
	"context"
	"strings"
	"testing"
	"time"

	cdevents "github.com/cdevents/sdk-go/pkg/api"
	cdeventsv05 "github.com/cdevents/sdk-go/pkg/api/v05"

	rr "github.com/JorisJonkers-dev/delivery/internal/releaserecord"
	"github.com/JorisJonkers-dev/delivery/internal/releaserecord/cdeventstest"
)

func TestArtifactID(t *testing.T) {
	digest := "sha256:" + strings.Repeat("a", 64)
	for image, want := range map[string]string{
		"registry.example/estate/docs@" + digest:         "pkg:oci/docs@sha256:" + strings.Repeat("a", 64) + "?repository_url=registry.example%2Festate%2Fdocs",
		"oci://registry.example/estate/docs@" + digest:   "pkg:oci/docs@sha256:" + strings.Repeat("a", 64) + "?repository_url=registry.example%2Festate%2Fdocs",
		"ghcr.io/acme/API:1.2.3":                         "pkg:oci/api?repository_url=ghcr.io%2Facme%2FAPI&tag=1.2.3",
		"registry.example:5000/acme/api:1.2.3@" + digest: "pkg:oci/api@sha256:" + strings.Repeat("a", 64) + "?repository_url=registry.example:5000%2Facme%2Fapi&tag=1.2.3",
		"registry.example:5000/acme/api":                 "pkg:generic/docs@2.1.0",
		"":                                               "pkg:generic/docs@2.1.0",
		"not an image":                                   "pkg:generic/docs@2.1.0",
	} {
		r := rr.NewRecord(rr.Release{ID: mustID(t, "docs@2.1.0:prod-eu/prod"), Image: image}, t0)
		if got := rr.ArtifactID(r); got != want {
			t.Errorf("%q: %s, want %s", image, got, want)
		}
	}
}

func TestEventIDs(t *testing.T) {
	a := rr.EventID("docs@2.1.0:prod-eu/prod", rr.Event{Type: rr.EventFailed, Outcome: "aborted"})
	if a != rr.EventID("docs@2.1.0:prod-eu/prod", rr.Event{Type: rr.EventFailed, Outcome: "aborted"}) {
		t.Fatal("not deterministic")
	}
	for _, other := range []string{
		rr.EventID("docs@2.1.0:prod-eu/prod", rr.Event{Type: rr.EventFailed, Outcome: "degraded"}),
		rr.EventID("docs@2.1.0:prod-eu/prod", rr.Event{Type: rr.EventDeploying}),
		rr.EventID("docs@2.1.0:prod-us/prod", rr.Event{Type: rr.EventFailed, Outcome: "aborted"}),
	} {
		if other == a {
			t.Fatalf("two events share the id %s", a)
		}
	}
	if len(a) != 36 || a[14] != '8' {
		t.Fatalf("not a version 8 UUID: %s", a)
	}
}

// TestEveryEventReachesARealReceiver sends every event the reducer makes
// through the CloudEvents sink to the SDK's own HTTP receiver, which holds
// each to the CDEvents SDK's validation.
func TestEveryEventReachesARealReceiver(t *testing.T) {
	recv := cdeventstest.Start(t)
	sink, err := rr.NewCloudEventsSink(recv.URL)
	if err != nil {
		t.Fatal(err)
	}
	rec := fullRecord(t)
	rec.Kind = rr.KindPromote
	events := []rr.Event{{Type: rr.EventDeploying}, {Type: rr.EventFailed, Outcome: "sync-failed"}, {Type: rr.EventFailed, Outcome: "aborted"},
		{Type: rr.EventFailed, Outcome: "degraded"}, {Type: rr.EventDeployed}, {Type: rr.EventUpgraded}, {Type: rr.EventRolledBack}}
	for _, e := range events {
		ev, err := rr.CDEvent(rec, e, now)
		if err != nil {
			t.Fatalf("%s: %v", e.Key(), err)
		}
		if err := sink.Send(context.Background(), ev); err != nil {
			t.Fatalf("%s: %v", e.Key(), err)
		}
	}
	got := recv.WaitFor(t, len(events), 5*time.Second)
	want := []string{"dev.cdeventsx.delivery-release.deploying.0.1.0", "dev.cdeventsx.delivery-release.failed.0.1.0",
		"dev.cdeventsx.delivery-release.failed.0.1.0", "dev.cdeventsx.delivery-release.failed.0.1.0",
		"dev.cdevents.service.deployed.0.3.0", "dev.cdevents.service.upgraded.0.3.0", "dev.cdevents.service.rolledback.0.3.0"}
	for i, r := range got {
		cd := r.CDEvent
		if rr.TypeOf(cd).String() != want[i] || r.CloudEvent.Type() != want[i] || cd.GetId() != rr.EventID(rec.ReleaseID, events[i]) ||
			cd.GetSource() != "/release-record/prod-eu/prod" || cd.GetChainId() != "docs@2.1.0-rb.1" || !cd.GetTimestamp().Equal(now) {
			t.Errorf("event %d: %s %s %s %s %v", i, rr.TypeOf(cd), cd.GetId(), cd.GetSource(), cd.GetChainId(), cd.GetTimestamp())
		}
	}
	deployed, ok := got[4].CDEvent.(*cdeventsv05.ServiceDeployedEvent)
	if !ok || deployed.Subject.Id != "docs" || deployed.Subject.Content.Environment.Id != "prod-eu/prod" ||
		!strings.HasPrefix(deployed.Subject.Content.ArtifactId, "pkg:oci/docs@sha256:") {
		t.Fatalf("deployed: %#v", got[4].CDEvent)
	}
	var content rr.ReleaseContent
	failed := got[2].CDEvent.(*cdeventsv05.CustomTypeEvent)
	if err := asContent(failed.Subject.Content, &content); err != nil || content.Outcome != "aborted" || content.Reason != "apply failed" ||
		content.ReleaseID != rec.ReleaseID || failed.Subject.Id != rec.ReleaseID || failed.GetSchemaUri() != rr.ReleaseEventSchemaURI {
		t.Fatalf("failed: %+v %v", content, err)
	}

	// A sink that refuses, or is not there, is an error.
	recv.Refuse(1)
	ev, _ := rr.CDEvent(rec, events[0], now)
	if err := sink.Send(context.Background(), ev); err == nil || !strings.Contains(err.Error(), "503") {
		t.Fatalf("a refused send: %v", err)
	}
	gone, _ := rr.NewCloudEventsSink("http://127.0.0.1:1/")
	if err := gone.Send(context.Background(), ev); err == nil {
		t.Fatal("a send to nothing succeeded")
	}
}

func TestCDEventRefusesWhatDoesNotValidate(t *testing.T) {
	rec := fullRecord(t)
	if _, err := rr.CDEvent(rec, rr.Event{Type: "shipped"}, now); err == nil {
		t.Fatal("an event of no type built")
	}
	rec.Cluster = "Not A Source Segment/"
	if _, err := rr.CDEvent(rec, rr.Event{Type: rr.EventDeploying}, now); err == nil {
		t.Fatal("a custom event off its schema built")
	}
	if _, err := cdevents.ParseType(rr.CustomType(rr.EventFailed).String()); err != nil {
		t.Fatal(err)
	}
}
