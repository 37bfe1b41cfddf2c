package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"

	"github.com/JorisJonkers-dev/delivery/internal/cli"
	"github.com/JorisJonkers-dev/delivery/internal/postgrescatalog"
	"github.com/JorisJonkers-dev/delivery/internal/server"
	"github.com/JorisJonkers-dev/delivery/internal/settings"
	"github.com/JorisJonkers-dev/delivery/internal/vaultlogin"
)

func main() {
	ctx, stop := server.SignalContext(context.Background())
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr, postgrescatalog.Connector{})
	stop()
	os.Exit(code)
}

// service is the job as its --help tells it.
var service = cli.Service{
	Name: "postgres-catalog",
	Summary: "postgres-catalog applies a PostgreSQL server's database catalog once and exits: 0 when the server\n" +
		"and Vault hold the catalog, 1 on a bad setting, a refused catalog or a failed step.",
	Variables: postgrescatalog.Variables,
}

// run answers --help and --version, or reads the settings, the catalog,
// then Vault, then PostgreSQL, in that order: a bad setting or a refused
// catalog never reaches either server. base carries what a test adds to
// every connection (a statement tracer). Every way a run ends is one JSON
// line on out.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, out io.Writer, base postgrescatalog.Connector) int {
	if code, answered := service.Answer(args, stdout, out); answered {
		return code
	}
	log := slog.New(slog.NewJSONHandler(out, nil))
	env := settings.New(getenv)
	vaultSettings := vaultlogin.Read(env, "postgres-catalog")
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

	client, err := vaultlogin.NewClient(vaultSettings)
	if err != nil {
		log.Error("bad setting", slog.String("error", err.Error()))
		return 1
	}
	if err := vaultlogin.Login(ctx, client, vaultSettings); err != nil {
		log.Error("call failed", slog.String("call", "login"), slog.String("role", vaultSettings.Role), slog.String("error", err.Error()))
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
