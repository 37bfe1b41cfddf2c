package main

import (
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/JorisJonkers-dev/delivery/internal/cli"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/demo"
)

func demoCommand(in cli.Env) *cobra.Command {
	return &cobra.Command{
		Use:   "demo",
		Short: "Tell a delivery step by step on a bus of its own: three nodes, a canary, a failing build, a put",
		Long: "mesh demo starts an embedded NATS JetStream server, three node agents in folders of their own, the\n" +
			"assigner, the watchman and the view, registers a small module (an HTTP server the agents run) and tells\n" +
			"its delivery: the build done, the canary first, the others once it is healthy, the revision delivered;\n" +
			"then a build whose health check fails on the canary, stuck, no other node moving, a stall said; then a\n" +
			"put by hand on one node. The services' JSON lines go to standard error. It exits 1 if a step does not\n" +
			"go as told.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			self, err := os.Executable()
			if err != nil {
				return fail(in, 1, "cannot find itself to run as the module", err)
			}
			dir, err := os.MkdirTemp("", "mesh-demo-")
			if err != nil {
				return fail(in, 1, "no folder for the nodes", err)
			}
			defer os.RemoveAll(dir)
			s := demo.Story{Out: in.Stdout, Logs: in.Stderr, Module: []string{self, "demo-module"}, Dir: dir, StuckAfter: 3 * time.Second}
			if err := s.Run(cmd.Context()); err != nil {
				return fail(in, 1, "the story did not go as told", err)
			}
			return nil
		},
	}
}

// demoModuleCommand is the demo's module, which the demo's agents run.
func demoModuleCommand(in cli.Env) *cobra.Command {
	return &cobra.Command{
		Use:    "demo-module",
		Short:  "The demo's module: an HTTP server on ADDR (run by the demo's agents)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := demo.ServeModule(c.Context(), in.Getenv); err != nil {
				return fail(in, 1, "the demo's module stopped", err)
			}
			return nil
		},
	}
}
