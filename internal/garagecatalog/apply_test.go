package garagecatalog

import (
	"bufio"
	"context"
	"encoding/json"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	vaultapi "github.com/hashicorp/vault/api"

	"github.com/JorisJonkers-dev/delivery/internal/testenv"
	"github.com/JorisJonkers-dev/delivery/internal/testenv/fakegarage"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

const adminTokenPath = "secret/data/platform/garage/admin"

// JobPolicy is the least a run needs of Vault: read and create the Projects'
// key documents, never update them, and read the admin token. The tests run
// the job with nothing more, so a call outside it fails.
const JobPolicy = `
path "secret/data/+/+/s3" {
  capabilities = ["read", "create"]
}
path "` + adminTokenPath + `" {
  capabilities = ["read"]
}
`

// world is one Garage double and one real Vault dev server, and the logs of
// every run against them.
type world struct {
	garage *fakegarage.Garage
	vault  *testenv.Vault
	audit  string
	logs   testenv.LogBuffer
}

func newWorld(t *testing.T) *world {
	t.Helper()
	w := &world{garage: fakegarage.New(t), vault: testenv.NewVault(t), audit: filepath.Join(t.TempDir(), "audit.log")}
	ctx := context.Background()
	// Vault's own audit log counts the writes Vault receives.
	if err := w.vault.Client.Sys().EnableAuditWithOptionsWithContext(ctx, "file", &vaultapi.EnableAuditOptions{
		Type: "file", Options: map[string]string{"file_path": w.audit},
	}); err != nil {
		t.Fatalf("enable Vault's audit log: %v", err)
	}
	w.rootWrite(t, adminTokenPath, map[string]any{"admin-token": w.garage.Token})
	if err := w.vault.Client.Sys().PutPolicyWithContext(ctx, "garage-catalog", JobPolicy); err != nil {
		t.Fatal(err)
	}
	return w
}

func (w *world) rootWrite(t *testing.T, path string, data map[string]any) {
	t.Helper()
	if _, err := w.vault.Client.Logical().Write(path, map[string]any{"data": data}); err != nil {
		t.Fatalf("write %s: %v", path, err)
	}
}

// jobVault is a Vault client holding only the job's policy.
func (w *world) jobVault(t *testing.T) *VaultKV {
	t.Helper()
	secret, err := w.vault.Client.Auth().Token().Create(&vaultapi.TokenCreateRequest{Policies: []string{"garage-catalog"}})
	if err != nil {
		t.Fatal(err)
	}
	c := w.vault.LoginClient(t)
	c.SetToken(secret.Auth.ClientToken)
	return &VaultKV{Client: c}
}

func (w *world) catalog(keys ...Key) *Catalog {
	host, port := splitHostPort(w.garage.URL)
	return &Catalog{
		AdminAPI:   AdminAPI{Host: host, Port: port, Scheme: "http", Version: "v2"},
		AdminToken: AdminToken{Path: adminTokenPath, Field: "admin-token"},
		Keys:       keys,
	}
}

func (w *world) run(t *testing.T, keys ...Key) (Summary, error) {
	t.Helper()
	log := slog.New(slog.NewJSONHandler(&w.logs, nil))
	return Run(context.Background(), w.catalog(keys...), w.jobVault(t), nil, log)
}

// document reads a key's document as root.
func (w *world) document(t *testing.T, k Key) (Credentials, bool) {
	t.Helper()
	s, err := w.vault.Client.Logical().Read(k.DocumentPath())
	if err != nil {
		t.Fatal(err)
	}
	if s == nil {
		return Credentials{}, false
	}
	data, _ := s.Data["data"].(map[string]any)
	c, err := ParseDocument(data)
	if err != nil {
		t.Fatalf("document %s: %v", k.DocumentPath(), err)
	}
	return c, true
}

// vaultWrites counts the requests Vault's audit log records that would
// change a secret: create, update or delete under secret/.
func (w *world) vaultWrites(t *testing.T) int {
	t.Helper()
	f, err := os.Open(w.audit)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var entry struct {
			Type    string `json:"type"`
			Request struct {
				Operation string `json:"operation"`
				Path      string `json:"path"`
			} `json:"request"`
		}
		if json.Unmarshal(sc.Bytes(), &entry) != nil || entry.Type != "request" {
			continue
		}
		switch entry.Request.Operation {
		case "create", "update", "delete":
			if strings.HasPrefix(entry.Request.Path, "secret/") {
				n++
			}
		}
	}
	return n
}

