package garagecatalog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
)

// Summary counts what a run did. A run over a Garage and Vault that already
// hold the catalog counts nothing but Kept.
type Summary struct {
	Kept           int // keys Garage and Vault already agreed on
	Imported       int // keys Vault held and Garage lacked
	WrittenDown    int // keys Garage held under the Project's name, written to Vault
	Minted         int // new keys, written to Vault and imported
	BucketsCreated int
	Grants         int
}

// Changes is how many things the run wrote, in Garage or Vault.
func (s Summary) Changes() int {
	return s.Imported + s.WrittenDown + 2*s.Minted + s.BucketsCreated + s.Grants
}

// Applier applies a catalog's keys through a Garage and a Vault.
type Applier struct {
	Garage Garage
	Vault  Vault
	Log    *slog.Logger
	// Mint makes a new key; MintRandom when nil.
	Mint func() (Credentials, error)
}

// Run reads Garage's admin token from Vault and applies the catalog through
// the admin API version it names.
func Run(ctx context.Context, c *Catalog, vault Vault, client *http.Client, log *slog.Logger) (Summary, error) {
	token, err := ReadAdminToken(ctx, vault, c.AdminToken)
	if err != nil {
		return Summary{}, err
	}
	garage, err := NewGarage(c.AdminAPI, token, client)
	if err != nil {
		return Summary{}, err
	}
	return (&Applier{Garage: garage, Vault: vault, Log: log}).Apply(ctx, c.Keys)
}

// Apply settles each key in order: its key, then its buckets, then its
// grants. A key that fails does not stop the others; the error names every
// Project that failed.
func (a *Applier) Apply(ctx context.Context, keys []Key) (Summary, error) {
	var sum Summary
	var failed []string
	for _, k := range keys {
		if err := ctx.Err(); err != nil {
			return sum, err
		}
		if err := a.applyKey(ctx, k, &sum); err != nil {
			failed = append(failed, fmt.Sprintf("project %s: %v", k.Project, err))
		}
	}
	if len(failed) > 0 {
		return sum, errors.New(strings.Join(failed, "; "))
	}
	return sum, nil
}

func (a *Applier) applyKey(ctx context.Context, k Key, sum *Summary) error {
	key, err := a.settleKey(ctx, k, sum)
	if err != nil {
		return err
	}
	for _, b := range k.Buckets {
		if err := a.settleBucket(ctx, k, b, key.AccessKeyID, sum); err != nil {
			return fmt.Errorf("bucket %s: %w", b, err)
		}
	}
	return nil
}

// settleKey makes Vault's document and Garage hold the same key. A lost
// check-and-set means another run wrote the document first; the second
// attempt then takes the document as it is.
func (a *Applier) settleKey(ctx context.Context, k Key, sum *Summary) (Credentials, error) {
	path := k.DocumentPath()
	log := a.Log.With(slog.String("project", k.Project), slog.String("process", k.Process), slog.String("document", path))
	for range 2 {
		facts, err := a.keyFacts(ctx, k, path)
		if err != nil {
			return Credentials{}, err
		}
		decision, err := DecideKey(facts)
		if err != nil {
			return Credentials{}, err
		}
		switch decision.Action {
		case KeyKeep:
			sum.Kept++
			return *facts.Document, nil
		case KeyImport:
			if err := a.importKey(ctx, k, *facts.Document); err != nil {
				return Credentials{}, err
			}
			sum.Imported++
			log.Info("key imported into Garage from Vault", slog.Any("key", *facts.Document))
			return *facts.Document, nil
		case KeyWriteDown:
			held, found, err := a.Garage.GetKeyInfo(ctx, decision.KeyID)
			if err != nil {
				return Credentials{}, err
			}
			if !found {
				return Credentials{}, fmt.Errorf("garage's key %s named %s vanished while the run read it", decision.KeyID, k.Project)
			}
			created, err := a.Vault.CreateDocument(ctx, path, held.Document())
			if err != nil {
				return Credentials{}, err
			}
			if !created {
				continue
			}
			sum.WrittenDown++
			log.Info("key Garage holds under the Project's name written to Vault", slog.Any("key", held.Credentials))
			return held.Credentials, nil
		case KeyMint:
			mint := a.Mint
			if mint == nil {
				mint = MintRandom
			}
			key, err := mint()
			if err != nil {
				return Credentials{}, err
			}
			created, err := a.Vault.CreateDocument(ctx, path, key.Document())
			if err != nil {
				return Credentials{}, err
			}
			if !created {
				continue
			}
			if err := a.importKey(ctx, k, key); err != nil {
				return Credentials{}, err
			}
			sum.Minted++
			log.Info("key minted, written to Vault and imported into Garage", slog.Any("key", key))
			return key, nil
		}
	}
	return Credentials{}, fmt.Errorf("vault document %s was written by someone else, then could not be read", path)
}

