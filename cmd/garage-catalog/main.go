package main

import (
	"context"
	"io"
	"log/slog"
	"os"

	"github.com/JorisJonkers-dev/delivery/internal/cli"
	"github.com/JorisJonkers-dev/delivery/internal/garagecatalog"
	"github.com/JorisJonkers-dev/delivery/internal/settings"
	"github.com/JorisJonkers-dev/delivery/internal/vaultlogin"
)

func main() {
	cli.Main(func(ctx context.Context) int { return run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr) })
}

// service is the job as its --help tells it.
var service = cli.Service{
	Name: "garage-catalog",
	Summary: "garage-catalog applies the bucket catalog deploy-kit renders to Garage through its admin API, once,\n" +
		"and exits: 0 when Garage and Vault hold the catalog, 2 on a bad setting, 1 on a refused catalog or a\n" +
		"failed call. It never deletes a key, a bucket or a grant.",
	Variables: garagecatalog.Variables,
}

// run answers its command line, or applies the catalog once; it returns
// the exit code.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, out io.Writer) int {
	return cli.NewEnv(getenv, stdout, out).Execute(ctx, cli.Command{Service: service, Run: apply}, args)
}

// apply reads the settings, the catalog and then Vault and Garage, in that
// order: a bad setting or a refused catalog reaches neither. Every way a run
// ends is one log line.
func apply(ctx context.Context, env cli.Env) error {
	log := env.Log
	s := settings.New(env.Getenv)
	file := s.Required("CATALOG_FILE")
	vault := vaultlogin.Read(s, "garage-catalog")
	if err := s.Err(); err != nil {
		return cli.BadSetting(err)
	}

	catalog, err := readCatalog(file)
	if err != nil {
		return cli.Failed("refused: nothing applied", err, slog.String("file", file))
	}

	client, err := vaultlogin.NewClient(vault)
	if err != nil {
		return cli.BadSetting(err)
	}
	if err := vaultlogin.Login(ctx, client, vault); err != nil {
		return cli.Failed("call failed", err, slog.String("call", "login"), slog.String("role", vault.Role))
	}

	sum, err := garagecatalog.Run(ctx, catalog, &garagecatalog.VaultKV{Client: client}, nil, log)
	if err != nil {
		return cli.Failed("call failed", err,
			slog.Int("imported", sum.Imported), slog.Int("written_down", sum.WrittenDown), slog.Int("minted", sum.Minted),
			slog.Int("buckets_created", sum.BucketsCreated), slog.Int("grants", sum.Grants))
	}
	log.Info("summary", slog.Int("keys", len(catalog.Keys)), slog.Int("kept", sum.Kept),
		slog.Int("imported", sum.Imported), slog.Int("written_down", sum.WrittenDown), slog.Int("minted", sum.Minted),
		slog.Int("buckets_created", sum.BucketsCreated), slog.Int("grants", sum.Grants), slog.Int("changes", sum.Changes()))
	return nil
}

func readCatalog(path string) (*garagecatalog.Catalog, error) {
	f, err := os.Open(path) //nolint:gosec // the catalog's path is the job's own setting
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return garagecatalog.Decode(f)
}
