package bus

import (
	"errors"
	"regexp"
	"strings"
	"testing"
)

// keySafe is what a NATS key-value key allows, and bucketSafe a bucket name.
var (
	keySafe    = regexp.MustCompile(`^[-/_=.a-zA-Z0-9]+$`)
	bucketSafe = regexp.MustCompile(`^[-_a-zA-Z0-9]+$`)
)

func TestEncodeName(t *testing.T) {
	cases := []struct {
		name, token string
		refused     bool
	}{
		{"web", "web", false},
		{"home-server-1", "home-server-1", false},
		{"web.api", "web_2eapi", false},
		{"a_b", "a_5fb", false},
		{"sha256:ab", "sha256_3aab", false},
		{"Ünïcode", "_c3_9cn_c3_afcode", false},
		{"", "", true},
		{"has space", "", true},
		{"tab\there", "", true},
		{"nul\x00", "", true},
		{"bad\xffutf8", "", true},
		{strings.Repeat("a", MaxNameBytes+1), "", true},
		{strings.Repeat("a", MaxNameBytes), strings.Repeat("a", MaxNameBytes), false},
	}
	for _, c := range cases {
		got, err := EncodeName(c.name)
		if c.refused {
			if !errors.Is(err, ErrName) {
				t.Errorf("%q: encoded as %q, want refused", c.name, got)
			}
			continue
		}
		if err != nil || got != c.token {
			t.Errorf("%q: %q %v, want %q", c.name, got, err, c.token)
		}
		back, err := DecodeName(got)
		if err != nil || back != c.name {
			t.Errorf("%q: decoded back as %q %v", c.name, back, err)
		}
	}
}

func TestDecodeNameRefusesOtherForms(t *testing.T) {
	for _, token := range []string{"", "a.b", "_61", "_2E", "_2", "a_zz", "with space"} {
		if name, err := DecodeName(token); !errors.Is(err, ErrName) {
			t.Errorf("%q: decoded as %q, want refused", token, name)
		}
	}
}

func TestKeys(t *testing.T) {
	cases := []struct {
		key  Key
		want string
	}{
		{Key{Kind: KindModule, Module: "web"}, "module.web"},
		{Key{Kind: KindBuild, Module: "web", Fingerprint: "f1"}, "build.web.f1"},
		{Key{Kind: KindHold, Module: "web.api", Fingerprint: "f1"}, "hold.web_2eapi.f1"},
		{Key{Kind: KindGrant, Module: "web", Fingerprint: "f1"}, "grant.web.f1"},
		{Key{Kind: KindComposition, Module: "web", Fingerprint: "f1"}, "composition.web.f1"},
		{Key{Kind: KindWant, Node: "n1", Module: "web"}, "want.n1.web"},
		{Key{Kind: KindHave, Node: "n.1", Module: "web"}, "have.n_2e1.web"},
		{Key{Kind: KindSeal, Node: "n1", Module: "web.api"}, "seal.n1.web_2eapi"},
	}
	for _, c := range cases {
		got, err := c.key.Encode()
		if err != nil || got != c.want {
			t.Errorf("%+v: %q %v, want %q", c.key, got, err, c.want)
			continue
		}
		back, err := ParseKey(got)
		if err != nil || back != c.key {
			t.Errorf("%q: parsed as %+v %v", got, back, err)
		}
	}
	for _, bad := range []string{"want.n1", "want.n1.web.x", "nothing.web", "build..f1", "module.a b"} {
		if k, err := ParseKey(bad); err == nil {
			t.Errorf("%q: parsed as %+v, want refused", bad, k)
		}
	}
	if _, err := WantKey("n 1", "web"); !errors.Is(err, ErrName) {
		t.Errorf("a node with a space: %v, want refused", err)
	}
	bucket, err := ComposedBucket("n.1")
	if err != nil || bucket != "composed-n_2e1" {
		t.Errorf("bucket %q %v", bucket, err)
	}
	if node, err := NodeOfBucket(bucket); err != nil || node != "n.1" {
		t.Errorf("node %q %v", node, err)
	}
}

// FuzzName holds the encoding to its promises: what encodes is key-safe and
// bucket-safe, holds no dot, and decodes back to itself; what a token
// decodes to encodes to that same token.
func FuzzName(f *testing.F) {
	for _, s := range []string{"web", "web.api", "a_b", "_2e", "Ünï", "", "a b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if token, err := EncodeName(s); err == nil {
			if !keySafe.MatchString(token) || !bucketSafe.MatchString(token) || strings.Contains(token, ".") {
				t.Fatalf("%q encodes as %q, not key-safe", s, token)
			}
			if back, err := DecodeName(token); err != nil || back != s {
				t.Fatalf("%q: %q decodes as %q %v", s, token, back, err)
			}
		}
		if name, err := DecodeName(s); err == nil {
			if again, _ := EncodeName(name); again != s {
				t.Fatalf("%q decodes as %q, which encodes as %q", s, name, again)
			}
		}
		if k, err := ParseKey(s); err == nil {
			if again, err := k.Encode(); err != nil || again != s {
				t.Fatalf("%q parses as %+v, which encodes as %q %v", s, k, again, err)
			}
		}
	})
}

func TestNodeKeys(t *testing.T) {
	for _, tc := range []struct {
		kind      Kind
		node, out string
		fails     bool
	}{
		{KindWant, "n1", "want.n1.>", false},
		{KindHave, "web.api", "have.web_2eapi.>", false},
		{KindSeal, "n1", "seal.n1.>", false},
		{KindBuild, "n1", "", true},
		{KindWant, "", "", true},
		{KindWant, "n 1", "", true},
	} {
		got, err := NodeKeys(tc.kind, tc.node)
		if (err != nil) != tc.fails || got != tc.out {
			t.Errorf("NodeKeys(%s, %q) = %q, %v; want %q, fails %v", tc.kind, tc.node, got, err, tc.out, tc.fails)
		}
	}
}
