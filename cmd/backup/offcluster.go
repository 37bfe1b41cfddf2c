package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"filippo.io/age"

	"github.com/JorisJonkers-dev/delivery/internal/backup"
	"github.com/JorisJonkers-dev/delivery/internal/settings"
)

// offClusterVars are the variables of the off-cluster copy besides the
// provider's keys; setting any of them without the destination is a mistake.
var offClusterVars = []string{"BACKUP_OFF_CLUSTER_PATH", "BACKUP_OFF_CLUSTER_RECIPIENT", "BACKUP_OFF_CLUSTER_PART_MIB"}

// offCluster reads the off-cluster copy's settings. It returns nil when no
// destination is set, and an error for anything set partially or wrongly, so
// a run that was meant to copy never writes a generation it cannot copy.
func offCluster(getenv func(string) string, retain int) (*backup.OffClusterCopy, error) {
	if getenv("BACKUP_OFF_CLUSTER") == "" {
		for _, name := range offClusterVars {
			if getenv(name) != "" {
				return nil, fmt.Errorf("%s is set but BACKUP_OFF_CLUSTER is not: set both, or neither", name)
			}
		}
		return nil, nil //nolint:nilnil // no destination is a valid setting: the copy stays on the claim
	}
	store, dest, err := destination(getenv)
	if err != nil {
		return nil, err
	}
	env := settings.New(getenv)
	rawRecipient := env.Required("BACKUP_OFF_CLUSTER_RECIPIENT")
	partMiB := env.PositiveInt("BACKUP_OFF_CLUSTER_PART_MIB", backup.DefaultPartSize>>20)
	if err := env.Err(); err != nil {
		return nil, err
	}
	recipient, err := backup.ParseRecipient(rawRecipient)
	if err != nil {
		return nil, fmt.Errorf("BACKUP_OFF_CLUSTER_RECIPIENT: %w", err)
	}
	partSize := int64(partMiB) << 20
	if _, err := backup.PlanParts(0, partSize); err != nil {
		return nil, fmt.Errorf("BACKUP_OFF_CLUSTER_PART_MIB: %w", err)
	}
	return &backup.OffClusterCopy{Store: store, Destination: dest, Recipient: recipient, PartSize: partSize, Retain: retain}, nil
}

// destination reads where the copies are and how to reach the provider.
func destination(getenv func(string) string) (*backup.S3Store, backup.Destination, error) {
	env := settings.New(getenv)
	raw := env.Required("BACKUP_OFF_CLUSTER")
	path := env.Required("BACKUP_OFF_CLUSTER_PATH")
	endpoint := env.Required("AWS_ENDPOINT_URL")
	access := env.Required("AWS_ACCESS_KEY_ID")
	secret := env.Required("AWS_SECRET_ACCESS_KEY")
	region := env.String("AWS_REGION", "us-east-1")
	if err := env.Err(); err != nil {
		return nil, backup.Destination{}, err
	}
	dest, err := backup.ParseDestination(raw, path)
	if err != nil {
		return nil, backup.Destination{}, fmt.Errorf("BACKUP_OFF_CLUSTER: %w", err)
	}
	store, err := backup.NewS3Store(backup.S3Settings{Endpoint: endpoint, AccessKey: access, SecretKey: secret,
		Region: region, Bucket: dest.Bucket, Transport: s3Transport})
	if err != nil {
		return nil, backup.Destination{}, err
	}
	return store, dest, nil
}

// s3Transport is nil (minio-go's own) except in tests that watch requests.
var s3Transport http.RoundTripper

