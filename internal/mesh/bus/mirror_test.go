package bus_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/mesh/bus"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/bus/bustest"
)

// TestAMirrorFollowsItsBucket: the initial values are in when Follow
// answers, a document that does not decode is skipped, and a put, a put
// that no longer decodes and a delete each change the mirror and wake it.
func TestAMirrorFollowsItsBucket(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b := bustest.Open(t, bustest.Embedded(t), 1)
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	want := func(fp string) []byte {
		return bus.Encode(bus.Want{Fingerprint: fp, Digest: bus.Digest([]byte(fp)), Owner: bus.OwnerRules, At: at})
	}
	put := func(key string, raw []byte) {
		t.Helper()
		if _, err := b.Wants.Put(ctx, key, raw); err != nil {
			t.Fatal(err)
		}
	}
	put("want.n1.web", want("f1"))
	put("want.n2.web", []byte(`{"fingerprint":`))
	var skipped []string
	m, err := bus.Follow(ctx, b.Wants, bus.Places(bus.KindWant, bus.DecodeWant), func(key string, _ error) { skipped = append(skipped, key) })
	if err != nil {
		t.Fatal(err)
	}
	n1, n2 := bus.Place{Node: "n1", Module: "web"}, bus.Place{Node: "n2", Module: "web"}
	docs, _ := m.Docs()
	if len(docs) != 1 || docs[n1].Fingerprint != "f1" || len(skipped) != 1 || skipped[0] != "want.n2.web" {
		t.Fatalf("initially %+v, skipped %v", docs, skipped)
	}
	until := func(what string, ok func(map[bus.Place]bus.Want) bool) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			docs, err := m.Docs()
			if err != nil {
				t.Fatal(err)
			}
			if ok(docs) {
				return
			}
			select {
			case <-m.Changed():
			case <-deadline:
				t.Fatalf("not within 10 s: %s; %+v", what, docs)
			}
		}
	}
	put("want.n2.web", want("f2"))
	until("n2 put", func(d map[bus.Place]bus.Want) bool { return d[n2].Fingerprint == "f2" })
	put("want.n2.web", []byte(`not json`))
	until("n2 no longer decoding, dropped", func(d map[bus.Place]bus.Want) bool { _, ok := d[n2]; return !ok && len(d) == 1 })
	if err := b.Wants.Delete(ctx, "want.n1.web"); err != nil {
		t.Fatal(err)
	}
	until("n1 deleted", func(d map[bus.Place]bus.Want) bool { return len(d) == 0 })

	// Once its context ends the mirror is no longer fed; one whose context
	// ended before its initial values were in is none.
	cancel()
	if _, err := bus.Follow(ctx, b.Wants, bus.Places(bus.KindWant, bus.DecodeWant), func(string, error) {}); !errors.Is(err, context.Canceled) {
		t.Fatalf("a follow of an ended context: %v", err)
	}
}
