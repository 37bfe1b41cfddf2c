package testenv

import (
	"context"
	"net"
	"strconv"
	"testing"

	vaultapi "github.com/hashicorp/vault/api"
)

// ConfigureDatabaseEngine mounts Vault's database secrets engine at mount
// and configures connection on it: the built-in postgresql-database-plugin
// signing in to pg's postgres database as its superuser, allowed to issue
// logins for every role, as the platform sets it up. It keeps that login at
// adminPath too, a KV v2 data path (secret/data/…), where the database
// catalog reads it.
func (v *Vault) ConfigureDatabaseEngine(t testing.TB, pg *Postgres, mount, connection, adminPath string) {
	t.Helper()
	ctx := context.Background()
	if err := v.Client.Sys().MountWithContext(ctx, mount, &vaultapi.MountInput{Type: "database"}); err != nil {
		t.Fatalf("mount the database engine at %s: %v", mount, err)
	}
	hostPort := net.JoinHostPort(pg.Host, strconv.Itoa(pg.Port))
	if _, err := v.Client.Logical().WriteWithContext(ctx, mount+"/config/"+connection, map[string]any{
		"plugin_name":    "postgresql-database-plugin",
		"connection_url": "postgresql://{{username}}:{{password}}@" + hostPort + "/postgres?sslmode=disable",
		"username":       pg.User,
		"password":       pg.Password,
		"allowed_roles":  "*",
	}); err != nil {
		t.Fatalf("configure the connection %s: %v", connection, err)
	}
	if _, err := v.Client.Logical().WriteWithContext(ctx, adminPath, map[string]any{
		"data": map[string]any{"username": pg.User, "password": pg.Password},
	}); err != nil {
		t.Fatalf("keep the admin login at %s: %v", adminPath, err)
	}
}
