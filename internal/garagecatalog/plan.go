package garagecatalog

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"slices"
	"strings"
)

// Credentials is an S3 key as Garage issues it. Its String, GoString and
// LogValue name the access key id alone, so the secret cannot reach a log
// line or an error by being printed.
type Credentials struct {
	AccessKeyID     string
	SecretAccessKey string
}

// String names the key by its access key id.
func (c Credentials) String() string { return "key " + c.AccessKeyID }

// GoString names the key by its access key id, for %#v.
func (c Credentials) GoString() string { return c.String() }

// LogValue implements slog.LogValuer.
func (c Credentials) LogValue() slog.Value { return slog.StringValue(c.AccessKeyID) }

// The fields of the Vault document holding a key.
const (
	FieldAccessKeyID     = "access-key-id"
	FieldSecretAccessKey = "secret-access-key"
)

// Garage's key format: GK and 12 bytes in hex; the secret is 32 bytes in
// hex. Garage reads hex in either case, so a document holding upper case is
// one it imports.
var (
	accessKeyIDFormat = regexp.MustCompile(`^GK[0-9a-fA-F]{24}$`)
	secretFormat      = regexp.MustCompile(`^[0-9a-fA-F]{64}$`)
)

// ParseDocument reads the key a Vault document holds. A document that lacks
// either field, or holds a key Garage would not accept, is an error: the run
// cannot import it, and must not write over it.
func ParseDocument(data map[string]any) (Credentials, error) {
	id, _ := data[FieldAccessKeyID].(string)
	secret, _ := data[FieldSecretAccessKey].(string)
	switch {
	case id == "" || secret == "":
		return Credentials{}, fmt.Errorf("the document lacks %s or %s", FieldAccessKeyID, FieldSecretAccessKey)
	case !accessKeyIDFormat.MatchString(id):
		return Credentials{}, fmt.Errorf("%s is not a Garage access key id (GK and 24 hex digits)", FieldAccessKeyID)
	case !secretFormat.MatchString(secret):
		return Credentials{}, fmt.Errorf("%s of key %s is not a Garage secret (64 hex digits)", FieldSecretAccessKey, id)
	}
	return Credentials{AccessKeyID: id, SecretAccessKey: secret}, nil
}

// Document is the Vault document's fields for a key.
func (c Credentials) Document() map[string]string {
	return map[string]string{FieldAccessKeyID: c.AccessKeyID, FieldSecretAccessKey: c.SecretAccessKey}
}

// Mint makes a new key in Garage's own format from random bytes, as Garage's
// CreateKey does. The run writes it to Vault before Garage learns of it, so
// that Vault's check-and-set decides which of two concurrent runs' keys is
// the one: the loser's key never reaches Garage.
func Mint(random io.Reader) (Credentials, error) {
	b := make([]byte, 12+32)
	if _, err := io.ReadFull(random, b); err != nil {
		return Credentials{}, fmt.Errorf("mint a key: %w", err)
	}
	return Credentials{AccessKeyID: "GK" + hex.EncodeToString(b[:12]), SecretAccessKey: hex.EncodeToString(b[12:])}, nil
}

// MintRandom mints from the system's secure random source.
func MintRandom() (Credentials, error) { return Mint(rand.Reader) }

// KeyAction is what a run does about a Project's key.
type KeyAction int

const (
	// KeyKeep means Garage holds the key Vault's document names, with its secret.
	KeyKeep KeyAction = iota
	// KeyImport means Vault's document holds a key Garage lacks; Garage imports it.
	KeyImport
	// KeyWriteDown means there is no document and Garage holds one key named for
	// the Project; it is written to Vault.
	KeyWriteDown
	// KeyMint means there is no document and no key named for the Project; a new
	// key is written to Vault, then imported.
	KeyMint
)

func (a KeyAction) String() string {
	switch a {
	case KeyKeep:
		return "keep"
	case KeyImport:
		return "import"
	case KeyWriteDown:
		return "write down"
	case KeyMint:
		return "mint"
	default:
		return fmt.Sprintf("KeyAction(%d)", int(a))
	}
}

// KeyFacts is what a run knows about a Project's key before acting.
type KeyFacts struct {
	Project string
	// Document is the key Vault's document holds; nil when there is none.
	Document *Credentials
	// Held is Garage's key with the document's id; nil when Garage lacks it.
	// Only read when Document is set.
	Held *HeldKey
	// Named are the ids of Garage's keys named for the Project, and Expired
	// those of them Garage says have expired. Only read when Document is nil.
	Named, Expired []string
}

// KeyDecision is the action and, for KeyWriteDown, the key to write down.
type KeyDecision struct {
	Action KeyAction
	KeyID  string
}

// DecideKey chooses what to do about a Project's key.
func DecideKey(f KeyFacts) (KeyDecision, error) {
	if f.Document != nil {
		switch {
		case f.Held == nil:
			return KeyDecision{Action: KeyImport, KeyID: f.Document.AccessKeyID}, nil
		case f.Held.SecretAccessKey != f.Document.SecretAccessKey:
			return KeyDecision{}, fmt.Errorf("garage holds key %s with a secret other than Vault's document: refusing to choose between them", f.Document.AccessKeyID)
		case f.Held.Expired:
			// Kept, it would leave the Project a key that no longer signs
			// in, and the run would say all is well.
			return KeyDecision{}, fmt.Errorf("garage's key %s, which Vault's document names, has expired: renew it in Garage", f.Document.AccessKeyID)
		default:
			return KeyDecision{Action: KeyKeep, KeyID: f.Document.AccessKeyID}, nil
		}
	}
	switch len(f.Named) {
	case 0:
		return KeyDecision{Action: KeyMint}, nil
	case 1:
		if slices.Contains(f.Expired, f.Named[0]) {
			// Written down, it would hand the Project a key that no longer
			// signs in, and the run would say all is well.
			return KeyDecision{}, fmt.Errorf("garage's key %s named %s has expired and Vault holds none: renew it in Garage, or write a key to Vault by hand",
				f.Named[0], f.Project)
		}
		return KeyDecision{Action: KeyWriteDown, KeyID: f.Named[0]}, nil
	default:
		return KeyDecision{}, fmt.Errorf("garage holds %d keys named %s (%s) and Vault none: write the one in use to Vault by hand",
			len(f.Named), f.Project, strings.Join(f.Named, ", "))
	}
}

// Permission is a key's permissions on a bucket.
type Permission struct {
	Read, Write, Owner bool
}

// Grant is what the run gives a key on each of its buckets: read and write,
// never owner.
var Grant = Permission{Read: true, Write: true}

// BucketFacts is what a run knows about one of a key's buckets.
type BucketFacts struct {
	// Exists is whether Garage holds a bucket with the global alias.
	Exists bool
	// Perm is the key's permissions on it.
	Perm Permission
}

// BucketDecision says whether to create the bucket and whether to grant.
type BucketDecision struct {
	Create, Allow bool
}

// DecideBucket creates an absent bucket and grants read and write where the
// key lacks either. A permission the key has beyond the grant (owner) is left
// alone: the run never takes a grant away.
func DecideBucket(f BucketFacts) BucketDecision {
	if !f.Exists {
		return BucketDecision{Create: true, Allow: true}
	}
	return BucketDecision{Allow: !f.Perm.Read || !f.Perm.Write}
}
