package composition

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/secure-systems-lab/go-securesystemslib/dsse"
)

// PayloadType is the DSSE payload type of a composition; an envelope of any
// other type is refused before its signatures are looked at.
const PayloadType = "application/vnd.delivery.mesh.composition+json"

// MaxEnvelopeBytes bounds an envelope: a composition's files are its
// configuration, not its binaries, and a reader must not be made to hold an
// unbounded document to find out it is unsigned.
const MaxEnvelopeBytes = 16 << 20

// ErrUnverified marks an envelope no trusted key signed.
var ErrUnverified = errors.New("no trusted key signed the composition")

// Sign encodes doc, signs it with signer and gives the envelope's exact
// bytes: the bytes stored on the bus and the ones its digest is of.
func Sign(ctx context.Context, signer *Signer, doc Document) ([]byte, error) {
	payload, err := doc.Encode()
	if err != nil {
		return nil, err
	}
	es, err := dsse.NewEnvelopeSigner(signer)
	if err != nil {
		return nil, err
	}
	env, err := es.SignPayload(ctx, PayloadType, payload)
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(env)
	if err != nil {
		return nil, err
	}
	if len(raw) > MaxEnvelopeBytes {
		return nil, fmt.Errorf("the signed composition is %d bytes, more than %d", len(raw), MaxEnvelopeBytes)
	}
	return raw, nil
}

// DecodeEnvelope reads an envelope strictly (its schema: the payload type,
// standard base64, Ed25519-sized signatures) without reading its payload.
func DecodeEnvelope(raw []byte) (dsse.Envelope, error) {
	if len(raw) > MaxEnvelopeBytes {
		return dsse.Envelope{}, fmt.Errorf("envelope: %d bytes, more than %d", len(raw), MaxEnvelopeBytes)
	}
	var env dsse.Envelope
	if err := envelopeSchema.DecodeStrict(raw, &env); err != nil {
		return dsse.Envelope{}, fmt.Errorf("envelope: %w", err)
	}
	if _, err := base64.StdEncoding.Strict().DecodeString(env.Payload); err != nil {
		return dsse.Envelope{}, fmt.Errorf("envelope: the payload is not standard base64: %w", err)
	}
	// Strict: base64 whose unused low bits are set decodes to the same
	// signature, so one signed envelope would have many spellings.
	for i, s := range env.Signatures {
		if _, err := base64.StdEncoding.Strict().DecodeString(s.Sig); err != nil {
			return dsse.Envelope{}, fmt.Errorf("envelope: signature %d is not strict standard base64: %w", i, err)
		}
	}
	return env, nil
}

// Trust verifies envelopes against the configured public keys.
type Trust struct {
	verifier *dsse.EnvelopeVerifier
	ids      []string
}

// NewTrust trusts signatures by any of keys.
func NewTrust(keys ...ed25519.PublicKey) (*Trust, error) {
	seen := map[string]bool{}
	var vs []dsse.Verifier
	t := &Trust{}
	for _, k := range keys {
		if len(k) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("a public key of %d bytes, not %d", len(k), ed25519.PublicKeySize)
		}
		id := KeyID(k)
		if seen[id] {
			continue // one key twice would count as two signers
		}
		seen[id] = true
		vs = append(vs, verifier{pub: k, id: id})
		t.ids = append(t.ids, id)
	}
	v, err := dsse.NewEnvelopeVerifier(vs...)
	if err != nil {
		return nil, fmt.Errorf("no public key to trust: %w", err)
	}
	t.verifier = v
	return t, nil
}

// KeyIDs are the ids of the trusted keys.
func (t *Trust) KeyIDs() []string { return append([]string(nil), t.ids...) }

// Open verifies an envelope and only then reads its payload: a document is
// parsed once a trusted key is known to have signed it, never before.
func (t *Trust) Open(ctx context.Context, raw []byte) (Document, error) {
	env, err := DecodeEnvelope(raw)
	if err != nil {
		return Document{}, err
	}
	_, payload, err := t.verifier.VerifyAndDecode(ctx, &env)
	if err != nil {
		return Document{}, fmt.Errorf("%w: %s", ErrUnverified, err.Error())
	}
	return Decode(payload)
}

// OpenFor is Open holding the document to being the one for node, module
// and fingerprint.
func (t *Trust) OpenFor(ctx context.Context, raw []byte, node, module, fingerprint string) (Document, error) {
	doc, err := t.Open(ctx, raw)
	if err != nil {
		return Document{}, err
	}
	if err := doc.Names(node, module, fingerprint); err != nil {
		return Document{}, err
	}
	return doc, nil
}
