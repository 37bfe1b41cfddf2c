package vaultpolicy

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// form is one shape of path the render writes, with exactly the capabilities
// a grant gives on it. A path of any other shape is refused: a form the
// render gains is refused until this list gains it.
type form struct {
	what         string
	pattern      *regexp.Regexp
	capabilities []string
}

// segment is one path segment as the render spells names: no glob, no "+",
// no template braces, no quotes, no "." or ".." segment.
const segment = `[A-Za-z0-9][A-Za-z0-9._-]*`

var forms = []form{
	{"a kv document", regexp.MustCompile(`^secret/(data|metadata)/` + segment + `(/` + segment + `)*$`), []string{"read"}},
	{"database credentials", regexp.MustCompile(`^database/creds/` + segment + `$`), []string{"read"}},
	{"a transit operation", regexp.MustCompile(`^transit/(sign|verify|encrypt|decrypt)/` + segment + `$`), []string{"update"}},
	{"a transit key rotation", regexp.MustCompile(`^transit/keys/` + segment + `/rotate$`), []string{"update"}},
}

// CheckRule holds one policy rule to the render's forms. The named refusals
// come first so that the message says why, not only that.
func CheckRule(rule Rule) error {
	path := rule.Path
	switch {
	case strings.Contains(path, "*"):
		return fmt.Errorf("path %q holds a glob; grants are on exact paths", path)
	case path == "+" || strings.HasPrefix(path, "+/") || strings.HasSuffix(path, "/+") || strings.Contains(path, "/+/"):
		return fmt.Errorf("path %q holds a + segment; grants are on exact paths", path)
	case strings.Contains(path, "{{") || strings.Contains(path, "}}"):
		return fmt.Errorf("path %q holds a template; grants are on exact paths", path)
	case strings.HasPrefix(path, "sys/") || path == "sys":
		return fmt.Errorf("path %q is under sys/: no grant reaches Vault itself", path)
	case strings.HasPrefix(path, "auth/") || path == "auth":
		return fmt.Errorf("path %q is under auth/: no grant reaches Vault's logins", path)
	case slices.Contains(rule.Capabilities, "sudo"):
		return fmt.Errorf("path %q: sudo is never granted", path)
	}
	for _, f := range forms {
		if !f.pattern.MatchString(path) {
			continue
		}
		if !slices.Equal(rule.Capabilities, f.capabilities) {
			return fmt.Errorf("path %q is %s and carries exactly %q, not %q", path, f.what, f.capabilities, rule.Capabilities)
		}
		return nil
	}
	return fmt.Errorf("path %q is not a form the render writes", path)
}

// Encode is the job's own canonical encoding of a checked policy: one JSON
// line, paths in order. Vault is handed this, never the file, so it parses
// exactly what was checked.
func (p Policy) Encode() string {
	type capabilities struct {
		Capabilities []string `json:"capabilities"`
	}
	paths := make(map[string]capabilities, len(p.Rules))
	for _, r := range p.Rules {
		paths[r.Path] = capabilities{Capabilities: r.Capabilities}
	}
	out, err := json.Marshal(struct {
		Path map[string]capabilities `json:"path"`
	}{paths})
	if err != nil {
		panic(err) // strings and slices of strings always marshal
	}
	return string(out)
}

// SameRole says whether a role Vault holds is the rendered one, comparing
// only what decides who logs in and what the login may do, in any order.
func SameRole(held, want Role) bool {
	return sameSet(held.TokenEdits, want.TokenEdits) &&
		sameSet(held.ServiceAccountNames, want.ServiceAccountNames) &&
		sameSet(held.ServiceAccountNamespaces, want.ServiceAccountNamespaces) &&
		held.NamespaceSelector == want.NamespaceSelector &&
		sameSet(held.TokenPolicies, want.TokenPolicies)
}

// SamePolicy says whether the policy text Vault holds is the rendered policy:
// the text read as a document and encoded again equals the rendered one. Text
// the decoder refuses (HCL, a wider grant) is never the same.
func SamePolicy(held string, want Policy) bool {
	if held == want.Encode() {
		return true
	}
	policy, err := DecodePolicy([]byte(held))
	return err == nil && policy.Encode() == want.Encode()
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