// assertNoSecretLogged fails when any secret either side holds shows in the
// runs' logs: the keys' secrets, Garage's admin token, Vault's root token.
func (w *world) assertNoSecretLogged(t *testing.T, extra ...string) {
	t.Helper()
	logs := w.logs.String()
	secrets := append([]string{w.garage.Token, w.vault.RootToken}, extra...)
	for _, id := range w.allKeyIDs() {
		_, secret, _ := w.garage.Key(id)
		secrets = append(secrets, secret)
	}
	for _, s := range secrets {
		if s != "" && strings.Contains(logs, s) {
			t.Errorf("a secret reached the logs: %s", logs)
		}
	}
}

func (w *world) allKeyIDs() []string {
	var ids []string
	for _, name := range []string{"knowledge", "media", "Imported key", "Unnamed key"} {
		ids = append(ids, w.garage.KeysNamed(name)...)
	}
	return ids
}

var (
	knowledge = Key{Project: "knowledge", Process: "karakeep", Buckets: []string{"knowledge-assets"}}
	media     = Key{Project: "media", Process: "immich", Buckets: []string{"media-library", "media.thumbnails"}}
)

// assertApplied checks Garage and Vault hold the key: the same id and secret
// on both sides, named for the Project, allowed to read and write each
// bucket and no more.
func (w *world) assertApplied(t *testing.T, k Key) Credentials {
	t.Helper()
	doc, ok := w.document(t, k)
	if !ok {
		t.Fatalf("no document at %s", k.DocumentPath())
	}
	name, secret, held := w.garage.Key(doc.AccessKeyID)
	if !held || secret != doc.SecretAccessKey || name != k.Project {
		t.Fatalf("garage holds %s as %q (held %v, same secret %v)", doc.AccessKeyID, name, held, secret == doc.SecretAccessKey)
	}
	for _, b := range k.Buckets {
		_, perms, ok := w.garage.Bucket(b)
		if !ok {
			t.Fatalf("no bucket %s", b)
		}
		if perms[doc.AccessKeyID] != (fakegarage.Perm{Read: true, Write: true}) {
			t.Errorf("bucket %s: key %s has %+v, want read and write, not owner", b, doc.AccessKeyID, perms[doc.AccessKeyID])
		}
	}
	return doc
}

func TestFreshCatalog(t *testing.T) {
	w := newWorld(t)
	sum, err := w.run(t, knowledge, media)
	if err != nil {
		t.Fatal(err)
	}
	if sum != (Summary{Minted: 2, BucketsCreated: 3, Grants: 3}) {
		t.Errorf("summary %+v", sum)
	}
	w.assertApplied(t, knowledge)
	w.assertApplied(t, media)
	if w.garage.KeyCount() != 2 || w.garage.BucketCount() != 3 {
		t.Errorf("garage holds %d keys and %d buckets, want 2 and 3", w.garage.KeyCount(), w.garage.BucketCount())
	}
	w.assertNoSecretLogged(t)
}

func TestSecondRunWritesNothing(t *testing.T) {
	w := newWorld(t)
	if _, err := w.run(t, knowledge, media); err != nil {
		t.Fatal(err)
	}
	garageWrites, vaultWrites := w.garage.Writes(), w.vaultWrites(t)
	if vaultWrites != 3 { // the admin token, and one document per key
		t.Fatalf("the audit log counts %d writes after the first run, want 3", vaultWrites)
	}
	sum, err := w.run(t, knowledge, media)
	if err != nil {
		t.Fatal(err)
	}
	if sum != (Summary{Kept: 2}) || sum.Changes() != 0 {
		t.Errorf("second run: %+v", sum)
	}
	if got := w.garage.Writes(); got != garageWrites {
		t.Errorf("the second run sent Garage %d writes", got-garageWrites)
	}
	if got := w.vaultWrites(t); got != vaultWrites {
		t.Errorf("the second run sent Vault %d writes", got-vaultWrites)
	}
	w.assertNoSecretLogged(t)
}

