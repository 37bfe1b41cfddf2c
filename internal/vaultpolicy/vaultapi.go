package vaultpolicy

import (
	"context"
	"fmt"
	"net/url"

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
	}, true, nil
}

// WriteRole writes auth/<mount>/role/<name>. The selector is always sent,
// empty, so that a role that gained one loses it.
func (c *Client) WriteRole(ctx context.Context, name string, role Role) error {
	_, err := c.API.Logical().WriteWithContext(ctx, c.rolePath(name), map[string]any{
		fieldNames:     role.ServiceAccountNames,
		fieldNamespace: role.ServiceAccountNamespaces,
		fieldSelector:  role.NamespaceSelector,
		fieldPolicies:  role.TokenPolicies,
	})
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
