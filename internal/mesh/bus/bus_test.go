package bus_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/mesh/bus"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/bus/bustest"
)

func openBus(t *testing.T) *bus.Bus { return bustest.Open(t, bustest.Embedded(t), 1) }

func TestSwapReadsAgainOnConflict(t *testing.T) {
	b := openBus(t)
	ctx := context.Background()
	key, _ := bus.WantKey("n1", "web")
	first := bus.Want{Fingerprint: "f1", Digest: bus.Digest([]byte("1")), Owner: bus.OwnerRules, At: time.Unix(1, 0).UTC()}
	wrote, _, err := b.Swap(ctx, b.Wants, key, func([]byte) ([]byte, bool, error) { return bus.Encode(first), true, nil })
	if err != nil || !wrote {
		t.Fatalf("create: wrote %v, %v", wrote, err)
	}
	// Another writer takes the key between this writer's read and its write:
	// the write conflicts, and the second decision sees the put's want.
	put := bus.Want{Fingerprint: "f0", Digest: first.Digest, Owner: bus.PutOwner("op"), At: time.Unix(2, 0).UTC()}
	var seen []bus.Owner
	wrote, _, err = b.Swap(ctx, b.Wants, key, func(current []byte) ([]byte, bool, error) {
		w, err := bus.DecodeWant(current)
		if err != nil {
			return nil, false, err
		}
		seen = append(seen, w.Owner)
		if len(seen) == 1 {
			if _, err := b.Wants.Put(ctx, key, bus.Encode(put)); err != nil {
				t.Fatal(err)
			}
		}
		if w.Owner != bus.OwnerRules {
			return nil, false, nil // not the rules' to write
		}
		next := first
		next.Fingerprint = "f2"
		return bus.Encode(next), true, nil
	})
	if err != nil || wrote {
		t.Fatalf("second write: wrote %v, %v", wrote, err)
	}
	if len(seen) != 2 || seen[1] != put.Owner {
		t.Fatalf("decisions saw owners %v, want rules then the put", seen)
	}
	got, err := b.Wants.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if w, _ := bus.DecodeWant(got.Value()); !w.Same(put) {
		t.Fatalf("the key holds %+v, want the put's %+v", w, put)
	}
	// A decision that writes what the key holds already writes nothing.
	ops := b.Ops()
	wrote, _, err = b.Swap(ctx, b.Wants, key, func(current []byte) ([]byte, bool, error) { return current, true, nil })
	if err != nil || wrote || b.Ops()-ops != 1 {
		t.Fatalf("an equal write: wrote %v, %d operations, %v", wrote, b.Ops()-ops, err)
	}
}

