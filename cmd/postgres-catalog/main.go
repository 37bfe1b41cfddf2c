// Command postgres-catalog applies a PostgreSQL server's database catalog
// once and exits: 0 when the server and Vault hold the catalog, 1 on a bad
// setting, a refused catalog or a failed step.
package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"

	vaultapi "github.com/hashicorp/vault/api"

	"github.com/JorisJonkers-dev/delivery/internal/postgrescatalog"
	"github.com/JorisJonkers-dev/delivery/internal/server"
	"github.com/JorisJonkers-dev/delivery/internal/settings"
	"github.com/JorisJonkers-dev/delivery/internal/vaultpolicy"
)

// The pod's own ServiceAccount token, as the kubelet mounts it.
const defaultTokenFile = "/var/run/secrets/kubernetes.io/serviceaccount/token" //nolint:gosec // a path, not a credential

func main() {
	ctx, stop := server.SignalContext(context.Background())
	code := run(ctx, os.Getenv, os.Stderr, postgrescatalog.Connector{})
	stop()
	os.Exit(code)
}

// run reads the settings, the catalog, then Vault, then PostgreSQL, in that
// order: a bad setting or a refused catalog never reaches either server.
// base carries what a test adds to every connection (a statement tracer).
// Every way it ends is one JSON line on out.
func run(ctx context.Context, getenv func(string) string, out io.Writer, base postgrescatalog.Connector) int {
	log := slog.New(slog.NewJSONHandler(out, nil))
	env := settings.New(getenv)
	addr := env.Required("VAULT_ADDR")
	role := env.String("VAULT_ROLE", "postgres-catalog")
	authPath := env.String("VAULT_AUTH_PATH", "kubernetes")
	tokenFile := env.String("TOKEN_FILE", defaultTokenFile)
	catalogFile := env.Required("CATALOG_FILE")
	rootCert := env.String("PGSSLROOTCERT", "")
	if err := env.Err(); err != nil {
		log.Error("bad setting", slog.String("error", err.Error()))
		return 1
	}

	catalog, err := postgrescatalog.Load(catalogFile)
	if err != nil {
		log.Error("refused: nothing applied", slog.String("file", catalogFile), slog.String("error", err.Error()))
		return 1
	}

	cfg := vaultapi.DefaultConfig()
	if cfg.Error != nil {
		// Vault's client reads its own VAULT_* variables (TLS, retries) itself.
		log.Error("bad setting", slog.String("error", "Vault's VAULT_* variables: "+cfg.Error.Error()))
		return 1
	}
	cfg.Address = addr
	client, err := vaultapi.NewClient(cfg)
	if err != nil {
		log.Error("vault client", slog.String("error", err.Error()))
		return 1
	}
	// A token from the environment is never used: the job acts only as the
	// role it logs in as.
	client.ClearToken()
	if err := vaultpolicy.Login(ctx, client, authPath, role, tokenFile); err != nil {
		log.Error("call failed", slog.String("call", "login"), slog.String("role", role), slog.String("error", err.Error()))
		return 1
	}
	vault := &postgrescatalog.VaultClient{API: client}
	admin, err := vault.ReadAdminLogin(ctx, catalog.AdminPath)
	if err != nil {
		log.Error("call failed", slog.String("call", "read admin login"), slog.String("path", catalog.AdminPath), slog.String("error", err.Error()))
		return 1
	}

	connector := base
	connector.Server, connector.Login, connector.SSLRootCert = catalog.Server, admin, rootCert
	applier := &postgrescatalog.Applier{Catalog: catalog, Connect: connector.Connect, Vault: vault, Log: log}
	sum, err := applier.Apply(ctx)
	if err != nil {
		if step, ok := errors.AsType[*postgrescatalog.StepError](err); ok {
			log.Error("step failed", slog.String("project", step.Project), slog.String("database", step.Database),
				slog.String("step", string(step.Step)), slog.String("error", step.Err.Error()))
			return 1
		}
		// Apply fails outside a Project's steps only before the first one,
		// connecting to the server.
		log.Error("call failed", slog.String("call", "connect"), slog.String("error", err.Error()))
		return 1
	}
	log.Info("summary", slog.Int("projects", sum.Projects), slog.Int("changed", sum.Changed),
		slog.Int("statements", sum.Statements), slog.Int("vaultWrites", sum.VaultWrites))
	return 0
}
