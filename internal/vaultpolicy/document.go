package vaultpolicy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/util/validation"
)

// File name suffixes of the two documents the render writes per identity.
const (
	policySuffix = ".policy.json"
	roleSuffix   = ".role.json"
	// nameSeparator splits a document name into its Project and identity; the
	// first occurrence wins, so a name has exactly one reading.
	nameSeparator = "-system-"
)

// maxDocumentBytes bounds one document; a rendered one is a few hundred bytes
// and a ConfigMap holds at most 1 MiB in all.
const maxDocumentBytes = 64 << 10

// Identity is a ServiceAccount that holds a grant: Name in the namespace
// <Project>-system.
type Identity struct {
	Project string
	Name    string
}

// Namespace is the Project's namespace, the only one a role may bind.
func (id Identity) Namespace() string { return id.Project + "-system" }

// VaultName names both the policy and the role in Vault.
func (id Identity) VaultName() string { return id.Namespace() + "-" + id.Name }

// ParseName reads a document name as <project>-system-<identity>. The Project
// stands before the first "-system-", the identity after it; both must be
// DNS labels, as a namespace and a ServiceAccount name are.
func ParseName(name string) (Identity, error) {
	project, identity, found := strings.Cut(name, nameSeparator)
	if !found {
		return Identity{}, fmt.Errorf("name %q is not <project>-system-<identity>", name)
	}
	id := Identity{Project: project, Name: identity}
	if project == "" || len(validation.IsDNS1123Label(id.Namespace())) > 0 {
		return Identity{}, fmt.Errorf("name %q: Project %q does not make a namespace name", name, project)
	}
	if len(validation.IsDNS1123Label(identity)) > 0 {
		return Identity{}, fmt.Errorf("name %q: identity %q is not a ServiceAccount name", name, identity)
	}
	return id, nil
}

// Rule grants Capabilities on one exact Vault path.
type Rule struct {
	Path         string
	Capabilities []string
}

// Policy is a checked policy document: its rules sorted by path.
type Policy struct {
	Rules []Rule
}

// Role is a Kubernetes-auth role as far as it decides who may log in and what
// the login may do. NamespaceSelector is carried so that a role Vault holds
// with one is seen to differ; a checked document never has one.
type Role struct {
	ServiceAccountNames      []string
	ServiceAccountNamespaces []string
	NamespaceSelector        string
	TokenPolicies            []string
	// TokenEdits names the token settings (token_period, token_ttl, ...)
	// a role Vault holds carries away from their defaults. A rendered role
	// sets none, so one that carries any is not as rendered.
	TokenEdits []string
}

// Entry is one identity's checked pair of documents.
type Entry struct {
	Identity Identity
	Policy   Policy
	Role     Role
}

// Name is the Vault name of both documents.
func (e Entry) Name() string { return e.Identity.VaultName() }

// Render is a whole checked render, its entries sorted by name.
type Render struct {
	Entries []Entry
}

