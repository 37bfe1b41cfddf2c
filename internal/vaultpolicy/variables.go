package vaultpolicy

import (
	"github.com/JorisJonkers-dev/delivery/internal/settings"
	"github.com/JorisJonkers-dev/delivery/internal/vaultlogin"
)

// Variables are the variables the job's binary reads, for its --help and for
// the manifests' tests, which hold what a Job sets to them.
var Variables = append(vaultlogin.Variables("policy-admin"),
	settings.Variable{Name: "POLICIES_DIR", Default: "/policies", Meaning: "where the render's ConfigMap is mounted"})
