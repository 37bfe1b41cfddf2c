package bus

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// A want's owner is what its writer says, and the assigner's credential
// writes wants: it could say put:<id> or hand of any want. What proves such
// an owner is the seal, seal.<node>.<module> in mesh_seals, which only the
// operator's credential may write: the want a put or a hand owns, as the
// operator wrote it. The agent takes a want as a put's or a hand's only when
// the seal names the same want (agent.ProvenOwner).

// ReadSeal is node's seal on its want of module and the seal's revision; nil
// when there is none. A seal that does not decode proves nothing and is
// answered as none, so the want is held to the rules.
func (b *Bus) ReadSeal(ctx context.Context, node, module string) (*Want, uint64, error) {
	key, err := SealKey(node, module)
	if err != nil {
		return nil, 0, err
	}
	b.ops.Add(1)
	got, err := b.Seals.Get(ctx, key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return nil, 0, nil
	case err != nil:
		return nil, 0, fmt.Errorf("read %s in %s: %w", key, SealsBucket, err)
	}
	seal, err := DecodeWant(got.Value())
	if err != nil {
		return nil, got.Revision(), nil //nolint:nilerr // a seal that does not decode proves no owner, as none
	}
	return &seal, got.Revision(), nil
}

// SealWant writes want as the operator's (a hand's or a put's), with the
// operator's credential: its seal first, then the want, so an agent that
// reads the want finds the seal that proves its owner.
func (b *Bus) SealWant(ctx context.Context, node, module string, want Want) error {
	sealKey, err := SealKey(node, module)
	if err != nil {
		return err
	}
	wantKey, err := WantKey(node, module)
	if err != nil {
		return err
	}
	b.ops.Add(2)
	if _, err := b.Seals.Put(ctx, sealKey, Encode(want)); err != nil {
		return fmt.Errorf("write %s in %s: %w", sealKey, SealsBucket, err)
	}
	if _, err := b.Wants.Put(ctx, wantKey, Encode(want)); err != nil {
		return fmt.Errorf("write %s in %s: %w", wantKey, WantsBucket, err)
	}
	return nil
}
