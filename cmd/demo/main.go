package main

import (
	"context"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/JorisJonkers-dev/delivery/internal/cli"
	"github.com/JorisJonkers-dev/delivery/internal/demo"
	"github.com/JorisJonkers-dev/delivery/internal/settings"
)

func main() {
	cli.Main(func(ctx context.Context) int { return run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr, demo.Run) })
}

// service is the demo as its --help tells it. Its variables are read
// through the test servers' finder: it reads no variable of its own, and
// sets every one the gate reads.
var service = cli.Service{
	Name: "demo",
	Summary: "demo delivers a release along the whole path on a node that runs pods (as root: the real\n" +
		"Flux, the real Flagger, the product's own pods) and prints what each part did; where the node\n" +
		"cannot run, or with --kwok, it tells the story on kwok's cluster instead. Everything stays up\n" +
		"until Ctrl-C, unless --once.",
	Variables: []settings.Variable{
		{Name: "KUBEBUILDER_ASSETS", Default: "the cache folder", Meaning: "the folder holding etcd, kube-apiserver, the controllers, kwok and Flagger"},
		{Name: "DELIVERY_CACHE", Default: "$XDG_CACHE_HOME/delivery", Meaning: "the cache folder the servers are built into"},
		{Name: "XDG_CACHE_HOME", Default: "~/.cache", Meaning: "the user's cache folder"},
	},
}

// run reads the command line and runs the demo until the story ends
// (--once) or ctx ends (SIGINT or SIGTERM, through cli.Main); it returns the
// exit code.
func run(ctx context.Context, args []string, getenv func(string) string, out, errOut io.Writer, play func(context.Context, demo.Options) error) int {
	var once, kwok bool
	return cli.NewEnv(getenv, out, errOut).Execute(ctx, cli.Command{
		Service: service,
		Use:     "[--once] [--kwok]",
		Flags: func(c *cobra.Command) {
			c.Flags().BoolVar(&once, "once", false, "exit after the story: 0 only when every step answered as expected")
			c.Flags().BoolVar(&kwok, "kwok", false, "tell the story on kwok's cluster, whose pods run nothing, even where the node that runs pods can run")
		},
		Run: func(ctx context.Context, env cli.Env) error {
			if err := play(ctx, demo.Options{Once: once, Out: env.Stdout, Kwok: kwok}); err != nil {
				return cli.Failed("the story did not go as told", err)
			}
			return nil
		},
	}, args)
}
