package publish

import (
	"context"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
)

// Signer signs what a release pushes. One implementation per way of
// signing: a cosign key pair here; keyless signing is cosign's own command
// in the release workflow, over the digests file.
type Signer interface {
	// Sign stores a signature of the manifest ref names where cosign's
	// verifiers look for one.
	Sign(ctx context.Context, ref name.Digest) error
	// Attest stores a signed in-toto statement of predicate, of type
	// predicateType, about ref.
	Attest(ctx context.Context, ref name.Digest, predicateType string, predicate []byte) error
}

// defaultKeychain is where a release's registry credentials come from: the
// docker config a registry login writes, as crane and cosign read it.
var defaultKeychain = authn.DefaultKeychain
