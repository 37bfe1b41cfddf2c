package assign

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/mesh/bus"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/bus/bustest"
)

// TestAWriteThatLosesDecidesAgain holds the write to its compare-and-swap:
// a want written since the watch delivered it is read again, and written
// over only while the rules own it.
func TestAWriteThatLosesDecidesAgain(t *testing.T) {
	ctx := context.Background()
	b := bustest.Open(t, bustest.Embedded(t), 1)
	a := &Assigner{Bus: b, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))}
	key, _ := bus.WantKey("n1", "web")
	at := time.Unix(1, 0).UTC()
	rules := func(f string) bus.Want {
		return bus.Want{Fingerprint: f, Digest: bus.Digest([]byte(f)), Owner: bus.OwnerRules, At: at}
	}
	for _, c := range []struct {
		what  string
		since bus.Want // written after the revision the assigner holds
		wrote bool
	}{
		{"a put since: left as it is", bus.Want{Fingerprint: "f0", Digest: bus.Digest([]byte("f0")), Owner: bus.PutOwner("op"), At: at}, false},
		{"a hand want since: left as it is", bus.Want{Fingerprint: "f0", Digest: bus.Digest([]byte("f0")), Owner: bus.OwnerHand, At: at}, false},
		{"the rules' own want since, the same: not written again", rules("f2"), false},
		{"the rules' own want since, another: written", rules("f3"), true},
	} {
		held, err := b.Wants.Put(ctx, key, bus.Encode(rules("f1")))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Wants.Put(ctx, key, bus.Encode(c.since)); err != nil {
			t.Fatal(err)
		}
		_, wrote, err := a.write(ctx, Write{Place: Place{Node: "n1", Module: "web"}, Want: rules("f2")}, heldWant{want: rules("f1"), revision: held})
		if err != nil || wrote != c.wrote {
			t.Errorf("%s: wrote %v, %v", c.what, wrote, err)
		}
		got, err := b.Wants.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		w, _ := bus.DecodeWant(got.Value())
		if want := map[bool]bus.Want{true: rules("f2"), false: c.since}[c.wrote]; !w.Same(want) {
			t.Errorf("%s: the key holds %+v, want %+v", c.what, w, want)
		}
	}
	// A key nobody wrote yet is created; one written since by anyone is
	// not taken by a create.
	other, _ := bus.WantKey("n2", "web")
	if _, wrote, err := a.write(ctx, Write{Place: Place{Node: "n2", Module: "web"}, Want: rules("f2")}, heldWant{}); err != nil || !wrote {
		t.Fatalf("a first want: wrote %v, %v", wrote, err)
	}
	if _, err := b.Wants.Put(ctx, other, bus.Encode(bus.Want{Fingerprint: "f0", Digest: bus.Digest([]byte("f0")), Owner: bus.OwnerHand, At: at})); err != nil {
		t.Fatal(err)
	}
	if _, wrote, err := a.write(ctx, Write{Place: Place{Node: "n2", Module: "web"}, Want: rules("f4")}, heldWant{}); err != nil || wrote {
		t.Fatalf("a create over a hand want: wrote %v, %v", wrote, err)
	}
}
