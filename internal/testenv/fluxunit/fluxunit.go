// Package fluxunit writes a Project's Flux unit into a test's API server as
// the release path reads it: the OCIRepository project-<name> pinned by
// digest, and the Kustomization applying it with the Rollout annotations and
// the status kustomize-controller would have written. No Flux controller
// runs beside that API server, so the status is the test's to set; the
// Reporter's and the release record's tests share this one writer so that
// they read the same unit.
package fluxunit

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/JorisJonkers-dev/delivery/internal/releasepath"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
)

// transitionAt stamps every condition written: nothing on the release path
// reads a unit's condition times, but the Flux CRDs require one.
const transitionAt = "2026-11-30T10:00:00Z"

// Unit is one Project's unit.
type Unit struct {
	// Namespace is Flux's; both objects are named project-<Project>.
	Namespace, Project string
	// Pin is the digest the OCIRepository is pinned to.
	Pin string
	// Repository, Version, URL and Digest are the Rollout annotations, URL
	// left out when empty and Digest the Pin when empty. A unit with no
	// Repository carries no Rollout annotation at all.
	Repository, Version, URL, Digest string
	// Applied and Attempted are the Kustomization's lastAppliedRevision and
	// lastAttemptedRevision; Origin, when set, its
	// lastAppliedOriginRevision.
	Applied, Attempted, Origin string
	// Ready, Reason and Message are its Ready condition; True and
	// ReconciliationSucceeded when Ready is empty.
	Ready, Reason, Message string
	// Inventory are the objects it applied.
	Inventory []Entry
	// Source, when set, is the OCIRepository's Ready condition.
	Source *SourceReady
}

// Entry is one object of a unit's inventory.
type Entry struct {
	// ID is Flux's <namespace>_<name>_<group>_<kind>.
	ID string
	// Version is the object's API version within its group.
	Version string
}

// Canary is the inventory entry of a Flagger Canary.
func Canary(namespace, name string) Entry {
	return Entry{ID: namespace + "_" + name + "_flagger.app_Canary", Version: "v1beta1"}
}

// Deployment is the inventory entry of a Deployment.
func Deployment(namespace, name string) Entry {
	return Entry{ID: namespace + "_" + name + "_apps_Deployment", Version: "v1"}
}

// SourceReady is an OCIRepository's Ready condition, written as
// source-controller writes a failed fetch: stamped with the generation it
// speaks of, status.observedGeneration left unset as no fetch succeeded.
type SourceReady struct {
	Status, Reason, Message string
	// Generation is the spec the condition speaks of: 1, the unit's pin as
	// written; 0, a spec before it.
	Generation int64
}

// YAML is the unit as two YAML documents.
func (u Unit) YAML() string {
	annotations := "{}"
	if u.Repository != "" {
		digest := u.Digest
		if digest == "" {
			digest = u.Pin
		}
		annotations = fmt.Sprintf("{%s: %s, %s: %q, %s: %q", releasepath.AnnotationRepository, u.Repository,
			releasepath.AnnotationVersion, u.Version, releasepath.AnnotationDigest, digest)
		if u.URL != "" {
			annotations += fmt.Sprintf(", %s: %q", releasepath.AnnotationURL, u.URL)
		}
		annotations += "}"
	}
	if u.Ready == "" {
		u.Ready, u.Reason = "True", "ReconciliationSucceeded"
	}
	source := ""
	if s := u.Source; s != nil {
		source = fmt.Sprintf(`
status:
  conditions:
    - {type: Ready, status: %q, reason: %s, message: %q, observedGeneration: %d, lastTransitionTime: %q}`,
			s.Status, s.Reason, s.Message, s.Generation, transitionAt)
	}
	origin := ""
	if u.Origin != "" {
		origin = fmt.Sprintf("\n  lastAppliedOriginRevision: %q", u.Origin)
	}
	entries := make([]string, 0, len(u.Inventory))
	for _, e := range u.Inventory {
		entries = append(entries, fmt.Sprintf("{id: %s, v: %s}", e.ID, e.Version))
	}
	return fmt.Sprintf(`---
apiVersion: source.toolkit.fluxcd.io/v1
kind: OCIRepository
metadata: {name: project-%[1]s, namespace: %[2]s}
spec:
  interval: 10m
  url: oci://registry.example/estate/%[1]s
  ref: {digest: %[3]q}%[4]s
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: project-%[1]s
  namespace: %[2]s
  annotations: %[5]s
spec:
  interval: 10m
  prune: true
  wait: true
  path: ./
  sourceRef: {kind: OCIRepository, name: project-%[1]s}
status:
  lastAppliedRevision: %[6]q
  lastAttemptedRevision: %[7]q%[8]s
  conditions:
    - {type: Ready, status: %[9]q, reason: %[10]s, message: %[11]q, lastTransitionTime: %[12]q}
  inventory: {entries: [%[13]s]}
`, u.Project, u.Namespace, u.Pin, source, annotations, u.Applied, u.Attempted, origin, u.Ready, u.Reason, u.Message, transitionAt,
		strings.Join(entries, ", "))
}

// Apply writes the unit into cp, its status as a controller would; a second
// Apply moves it.
func (u Unit) Apply(t testing.TB, cp *testenv.ControlPlane) {
	t.Helper()
	if _, err := cp.Apply(context.Background(), []byte(u.YAML())); err != nil {
		t.Fatalf("apply the unit of %s: %v", u.Project, err)
	}
}
