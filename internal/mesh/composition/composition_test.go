package composition

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/secure-systems-lab/go-securesystemslib/dsse"
)

func sample() Document {
	return Document{
		Module: "web", Fingerprint: "f1", Node: "n1",
		Files: map[string]File{
			"etc/web.conf": {Content: "port = 8080\n", Mode: "0644"},
			"bin/check":    {Content: "#!/bin/sh\nexit 0\n", Mode: "0755"},
		},
		Command: Command{Argv: []string{"bin/web", "--config", "etc/web.conf"}, Env: map[string]string{"PORT": "8080"}, Dir: "run"},
		Health:  Health{HTTP: "http://127.0.0.1:8080/healthz", Interval: Duration(10 * time.Second), Timeout: Duration(2 * time.Second)},
	}
}

func newKey(t testing.TB) (*Signer, ed25519.PublicKey) {
	t.Helper()
	priv, pub, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	key, err := ParsePrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := ParsePublicKeys(pub)
	if err != nil || len(keys) != 1 {
		t.Fatalf("public keys %v, %v", keys, err)
	}
	return NewSigner(key), keys[0]
}

func TestSignAndOpen(t *testing.T) {
	ctx := context.Background()
	signer, pub := newKey(t)
	raw, err := Sign(ctx, signer, sample())
	if err != nil {
		t.Fatal(err)
	}
	trust, err := NewTrust(pub, pub)
	if err != nil {
		t.Fatal(err)
	}
	if ids := trust.KeyIDs(); len(ids) != 1 || ids[0] != KeyID(pub) {
		t.Fatalf("trusted ids %v: one key named twice is one key", ids)
	}
	doc, err := trust.OpenFor(ctx, raw, "n1", "web", "f1")
	if err != nil {
		t.Fatal(err)
	}
	if doc.Files["bin/check"].Perm() != 0o755 || doc.Health.Timeout != Duration(2*time.Second) || doc.Command.Dir != "run" {
		t.Fatalf("opened %+v", doc)
	}
	if err := doc.Names("n2", "web", "f1"); err == nil {
		t.Fatal("a composition for n1 was taken as n2's")
	}
	if _, err := trust.OpenFor(ctx, raw, "n1", "web", "f2"); err == nil {
		t.Fatal("a composition at f1 was taken as f2's")
	}
	var env map[string]any
	if err := json.Unmarshal(raw, &env); err != nil || env["payloadType"] != PayloadType {
		t.Fatalf("envelope %s", raw)
	}
}

// resign builds an envelope by hand, so a test can sign what Sign refuses.
func resign(t *testing.T, signer *Signer, payloadType string, payload []byte) []byte {
	t.Helper()
	es, err := dsse.NewEnvelopeSigner(signer)
	if err != nil {
		t.Fatal(err)
	}
	env, err := es.SignPayload(context.Background(), payloadType, payload)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(env)
	return raw
}

