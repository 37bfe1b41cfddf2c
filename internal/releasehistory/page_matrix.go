package releasehistory

import (
	"cmp"
	"slices"
	"time"

	rr "github.com/JorisJonkers-dev/delivery/internal/releaserecord"
)

// Place is one cluster and env: a column of the matrix.
type Place struct{ Cluster, Env string }

// Matrix is what runs where now: a row per app, a cell per place.
type Matrix struct {
	Places []Place
	Apps   []MatrixRow
}

// MatrixRow is one app's cells, one per Place of the matrix, in its order.
type MatrixRow struct {
	App   string
	Cells []Cell
}

// Cell is one app in one place: the release that serves and the newer one
// not serving yet (or that failed), either nil.
type Cell struct {
	Serving, InFlight *CellRelease
}

// CellRelease is a release as a cell shows it.
type CellRelease struct {
	ReleaseID, Version string
	State              rr.State
	Since              time.Time
	// Why is the record's first failure; "" when there is none.
	Why string
	// Held is why the Release Gate holds the release; "" when it does not.
	Held string
}

// heldOf is the gate's reason for holding a release that does not serve
// yet; a release that serves, or is done, is held by no gate now.
func heldOf(r rr.Record) string {
	if !pending(r) {
		return ""
	}
	return r.Held
}

// serves says a record's release runs now: healthy, or degraded after it
// reached healthy (drift on a running release, not a failed change).
func serves(r rr.Record) bool {
	return r.State == rr.StateHealthy || (r.State == rr.StateDegraded && !r.HealthyAt.IsZero())
}

// pending says a record is newer work that does not serve: on its way, or
// failed before it served. Superseded, rolled back and closed are done.
func pending(r rr.Record) bool {
	switch r.State {
	case rr.StateMerged, rr.StateProgressing, rr.StateSyncFailed, rr.StateAborted:
		return true
	case rr.StateDegraded:
		return r.HealthyAt.IsZero()
	case rr.StateHealthy, rr.StateSuperseded, rr.StateRolledBack, rr.StateClosed:
		return false
	}
	return false
}

// MatrixOf is what runs where from the records, newest first (NewestFirst):
// per app and place the newest release that serves, and the newest release
// of all when it is newer than that one and pending.
func MatrixOf(recs []rr.Record) Matrix {
	type cellState struct {
		cell      Cell
		seenNewer bool
	}
	cells := map[ServiceKey]*cellState{}
	places, apps := map[Place]bool{}, map[string]bool{}
	for _, r := range recs {
		k := KeyOf(r)
		c := cells[k]
		if c == nil {
			c = &cellState{}
			cells[k] = c
			places[Place{Cluster: r.Cluster, Env: r.Env}], apps[r.App] = true, true
		}
		if c.cell.Serving != nil {
			continue
		}
		switch {
		case serves(r):
			c.cell.Serving = cellOf(r)
		case !c.seenNewer && pending(r):
			c.cell.InFlight = cellOf(r)
		}
		// Only the newest record may be in flight: an older pending one was
		// overtaken by the newer.
		c.seenNewer = true
	}
	m := Matrix{Places: sortedKeys(places, func(a, b Place) int { return cmp.Or(cmp.Compare(a.Cluster, b.Cluster), cmp.Compare(a.Env, b.Env)) })}
	for _, app := range sortedKeys(apps, cmp.Compare[string]) {
		row := MatrixRow{App: app, Cells: make([]Cell, len(m.Places))}
		for i, p := range m.Places {
			if c := cells[ServiceKey{App: app, Env: p.Env, Cluster: p.Cluster}]; c != nil {
				row.Cells[i] = c.cell
			}
		}
		m.Apps = append(m.Apps, row)
	}
	return m
}

func cellOf(r rr.Record) *CellRelease {
	c := &CellRelease{ReleaseID: r.ReleaseID, State: r.State, Since: r.StateAt, Why: r.LastError, Held: heldOf(r)}
	if id, err := rr.ParseReleaseID(r.ReleaseID); err == nil {
		c.Version = id.Version()
	}
	return c
}

func sortedKeys[K comparable](m map[K]bool, order func(a, b K) int) []K {
	out := make([]K, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.SortFunc(out, order)
	return out
}

// RollbackTargets is, per service, the images it may be rolled back to and
// the release that ran each: the newest keep that reached healthy, as
// RollbackEligible answers, worked out once for every row of the page.
func RollbackTargets(recs []rr.Record, keep int) map[ServiceKey]map[string]string {
	out := map[ServiceKey]map[string]string{}
	for k, group := range healthyByService(recs) {
		images := map[string]string{}
		for i := 0; i < len(group) && i < keep; i++ {
			if _, ok := images[group[i].Image]; !ok {
				images[group[i].Image] = group[i].ReleaseID
			}
		}
		out[k] = images
	}
	return out
}
