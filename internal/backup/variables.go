package backup

import (
	"slices"
	"strconv"

	"github.com/JorisJonkers-dev/delivery/internal/settings"
)

// The variables backup reads beside its methods' own, grouped as its
// commands read them, for their --help and for the manifests' tests.
var (
	// JobVariables are what every method's run reads.
	JobVariables = []settings.Variable{
		{Name: "BACKUP_RETAIN", Default: settings.Required, Meaning: "scheduled generations of the method to keep, a whole number of at least 1"},
		{Name: "BACKUP_ROLLBACK", Default: settings.Unset, Meaning: "a Rollback's request id; the run writes a rollback copy instead"},
		ClaimVariable,
	}
	// ClaimVariable is the backup claim's folder.
	ClaimVariable = settings.Variable{Name: "BACKUP_DIR", Default: "/backup", Meaning: "the backup claim"}
	// DestinationVariables say where the off-cluster copies are: the
	// methods copy there, restore and drill read from there.
	DestinationVariables = []settings.Variable{
		{Name: "BACKUP_OFF_CLUSTER", Default: settings.Unset, Meaning: "s3://bucket[/prefix]: where the off-cluster copies are"},
		{Name: "BACKUP_OFF_CLUSTER_PATH", Default: RequiredWithDestination, Meaning: "this volume's folder under the prefix"},
		{Name: "AWS_ENDPOINT_URL", Default: RequiredWithDestination, Meaning: "the provider's S3 endpoint, http(s)://host[:port]"},
		{Name: "AWS_ACCESS_KEY_ID", Default: RequiredWithDestination, Meaning: "the provider's access key"},
		{Name: "AWS_SECRET_ACCESS_KEY", Default: RequiredWithDestination, Meaning: "the provider's secret key"},
		{Name: "AWS_REGION", Default: "us-east-1", Meaning: "the region requests are signed for"},
	}
	// CopyVariables are what a method's run reads to copy off the cluster.
	CopyVariables = []settings.Variable{
		{Name: "BACKUP_OFF_CLUSTER_RECIPIENT", Default: RequiredWithDestination, Meaning: "the age X25519 public key (age1…) every copy is encrypted to"},
		{Name: "BACKUP_OFF_CLUSTER_PART_MIB", Default: strconv.Itoa(DefaultPartSize >> 20), Meaning: "copies larger than this go as a multipart upload of parts this size (5-5120)"},
	}
)

// RequiredWithDestination is the Default of a variable that must be set
// when BACKUP_OFF_CLUSTER is.
const RequiredWithDestination = "required with a destination"

// VariablesOf are the variables the command of method m reads.
func VariablesOf(m Method) []settings.Variable {
	return slices.Concat(JobVariables, m.Variables(), DestinationVariables, CopyVariables)
}
