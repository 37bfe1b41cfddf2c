package main

import (
	"slices"
	"strconv"

	"github.com/JorisJonkers-dev/delivery/internal/backup"
	"github.com/JorisJonkers-dev/delivery/internal/settings"
)

// The variables backup reads, grouped as its commands read them, for their
// --help.
var (
	jobVariables = []settings.Variable{
		{Name: "BACKUP_RETAIN", Default: settings.Required, Meaning: "scheduled generations of the method to keep, a whole number of at least 1"},
		{Name: "BACKUP_ROLLBACK", Default: settings.Unset, Meaning: "a Rollback's request id; the run writes a rollback copy instead"},
		claimVariable,
	}
	claimVariable = settings.Variable{Name: "BACKUP_DIR", Default: "/backup", Meaning: "the backup claim"}
	// destinationVariables say where the off-cluster copies are: the
	// methods copy there, restore and drill read from there.
	destinationVariables = []settings.Variable{
		{Name: "BACKUP_OFF_CLUSTER", Default: settings.Unset, Meaning: "s3://bucket[/prefix]: where the off-cluster copies are"},
		{Name: "BACKUP_OFF_CLUSTER_PATH", Default: "required with a destination", Meaning: "this volume's folder under the prefix"},
		{Name: "AWS_ENDPOINT_URL", Default: "required with a destination", Meaning: "the provider's S3 endpoint, http(s)://host[:port]"},
		{Name: "AWS_ACCESS_KEY_ID", Default: "required with a destination", Meaning: "the provider's access key"},
		{Name: "AWS_SECRET_ACCESS_KEY", Default: "required with a destination", Meaning: "the provider's secret key"},
		{Name: "AWS_REGION", Default: "us-east-1", Meaning: "the region requests are signed for"},
	}
	copyVariables = []settings.Variable{
		{Name: "BACKUP_OFF_CLUSTER_RECIPIENT", Default: "required with a destination", Meaning: "the age X25519 public key (age1…) every copy is encrypted to"},
		{Name: "BACKUP_OFF_CLUSTER_PART_MIB", Default: strconv.Itoa(backup.DefaultPartSize >> 20), Meaning: "copies larger than this go as a multipart upload of parts this size (5-5120)"},
	}
)

// sharedVariables stand, in the help of backup itself, for the variables
// more than one method reads, each named once for all of them.
var sharedVariables = map[string]settings.Variable{
	"BACKUP_HOST": {Name: "BACKUP_HOST", Default: "required for postgres, rabbitmq", Meaning: "the server or the management API's host"},
	"BACKUP_PORT": {Name: "BACKUP_PORT", Default: "5432 / 15672", Meaning: "postgres, rabbitmq: its port"},
}

// methodVariables are the variables of every method, in the order the
// methods name them, each once.
func methodVariables() []settings.Variable {
	var all []settings.Variable
	seen := map[string]bool{}
	for _, m := range backup.Methods() {
		for _, v := range m.Variables() {
			if seen[v.Name] {
				continue
			}
			seen[v.Name] = true
			if shared, ok := sharedVariables[v.Name]; ok {
				v = shared
			}
			all = append(all, v)
		}
	}
	return all
}

// variablesOf are the variables command reads; "backup" reads them all.
func variablesOf(command string) []settings.Variable {
	if m, ok := backup.MethodNamed(command); ok {
		return slices.Concat(jobVariables, m.Variables(), destinationVariables, copyVariables)
	}
	switch command {
	case "restore":
		return slices.Concat([]settings.Variable{{Name: claimVariable.Name, Default: claimVariable.Default,
			Meaning: "the backup claim, read with --claim"}}, destinationVariables)
	case "drill":
		return destinationVariables
	case "backup":
		return slices.Concat(jobVariables, methodVariables(), destinationVariables, copyVariables)
	default:
		return nil
	}
}