func (a *Applier) keyFacts(ctx context.Context, k Key, path string) (KeyFacts, error) {
	facts := KeyFacts{Project: k.Project}
	fields, found, err := a.Vault.ReadDocument(ctx, path)
	if err != nil {
		return facts, err
	}
	if found {
		doc, err := ParseDocument(fields)
		if err != nil {
			return facts, fmt.Errorf("vault document %s: %w", path, err)
		}
		facts.Document = &doc
		held, ok, err := a.Garage.GetKeyInfo(ctx, doc.AccessKeyID)
		if err != nil {
			return facts, err
		}
		if ok {
			facts.Held = &held
		}
		return facts, nil
	}
	keys, err := a.Garage.ListKeys(ctx)
	if err != nil {
		return facts, err
	}
	for _, key := range keys {
		if key.Name == k.Project {
			facts.Named = append(facts.Named, key.ID)
			if key.Expired {
				facts.Expired = append(facts.Expired, key.ID)
			}
		}
	}
	return facts, nil
}

// importKey imports a key, named for its Project. Garage refusing because it
// holds the id already is fine when it holds the same secret: another run
// imported it first.
func (a *Applier) importKey(ctx context.Context, k Key, key Credentials) error {
	err := a.Garage.ImportKey(ctx, k.Project, key)
	if !errors.Is(err, ErrExists) {
		return err
	}
	held, found, err := a.Garage.GetKeyInfo(ctx, key.AccessKeyID)
	if err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("garage refuses to import key %s: it held that id once and deleted it; Vault's document names a key Garage will not take back", key.AccessKeyID)
	}
	if _, err := DecideKey(KeyFacts{Project: k.Project, Document: &key, Held: &held}); err != nil {
		return err
	}
	return nil
}

func (a *Applier) settleBucket(ctx context.Context, k Key, alias, keyID string, sum *Summary) error {
	log := a.Log.With(slog.String("project", k.Project), slog.String("bucket", alias), slog.String("key", keyID))
	bucket, found, err := a.Garage.GetBucketInfo(ctx, alias)
	if err != nil {
		return err
	}
	decision := DecideBucket(BucketFacts{Exists: found, Perm: bucket.Perms[keyID]})
	if decision.Create {
		bucket, err = a.Garage.CreateBucket(ctx, alias)
		switch {
		case errors.Is(err, ErrExists):
			// Another run created it first; take it as it now is.
			if bucket, found, err = a.Garage.GetBucketInfo(ctx, alias); err != nil {
				return err
			}
			if !found {
				return fmt.Errorf("garage says the bucket exists but does not find it")
			}
			decision.Allow = DecideBucket(BucketFacts{Exists: true, Perm: bucket.Perms[keyID]}).Allow
		case err != nil:
			return err
		default:
			sum.BucketsCreated++
			log.Info("bucket created", slog.String("bucket_id", bucket.ID))
		}
	}
	if decision.Allow {
		if err := a.Garage.AllowBucketKey(ctx, bucket.ID, keyID, Grant); err != nil {
			return err
		}
		sum.Grants++
		log.Info("key allowed to read and write the bucket")
	}
	return nil
}
