package main

import (
	"context"
	"io"
	"log/slog"
	"os"

	"github.com/JorisJonkers-dev/delivery/internal/cli"
	"github.com/JorisJonkers-dev/delivery/internal/garagecatalog"
	"github.com/JorisJonkers-dev/delivery/internal/server"
	"github.com/JorisJonkers-dev/delivery/internal/settings"
	"github.com/JorisJonkers-dev/delivery/internal/vaultlogin"
)

func main() {
	ctx, stop := server.SignalContext(context.Background())
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// service is the job as its --help tells it.
var service = cli.Service{
	Name: "garage-catalog",
	Summary: "garage-catalog applies the bucket catalog deploy-kit renders to Garage through its admin API, once,\n" +
		"and exits: 0 when Garage and Vault hold the catalog, 1 on a bad setting, a refused catalog or a failed\n" +
		"call. It never deletes a key, a bucket or a grant.",
	Variables: garagecatalog.Variables,
}

// run answers --help and --version, or reads the settings, the catalog and
// then Vault and Garage, in that order: a bad setting or a refused catalog
// reaches neither. Every way a run ends is one JSON line on out.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, out io.Writer) int {
	if code, answered := service.Answer(args, stdout, out); answered {
		return code
	}
	log := slog.New(slog.NewJSONHandler(out, nil))
	env := settings.New(getenv)
	file := env.Required("CATALOG_FILE")
	vault := vaultlogin.Read(env, "garage-catalog")
	if err := env.Err(); err != nil {
		log.Error("bad setting", slog.String("error", err.Error()))
		return 1
	}

	catalog, err := readCatalog(file)
	if err != nil {
		log.Error("refused: nothing applied", slog.String("file", file), slog.String("error", err.Error()))
		return 1
	}

	client, err := vaultlogin.NewClient(vault)
	if err != nil {
		log.Error("bad setting", slog.String("error", err.Error()))
		return 1
	}
	if err := vaultlogin.Login(ctx, client, vault); err != nil {
		log.Error("call failed", slog.String("call", "login"), slog.String("role", vault.Role), slog.String("error", err.Error()))
		return 1
	}

	sum, err := garagecatalog.Run(ctx, catalog, &garagecatalog.VaultKV{Client: client}, nil, log)
	if err != nil {
		log.Error("call failed", slog.String("error", err.Error()),
			slog.Int("imported", sum.Imported), slog.Int("written_down", sum.WrittenDown), slog.Int("minted", sum.Minted),
			slog.Int("buckets_created", sum.BucketsCreated), slog.Int("grants", sum.Grants))
		return 1
	}
	log.Info("summary", slog.Int("keys", len(catalog.Keys)), slog.Int("kept", sum.Kept),
		slog.Int("imported", sum.Imported), slog.Int("written_down", sum.WrittenDown), slog.Int("minted", sum.Minted),
		slog.Int("buckets_created", sum.BucketsCreated), slog.Int("grants", sum.Grants), slog.Int("changes", sum.Changes()))
	return 0
}

func readCatalog(path string) (*garagecatalog.Catalog, error) {
	f, err := os.Open(path) //nolint:gosec // the catalog's path is the job's own setting
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return garagecatalog.Decode(f)
}
