package main

import (
	"context"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/JorisJonkers-dev/delivery/internal/cli"
	"github.com/JorisJonkers-dev/delivery/internal/settings"
)

func main() {
	cli.Main(func(ctx context.Context) int { return run(ctx, os.Args[1:], os.Getenv, time.Now, os.Stdout, os.Stderr) })
}

// The variables mesh reads, each named in the help of the commands that
// read it.
var (
	natsURL      = settings.Variable{Name: "NATS_URL", Default: "nats://127.0.0.1:4222", Meaning: "the NATS server (JetStream) the bus is on"}
	natsCreds    = settings.Variable{Name: "NATS_CREDS", Default: "", Meaning: "a NATS credentials file (a user JWT and its nkey seed) to connect with; empty, none"}
	natsNkey     = settings.Variable{Name: "NATS_NKEY", Default: "", Meaning: "a file holding an nkey seed to connect with, instead of NATS_CREDS; empty, none"}
	trustedKeys  = settings.Variable{Name: "MESH_TRUSTED_KEYS", Default: settings.Required, Meaning: "a file of PEM Ed25519 public keys; a composition none of them signed is never wanted"}
	onlineWindow = settings.Variable{Name: "ONLINE_WINDOW", Default: "2m", Meaning: "a node that wrote a have this recently is online; the first online node by name is a module's canary"}
	tick         = settings.Variable{Name: "ASSIGN_TICK", Default: "15s", Meaning: "time between decisions when nothing on the bus changed (a node going offline changes the canary)"}
	replicas     = settings.Variable{Name: "MESH_REPLICAS", Default: "1", Meaning: "the replica count of the buckets mesh makes"}
)

// variables are every variable mesh reads.
var variables = []string{natsURL.Name, natsCreds.Name, natsNkey.Name, trustedKeys.Name, onlineWindow.Name, tick.Name, replicas.Name,
	stuckAfter.Name, viewTick.Name, stallAfter.Name, watchAddr.Name,
	nodeName.Name, meshRoot.Name, stopGrace.Name, healthFor.Name, keepCount.Name, backupDir.Name, backupWait.Name}

func variablesOf(command string) []settings.Variable {
	switch command {
	case "compose", "grants":
		return []settings.Variable{natsURL, natsCreds, natsNkey, replicas}
	case "assigner":
		return []settings.Variable{natsURL, natsCreds, natsNkey, trustedKeys, onlineWindow, tick, replicas}
	case "put":
		return []settings.Variable{natsURL, natsCreds, natsNkey, trustedKeys, replicas}
	case "view":
		return []settings.Variable{natsURL, natsCreds, natsNkey, stuckAfter, onlineWindow, viewTick, replicas}
	case "status":
		return []settings.Variable{natsURL, natsCreds, natsNkey, stuckAfter, onlineWindow, replicas}
	case "source":
		return []settings.Variable{natsURL, natsCreds, natsNkey, replicas}
	case "watchman":
		return []settings.Variable{natsURL, natsCreds, natsNkey, stallAfter, viewTick, watchAddr, replicas}
	case "agent":
		return []settings.Variable{natsURL, natsCreds, natsNkey, trustedKeys, nodeName, meshRoot, stopGrace, healthFor, keepCount, backupWait, replicas}
	case "backup-seat":
		return []settings.Variable{natsURL, natsCreds, natsNkey, nodeName, backupDir, replicas}
	case "mesh":
		return []settings.Variable{natsURL, natsCreds, natsNkey, trustedKeys, onlineWindow, tick, replicas, stuckAfter, viewTick, stallAfter,
			watchAddr, nodeName, meshRoot, stopGrace, healthFor, keepCount, backupDir, backupWait}
	default:
		return nil
	}
}

// run is the whole command, handed its arguments, environment, clock and
// outputs so a test runs it end to end.
func run(ctx context.Context, args []string, getenv func(string) string, now func() time.Time, stdout, stderr io.Writer) int {
	env := cli.NewEnv(getenv, stdout, stderr)
	env.Now = now
	return env.Execute(ctx, cli.Command{
		Service: cli.Service{Name: "mesh", Variables: variablesOf("mesh"), Summary: "mesh delivers modules straight to nodes: each node's want of each module names a build fingerprint\n" +
			"and the digest of the one signed composition it allows. \"mesh key\" makes a signing key pair,\n" +
			"\"mesh compose\" signs a composition and puts it on the bus, \"mesh assigner\" writes the wants the\n" +
			"seven rules give, and \"mesh put\" holds one node's want by hand. \"mesh source\" writes the revision CI\n" +
			"built, \"mesh view\" and \"mesh status\" say whether it is delivered, \"mesh watchman\" says a node that\n" +
			"does not move; on each node \"mesh agent\" applies what it is signed to and \"mesh backup-seat\" backs\n" +
			"its data up first."},
		Short: "Deliver modules to nodes over a NATS JetStream bus",
		Commands: []*cobra.Command{keyCommand(env), composeCommand(env), assignerCommand(env), putCommand(env),
			sourceCommand(env), viewCommand(env), statusCommand(env), watchmanCommand(env), agentCommand(env), backupSeatCommand(env),
			grantsCommand(env), demoCommand(env), demoModuleCommand(env)},
		VariablesOf: variablesOf,
	}, args)
}
