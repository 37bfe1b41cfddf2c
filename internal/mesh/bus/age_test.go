package bus_test

import (
	"context"
	"testing"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/mesh/bus"
)

// TestCompositionRevision: the revisions order a node's compositions as
// they were written, and an entry written again no longer speaks for the
// composition it held.
func TestCompositionRevision(t *testing.T) {
	b := openBus(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	first, err := b.WriteComposition(ctx, "n1", "web", "f1", []byte("one"))
	if err != nil {
		t.Fatal(err)
	}
	second, err := b.WriteComposition(ctx, "n1", "web", "f2", []byte("two"))
	if err != nil {
		t.Fatal(err)
	}
	r1, err := b.CompositionRevision(ctx, "n1", "web", "f1", first.Digest)
	if err != nil {
		t.Fatal(err)
	}
	_, _, r2, err := b.ReadCompositionAt(ctx, "n1", "web", "f2")
	if err != nil {
		t.Fatal(err)
	}
	if r1 == 0 || r2 <= r1 {
		t.Errorf("revisions %d then %d, want the later above the earlier", r1, r2)
	}
	if _, err := b.WriteComposition(ctx, "n1", "web", "f1", []byte("one again")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ fingerprint, digest string }{{"f1", first.Digest}, {"f9", second.Digest}} {
		if r, err := b.CompositionRevision(ctx, "n1", "web", c.fingerprint, c.digest); err != nil || r != 0 {
			t.Errorf("%s at %s: %d, %v; want 0", c.fingerprint, c.digest, r, err)
		}
	}
}

func TestHeld(t *testing.T) {
	b := openBus(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if held, err := b.Held(ctx, "web", "f1"); err != nil || held {
		t.Fatalf("held %v, %v before any hold", held, err)
	}
	key, _ := bus.HoldKey("web", "f1")
	if _, err := b.Holds.Put(ctx, key, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if held, err := b.Held(ctx, "web", "f1"); err != nil || !held {
		t.Fatalf("held %v, %v after the hold", held, err)
	}
}