func TestRebuiltGarageReimportsTheSameKeys(t *testing.T) {
	w := newWorld(t)
	if _, err := w.run(t, knowledge, media); err != nil {
		t.Fatal(err)
	}
	before := map[string]Credentials{}
	for _, k := range []Key{knowledge, media} {
		before[k.Project], _ = w.document(t, k)
	}
	vaultWrites := w.vaultWrites(t)

	w.garage.Rebuild()
	sum, err := w.run(t, knowledge, media)
	if err != nil {
		t.Fatal(err)
	}
	if sum != (Summary{Imported: 2, BucketsCreated: 3, Grants: 3}) {
		t.Errorf("summary %+v", sum)
	}
	for _, k := range []Key{knowledge, media} {
		if got := w.assertApplied(t, k); got != before[k.Project] {
			t.Errorf("%s: Garage hands out %v, not the key it had", k.Project, got)
		}
	}
	if w.vaultWrites(t) != vaultWrites {
		t.Error("re-importing wrote to Vault")
	}
	w.assertNoSecretLogged(t)
}

func TestConflictingSecretFailsTheRun(t *testing.T) {
	w := newWorld(t)
	w.rootWrite(t, knowledge.DocumentPath(), map[string]any{FieldAccessKeyID: docKey.AccessKeyID, FieldSecretAccessKey: docKey.SecretAccessKey})
	w.garage.HoldImportedKey(otherKey.AccessKeyID, otherKey.SecretAccessKey, "knowledge")
	writes := w.vaultWrites(t)

	sum, err := w.run(t, knowledge, media)
	if err == nil || !strings.Contains(err.Error(), "project knowledge") || !strings.Contains(err.Error(), "secret other than Vault's") {
		t.Fatalf("got %v, want the run to fail naming knowledge's conflict", err)
	}
	if doc, _ := w.document(t, knowledge); doc != docKey {
		t.Error("the document changed")
	}
	if _, _, ok := w.garage.Bucket("knowledge-assets"); ok {
		t.Error("a bucket was created for a key in conflict")
	}
	// The other Project is not held back by the one in conflict.
	w.assertApplied(t, media)
	if sum.Minted != 1 || w.vaultWrites(t) != writes+1 {
		t.Errorf("summary %+v", sum)
	}
	w.assertNoSecretLogged(t, docKey.SecretAccessKey, otherKey.SecretAccessKey)
	if strings.Contains(err.Error(), docKey.SecretAccessKey) || strings.Contains(err.Error(), otherKey.SecretAccessKey) {
		t.Error("the error holds a secret")
	}
}

func TestKeyGarageHoldsUnderTheProjectsNameIsWrittenDown(t *testing.T) {
	w := newWorld(t)
	id, secret := w.garage.HoldKey("knowledge")
	sum, err := w.run(t, knowledge)
	if err != nil {
		t.Fatal(err)
	}
	if sum != (Summary{WrittenDown: 1, BucketsCreated: 1, Grants: 1}) {
		t.Errorf("summary %+v", sum)
	}
	doc := w.assertApplied(t, knowledge)
	if doc != (Credentials{AccessKeyID: id, SecretAccessKey: secret}) {
		t.Errorf("wrote down %v, not Garage's key %s", doc, id)
	}
	if ids := w.garage.KeysNamed("knowledge"); len(ids) != 1 {
		t.Errorf("garage holds keys %v named knowledge, want the one", ids)
	}
	w.assertNoSecretLogged(t)
}

// A key Vault's document names that has expired in Garage fails its
// Project: kept, it would leave the Project a key that no longer signs in.
// One named for the Project with no document is not written down either.
func TestAnExpiredKeyFailsTheRun(t *testing.T) {
	w := newWorld(t)
	if _, err := w.run(t, knowledge); err != nil {
		t.Fatal(err)
	}
	doc, _ := w.document(t, knowledge)
	w.garage.ExpireKey(doc.AccessKeyID)
	if _, err := w.run(t, knowledge); err == nil || !strings.Contains(err.Error(), doc.AccessKeyID+", which Vault's document names, has expired") {
		t.Fatalf("a kept key that expired: %v", err)
	}
	id, _ := w.garage.HoldKey("media")
	w.garage.ExpireKey(id)
	if _, err := w.run(t, media); err == nil || !strings.Contains(err.Error(), id+" named media has expired") {
		t.Fatalf("an expired key to write down: %v", err)
	}
	if _, ok := w.document(t, media); ok {
		t.Error("an expired key was written down")
	}
	w.assertNoSecretLogged(t)
}

