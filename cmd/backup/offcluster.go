package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"filippo.io/age"
	"github.com/spf13/cobra"

	"github.com/JorisJonkers-dev/delivery/internal/backup"
	"github.com/JorisJonkers-dev/delivery/internal/cli"
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

// restoreOptions are the flags of "backup restore".
type restoreOptions struct {
	identity string
	claim    bool
	list     bool
	target   string
	json     bool
}

func restoreCommand(in cli.Env) *cobra.Command {
	var o restoreOptions
	c := &cobra.Command{
		Use:   "restore [--claim] [--identity FILE] [--json] --target DIR GENERATION",
		Short: "Read a generation back into a folder, or list the generations",
		Example: "  backup restore --list\n" +
			"  backup restore --identity key.txt --target /restore files-20261026T024500Z.tar.gz\n" +
			"  backup restore --claim --target /restore postgres-20261026T031500Z.sql.gz",
		DisableFlagsInUseLine: true,
		Long: "backup restore reads a generation back from the destination (BACKUP_OFF_CLUSTER) or, with --claim,\n" +
			"from BACKUP_DIR: an off-cluster copy is checked against the provider's checksums as it streams in,\n" +
			"decrypted with the age identity file and decompressed, and nothing appears in the target until all\n" +
			"of it read back whole. On a terminal it shows its progress and a summary; elsewhere, or with --json,\n" +
			"it logs JSON lines.",
		Args: func(_ *cobra.Command, args []string) error {
			switch {
			case o.list && len(args) > 0:
				return fmt.Errorf("--list takes no generation, got %q", args[0])
			case o.list:
				return nil
			case len(args) != 1:
				return errors.New("name the one generation to restore")
			case o.target == "":
				return errors.New("--target: name the folder to restore into")
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error { return exitWith(runRestore(c.Context(), in, o, args)) },
	}
	f := c.Flags()
	f.StringVar(&o.identity, "identity", "", "the age identity `FILE` that decrypts the off-cluster copies")
	f.BoolVar(&o.claim, "claim", false, "read the generations on the claim (BACKUP_DIR) instead of the destination")
	f.BoolVar(&o.list, "list", false, "list the generations, newest first")
	f.StringVar(&o.target, "target", "", "the folder `DIR` to restore into, made if absent")
	f.BoolVar(&o.json, "json", false, "log JSON lines even on a terminal")
	return c
}

// runRestore is "backup restore": one generation into a folder, or the list.
func runRestore(ctx context.Context, in cli.Env, o restoreOptions, args []string) int {
	report := newReporter(o.json, in.Stderr, in.Log)
	restorer, err := restorerFor(in.Getenv, o.claim, o.identity, o.list)
	if err != nil {
		report.notStarted("restore", err)
		return 2
	}
	if o.list {
		gens, err := restorer.List(ctx)
		if err != nil {
			report.listFailed(err)
			return 1
		}
		for _, g := range gens {
			fmt.Fprintln(in.Stdout, g.Name())
		}
		return 0
	}
	g, err := parseGeneration(args[0])
	if err != nil {
		report.notStarted("restore", err)
		return 2
	}
	restorer.Progress = report
	result, err := restorer.Restore(ctx, g, o.target)
	if err != nil {
		report.restoreFailed(g, err)
		return 1
	}
	report.restored(restorer.Source.String(), result)
	printLoadCommands(in.Stdout, g, result.Path)
	return 0
}

// drillOptions are the flags of "backup drill".
type drillOptions struct {
	identity string
	scratch  string
	claim    bool
	json     bool
}

func drillCommand(in cli.Env) *cobra.Command {
	var o drillOptions
	c := &cobra.Command{
		Use:                   "drill --identity FILE [--scratch DIR] [--json]",
		DisableFlagsInUseLine: true,
		Short:                 "Restore the newest off-cluster copy into a scratch folder and check it",
		Long: "backup drill restores the newest off-cluster copy into a folder it makes under the scratch folder,\n" +
			"checks it (the archive reads whole, every SQLite database passes integrity_check, a dump is whole,\n" +
			"definitions parse), removes the folder, and exits 1 when any check fails. On a terminal it shows its\n" +
			"progress and a summary; elsewhere, or with --json, it logs JSON lines.",
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return exitWith(runDrill(c.Context(), in, o)) },
	}
	f := c.Flags()
	f.StringVar(&o.identity, "identity", "", "the age identity `FILE` that decrypts the off-cluster copies")
	f.StringVar(&o.scratch, "scratch", os.TempDir(), "the folder `DIR` the drill restores into and empties")
	f.BoolVar(&o.json, "json", false, "log JSON lines even on a terminal")
	// The drill reads the destination alone; --claim is taken to say so.
	f.BoolVar(&o.claim, "claim", false, "refused: the drill restores the newest off-cluster copy")
	_ = f.MarkHidden("claim")
	return c
}

// runDrill is "backup drill".
func runDrill(ctx context.Context, in cli.Env, o drillOptions) int {
	report := newReporter(o.json, in.Stderr, in.Log)
	if o.claim {
		report.notStarted("drill", errors.New("the drill restores the newest off-cluster copy: drop --claim"))
		return 2
	}
	restorer, err := restorerFor(in.Getenv, false, o.identity, false)
	if err != nil {
		report.notStarted("drill", err)
		return 2
	}
	restorer.Now = in.Now
	restorer.Progress = report
	result, err := restorer.Drill(ctx, o.scratch)
	if len(result.Ahead) > 0 {
		report.passedOver(result.Ahead)
	}
	if err != nil {
		report.drillFailed(err)
		return 1
	}
	report.drillPassed(restorer.Source.String(), result)
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
		return backup.Restorer{Source: backup.ClaimSource{Dir: settings.New(getenv).String("BACKUP_DIR", "/backup")}}, nil
	}
	if getenv("BACKUP_OFF_CLUSTER") == "" {
		return backup.Restorer{}, errors.New("BACKUP_OFF_CLUSTER is not set: name the destination, or restore from the claim with --claim")
	}
	store, dest, err := destination(getenv)
	if err != nil {
		return backup.Restorer{}, err
	}
	source := backup.StoreSource{Store: store, Destination: dest}
	if listOnly {
		return backup.Restorer{Source: source}, nil
	}
	if identityFile == "" {
		return backup.Restorer{}, errors.New("--identity: the off-cluster copies are age-encrypted; name the identity file")
	}
	f, err := os.Open(identityFile) //nolint:gosec // the operator names the identity file
	if err != nil {
		return backup.Restorer{}, fmt.Errorf("--identity: %w", err)
	}
	defer f.Close()
	if source.Identities, err = age.ParseIdentities(f); err != nil {
		return backup.Restorer{}, fmt.Errorf("--identity %s: %w", identityFile, err)
	}
	return backup.Restorer{Source: source}, nil
}

// printLoadCommands says how to load a restored dump or definitions, as
// the generation's method puts it; a files generation is already in place.
func printLoadCommands(w io.Writer, g backup.Generation, path string) {
	if m, ok := backup.MethodNamed(g.Method); ok {
		fmt.Fprint(w, m.LoadHint(path))
	}
}

func generationNames(gens []backup.Generation) []string {
	names := make([]string, len(gens))
	for i, g := range gens {
		names[i] = g.Name()
	}
	return names
}
