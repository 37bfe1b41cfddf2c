package publish

import (
	"bytes"
	"context"
	"crypto"
	"encoding/base64"
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/sigstore/cosign/v3/pkg/cosign"
	"github.com/sigstore/cosign/v3/pkg/cosign/attestation"
	"github.com/sigstore/cosign/v3/pkg/oci/mutate"
	ociremote "github.com/sigstore/cosign/v3/pkg/oci/remote"
	"github.com/sigstore/cosign/v3/pkg/oci/static"
	"github.com/sigstore/cosign/v3/pkg/types"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/dsse"
	sigpayload "github.com/sigstore/sigstore/pkg/signature/payload"
)

// KeySigner signs with a cosign key pair, as cosign sign --key and cosign
// attest --key do, offline: no transparency log, so a verifier checks
// with the public key alone (source-controller's verify with a cosign.pub).
type KeySigner struct {
	signer signature.SignerVerifier
	remote []remote.Option
}

// NewKeySigner reads a cosign private key (cosign generate-key-pair's
// cosign.key) sealed with password.
func NewKeySigner(key, password []byte, opts ...remote.Option) (*KeySigner, error) {
	sv, err := cosign.LoadPrivateKey(key, password, nil)
	if err != nil {
		return nil, fmt.Errorf("read the cosign key: %w", err)
	}
	return &KeySigner{signer: sv, remote: opts}, nil
}

// PublicKey is the key's public half as PEM, what verifiers are given.
func (k *KeySigner) PublicKey() ([]byte, error) {
	pub, err := k.signer.PublicKey()
	if err != nil {
		return nil, err
	}
	return cryptoPEM(pub)
}

func (k *KeySigner) options(ctx context.Context) []ociremote.Option {
	return []ociremote.Option{ociremote.WithRemoteOptions(append([]remote.Option{remote.WithContext(ctx)}, k.remote...)...)}
}

// Sign signs cosign's simple-signing payload of ref and stores it in the
// repository's sha256-<hex>.sig, beside any signature already there.
func (k *KeySigner) Sign(ctx context.Context, ref name.Digest) error {
	payload, err := sigpayload.Cosign{Image: ref}.MarshalJSON()
	if err != nil {
		return err
	}
	raw, err := k.signer.SignMessage(bytes.NewReader(payload))
	if err != nil {
		return err
	}
	sig, err := static.NewSignature(payload, base64.StdEncoding.EncodeToString(raw))
	if err != nil {
		return err
	}
	opts := k.options(ctx)
	se, err := ociremote.SignedEntity(ref, opts...)
	if err != nil {
		return err
	}
	signed, err := mutate.AttachSignatureToEntity(se, sig)
	if err != nil {
		return err
	}
	return ociremote.WriteSignatures(ref.Repository, signed, opts...)
}

// Attest wraps an in-toto statement of predicate about ref in a DSSE
// envelope signed by the key and stores it in sha256-<hex>.att.
func (k *KeySigner) Attest(ctx context.Context, ref name.Digest, predicateType string, predicate []byte) error {
	kind := "custom"
	if predicateType == PredicateSPDX {
		kind = "spdxjson"
	}
	statement, err := attestation.GenerateStatement(attestation.GenerateOpts{
		Predicate: bytes.NewReader(predicate), Type: kind,
		Digest: ref.DigestStr()[len("sha256:"):], Repo: ref.Repository.String(),
	})
	if err != nil {
		return err
	}
	payload, err := statement.MarshalJSON()
	if err != nil {
		return err
	}
	envelope, err := dsse.WrapSigner(k.signer, types.IntotoPayloadType).SignMessage(bytes.NewReader(payload))
	if err != nil {
		return err
	}
	att, err := static.NewAttestation(envelope, static.WithLayerMediaType(types.DssePayloadType),
		static.WithAnnotations(map[string]string{"predicateType": predicateType}))
	if err != nil {
		return err
	}
	opts := k.options(ctx)
	attested, err := mutate.AttachAttestationToEntity(ociremote.SignedUnknown(ref, opts...), att)
	if err != nil {
		return err
	}
	return ociremote.WriteAttestations(ref.Repository, attested, opts...)
}

// cryptoPEM is a public key as the PEM cosign writes to cosign.pub.
func cryptoPEM(pub crypto.PublicKey) ([]byte, error) {
	return cryptoutils.MarshalPublicKeyToPEM(pub)
}
