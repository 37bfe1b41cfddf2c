// Command backup writes one generation of a volume (files), a PostgreSQL
// server (postgres) or a RabbitMQ broker's definitions (rabbitmq) onto the
// backup claim, copies it off the cluster when a destination is set, prunes,
// and exits: 0 only when the generation is complete and durable (and, with a
// destination, copied and verified). "backup restore" and "backup drill" read
// the generations back.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/backup"
	"github.com/JorisJonkers-dev/delivery/internal/server"
	"github.com/JorisJonkers-dev/delivery/internal/settings"
)

func main() {
	ctx, stop := server.SignalContext(context.Background())
	code := run(ctx, os.Args[1:], os.Getenv, time.Now, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

const usage = "usage: backup files|postgres|rabbitmq | backup restore [flags] [generation] | backup drill [flags]"

// run is the whole job, handed its arguments, environment, clock and
// outputs so a test runs it end to end.
func run(ctx context.Context, args []string, getenv func(string) string, now func() time.Time, stdout, stderr io.Writer) int {
	logger := slog.New(slog.NewJSONHandler(stderr, nil))
	if len(args) > 0 && (args[0] == "restore" || args[0] == "drill") {
		return runRestore(ctx, args, getenv, now, stdout, logger)
	}
	job, err := configure(args, getenv, logger)
	if err != nil {
		logger.Error("backup did not start", "error", err.Error())
		return 2
	}
	job.Now = now
	job.Logger = logger
	if copier, ok := job.OffCluster.(*backup.OffClusterCopy); ok {
		copier.Now, copier.Logger = now, logger
	}
	result, err := job.Run(ctx)
	if err != nil {
		logger.Error("backup failed", "method", job.Method.Name(), "error", err.Error())
		return 1
	}
	logger.Info("backup complete", "method", job.Method.Name(), "generation", result.Generation.Name(),
		"bytes", result.Size, "seconds", result.Took.Seconds(), "pruned", len(result.Pruned))
	return 0
}

// configure reads the method from args and everything else from the
// environment; the first missing or malformed value stops the run before
// anything is written.
func configure(args []string, getenv func(string) string, logger *slog.Logger) (backup.Job, error) {
	if len(args) != 1 {
		return backup.Job{}, errors.New(usage)
	}
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
	job := backup.Job{Dir: dir, Retain: retain, Request: request}
	switch args[0] {
	case "files":
		source := env.String("BACKUP_SOURCE_DIR", "/data")
		if inside(dir, source) {
			return backup.Job{}, fmt.Errorf("BACKUP_DIR %s lies inside BACKUP_SOURCE_DIR %s: the archive would hold itself", dir, source)
		}
		job.Method = backup.Files{Source: source, Staging: filepath.Join(dir, backup.StagingDir), Logger: logger}
	case "postgres":
		job.Method = backup.Postgres{
			Program:  env.String("BACKUP_PG_DUMPALL", "pg_dumpall"),
			Host:     env.Required("BACKUP_HOST"),
			Port:     env.PositiveInt("BACKUP_PORT", 5432),
			User:     env.Required("PGUSER"),
			Password: env.Required("PGPASSWORD"),
		}
	case "rabbitmq":
		job.Method = backup.RabbitMQ{
			Host:     env.Required("BACKUP_HOST"),
			Port:     env.PositiveInt("BACKUP_PORT", 15672),
			Username: env.Required("RABBITMQ_USERNAME"),
			Password: env.Required("RABBITMQ_PASSWORD"),
		}
	default:
		return backup.Job{}, fmt.Errorf("unknown method %q: %s", args[0], usage)
	}
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

// inside reports whether dir is source or lies below it.
func inside(dir, source string) bool {
	rel, err := filepath.Rel(filepath.Clean(source), filepath.Clean(dir))
	return err == nil && (rel == "." || (rel != ".." && !strings.HasPrefix(rel, "../")))
}