func TestTwoKeysUnderTheProjectsNameFailTheRun(t *testing.T) {
	w := newWorld(t)
	w.garage.HoldKey("knowledge")
	w.garage.HoldKey("knowledge")
	if _, err := w.run(t, knowledge); err == nil || !strings.Contains(err.Error(), "2 keys named knowledge") {
		t.Fatalf("got %v", err)
	}
	if _, ok := w.document(t, knowledge); ok {
		t.Error("a document was written")
	}
	w.assertNoSecretLogged(t)
}

func TestConcurrentRunsMintOneKey(t *testing.T) {
	w := newWorld(t)
	projects := []Key{knowledge, media,
		{Project: "agents", Process: "runner", Buckets: []string{"agents-work"}},
		{Project: "auth", Process: "keycloak", Buckets: []string{"auth-exports"}},
	}
	// Each run has its own clients, as two pods would.
	appliers := make([]*Applier, 2)
	for i := range appliers {
		appliers[i] = &Applier{
			Garage: NewGarageV2(w.garage.URL, w.garage.Token, nil),
			Vault:  w.jobVault(t),
			Log:    slog.New(slog.NewJSONHandler(&w.logs, nil)),
		}
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	errs := make([]error, len(appliers))
	for i, applier := range appliers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, errs[i] = applier.Apply(context.Background(), projects)
		}()
	}
	close(start)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range projects {
		doc := w.assertApplied(t, k)
		if ids := w.garage.KeysNamed(k.Project); len(ids) != 1 || ids[0] != doc.AccessKeyID {
			t.Errorf("%s: garage holds keys %v, want only Vault's %s", k.Project, ids, doc.AccessKeyID)
		}
	}
	if w.garage.KeyCount() != len(projects) || w.garage.BucketCount() != 5 {
		t.Errorf("garage holds %d keys and %d buckets", w.garage.KeyCount(), w.garage.BucketCount())
	}
	w.assertNoSecretLogged(t)
}

// meetingVault holds each run at its first write until the other run gets
// there too: both have found no document and minted a key of their own.
type meetingVault struct {
	Vault
	arrived *sync.WaitGroup
}

func (m meetingVault) CreateDocument(ctx context.Context, path string, fields map[string]string) (bool, error) {
	m.arrived.Done()
	m.arrived.Wait()
	return m.Vault.CreateDocument(ctx, path, fields)
}

func TestConcurrentRunsThatBothMintedKeepOneKey(t *testing.T) {
	w := newWorld(t)
	var arrived sync.WaitGroup
	arrived.Add(2)
	appliers := make([]*Applier, 2)
	for i := range appliers {
		appliers[i] = &Applier{
			Garage: NewGarageV2(w.garage.URL, w.garage.Token, nil),
			Vault:  meetingVault{Vault: w.jobVault(t), arrived: &arrived},
			Log:    slog.New(slog.NewJSONHandler(&w.logs, nil)),
		}
	}
	var wg sync.WaitGroup
	sums := make([]Summary, len(appliers))
	errs := make([]error, len(appliers))
	for i, applier := range appliers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sums[i], errs[i] = applier.Apply(context.Background(), []Key{knowledge})
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if sums[0].Minted+sums[1].Minted != 1 {
		t.Errorf("minted %d and %d keys, want one between them", sums[0].Minted, sums[1].Minted)
	}
	doc := w.assertApplied(t, knowledge)
	if ids := w.garage.KeysNamed("knowledge"); len(ids) != 1 || ids[0] != doc.AccessKeyID || w.garage.KeyCount() != 1 {
		t.Errorf("garage holds keys %v, want only Vault's %s", ids, doc.AccessKeyID)
	}
	w.assertNoSecretLogged(t)
}

func TestOwnerGrantIsKeptAndNothingWritten(t *testing.T) {
	w := newWorld(t)
	if _, err := w.run(t, knowledge); err != nil {
		t.Fatal(err)
	}
	doc, _ := w.document(t, knowledge)
	w.garage.Grant("knowledge-assets", doc.AccessKeyID, fakegarage.Perm{Read: true, Write: true, Owner: true})
	writes := w.garage.Writes()
	if _, err := w.run(t, knowledge); err != nil {
		t.Fatal(err)
	}
	if _, perms, _ := w.garage.Bucket("knowledge-assets"); !perms[doc.AccessKeyID].Owner {
		t.Error("an owner grant was taken away")
	}
	if w.garage.Writes() != writes {
		t.Error("the run wrote to Garage")
	}
}

