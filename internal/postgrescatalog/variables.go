package postgrescatalog

import (
	"slices"

	"github.com/JorisJonkers-dev/delivery/internal/settings"
	"github.com/JorisJonkers-dev/delivery/internal/vaultlogin"
)

// Variables are the variables the job's binary reads, for its --help and for
// the manifests' tests, which hold what a Job sets to them.
var Variables = slices.Concat([]settings.Variable{{Name: "CATALOG_FILE", Default: settings.Required,
	Meaning: "the catalog file (the mounted ConfigMap's key)"}},
	vaultlogin.Variables("postgres-catalog"),
	[]settings.Variable{{Name: "PGSSLROOTCERT", Default: "the system's roots", Meaning: "CA bundle for sslmode verify-ca/verify-full"}})
