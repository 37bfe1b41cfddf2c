package vaultpolicy

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// FuzzDecodePair feeds the decoder and checker any name and any pair of
// documents. Whatever it accepts must hold, checked afresh here: the role
// binds exactly the name's ServiceAccount, namespace and policy; every path
// is exact and outside sys/ and auth/; and the job's encoding, read again,
// is the same policy.
func FuzzDecodePair(f *testing.F) {
	for _, dir := range []string{"render/auth", "render/estate", "render/knowledge-platform"} {
		addPairs(f, filepath.Join("testdata", dir))
	}
	refusals, err := os.ReadDir(filepath.Join("testdata", "refusals"))
	if err != nil {
		f.Fatal(err)
	}
	for _, d := range refusals {
		addPairs(f, filepath.Join("testdata", "refusals", d.Name()))
	}
	f.Fuzz(func(t *testing.T, name string, policyDoc, roleDoc []byte) {
		entry, err := DecodePair(name, policyDoc, roleDoc)
		if err != nil {
			return
		}
		id := entry.Identity
		if id.VaultName() != name || strings.Contains(id.Project, nameSeparator) {
			t.Fatalf("name %q read as %+v", name, id)
		}
		r := entry.Role
		if !slices.Equal(r.ServiceAccountNames, []string{id.Name}) || !slices.Equal(r.ServiceAccountNamespaces, []string{id.Namespace()}) ||
			!slices.Equal(r.TokenPolicies, []string{name}) || r.NamespaceSelector != "" {
			t.Fatalf("accepted role %+v for %q", r, name)
		}
		for _, rule := range entry.Policy.Rules {
			if strings.ContainsAny(rule.Path, `*+{}" `) || strings.HasPrefix(rule.Path, "sys/") || strings.HasPrefix(rule.Path, "auth/") ||
				slices.Contains(rule.Capabilities, "sudo") || len(rule.Capabilities) != 1 {
				t.Fatalf("accepted rule %+v", rule)
			}
		}
		again, err := DecodePolicy([]byte(entry.Policy.Encode()))
		if err != nil || again.Encode() != entry.Policy.Encode() {
			t.Fatalf("the job's encoding %s does not read back: %v", entry.Policy.Encode(), err)
		}
	})
}

func addPairs(f *testing.F, dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		f.Fatal(err)
	}
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), policySuffix)
		if !ok {
			continue
		}
		policy, _ := os.ReadFile(filepath.Join(dir, e.Name()))
		role, _ := os.ReadFile(filepath.Join(dir, name+roleSuffix))
		f.Add(name, policy, role)
	}
}