// runRestore is "backup restore" and "backup drill".
func runRestore(ctx context.Context, args []string, getenv func(string) string, now func() time.Time, stdout io.Writer, logger *slog.Logger) int {
	command := args[0]
	flags := flag.NewFlagSet("backup "+command, flag.ContinueOnError)
	flags.SetOutput(io.Discard)
	identity := flags.String("identity", "", "age identity file (off-cluster copies)")
	fromClaim := flags.Bool("claim", false, "read the generations on the claim (BACKUP_DIR) instead of the destination")
	list := flags.Bool("list", false, "list the generations, newest first")
	target := flags.String("target", "", "folder to restore into")
	scratch := flags.String("scratch", os.TempDir(), "folder the drill restores into and empties")
	if err := flags.Parse(args[1:]); err != nil {
		logger.Error("backup "+command+" did not start", "error", err.Error())
		return 2
	}
	restorer, err := restorerFor(getenv, *fromClaim, *identity, *list)
	if err != nil {
		logger.Error("backup "+command+" did not start", "error", err.Error())
		return 2
	}
	if command == "drill" {
		if restorer.Store == nil {
			logger.Error("backup drill did not start", "error", "the drill restores the newest off-cluster copy: drop --claim")
			return 2
		}
		restorer.Now = now
		result, err := restorer.Drill(ctx, *scratch)
		if len(result.Ahead) > 0 {
			logger.Warn("the drill passed over copies stamped after its own time; a clock ran ahead when they were written",
				"copies", generationNames(result.Ahead))
		}
		if err != nil {
			logger.Error("drill failed", "error", err.Error())
			return 1
		}
		logger.Info("drill passed", "generation", result.Generation.Name(), "files", result.Files, "sqlite_databases", result.Databases)
		return 0
	}
	if *list {
		gens, err := restorer.List(ctx)
		if err != nil {
			logger.Error("restore failed", "error", err.Error())
			return 1
		}
		for _, g := range gens {
			fmt.Fprintln(stdout, g.Name())
		}
		return 0
	}
	if flags.NArg() != 1 || *target == "" {
		logger.Error("backup restore did not start", "error", "usage: backup restore [--claim] [--identity FILE] --target DIR GENERATION")
		return 2
	}
	g, err := parseGeneration(flags.Arg(0))
	if err != nil {
		logger.Error("backup restore did not start", "error", err.Error())
		return 2
	}
	result, err := restorer.Restore(ctx, g, *target)
	if err != nil {
		logger.Error("restore failed", "generation", g.Name(), "error", err.Error())
		return 1
	}
	logger.Info("restored", "generation", g.Name(), "path", result.Path, "files", result.Files)
	printLoadCommands(stdout, g, result.Path)
	return 0
}

// parseGeneration accepts a generation's name with or without ".age".
func parseGeneration(name string) (backup.Generation, error) {
	return backup.ParseName(strings.TrimSuffix(name, backup.CopySuffix))
}

// restorerFor builds the restorer: the claim with --claim, else the
// destination, whose copies need the identity file to decrypt.
func restorerFor(getenv func(string) string, fromClaim bool, identityFile string, listOnly bool) (backup.Restorer, error) {
	if fromClaim {
		return backup.Restorer{ClaimDir: settings.New(getenv).String("BACKUP_DIR", "/backup")}, nil
	}
	if getenv("BACKUP_OFF_CLUSTER") == "" {
		return backup.Restorer{}, errors.New("BACKUP_OFF_CLUSTER is not set: name the destination, or restore from the claim with --claim")
	}
	store, dest, err := destination(getenv)
	if err != nil {
		return backup.Restorer{}, err
	}
	r := backup.Restorer{Store: store, Destination: dest}
	if listOnly {
		return r, nil
	}
	if identityFile == "" {
		return backup.Restorer{}, errors.New("--identity: the off-cluster copies are age-encrypted; name the identity file")
	}
	f, err := os.Open(identityFile) //nolint:gosec // the operator names the identity file
	if err != nil {
		return backup.Restorer{}, fmt.Errorf("--identity: %w", err)
	}
	defer f.Close()
	if r.Identities, err = age.ParseIdentities(f); err != nil {
		return backup.Restorer{}, fmt.Errorf("--identity %s: %w", identityFile, err)
	}
	return r, nil
}

// printLoadCommands says how to load a restored dump or definitions; a
// files generation is already in place.
func printLoadCommands(w io.Writer, g backup.Generation, path string) {
	switch g.Method {
	case "files":
		fmt.Fprintf(w, "unpacked into %s\n", path)
	case "postgres":
		// The dump creates every role, the superuser the new server already
		// has among them: that one statement fails, and ON_ERROR_STOP would
		// end the load there.
		fmt.Fprintf(w, "restored %s; load it into an empty server as its superuser:\n", path)
		fmt.Fprintf(w, "  psql --no-password --dbname postgres --file %s\n", shellQuote(path))
		fmt.Fprintf(w, "  (one error is expected: the superuser the server already has exists)\n")
	case "rabbitmq":
		fmt.Fprintf(w, "restored %s; import the definitions with either of:\n", path)
		fmt.Fprintf(w, "  rabbitmqctl import_definitions %s\n", shellQuote(path))
		fmt.Fprintf(w, "  curl --fail -u \"$RABBITMQ_USERNAME:$RABBITMQ_PASSWORD\" -H 'content-type: application/json' --data-binary @%s http://<broker>:15672/api/definitions\n", shellQuote(path))
	}
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func generationNames(gens []backup.Generation) []string {
	names := make([]string, len(gens))
	for i, g := range gens {
		names[i] = g.Name()
	}
	return names
}
