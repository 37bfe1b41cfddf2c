package ociimage

import (
	"fmt"
	"slices"
	"strings"
)

// Target is one image: the command whose binary it carries and how the image
// starts it. Several targets may share a command (backup's methods), and
// then the same binary.
type Target struct {
	Name    string   // the image's name: bin/images/<Name>.tar, its name in the layout, its stage in deploy/Dockerfile
	Command string   // the folder under cmd/, which is also the binary's name
	Args    []string // what the entrypoint passes the binary before a run's own arguments
	// Description is the image's org.opencontainers.image.description label.
	Description string
}

// BinaryDir is where every image keeps its binary, as deploy/Dockerfile's
// stages do.
const BinaryDir = "/usr/local/bin"

// NoPgDumpall says what the backup-postgres image lacks, for the help, the
// label and the docs to say the same thing.
const NoPgDumpall = "backup-postgres holds no pg_dumpall: pg_dumpall runs pg_dump through /bin/sh, and these " +
	"images have no shell, so a run fails naming pg_dumpall; the image that dumps is built FROM a " +
	"postgres base of the server's major version (deploy/Dockerfile, --target backup-postgres)"

var targets = []Target{
	{Name: "release-gate", Command: "release-gate", Description: "The Release Gate: answers Flagger's webhooks and reconciles every gated Application"},
	{Name: "collector", Command: "collector", Description: "The Collector: commits the facts only the cluster knows to the Estate repository"},
	{Name: "reporter", Command: "reporter", Description: "The Reporter: reports every release to GitHub as a Deployment status"},
	{Name: "release-record", Command: "release-record", Description: "The release record: one record per release, and its events sent as CDEvents"},
	{Name: "vault-policy", Command: "vault-policy", Description: "The job that applies the Vault policies and roles deploy-kit renders"},
	{Name: "postgres-catalog", Command: "postgres-catalog", Description: "The job that applies a PostgreSQL server's database catalog"},
	{Name: "garage-catalog", Command: "garage-catalog", Description: "The job that applies the bucket catalog to Garage"},
	{Name: "mesh", Command: "mesh", Description: "Node delivery: mesh assigner writes the wants, mesh key, compose and put beside it"},
	{Name: "backup-files", Command: "backup", Args: []string{"files"}, Description: "backup files: one generation of a volume"},
	{Name: "backup-postgres", Command: "backup", Args: []string{"postgres"}, Description: NoPgDumpall},
	{Name: "backup-rabbitmq", Command: "backup", Args: []string{"rabbitmq"}, Description: "backup rabbitmq: one generation of a broker's definitions"},
}

// Targets are every image this module ships, in the order they are built.
func Targets() []Target {
	out := make([]Target, len(targets))
	for i, t := range targets {
		out[i] = t
		out[i].Args = slices.Clone(t.Args)
	}
	return out
}

// Names are the targets' names, for a help text or an error.
func Names() []string {
	names := make([]string, len(targets))
	for i, t := range targets {
		names[i] = t.Name
	}
	return names
}

// Select picks the targets named in list (separated by commas or spaces), in
// the order Targets has them; an empty list is every target. A name that is
// no target is an error naming the ones there are.
func Select(list string) ([]Target, error) {
	names := strings.FieldsFunc(list, func(r rune) bool { return r == ',' || r == ' ' })
	if len(names) == 0 {
		return Targets(), nil
	}
	for _, n := range names {
		if !slices.Contains(Names(), n) {
			return nil, fmt.Errorf("no image is named %q (there are %s)", n, strings.Join(Names(), ", "))
		}
	}
	var out []Target
	for _, t := range Targets() {
		if slices.Contains(names, t.Name) {
			out = append(out, t)
		}
	}
	return out, nil
}

// Entrypoint is the image's entrypoint: the binary, then the target's args.
func (t Target) Entrypoint() []string {
	return append([]string{BinaryDir + "/" + t.Command}, t.Args...)
}

// Package is the package go build is handed for the target's binary.
func (t Target) Package() string { return "./cmd/" + t.Command }
