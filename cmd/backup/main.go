package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/JorisJonkers-dev/delivery/internal/backup"
	"github.com/JorisJonkers-dev/delivery/internal/cli"
	"github.com/JorisJonkers-dev/delivery/internal/settings"
)

func main() {
	cli.Main(func(ctx context.Context) int { return run(ctx, os.Args[1:], os.Getenv, time.Now, os.Stdout, os.Stderr) })
}

func exitWith(code int) error {
	if code == 0 {
		return nil
	}
	return cli.Exit(code)
}

// run is the whole command, handed its arguments, environment, clock and
// outputs so a test runs it end to end. A mistake on the command line exits
// 2 with the usage on stderr before anything reads the environment.
func run(ctx context.Context, args []string, getenv func(string) string, now func() time.Time, stdout, stderr io.Writer) int {
	env := cli.NewEnv(getenv, stdout, stderr)
	env.Now = now
	commands := []*cobra.Command{}
	for _, m := range backup.Methods() {
		commands = append(commands, methodCommand(env, m))
	}
	// restore and drill log only where they promise JSON lines (--json, or
	// no terminal), so theirs stays JSON whatever stderr is.
	jsonIn := env
	jsonIn.Log = slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: env.Level()}))
	return env.Execute(ctx, cli.Command{
		Service: cli.Service{Name: "backup", Variables: variablesOf("backup"), Summary: "backup writes one generation of a volume (files), a PostgreSQL server (postgres) or a RabbitMQ\n" +
			"broker's definitions (rabbitmq) onto the backup claim, copies it off the cluster when a destination\n" +
			"is set, prunes, and exits: 0 only when the generation is complete and durable. \"backup restore\" and\n" +
			"\"backup drill\" read the generations back. Its environment configures it."},
		Short:       "Write a generation onto the backup claim, copy it off the cluster, and read generations back",
		Commands:    append(commands, restoreCommand(jsonIn), drillCommand(jsonIn)),
		VariablesOf: variablesOf,
	}, args)
}

func methodCommand(in cli.Env, m backup.Method) *cobra.Command {
	method := m.Name()
	return &cobra.Command{
		Use:   method,
		Short: m.Summary(),
		Long: "backup " + method + " writes one generation onto the backup claim, copies it off the cluster when\n" +
			"BACKUP_OFF_CLUSTER is set, prunes, and exits 0 only when the generation is complete and durable.\n" +
			"It logs at LOG_LEVEL; a bad variable exits 2 before anything is written, a failed run exits 1.",
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return runJob(c.Context(), in, method) },
	}
}

// runJob writes, copies and prunes one generation of method.
func runJob(ctx context.Context, in cli.Env, method string) error {
	logger := in.Log
	job, err := configure(method, in.Getenv, logger)
	if err != nil {
		return cli.BadSetting(err)
	}
	job.Now = in.Now
	job.Logger = logger
	if copier, ok := job.OffCluster.(*backup.OffClusterCopy); ok {
		copier.Now, copier.Logger = in.Now, logger
	}
	result, err := job.Run(ctx)
	if err != nil {
		return cli.Failed("backup failed", err, "method", job.Method.Name())
	}
	logger.Info("backup complete", "method", job.Method.Name(), "generation", result.Generation.Name(),
		"bytes", result.Size, "seconds", result.Took.Seconds(), "pruned", len(result.Pruned))
	return nil
}

// configure reads the run of method from the environment, the method's own
// variables as the method reads them; the first missing or malformed value
// stops the run before anything is written.
func configure(method string, getenv func(string) string, logger *slog.Logger) (backup.Job, error) {
	env := settings.New(getenv)
	retain := env.PositiveInt("BACKUP_RETAIN", 0)
	request := env.String("BACKUP_ROLLBACK", "")
	dir := env.String("BACKUP_DIR", "/backup")
	if err := env.Err(); err != nil {
		return backup.Job{}, err
	}
	if request != "" {
		if err := backup.ValidRequest(request); err != nil {
			return backup.Job{}, fmt.Errorf("BACKUP_ROLLBACK: %w", err)
		}
	}
	m, known := backup.MethodNamed(method)
	if !known {
		return backup.Job{}, fmt.Errorf("unknown method %q", method)
	}
	configured, err := m.Configure(env, dir, logger)
	if err != nil {
		return backup.Job{}, err
	}
	job := backup.Job{Dir: dir, Retain: retain, Request: request, Method: configured}
	if err := env.Err(); err != nil {
		return backup.Job{}, err
	}
	copier, err := offCluster(getenv, retain)
	if err != nil {
		return backup.Job{}, err
	}
	if copier != nil {
		job.OffCluster = copier
	}
	return job, nil
}
