package garagecatalog

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

var (
	docKey   = Credentials{AccessKeyID: "GK" + strings.Repeat("a", 24), SecretAccessKey: strings.Repeat("1", 64)}
	otherKey = Credentials{AccessKeyID: docKey.AccessKeyID, SecretAccessKey: strings.Repeat("2", 64)}
)

func TestDecideKey(t *testing.T) {
	cases := []struct {
		name    string
		facts   KeyFacts
		want    KeyDecision
		wantErr string
	}{
		{"a document whose key Garage holds with its secret is kept",
			KeyFacts{Project: "p", Document: &docKey, Held: &HeldKey{Credentials: docKey}}, KeyDecision{Action: KeyKeep, KeyID: docKey.AccessKeyID}, ""},
		{"a document whose key has expired in Garage fails the run, never kept",
			KeyFacts{Project: "p", Document: &docKey, Held: &HeldKey{Credentials: docKey, Expired: true}}, KeyDecision{}, "has expired: renew it"},
		{"a document whose key Garage lacks is imported, so a rebuilt Garage hands out the same key",
			KeyFacts{Project: "p", Document: &docKey}, KeyDecision{Action: KeyImport, KeyID: docKey.AccessKeyID}, ""},
		{"a Garage holding the id with another secret fails the run",
			KeyFacts{Project: "p", Document: &docKey, Held: &HeldKey{Credentials: otherKey}}, KeyDecision{}, "secret other than Vault's"},
		{"with a document, keys named for the Project do not matter",
			KeyFacts{Project: "p", Document: &docKey, Held: &HeldKey{Credentials: docKey}, Named: []string{"GKx", "GKy"}}, KeyDecision{Action: KeyKeep, KeyID: docKey.AccessKeyID}, ""},
		{"no document and one key under the Project's name: it is written down",
			KeyFacts{Project: "p", Named: []string{"GKone"}}, KeyDecision{Action: KeyWriteDown, KeyID: "GKone"}, ""},
		{"one key named for the Project, expired: refused, never handed out",
			KeyFacts{Project: "p", Named: []string{"GKone"}, Expired: []string{"GKone"}}, KeyDecision{}, "GKone named p has expired"},
		{"no document and no key under the Project's name: one is minted",
			KeyFacts{Project: "p"}, KeyDecision{Action: KeyMint}, ""},
		{"no document and two keys under the Project's name: the run does not guess",
			KeyFacts{Project: "p", Named: []string{"GKone", "GKtwo"}}, KeyDecision{}, "2 keys named p (GKone, GKtwo)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := DecideKey(c.facts)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want %q", err, c.wantErr)
				}
				if strings.Contains(err.Error(), docKey.SecretAccessKey) || strings.Contains(err.Error(), otherKey.SecretAccessKey) {
					t.Fatal("the error holds a secret")
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("got %+v %v, want %+v", got, err, c.want)
			}
		})
	}
}

func TestDecideBucket(t *testing.T) {
	cases := []struct {
		name  string
		facts BucketFacts
		want  BucketDecision
	}{
		{"an absent bucket is created and the key allowed", BucketFacts{}, BucketDecision{Create: true, Allow: true}},
		{"a bucket the key reads and writes is left alone", BucketFacts{Exists: true, Perm: Permission{Read: true, Write: true}}, BucketDecision{}},
		{"a key that only reads is allowed to write", BucketFacts{Exists: true, Perm: Permission{Read: true}}, BucketDecision{Allow: true}},
		{"a key with no grant is allowed", BucketFacts{Exists: true}, BucketDecision{Allow: true}},
		{"an owner grant someone gave is kept, never taken away", BucketFacts{Exists: true, Perm: Permission{Read: true, Write: true, Owner: true}}, BucketDecision{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := DecideBucket(c.facts); got != c.want {
				t.Fatalf("got %+v, want %+v", got, c.want)
			}
		})
	}
	if Grant.Owner || !Grant.Read || !Grant.Write {
		t.Errorf("the grant is read and write, never owner: %+v", Grant)
	}
}

func TestParseDocument(t *testing.T) {
	good := map[string]any{FieldAccessKeyID: docKey.AccessKeyID, FieldSecretAccessKey: docKey.SecretAccessKey, "endpoint": "kept aside"}
	if got, err := ParseDocument(good); err != nil || got != docKey {
		t.Fatalf("got %v %v", got, err)
	}
	// Garage imports a key written in upper case; so does the job.
	upper := Credentials{AccessKeyID: "GK" + strings.ToUpper(docKey.AccessKeyID[2:]), SecretAccessKey: strings.ToUpper(docKey.SecretAccessKey)}
	if got, err := ParseDocument(map[string]any{FieldAccessKeyID: upper.AccessKeyID, FieldSecretAccessKey: upper.SecretAccessKey}); err != nil || got != upper {
		t.Fatalf("an upper-case document: %v %v", got, err)
	}
	for name, data := range map[string]map[string]any{
		"no secret":           {FieldAccessKeyID: docKey.AccessKeyID},
		"no id":               {FieldSecretAccessKey: docKey.SecretAccessKey},
		"id not Garage's":     {FieldAccessKeyID: "AKIAIOSFODNN7EXAMPLE", FieldSecretAccessKey: docKey.SecretAccessKey},
		"secret not Garage's": {FieldAccessKeyID: docKey.AccessKeyID, FieldSecretAccessKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"},
		"id not a string":     {FieldAccessKeyID: 7, FieldSecretAccessKey: docKey.SecretAccessKey},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParseDocument(data)
			if err == nil {
				t.Fatal("accepted")
			}
			if s, _ := data[FieldSecretAccessKey].(string); s != "" && strings.Contains(err.Error(), s) {
				t.Fatal("the error holds the secret")
			}
		})
	}
}

func TestMintIsGaragesFormat(t *testing.T) {
	k, err := Mint(bytes.NewReader(bytes.Repeat([]byte{0xab}, 44)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseDocument(map[string]any{FieldAccessKeyID: k.AccessKeyID, FieldSecretAccessKey: k.SecretAccessKey}); err != nil {
		t.Fatalf("minted key %v is not Garage's format: %v", k, err)
	}
	if _, err := Mint(bytes.NewReader(nil)); err == nil {
		t.Error("minting from an exhausted source succeeded")
	}
	a, _ := MintRandom()
	b, _ := MintRandom()
	if a == b {
		t.Error("two minted keys are the same")
	}
}

func TestCredentialsNeverPrintTheirSecret(t *testing.T) {
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("x", slog.Any("key", docKey), "also", docKey)
	for _, s := range []string{fmt.Sprint(docKey), fmt.Sprintf("%v %+v %#v %s", docKey, docKey, docKey, docKey), buf.String()} {
		if strings.Contains(s, docKey.SecretAccessKey) {
			t.Errorf("secret printed: %s", s)
		}
		if !strings.Contains(s, docKey.AccessKeyID) {
			t.Errorf("the key id is not named: %s", s)
		}
	}
	for _, a := range []KeyAction{KeyKeep, KeyImport, KeyWriteDown, KeyMint, KeyAction(9)} {
		if a.String() == "" {
			t.Error("an action without a name")
		}
	}
}
