// Command demo runs a whole release through the Release Gate on an embedded
// cluster and prints the transcript; with --once it exits after the story,
// 0 only when every step answered as the story expects.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/JorisJonkers-dev/delivery/internal/demo"
	"github.com/JorisJonkers-dev/delivery/internal/server"
)

func main() { os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr, demo.Run)) }

// run parses the flags and runs the demo until the story ends (--once) or
// SIGINT or SIGTERM arrives.
func run(ctx context.Context, args []string, out, errOut io.Writer, play func(context.Context, demo.Options) error) int {
	flags := flag.NewFlagSet("demo", flag.ContinueOnError)
	flags.SetOutput(errOut)
	once := flags.Bool("once", false, "exit after the story: 0 only when every step answered as expected")
	if err := flags.Parse(args); err != nil {
		return 2
	}
	if flags.NArg() > 0 {
		fmt.Fprintf(errOut, "demo takes no arguments, got %q\n", flags.Args())
		return 2
	}
	ctx, stop := server.SignalContext(ctx)
	defer stop()
	if err := play(ctx, demo.Options{Once: *once, Out: out}); err != nil {
		fmt.Fprintln(errOut, "demo:", err)
		return 1
	}
	return 0
}