func TestOpenRefuses(t *testing.T) {
	ctx := context.Background()
	signer, pub := newKey(t)
	other, _ := newKey(t)
	trust, err := NewTrust(pub)
	if err != nil {
		t.Fatal(err)
	}
	good, err := Sign(ctx, signer, sample())
	if err != nil {
		t.Fatal(err)
	}
	byOther, err := Sign(ctx, other, sample())
	if err != nil {
		t.Fatal(err)
	}
	payload, _ := sample().Encode()
	escaping := func(p string) []byte {
		doc := sample()
		doc.Files = map[string]File{p: {Content: "x", Mode: "0644"}}
		raw, _ := json.Marshal(doc)
		return resign(t, signer, PayloadType, raw)
	}
	// The keyid is the trusted one but the signature is another key's.
	var forged dsse.Envelope
	_ = json.Unmarshal(byOther, &forged)
	forged.Signatures[0].KeyID = KeyID(pub)
	forgedRaw, _ := json.Marshal(forged)

	cases := []struct {
		what     string
		raw      []byte
		unsigned bool // refused for its signature, before its payload is read
	}{
		{"an unknown key", byOther, true},
		{"the trusted keyid on another key's signature", forgedRaw, true},
		{"a wrong payload type", resign(t, signer, "application/json", payload), false},
		{"the signed payload under another type", bytes.Replace(good, []byte(PayloadType), []byte("application/vnd.other+json"), 1), false},
		{"no signatures", []byte(`{"payloadType":"` + PayloadType + `","payload":"e30=","signatures":[]}`), false},
		{"a path with ..", escaping("../etc/passwd"), false},
		{"an absolute path", escaping("/etc/passwd"), false},
		{"a path climbing back in", escaping("etc/../../x"), false},
		{"a path not clean", escaping("etc//web.conf"), false},
		{"a path of .", escaping("."), false},
		{"a backslash path", escaping(`..\x`), false},
		{"an unknown field", bytes.Replace(good, []byte(`{"payloadType"`), []byte(`{"x":1,"payloadType"`), 1), false},
		{"trailing data", append(append([]byte(nil), good...), []byte(" {}")...), false},
		{"not JSON", []byte(`{`), false},
		{"too large", bytes.Repeat([]byte(" "), MaxEnvelopeBytes+1), false},
	}
	for _, c := range cases {
		_, err := trust.Open(ctx, c.raw)
		if err == nil {
			t.Errorf("%s: opened", c.what)
			continue
		}
		if errors.Is(err, ErrUnverified) != c.unsigned {
			t.Errorf("%s: %v, refused for its signature %v, want %v", c.what, err, errors.Is(err, ErrUnverified), c.unsigned)
		}
	}
	// Every byte of the signed envelope counts: each altered in turn (to a
	// byte that keeps it JSON where it can) is refused.
	for i := range good {
		altered := append([]byte(nil), good...)
		switch c := altered[i]; {
		case c >= 'A' && c <= 'Y', c >= 'a' && c <= 'y', c >= '0' && c <= '8':
			altered[i] = c + 1
		default:
			altered[i] ^= 0x20
		}
		if _, err := trust.Open(ctx, altered); err == nil {
			t.Fatalf("byte %d (%q) altered to %q: opened", i, good[i], altered[i])
		}
	}
}

func TestSignRefusesWhatNoNodeWouldTake(t *testing.T) {
	signer, _ := newKey(t)
	for _, c := range []struct {
		what   string
		change func(*Document)
	}{
		{"a file outside the folder", func(d *Document) { d.Files["../x"] = File{Content: "", Mode: "0644"} }},
		{"a setuid mode", func(d *Document) { d.Files["x"] = File{Content: "", Mode: "4755"} }},
		{"no health check", func(d *Document) { d.Health.HTTP = "" }},
		{"two health checks", func(d *Document) { d.Health.Command = []string{"bin/check"} }},
		{"a timeout over the interval", func(d *Document) { d.Health.Timeout = Duration(time.Minute) }},
		{"data without a folder", func(d *Document) { d.HoldsData = true }},
		{"a folder without data", func(d *Document) { d.DataDir = "data" }},
		{"a file in the data folder", func(d *Document) { d.HoldsData, d.DataDir = true, "etc" }},
		{"a working directory outside", func(d *Document) { d.Command.Dir = "../run" }},
		{"no program", func(d *Document) { d.Command.Argv = nil }},
		{"a node that cannot be keyed", func(d *Document) { d.Node = "n 1" }},
		{"a bad variable name", func(d *Document) { d.Command.Env = map[string]string{"A-B": "x"} }},
		{"a health URL of ftp", func(d *Document) { d.Health.HTTP = "ftp://host/x" }},
	} {
		doc := sample()
		c.change(&doc)
		if _, err := Sign(context.Background(), signer, doc); err == nil {
			t.Errorf("%s: signed", c.what)
		}
	}
	doc := sample()
	doc.Files = nil
	doc.HoldsData, doc.DataDir = true, "data"
	doc.Health = Health{Command: []string{"bin/check"}, Interval: Duration(time.Second), Timeout: Duration(time.Second)}
	if _, err := Sign(context.Background(), signer, doc); err != nil {
		t.Errorf("a composition with no files, data and a command check: %v", err)
	}
}

func TestCheckPath(t *testing.T) {
	for p, ok := range map[string]bool{
		"a": true, "a/b.conf": true, ".config/x": true, "a..b": true, "..a": true,
		"": false, ".": false, "..": false, "../a": false, "a/..": false, "a/../b": false,
		"/a": false, "a/": false, "a//b": false, "./a": false, "a/./b": false, `a\b`: false, "a\x00": false,
	} {
		if err := CheckPath(p); (err == nil) != ok {
			t.Errorf("%q: %v, want ok %v", p, err, ok)
		}
	}
}

