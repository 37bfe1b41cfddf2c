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
	claimVariable  = settings.Variable{Name: "BACKUP_DIR", Default: "/backup", Meaning: "the backup claim"}
	filesVariables = []settings.Variable{
		{Name: "BACKUP_SOURCE_DIR", Default: "/data", Meaning: "the volume (read-only); must not contain BACKUP_DIR"},
	}
	postgresVariables = []settings.Variable{
		{Name: "BACKUP_HOST", Default: settings.Required, Meaning: "the PostgreSQL server's host"},
		{Name: "BACKUP_PORT", Default: "5432", Meaning: "its port"},
		{Name: "PGUSER", Default: settings.Required, Meaning: "the dump login; other libpq variables such as PGSSLMODE pass through to pg_dumpall"},
		{Name: "PGPASSWORD", Default: settings.Required, Meaning: "its password"},
		{Name: "BACKUP_PG_DUMPALL", Default: "pg_dumpall", Meaning: "the program to run; the image sets the path of its major version"},
	}
	rabbitmqVariables = []settings.Variable{
		{Name: "BACKUP_HOST", Default: settings.Required, Meaning: "the management API's host"},
		{Name: "BACKUP_PORT", Default: "15672", Meaning: "its port"},
		{Name: "RABBITMQ_USERNAME", Default: settings.Required, Meaning: "the management API login"},
		{Name: "RABBITMQ_PASSWORD", Default: settings.Required, Meaning: "its password"},
	}
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

// variablesOf are the variables command reads; "backup" reads them all.
func variablesOf(command string) []settings.Variable {
	switch command {
	case "files":
		return slices.Concat(jobVariables, filesVariables, destinationVariables, copyVariables)
	case "postgres":
		return slices.Concat(jobVariables, postgresVariables, destinationVariables, copyVariables)
	case "rabbitmq":
		return slices.Concat(jobVariables, rabbitmqVariables, destinationVariables, copyVariables)
	case "restore":
		return slices.Concat([]settings.Variable{{Name: claimVariable.Name, Default: claimVariable.Default,
			Meaning: "the backup claim, read with --claim"}}, destinationVariables)
	case "drill":
		return destinationVariables
	case "backup":
		port := settings.Variable{Name: "BACKUP_PORT", Default: "5432 / 15672", Meaning: "postgres, rabbitmq: its port"}
		return slices.Concat(jobVariables, filesVariables,
			[]settings.Variable{{Name: "BACKUP_HOST", Default: "required for postgres, rabbitmq", Meaning: "the server or the management API's host"}, port},
			postgresVariables[2:], rabbitmqVariables[2:], destinationVariables, copyVariables)
	default:
		return nil
	}
}
