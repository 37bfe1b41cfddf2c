// Package boundaries holds the services' packages apart: each service reads
// what another also reads through a package no service owns (the release
// path's read model, the pod callers' rule, the release model), never
// through another service's package, so that a change to one service's
// inside lands in that service alone. Test files alone.
package boundaries

import (
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/JorisJonkers-dev/delivery/"

// services names the service each package under internal/ belongs to, by
// its folder: a folder and everything under it. A package in none is no
// service's: shared, a tool's or the tests'.
var services = map[string]string{
	"internal/releasegate":     "release gate",
	"internal/reporter":        "reporter",
	"internal/releaserecord":   "release record",
	"internal/releasehistory":  "release record", // the release record's read side, served by its binary
	"internal/collector":       "collector",
	"internal/vaultpolicy":     "vault-policy",
	"internal/postgrescatalog": "postgres-catalog",
	"internal/garagecatalog":   "garage-catalog",
	"internal/backup":          "backup",
	"internal/mesh":            "mesh",
}

// allowed are the imports of another service's package that are that
// service's own doing, each with why.
var allowed = map[[2]string]string{
	// The node's backup worker answers with backup's files method, run in
	// the mesh agent's process on the node.
	{"internal/mesh/backupworker", "internal/backup"}: "the backup worker runs backup's files method",
}

// serviceOf is the service a package belongs to, and the folder that says
// so; "" for none.
func serviceOf(pkg string) (service, folder string) {
	rel := strings.TrimPrefix(pkg, module)
	for f, s := range services {
		if rel == f || strings.HasPrefix(rel, f+"/") {
			return s, f
		}
	}
	return "", ""
}

type listed struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

// list is `go list -json` of every package under internal/.
func list(t *testing.T) []listed {
	t.Helper()
	cmd := exec.Command("go", "list", "-json", module+"internal/...")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	var pkgs []listed
	for {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list's answer: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) == 0 {
		t.Fatal("go list named no package")
	}
	return pkgs
}

// TestNoServiceImportsAnother fails for a service's package that depends,
// directly or through a shared package, on another service's package.
func TestNoServiceImportsAnother(t *testing.T) {
	seen := map[string]bool{}
	for _, p := range list(t) {
		service, _ := serviceOf(p.ImportPath)
		if service == "" {
			continue
		}
		seen[service] = true
		direct := map[string]bool{}
		for _, i := range p.Imports {
			direct[i] = true
		}
		for _, dep := range p.Deps {
			other, _ := serviceOf(dep)
			if other == "" || other == service {
				continue
			}
			from, to := strings.TrimPrefix(p.ImportPath, module), strings.TrimPrefix(dep, module)
			if _, ok := allowed[[2]string{from, to}]; ok && direct[dep] {
				continue
			}
			how := "indirectly"
			if direct[dep] {
				how = "directly"
			}
			t.Errorf("%s (the %s) imports %s (the %s) %s: read what both need through a package no service owns", from, service, to, other, how)
		}
	}
	// A folder renamed away would leave its service unchecked.
	for folder, service := range services {
		if !seen[service] {
			t.Errorf("no package of the %s under %s: the table above is out of date", service, folder)
		}
	}
}
