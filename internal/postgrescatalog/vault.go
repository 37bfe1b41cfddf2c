package postgrescatalog

import (
	"context"
	"errors"
	"fmt"
	"slices"

	vaultapi "github.com/hashicorp/vault/api"
)

// DatabaseRole is a role of Vault's database secrets engine as far as this
// job sets it: the connection it issues logins on and the statements that
// create a login. Its TTLs, revocation and rotation stay as Vault holds them.
type DatabaseRole struct {
	Connection         string
	CreationStatements []string
}

// Equal says two roles issue the same logins.
func (r DatabaseRole) Equal(o DatabaseRole) bool {
	return r.Connection == o.Connection && slices.Equal(r.CreationStatements, o.CreationStatements)
}

// RoleFor is the Vault role issuing logins for the PostgreSQL role: each
// login is a member of the role and, through its own setting, acts as it
// from sign-in on, so what it creates belongs to the role and outlives it.
// Vault fills in {{name}}, {{password}} and {{expiration}}.
func RoleFor(connection, role string) DatabaseRole {
	r := ident(role)
	return DatabaseRole{Connection: connection, CreationStatements: []string{
		`CREATE ROLE "{{name}}" WITH LOGIN PASSWORD '{{password}}' VALID UNTIL '{{expiration}}' IN ROLE ` + r + `;`,
		`ALTER ROLE "{{name}}" SET role = ` + r + `;`,
	}}
}

// Vault is what the job needs of Vault: the admin login, and the database
// roles it keeps.
type Vault interface {
	ReadAdminLogin(ctx context.Context, path string) (Login, error)
	ReadDatabaseRole(ctx context.Context, path string) (DatabaseRole, bool, error)
	WriteDatabaseRole(ctx context.Context, path string, role DatabaseRole) error
}

// VaultClient is Vault through its official client, logged in already.
type VaultClient struct {
	API *vaultapi.Client
}

var _ Vault = (*VaultClient)(nil)

// ReadAdminLogin reads username and password at path: at the top level of
// the answer, or under data as a kv v2 mount answers.
func (c *VaultClient) ReadAdminLogin(ctx context.Context, path string) (Login, error) {
	secret, err := c.API.Logical().ReadWithContext(ctx, path)
	if err != nil {
		return Login{}, err
	}
	if secret == nil {
		return Login{}, fmt.Errorf("vault holds nothing at %s", path)
	}
	fields := secret.Data
	if nested, ok := fields["data"].(map[string]any); ok && fields["username"] == nil {
		fields = nested
	}
	user, _ := fields["username"].(string)
	password, _ := fields["password"].(string)
	if user == "" || password == "" {
		return Login{}, fmt.Errorf("%s holds no username and password", path)
	}
	return Login{Username: user, Password: password}, nil
}

// ReadDatabaseRole reads <mount>/roles/<name>.
func (c *VaultClient) ReadDatabaseRole(ctx context.Context, path string) (DatabaseRole, bool, error) {
	secret, err := c.API.Logical().ReadWithContext(ctx, path)
	if err != nil {
		return DatabaseRole{}, false, err
	}
	if secret == nil {
		return DatabaseRole{}, false, nil
	}
	connection, _ := secret.Data["db_name"].(string)
	role := DatabaseRole{Connection: connection}
	list, _ := secret.Data["creation_statements"].([]any)
	for _, s := range list {
		text, ok := s.(string)
		if !ok {
			return DatabaseRole{}, false, errors.New("vault answered creation statements that are not text")
		}
		role.CreationStatements = append(role.CreationStatements, text)
	}
	return role, true, nil
}

// WriteDatabaseRole writes <mount>/roles/<name>. Vault keeps the fields a
// write leaves out, so TTLs set by hand survive.
func (c *VaultClient) WriteDatabaseRole(ctx context.Context, path string, role DatabaseRole) error {
	_, err := c.API.Logical().WriteWithContext(ctx, path, map[string]any{
		"db_name":             role.Connection,
		"creation_statements": role.CreationStatements,
	})
	return err
}

// JobPolicy is the ACL policy the job's own Vault role needs for c: read the
// admin login, and read and write the catalog's database roles. It cannot
// delete, list, or read credentials.
func JobPolicy(c *Catalog) string {
	return `path "` + c.AdminPath + `" { capabilities = ["read"] }
path "` + c.Vault.Mount + `/roles/*" { capabilities = ["read", "create", "update"] }
`
}
