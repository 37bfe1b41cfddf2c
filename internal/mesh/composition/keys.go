package composition

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
)

// KeyID is the keyid a signature by pub carries: the hex SHA-256 of the raw
// 32-byte public key, so anyone holding the public key can say which it is.
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:])
}

// Signer signs compositions with one Ed25519 private key; it is a DSSE
// SignerVerifier, so it also verifies what it signed.
type Signer struct {
	key ed25519.PrivateKey
	id  string
}

// NewSigner is the signer of key.
func NewSigner(key ed25519.PrivateKey) *Signer {
	return &Signer{key: key, id: KeyID(key.Public().(ed25519.PublicKey))}
}

// Sign is the Ed25519 signature of data (DSSE hands it the envelope's
// pre-authentication encoding).
func (s *Signer) Sign(_ context.Context, data []byte) ([]byte, error) {
	return ed25519.Sign(s.key, data), nil
}

// KeyID names the signer's public key.
func (s *Signer) KeyID() (string, error) { return s.id, nil }

// Public is the signer's public key.
func (s *Signer) Public() crypto.PublicKey { return s.key.Public() }

// Verify checks a signature by the signer's own key.
func (s *Signer) Verify(ctx context.Context, data, sig []byte) error {
	return verifier{pub: s.key.Public().(ed25519.PublicKey), id: s.id}.Verify(ctx, data, sig)
}

// verifier checks signatures by one trusted public key.
type verifier struct {
	pub ed25519.PublicKey
	id  string
}

var errBadSignature = errors.New("the signature does not verify")

func (v verifier) Verify(_ context.Context, data, sig []byte) error {
	if !ed25519.Verify(v.pub, data, sig) {
		return errBadSignature
	}
	return nil
}

func (v verifier) KeyID() (string, error)   { return v.id, nil }
func (v verifier) Public() crypto.PublicKey { return v.pub }

// GenerateKey makes a key pair and gives both halves as PEM: the private key
// PKCS #8, the public key PKIX, the forms openssl and every TLS tool read.
func GenerateKey() (private, public []byte, err error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, nil, err
	}
	if public, err = publicPEM(pub); err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), public, nil
}

func publicPEM(pub ed25519.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}

// KeyPair is a new key ready to sign with: its signer, the trust of it
// alone, and its public key as PEM, as MESH_TRUSTED_KEYS holds it.
type KeyPair struct {
	Signer *Signer
	Trust  *Trust
	Public []byte
}

// NewKeyPair makes a key pair for a composer that signs with a key of its
// own, as the demo does.
func NewKeyPair() (KeyPair, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return KeyPair{}, err
	}
	public, err := publicPEM(pub)
	if err != nil {
		return KeyPair{}, err
	}
	trust, err := NewTrust(pub)
	if err != nil {
		return KeyPair{}, err
	}
	return KeyPair{Signer: NewSigner(priv), Trust: trust, Public: public}, nil
}

// ParsePrivateKey reads a PEM private key; it must be Ed25519.
func ParsePrivateKey(raw []byte) (ed25519.PrivateKey, error) {
	block, rest := pem.Decode(raw)
	if block == nil || block.Type != "PRIVATE KEY" {
		return nil, errors.New("private key: not a PEM PRIVATE KEY block")
	}
	if more, _ := pem.Decode(rest); more != nil {
		return nil, errors.New("private key: more than one PEM block")
	}
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("private key: %w", err)
	}
	ed, ok := key.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("private key: a %T, not Ed25519", key)
	}
	return ed, nil
}

// ParsePublicKeys reads the trusted public keys: one or more PEM PUBLIC KEY
// blocks, each Ed25519. A file with anything else in it is refused whole,
// since a key skipped silently is a composition refused later for no reason
// anyone can see.
func ParsePublicKeys(raw []byte) ([]ed25519.PublicKey, error) {
	var keys []ed25519.PublicKey
	for {
		block, rest := pem.Decode(raw)
		if block == nil {
			if len(bytes.TrimSpace(rest)) > 0 {
				return nil, errors.New("public keys: text that is not a PEM block")
			}
			break
		}
		if block.Type != "PUBLIC KEY" {
			return nil, fmt.Errorf("public keys: a PEM %s block, not PUBLIC KEY", block.Type)
		}
		key, err := x509.ParsePKIXPublicKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("public keys: %w", err)
		}
		ed, ok := key.(ed25519.PublicKey)
		if !ok {
			return nil, fmt.Errorf("public keys: a %T, not Ed25519", key)
		}
		keys = append(keys, ed)
		raw = rest
	}
	if len(keys) == 0 {
		return nil, errors.New("public keys: none")
	}
	return keys, nil
}
