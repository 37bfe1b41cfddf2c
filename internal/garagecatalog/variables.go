package garagecatalog

import (
	"github.com/JorisJonkers-dev/delivery/internal/settings"
	"github.com/JorisJonkers-dev/delivery/internal/vaultlogin"
)

// Variables are the variables the job's binary reads, for its --help and for
// the manifests' tests, which hold what a Job sets to them.
var Variables = append([]settings.Variable{{Name: "CATALOG_FILE", Default: settings.Required,
	Meaning: "the catalog, one JSON document (the catalog ConfigMap's key, as mounted)"}},
	vaultlogin.Variables("garage-catalog")...)
