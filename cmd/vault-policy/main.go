package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"

	"github.com/JorisJonkers-dev/delivery/internal/cli"
	"github.com/JorisJonkers-dev/delivery/internal/server"
	"github.com/JorisJonkers-dev/delivery/internal/settings"
	"github.com/JorisJonkers-dev/delivery/internal/vaultlogin"
	"github.com/JorisJonkers-dev/delivery/internal/vaultpolicy"
)

func main() {
	ctx, stop := server.SignalContext(context.Background())
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// service is the job as its --help tells it.
var service = cli.Service{
	Name: "vault-policy",
	Summary: "vault-policy applies the Vault policies and Kubernetes-auth roles deploy-kit renders into a mounted\n" +
		"ConfigMap, once, and exits: 0 when Vault holds the render, 1 on a refused render or a failed call.",
	Variables: vaultpolicy.Variables,
}

// run answers --help and --version, or reads the settings, the render and
// then Vault, in that order: a bad setting or a refused render never reaches
// Vault. Every way a run ends is one JSON line on out.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, out io.Writer) int {
	if code, answered := service.Answer(args, stdout, out); answered {
		return code
	}
	log := slog.New(slog.NewJSONHandler(out, nil))
	env := settings.New(getenv)
	vault := vaultlogin.Read(env, "policy-admin")
	dir := env.String("POLICIES_DIR", "/policies")
	if err := env.Err(); err != nil {
		log.Error("bad setting", slog.String("error", err.Error()))
		return 1
	}

	render, err := vaultpolicy.Load(dir)
	if err != nil {
		log.Error("refused: nothing applied", slog.String("dir", dir), slog.String("error", err.Error()))
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

	sum, err := vaultpolicy.Apply(ctx, &vaultpolicy.Client{API: client, AuthPath: vault.AuthPath}, render, vault.Role, log)
	if errors.Is(err, vaultpolicy.ErrRefused) {
		log.Error("refused: nothing applied", slog.String("dir", dir), slog.String("error", err.Error()))
		return 1
	}
	if err != nil {
		attrs := []any{slog.String("error", err.Error())}
		if call, ok := errors.AsType[*vaultpolicy.CallError](err); ok {
			attrs = append(attrs, slog.String("call", call.Call), slog.String("name", call.Name))
		}
		log.Error("call failed", attrs...)
		return 1
	}
	log.Info("summary", slog.Int("written", sum.Written), slog.Int("unchanged", sum.Unchanged), slog.Int("stale", len(sum.Stale)))
	return 0
}