func TestSwapCreatesOverADeletedKey(t *testing.T) {
	b := openBus(t)
	ctx := context.Background()
	key, _ := bus.HaveKey("n1", "web")
	if _, err := b.Haves.Put(ctx, key, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if err := b.Haves.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	wrote, _, err := b.Swap(ctx, b.Haves, key, func(current []byte) ([]byte, bool, error) {
		if current != nil {
			t.Errorf("a deleted key read as %q", current)
		}
		return []byte(`{"x":1}`), true, nil
	})
	if err != nil || !wrote {
		t.Fatalf("wrote %v, %v", wrote, err)
	}
}

func TestCompositionInlineAndInTheObjectStore(t *testing.T) {
	b := openBus(t)
	ctx := context.Background()
	small := []byte(`{"payloadType":"x","payload":"","signatures":[]}`)
	large := bytes.Repeat([]byte("a"), bus.InlineLimit+1)
	for _, c := range []struct {
		fingerprint string
		envelope    []byte
		inObject    bool
	}{{"f1", small, false}, {"f2", large, true}, {"f3", large[:bus.InlineLimit], false}} {
		entry, err := b.WriteComposition(ctx, "n.1", "web", c.fingerprint, c.envelope)
		if err != nil {
			t.Fatal(err)
		}
		if (entry.Object != "") != c.inObject || entry.Digest != bus.Digest(c.envelope) {
			t.Errorf("%s: entry %+v", c.fingerprint, entry.Object)
		}
		got, envelope, err := b.ReadComposition(ctx, "n.1", "web", c.fingerprint)
		if err != nil || !bytes.Equal(envelope, c.envelope) || got.Digest != entry.Digest {
			t.Errorf("%s: read back %d bytes, %v", c.fingerprint, len(envelope), err)
		}
	}
	// An object changed under its key no longer matches the key's digest.
	entry, _, err := b.ReadComposition(ctx, "n.1", "web", "f2")
	if err != nil {
		t.Fatal(err)
	}
	objects, err := b.Objects(ctx, "n.1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := objects.PutBytes(ctx, entry.Object, append(large[:len(large):len(large)], 'b')); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.ReadComposition(ctx, "n.1", "web", "f2"); err == nil || !strings.Contains(err.Error(), "digest") {
		t.Fatalf("an altered object read with %v, want refused on its digest", err)
	}
	if _, err := b.WriteComposition(ctx, "n 1", "web", "f1", small); err == nil {
		t.Fatal("a node name with a space was taken")
	}
}

// TestSealWant: the operator's want is sealed before it is written, so the
// seal is there for whoever reads the want; a seal that does not decode
// proves nothing and reads as none.
func TestSealWant(t *testing.T) {
	b := bustest.Open(t, bustest.Embedded(t), 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if seal, revision, err := b.ReadSeal(ctx, "n1", "web"); err != nil || seal != nil || revision != 0 {
		t.Fatalf("no seal yet: %+v %d %v", seal, revision, err)
	}
	w := bus.Want{Fingerprint: "f1", Digest: bus.Digest([]byte("e")), Owner: bus.OwnerHand, At: time.Now().UTC().Truncate(time.Second)}
	if err := b.SealWant(ctx, "n1", "web", w); err != nil {
		t.Fatal(err)
	}
	seal, revision, err := b.ReadSeal(ctx, "n1", "web")
	if err != nil || seal == nil || !seal.Same(w) || !seal.At.Equal(w.At) || revision == 0 {
		t.Fatalf("the seal %+v %d %v, want %+v", seal, revision, err, w)
	}
	key, _ := bus.WantKey("n1", "web")
	got, err := b.Wants.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if want, err := bus.DecodeWant(got.Value()); err != nil || !want.Same(w) {
		t.Fatalf("the want %+v %v", want, err)
	}
	sealKey, _ := bus.SealKey("n1", "web")
	if _, err := b.Seals.Put(ctx, sealKey, []byte(`{"owner":"hand"}`)); err != nil {
		t.Fatal(err)
	}
	if seal, _, err := b.ReadSeal(ctx, "n1", "web"); err != nil || seal != nil {
		t.Fatalf("a seal that does not decode read as %+v %v", seal, err)
	}
	if _, _, err := b.ReadSeal(ctx, "n 1", "web"); err == nil {
		t.Fatal("a node with a space was read")
	}
}

// TestAReaderDoesNotMakeAnObjectStore: an entry naming an object in a store
// that is not there is an error for its reader, which makes no store (a
// part's credential may not), and leaves none behind.
func TestAReaderDoesNotMakeAnObjectStore(t *testing.T) {
	b := openBus(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	entry := bus.Composed{Module: "web", Fingerprint: "f1", Node: "n1", Digest: bus.Digest([]byte("e")), Object: "composition.web.f1", Size: 1}
	if _, err := b.Envelope(ctx, entry); err == nil || !strings.Contains(err.Error(), "composed-n1") {
		t.Fatalf("an object in no store read with %v", err)
	}
	if _, err := b.JS.ObjectStore(ctx, "composed-n1"); err == nil {
		t.Fatal("reading made the object store")
	}
}
