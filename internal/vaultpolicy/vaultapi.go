package vaultpolicy

import (
	"context"
	"fmt"
	"maps"
	"net/url"
	"slices"

	vaultapi "github.com/hashicorp/vault/api"
)

// Client is Vault through its official client: ACL policies under
// sys/policies/acl and roles of the Kubernetes auth method mounted at
// AuthPath.
type Client struct {
	API      *vaultapi.Client
	AuthPath string
}

var _ Vault = (*Client)(nil)

func (c *Client) rolePath(name string) string {
	return "auth/" + c.AuthPath + "/role/" + url.PathEscape(name)
}

// ReadPolicy reads sys/policies/acl/<name>.
func (c *Client) ReadPolicy(ctx context.Context, name string) (string, bool, error) {
	secret, err := c.API.Logical().ReadWithContext(ctx, "sys/policies/acl/"+url.PathEscape(name))
	if err != nil {
		return "", false, err
	}
	if secret == nil {
		return "", false, nil
	}
	text, ok := secret.Data["policy"].(string)
	if !ok {
		return "", false, fmt.Errorf("vault answered without the policy text")
	}
	return text, true, nil
}

// WritePolicy writes sys/policies/acl/<name>.
func (c *Client) WritePolicy(ctx context.Context, name, text string) error {
	return c.API.Sys().PutPolicyWithContext(ctx, name, text)
}

// ReadRole reads auth/<mount>/role/<name>.
func (c *Client) ReadRole(ctx context.Context, name string) (Role, bool, error) {
	secret, err := c.API.Logical().ReadWithContext(ctx, c.rolePath(name))
	if err != nil {
		return Role{}, false, err
	}
	if secret == nil {
		return Role{}, false, nil
	}
	selector, _ := secret.Data[fieldSelector].(string)
	return Role{
		ServiceAccountNames:      stringList(secret.Data[fieldNames]),
		ServiceAccountNamespaces: stringList(secret.Data[fieldNamespace]),
		NamespaceSelector:        selector,
		TokenPolicies:            stringList(secret.Data[fieldPolicies]),
		TokenEdits:               tokenEdits(secret.Data),
	}, true, nil
}

// tokenDefaults are the token settings of a role that sets none of its own,
// as Vault's Kubernetes auth reads them back: no TTL, period or use count of
// its own, no CIDR bound, the default token type, the default policy kept.
// A period lets a token be renewed for ever and a longer TTL outlives the
// grant, so a role is held to these as to its bindings.
var tokenDefaults = map[string]any{
	"token_ttl": 0, "token_max_ttl": 0, "token_period": 0, "token_explicit_max_ttl": 0,
	"token_num_uses": 0, "token_bound_cidrs": []string{}, "token_type": "default", "token_no_default_policy": false,
}

// tokenEdits names, in order, the token settings in data away from their
// defaults; a setting Vault does not report is taken as its default.
func tokenEdits(data map[string]any) []string {
	var edits []string
	for name, def := range tokenDefaults {
		held, ok := data[name]
		if !ok || held == nil {
			continue
		}
		same := false
		switch def := def.(type) {
		case int:
			same = fmt.Sprint(held) == fmt.Sprint(def)
		case string:
			same = held == def
		case bool:
			same = held == def
		case []string:
			list := stringList(held)
			same = list != nil && len(list) == len(def)
		}
		if !same {
			edits = append(edits, name)
		}
	}
	slices.Sort(edits)
	return edits
}

// WriteRole writes auth/<mount>/role/<name>. The selector and every token
// setting are always sent, at their defaults, so that a role that gained
// one loses it.
func (c *Client) WriteRole(ctx context.Context, name string, role Role) error {
	body := map[string]any{
		fieldNames:     role.ServiceAccountNames,
		fieldNamespace: role.ServiceAccountNamespaces,
		fieldSelector:  role.NamespaceSelector,
		fieldPolicies:  role.TokenPolicies,
	}
	maps.Copy(body, tokenDefaults)
	_, err := c.API.Logical().WriteWithContext(ctx, c.rolePath(name), body)
	return err
}

// ListPolicies lists sys/policies/acl.
func (c *Client) ListPolicies(ctx context.Context) ([]string, error) {
	return c.API.Sys().ListPoliciesWithContext(ctx)
}

// ListRoles lists auth/<mount>/role; a mount without roles lists none.
func (c *Client) ListRoles(ctx context.Context) ([]string, error) {
	secret, err := c.API.Logical().ListWithContext(ctx, "auth/"+c.AuthPath+"/role")
	if err != nil {
		return nil, err
	}
	if secret == nil {
		return nil, nil
	}
	return stringList(secret.Data["keys"]), nil
}

// stringList reads a JSON list of strings as Vault's client decodes it; anything
// else reads as nil, which never equals a rendered list.
func stringList(v any) []string {
	list, ok := v.([]any)
	if !ok {
		return nil
	}
	out := make([]string, 0, len(list))
	for _, item := range list {
		s, ok := item.(string)
		if !ok {
			return nil
		}
		out = append(out, s)
	}
	return out
}

// AdminPolicy is the ACL policy the job's own login role needs, with the
// Kubernetes auth method mounted at authPath: read, write and list ACL
// policies and that method's roles. It cannot delete.
func AdminPolicy(authPath string) string {
	return `path "sys/policies/acl" { capabilities = ["list"] }
path "sys/policies/acl/*" { capabilities = ["read", "create", "update", "list"] }
path "auth/` + authPath + `/role" { capabilities = ["list"] }
path "auth/` + authPath + `/role/*" { capabilities = ["read", "create", "update", "list"] }
`
}
