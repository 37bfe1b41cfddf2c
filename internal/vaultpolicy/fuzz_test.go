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
// is one the render writes, carrying exactly the one capability that form
// grants; and the job's encoding, read again, is the same policy.
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
			if want := grantOn(rule.Path); want == "" || !slices.Equal(rule.Capabilities, []string{want}) {
				t.Fatalf("accepted rule %+v", rule)
			}
		}
		again, err := DecodePolicy([]byte(entry.Policy.Encode()))
		if err != nil || again.Encode() != entry.Policy.Encode() {
			t.Fatalf("the job's encoding %s does not read back: %v", entry.Policy.Encode(), err)
		}
	})
}

// grantOn is the one capability a path the render writes may carry, worked
// out segment by segment without the checker's patterns: "read" on a kv
// document or database credentials, "update" on a transit operation or key
// rotation, and "" on any other path.
func grantOn(path string) string {
	segments := strings.Split(path, "/")
	for _, s := range segments {
		if !plainSegment(s) {
			return ""
		}
	}
	switch n := len(segments); {
	case n >= 3 && segments[0] == "secret" && (segments[1] == "data" || segments[1] == "metadata"):
		return "read"
	case n == 3 && segments[0] == "database" && segments[1] == "creds":
		return "read"
	case n == 3 && segments[0] == "transit" && slices.Contains([]string{"sign", "verify", "encrypt", "decrypt"}, segments[1]):
		return "update"
	case n == 4 && segments[0] == "transit" && segments[1] == "keys" && segments[3] == "rotate":
		return "update"
	}
	return ""
}

// plainSegment is a name as the render spells it: letters, digits, '.', '_'
// and '-', led by a letter or digit, so never "", "." or "..".
func plainSegment(s string) bool {
	for i, c := range s {
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || !strings.ContainsRune("._-", c)) {
			return false
		}
	}
	return s != ""
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
