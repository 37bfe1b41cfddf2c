package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/JorisJonkers-dev/delivery/internal/cli"
	"github.com/JorisJonkers-dev/delivery/internal/demo"
	"github.com/JorisJonkers-dev/delivery/internal/server"
	"github.com/JorisJonkers-dev/delivery/internal/settings"
)

func main() { os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr, demo.Run)) }

// variables are what the demo reads, through the test servers' finder: it
// reads no variable of its own, and sets every one the gate reads.
var variables = []settings.Variable{
	{Name: "KUBEBUILDER_ASSETS", Default: "the cache folder", Meaning: "the folder holding etcd, kube-apiserver, the controllers, kwok and Flagger"},
	{Name: "DELIVERY_CACHE", Default: "$XDG_CACHE_HOME/delivery", Meaning: "the cache folder the servers are built into"},
	{Name: "XDG_CACHE_HOME", Default: "~/.cache", Meaning: "the user's cache folder"},
}

// run parses the flags and runs the demo until the story ends (--once) or
// SIGINT or SIGTERM arrives.
func run(ctx context.Context, args []string, out, errOut io.Writer, play func(context.Context, demo.Options) error) int {
	flags := flag.NewFlagSet("demo", flag.ContinueOnError)
	flags.SetOutput(io.Discard)
	once := flags.Bool("once", false, "exit after the story: 0 only when every step answered as expected")
	kwok := flags.Bool("kwok", false, "tell the story on kwok's cluster, whose pods run nothing, even where the node that runs pods can run")
	version := flags.Bool("version", false, "print the version and exit")
	err := flags.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		usage(out, flags)
		return 0
	case err != nil:
		fmt.Fprintf(errOut, "demo: %v\n\n", err)
		usage(errOut, flags)
		return 2
	case *version:
		fmt.Fprintln(out, cli.VersionLine("demo"))
		return 0
	case flags.NArg() > 0:
		fmt.Fprintf(errOut, "demo takes no arguments, got %q\n\n", flags.Args())
		usage(errOut, flags)
		return 2
	}
	ctx, stop := server.SignalContext(ctx)
	defer stop()
	if err := play(ctx, demo.Options{Once: *once, Out: out, Kwok: *kwok}); err != nil {
		fmt.Fprintln(errOut, "demo:", err)
		return 1
	}
	return 0
}

func usage(w io.Writer, flags *flag.FlagSet) {
	fmt.Fprint(w, "demo delivers a release along the whole path on a node that runs pods (as root: the real\n"+
		"Flux, the real Flagger, the product's own pods) and prints what each part did; where the node\n"+
		"cannot run, or with --kwok, it tells the story on kwok's cluster instead. Everything stays up\n"+
		"until Ctrl-C, unless --once.\n\n")
	fmt.Fprint(w, "Usage:\n  demo [--once] [--kwok]\n\nFlags:\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	flags.VisitAll(func(f *flag.Flag) { fmt.Fprintf(tw, "  --%s\t%s\n", f.Name, f.Usage) })
	fmt.Fprintln(tw, "  -h, --help\tprint this help and exit")
	_ = tw.Flush()
	fmt.Fprintln(w, "\nEnvironment:")
	cli.WriteVariables(w, variables)
}