func TestKeys(t *testing.T) {
	priv, pub, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	_, pub2, _ := GenerateKey()
	keys, err := ParsePublicKeys(append(append([]byte(nil), pub...), pub2...))
	if err != nil || len(keys) != 2 {
		t.Fatalf("two keys in one file: %d, %v", len(keys), err)
	}
	for what, raw := range map[string][]byte{
		"a private key as public": priv,
		"nothing":                 nil,
		"text after the key":      append(append([]byte(nil), pub...), "junk"...),
	} {
		if _, err := ParsePublicKeys(raw); err == nil {
			t.Errorf("public keys from %s: taken", what)
		}
	}
	if _, err := ParsePrivateKey(pub); err == nil {
		t.Error("a public key taken as private")
	}
	if _, err := NewTrust(); err == nil {
		t.Error("a trust of no keys")
	}
	if _, err := NewTrust(ed25519.PublicKey{1, 2}); err == nil {
		t.Error("a trust of a short key")
	}
	key, _ := ParsePrivateKey(priv)
	s := NewSigner(key)
	sig, _ := s.Sign(context.Background(), []byte("x"))
	if s.Verify(context.Background(), []byte("x"), sig) != nil || s.Verify(context.Background(), []byte("y"), sig) == nil {
		t.Error("the signer does not verify its own signatures alone")
	}
	if id, _ := s.KeyID(); id != KeyID(keys[0]) && len(id) != 64 {
		t.Errorf("keyid %q", id)
	}
}

// TestNewKeyPair holds a made pair to one key: what its signer signs its
// trust opens, another pair's trust does not, and its public PEM names it.
func TestNewKeyPair(t *testing.T) {
	ctx := context.Background()
	pair, err := NewKeyPair()
	if err != nil {
		t.Fatal(err)
	}
	other, err := NewKeyPair()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := Sign(ctx, pair.Signer, sample())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pair.Trust.Open(ctx, raw); err != nil {
		t.Fatalf("its own trust refuses it: %v", err)
	}
	if _, err := other.Trust.Open(ctx, raw); err == nil {
		t.Fatal("another pair's trust opened it")
	}
	keys, err := ParsePublicKeys(pair.Public)
	id, _ := pair.Signer.KeyID()
	if err != nil || len(keys) != 1 || KeyID(keys[0]) != id || pair.Trust.KeyIDs()[0] != id {
		t.Fatalf("public %v, %v: not the signer's key %s", keys, err, id)
	}
}

// FuzzOpen holds the envelope reader to never panicking and to never
// opening an envelope the trusted key did not sign.
func FuzzOpen(f *testing.F) {
	signer, pub := newKey(f)
	trust, err := NewTrust(pub)
	if err != nil {
		f.Fatal(err)
	}
	good, err := Sign(context.Background(), signer, sample())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte(`{"payloadType":"` + PayloadType + `","payload":"e30=","signatures":[{"keyid":"` + strings.Repeat("0", 64) + `","sig":"` + strings.Repeat("A", 86) + `=="}]}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		doc, err := trust.Open(context.Background(), raw)
		if err != nil {
			return
		}
		// An opened envelope's payload was signed by the one trusted key.
		env, _ := DecodeEnvelope(raw)
		payload, _ := base64.StdEncoding.DecodeString(env.Payload)
		signed := false
		for _, s := range env.Signatures {
			sig, _ := base64.StdEncoding.DecodeString(s.Sig)
			signed = signed || ed25519.Verify(pub, dsse.PAE(env.PayloadType, payload), sig)
		}
		if !signed {
			t.Fatalf("opened %+v, which the trusted key did not sign", doc)
		}
	})
}

// FuzzDecode holds the document reader to never panicking, and to giving
// back only documents whose paths stay inside the folder and which encode
// and decode again.
func FuzzDecode(f *testing.F) {
	payload, err := sample().Encode()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(payload)
	f.Add([]byte(`{"module":"m","fingerprint":"f","node":"n","files":{"../x":{"content":"","mode":"0644"}},"command":{"argv":["x"]},"health":{"command":["x"],"interval":"1s","timeout":"1s"},"holdsData":false}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		doc, err := Decode(raw)
		if err != nil {
			return
		}
		for p := range doc.Files {
			if CheckPath(p) != nil {
				t.Fatalf("decoded a file at %q", p)
			}
		}
		again, err := doc.Encode()
		if err != nil {
			t.Fatalf("%+v does not encode: %v", doc, err)
		}
		if _, err := Decode(again); err != nil {
			t.Fatalf("%s does not decode again: %v", again, err)
		}
	})
}