func TestKeyOnlyReadingIsAllowedToWrite(t *testing.T) {
	w := newWorld(t)
	if _, err := w.run(t, knowledge); err != nil {
		t.Fatal(err)
	}
	doc, _ := w.document(t, knowledge)
	w.garage.Grant("knowledge-assets", doc.AccessKeyID, fakegarage.Perm{Read: true})
	sum, err := w.run(t, knowledge)
	if err != nil || sum != (Summary{Kept: 1, Grants: 1}) {
		t.Fatalf("%+v %v", sum, err)
	}
	w.assertApplied(t, knowledge)
}

func TestBucketThatExistsIsTakenAsItIs(t *testing.T) {
	w := newWorld(t)
	id := w.garage.HoldBucket("knowledge-assets")
	sum, err := w.run(t, knowledge)
	if err != nil || sum.BucketsCreated != 0 || sum.Grants != 1 {
		t.Fatalf("%+v %v", sum, err)
	}
	if got, _, _ := w.garage.Bucket("knowledge-assets"); got != id || w.garage.BucketCount() != 1 {
		t.Error("the bucket was replaced")
	}
}

func TestDocumentsThatCannotBeUsedFailTheRun(t *testing.T) {
	cases := map[string]struct {
		arrange func(t *testing.T, w *world)
		want    string
	}{
		"a document without the secret": {
			func(t *testing.T, w *world) {
				w.rootWrite(t, knowledge.DocumentPath(), map[string]any{FieldAccessKeyID: docKey.AccessKeyID})
			}, "lacks",
		},
		"a deleted document": {
			func(t *testing.T, w *world) {
				w.rootWrite(t, knowledge.DocumentPath(), docKey.asFields())
				if _, err := w.vault.Client.Logical().Delete(knowledge.DocumentPath()); err != nil {
					t.Fatal(err)
				}
			}, "deleted or destroyed",
		},
		"no admin token": {
			func(t *testing.T, w *world) {
				w.rootWrite(t, adminTokenPath, map[string]any{"other": "x"})
			}, "no field admin-token",
		},
		"a wrong admin token": {
			func(t *testing.T, w *world) {
				w.rootWrite(t, adminTokenPath, map[string]any{"admin-token": "not-the-token"})
			}, "HTTP 403",
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t)
			c.arrange(t, w)
			writes := w.vaultWrites(t)
			_, err := w.run(t, knowledge)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want %q", err, c.want)
			}
			if w.vaultWrites(t) != writes || w.garage.KeyCount() != 0 {
				t.Error("a failed run wrote")
			}
			w.assertNoSecretLogged(t, docKey.SecretAccessKey, "not-the-token")
		})
	}
}

func (c Credentials) asFields() map[string]any {
	return map[string]any{FieldAccessKeyID: c.AccessKeyID, FieldSecretAccessKey: c.SecretAccessKey}
}

func TestVaultRefusesAnUpdateToTheJob(t *testing.T) {
	w := newWorld(t)
	w.rootWrite(t, knowledge.DocumentPath(), docKey.asFields())
	// Create is all the job holds on key documents; Vault itself refuses it
	// an overwrite, whatever check-and-set says.
	_, err := w.jobVault(t).Client.Logical().Write(knowledge.DocumentPath(), map[string]any{"data": otherKey.asFields()})
	if err == nil {
		t.Fatal("the job's policy let it overwrite a key document")
	}
	created, err := w.jobVault(t).CreateDocument(context.Background(), knowledge.DocumentPath(), otherKey.Document())
	if created || err != nil {
		t.Fatalf("check-and-set 0 over a document: created %v, %v", created, err)
	}
	// Under a policy that grants update as well, check-and-set alone keeps
	// the document.
	root := &VaultKV{Client: w.vault.Client}
	if created, err := root.CreateDocument(context.Background(), knowledge.DocumentPath(), otherKey.Document()); created || err != nil {
		t.Fatalf("check-and-set 0 over a document as root: created %v, %v", created, err)
	}
	if doc, _ := w.document(t, knowledge); doc != docKey {
		t.Error("the document changed")
	}
	// A refusal where no document is stays an error.
	if _, err := w.jobVault(t).CreateDocument(context.Background(), "secret/data/elsewhere", otherKey.Document()); err == nil {
		t.Error("a write the policy refuses is no error")
	}
}

func splitHostPort(rawURL string) (string, int) {
	u, err := url.Parse(rawURL)
	if err != nil {
		panic(err)
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		panic(err)
	}
	return u.Hostname(), port
}
