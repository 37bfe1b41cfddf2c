package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"

	"github.com/JorisJonkers-dev/delivery/internal/cli"
	"github.com/JorisJonkers-dev/delivery/internal/settings"
	"github.com/JorisJonkers-dev/delivery/internal/vaultlogin"
	"github.com/JorisJonkers-dev/delivery/internal/vaultpolicy"
)

func main() {
	cli.Main(func(ctx context.Context) int { return run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr) })
}

// service is the job as its --help tells it.
var service = cli.Service{
	Name: "vault-policy",
	Summary: "vault-policy applies the Vault policies and Kubernetes-auth roles deploy-kit renders into a mounted\n" +
		"ConfigMap, once, and exits: 0 when Vault holds the render, 2 on a bad setting, 1 on a refused render or a\n" +
		"failed call.",
	Variables: vaultpolicy.Variables,
}

// run answers its command line, or applies the render once; it returns the
// exit code.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, out io.Writer) int {
	return cli.NewEnv(getenv, stdout, out).Execute(ctx, cli.Command{Service: service, Run: apply}, args)
}

// apply reads the settings, the render and then Vault, in that order: a bad
// setting or a refused render never reaches Vault. Every way a run ends is
// one log line.
func apply(ctx context.Context, env cli.Env) error {
	log := env.Log
	s := settings.New(env.Getenv)
	vault := vaultlogin.Read(s, "policy-admin")
	dir := s.String("POLICIES_DIR", "/policies")
	if err := s.Err(); err != nil {
		return cli.BadSetting(err)
	}

	render, err := vaultpolicy.Load(dir)
	if err != nil {
		return cli.Failed("refused: nothing applied", err, slog.String("dir", dir))
	}

	client, err := vaultlogin.NewClient(vault)
	if err != nil {
		return cli.BadSetting(err)
	}
	if err := vaultlogin.Login(ctx, client, vault); err != nil {
		return cli.Failed("call failed", err, slog.String("call", "login"), slog.String("role", vault.Role))
	}

	sum, err := vaultpolicy.Apply(ctx, &vaultpolicy.Client{API: client, AuthPath: vault.AuthPath}, render, vault.Role, log)
	if errors.Is(err, vaultpolicy.ErrRefused) {
		return cli.Failed("refused: nothing applied", err, slog.String("dir", dir))
	}
	if err != nil {
		var attrs []any
		if call, ok := errors.AsType[*vaultpolicy.CallError](err); ok {
			attrs = append(attrs, slog.String("call", call.Call), slog.String("name", call.Name))
		}
		return cli.Failed("call failed", err, attrs...)
	}
	log.Info("summary", slog.Int("written", sum.Written), slog.Int("unchanged", sum.Unchanged), slog.Int("stale", len(sum.Stale)))
	return nil
}
