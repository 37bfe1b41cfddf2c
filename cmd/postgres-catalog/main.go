package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"

	"github.com/JorisJonkers-dev/delivery/internal/cli"
	"github.com/JorisJonkers-dev/delivery/internal/postgrescatalog"
	"github.com/JorisJonkers-dev/delivery/internal/settings"
	"github.com/JorisJonkers-dev/delivery/internal/vaultlogin"
)

func main() {
	cli.Main(func(ctx context.Context) int {
		return run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr, postgrescatalog.Connector{})
	})
}

// service is the job as its --help tells it.
var service = cli.Service{
	Name: "postgres-catalog",
	Summary: "postgres-catalog applies a PostgreSQL server's database catalog once and exits: 0 when the server\n" +
		"and Vault hold the catalog, 2 on a bad setting, 1 on a refused catalog or a failed step.",
	Variables: postgrescatalog.Variables,
}

// run answers its command line, or applies the catalog once; base carries
// what a test adds to every connection (a statement tracer). It returns the
// exit code.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, out io.Writer, base postgrescatalog.Connector) int {
	return cli.NewEnv(getenv, stdout, out).Execute(ctx, cli.Command{Service: service,
		Run: func(ctx context.Context, env cli.Env) error { return apply(ctx, env, base) }}, args)
}

// apply reads the settings, the catalog, then Vault, then PostgreSQL, in
// that order: a bad setting or a refused catalog never reaches either
// server. Every way a run ends is one log line.
func apply(ctx context.Context, env cli.Env, base postgrescatalog.Connector) error {
	log := env.Log
	s := settings.New(env.Getenv)
	vaultSettings := vaultlogin.Read(s, "postgres-catalog")
	catalogFile := s.Required("CATALOG_FILE")
	rootCert := s.String("PGSSLROOTCERT", "")
	if err := s.Err(); err != nil {
		return cli.BadSetting(err)
	}

	catalog, err := postgrescatalog.Load(catalogFile)
	if err != nil {
		return cli.Failed("refused: nothing applied", err, slog.String("file", catalogFile))
	}

	client, err := vaultlogin.NewClient(vaultSettings)
	if err != nil {
		return cli.BadSetting(err)
	}
	if err := vaultlogin.Login(ctx, client, vaultSettings); err != nil {
		return cli.Failed("call failed", err, slog.String("call", "login"), slog.String("role", vaultSettings.Role))
	}
	vault := &postgrescatalog.VaultClient{API: client}
	admin, err := vault.ReadAdminLogin(ctx, catalog.AdminPath)
	if err != nil {
		return cli.Failed("call failed", err, slog.String("call", "read admin login"), slog.String("path", catalog.AdminPath))
	}

	connector := base
	connector.Server, connector.Login, connector.SSLRootCert = catalog.Server, admin, rootCert
	applier := &postgrescatalog.Applier{Catalog: catalog, Connect: connector.Connect, Vault: vault, Log: log}
	sum, err := applier.Apply(ctx)
	if err != nil {
		if step, ok := errors.AsType[*postgrescatalog.StepError](err); ok {
			return cli.Failed("step failed", step.Err, slog.String("project", step.Project), slog.String("database", step.Database),
				slog.String("step", string(step.Step)))
		}
		// Apply fails outside a Project's steps only before the first one,
		// connecting to the server.
		return cli.Failed("call failed", err, slog.String("call", "connect"))
	}
	log.Info("summary", slog.Int("projects", sum.Projects), slog.Int("changed", sum.Changed),
		slog.Int("statements", sum.Statements), slog.Int("vaultWrites", sum.VaultWrites))
	return nil
}