// Projects are the Projects the render covers, sorted.
func (r Render) Projects() []string {
	var out []string
	for _, e := range r.Entries {
		out = append(out, e.Identity.Project)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Decode reads a render's files (file name to bytes) and checks every
// document; it returns the render only when all of it is as a grant derives.
// Any file that is not half of a complete pair refuses the whole render.
func Decode(files map[string][]byte) (Render, error) {
	if len(files) == 0 {
		return Render{}, errors.New("the render holds no documents")
	}
	type pair struct{ policy, role []byte }
	pairs := map[string]*pair{}
	for file, content := range files {
		name, isPolicy := strings.CutSuffix(file, policySuffix)
		isRole := false
		if !isPolicy {
			name, isRole = strings.CutSuffix(file, roleSuffix)
		}
		if !isPolicy && !isRole {
			return Render{}, fmt.Errorf("file %q is not a document the render writes (<name>.policy.json or <name>.role.json)", file)
		}
		p := pairs[name]
		if p == nil {
			p = &pair{}
			pairs[name] = p
		}
		if isPolicy {
			p.policy = content
		} else {
			p.role = content
		}
	}
	names := make([]string, 0, len(pairs))
	for name := range pairs {
		names = append(names, name)
	}
	slices.Sort(names)
	render := Render{Entries: make([]Entry, 0, len(names))}
	for _, name := range names {
		p := pairs[name]
		switch {
		case p.policy == nil:
			return Render{}, fmt.Errorf("%s has a role but no policy: half a pair", name)
		case p.role == nil:
			return Render{}, fmt.Errorf("%s has a policy but no role: half a pair", name)
		}
		entry, err := DecodePair(name, p.policy, p.role)
		if err != nil {
			return Render{}, err
		}
		render.Entries = append(render.Entries, entry)
	}
	return render, nil
}

// DecodePair checks one identity's policy and role documents against the
// grant its name derives.
func DecodePair(name string, policyDoc, roleDoc []byte) (Entry, error) {
	id, err := ParseName(name)
	if err != nil {
		return Entry{}, err
	}
	policy, err := DecodePolicy(policyDoc)
	if err != nil {
		return Entry{}, fmt.Errorf("%s%s: %w", name, policySuffix, err)
	}
	role, err := DecodeRole(roleDoc)
	if err != nil {
		return Entry{}, fmt.Errorf("%s%s: %w", name, roleSuffix, err)
	}
	if err := CheckRole(id, role); err != nil {
		return Entry{}, fmt.Errorf("%s%s: %w", name, roleSuffix, err)
	}
	return Entry{Identity: id, Policy: policy, Role: role}, nil
}

// DecodePolicy reads a policy document, {"path": {"<path>": {"capabilities":
// [...]}}}, strictly, and checks every rule against the render's forms.
func DecodePolicy(doc []byte) (Policy, error) {
	top, err := object(doc, "path")
	if err != nil {
		return Policy{}, err
	}
	raw, ok := top["path"]
	if !ok {
		return Policy{}, errors.New(`no "path" object`)
	}
	var paths map[string]json.RawMessage
	if err := json.Unmarshal(raw, &paths); err != nil || paths == nil {
		return Policy{}, errors.New(`"path" is not an object`)
	}
	if len(paths) == 0 {
		return Policy{}, errors.New("the policy grants nothing")
	}
	var policy Policy
	for path, body := range paths {
		fields, err := object(body, "capabilities")
		if err != nil {
			return Policy{}, fmt.Errorf("path %q: %w", path, err)
		}
		var capabilities []string
		if err := json.Unmarshal(fields["capabilities"], &capabilities); err != nil || capabilities == nil {
			return Policy{}, fmt.Errorf("path %q: capabilities are not a list of strings", path)
		}
		rule := Rule{Path: path, Capabilities: capabilities}
		if err := CheckRule(rule); err != nil {
			return Policy{}, err
		}
		policy.Rules = append(policy.Rules, rule)
	}
	slices.SortFunc(policy.Rules, func(a, b Rule) int { return strings.Compare(a.Path, b.Path) })
	return policy, nil
}

// Role document fields. The selector is named so that a document carrying it
// is refused for what it is rather than as an unknown field.
const (
	fieldNames     = "bound_service_account_names"
	fieldNamespace = "bound_service_account_namespaces"
	fieldSelector  = "bound_service_account_namespace_selector"
	fieldPolicies  = "token_policies"
)

// DecodeRole reads a role document, exactly the three fields the render
// writes, strictly.
func DecodeRole(doc []byte) (Role, error) {
	top, err := object(doc, fieldNames, fieldNamespace, fieldPolicies, fieldSelector)
	if err != nil {
		return Role{}, err
	}
	if _, ok := top[fieldSelector]; ok {
		return Role{}, errors.New("a role may not carry a namespace selector")
	}
	var role Role
	for field, into := range map[string]*[]string{
		fieldNames: &role.ServiceAccountNames, fieldNamespace: &role.ServiceAccountNamespaces, fieldPolicies: &role.TokenPolicies,
	} {
		raw, ok := top[field]
		if !ok {
			return Role{}, fmt.Errorf("no %q", field)
		}
		if err := json.Unmarshal(raw, into); err != nil || *into == nil {
			return Role{}, fmt.Errorf("%q is not a list of strings", field)
		}
	}
	return role, nil
}

// CheckRole holds a role to the one grant its name derives: exactly the
// identity's ServiceAccount, in exactly its Project's namespace, to the one
// policy of the same name, with no namespace selector.
func CheckRole(id Identity, role Role) error {
	switch {
	case !slices.Equal(role.ServiceAccountNames, []string{id.Name}):
		return fmt.Errorf("binds ServiceAccounts %q; the name allows exactly [%q]", role.ServiceAccountNames, id.Name)
	case !slices.Equal(role.ServiceAccountNamespaces, []string{id.Namespace()}):
		return fmt.Errorf("binds namespaces %q; the name allows exactly [%q]", role.ServiceAccountNamespaces, id.Namespace())
	case role.NamespaceSelector != "":
		return errors.New("a role may not carry a namespace selector")
	case !slices.Equal(role.TokenPolicies, []string{id.VaultName()}):
		return fmt.Errorf("grants policies %q; the name allows exactly [%q]", role.TokenPolicies, id.VaultName())
	}
	return nil
}

// object decodes one JSON object whose keys must all be among allowed,
// refusing what encoding/json would quietly accept: invalid UTF-8 (replaced),
// a key that differs only in case (matched), a key given twice (the last
// wins). Each of those is a way for Vault's parser to read something other
// than what was checked, so the decoder is hand-written around them.
func object(doc []byte, allowed ...string) (map[string]json.RawMessage, error) {
	if len(doc) > maxDocumentBytes {
		return nil, fmt.Errorf("document is larger than %d bytes", maxDocumentBytes)
	}
	if !utf8.Valid(doc) {
		return nil, errors.New("document is not valid UTF-8")
	}
	if err := noDuplicateKeys(doc); err != nil {
		return nil, err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(doc, &fields); err != nil {
		return nil, fmt.Errorf("not a JSON object: %w", err)
	}
	if fields == nil {
		return nil, errors.New("not a JSON object")
	}
	for key := range fields {
		if !slices.Contains(allowed, key) {
			return nil, fmt.Errorf("unknown field %q", key)
		}
	}
	return fields, nil
}

// noDuplicateKeys walks the whole value and refuses any object that names a
// key twice.
func noDuplicateKeys(doc []byte) error {
	dec := json.NewDecoder(bytes.NewReader(doc))
	if err := walk(dec); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("not a JSON object: data after the value")
	}
	return nil
}

func walk(dec *json.Decoder) error {
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("not a JSON object: %w", err)
	}
	delim, ok := tok.(json.Delim)
	if !ok {
		return nil
	}
	switch delim {
	case '{':
		seen := map[string]bool{}
		for dec.More() {
			key, err := dec.Token()
			if err != nil {
				return fmt.Errorf("not a JSON object: %w", err)
			}
			name, _ := key.(string)
			if seen[name] {
				return fmt.Errorf("key %q is given twice", name)
			}
			seen[name] = true
			if err := walk(dec); err != nil {
				return err
			}
		}
	case '[':
		for dec.More() {
			if err := walk(dec); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("not a JSON object: unexpected %q", delim)
	}
	if _, err := dec.Token(); err != nil { // the closing delimiter
		return fmt.Errorf("not a JSON object: %w", err)
	}
	return nil
}
