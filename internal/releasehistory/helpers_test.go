package releasehistory_test

import (
	"testing"
	"time"

	rr "github.com/JorisJonkers-dev/delivery/internal/releaserecord"
)

// now is the tests' clock: every time is an offset from it.
var now = time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)

func ago(d time.Duration) time.Time { return now.Add(-d) }

const day = 24 * time.Hour

// rec is a record of app docs in prod-eu/prod at version v, in state s
// since at, merged at merged.
func rec(t testing.TB, v string, s rr.State, merged, at time.Time) rr.Record {
	t.Helper()
	id, err := rr.NewReleaseID("docs", v, "prod-eu", "prod")
	if err != nil {
		t.Fatal(err)
	}
	r := rr.NewRecord(rr.Release{ID: id, Image: "ghcr.io/acme/docs:" + v}, merged)
	r.State, r.StateAt, r.LastFactAt = s, at, at
	return r
}

func healthy(r rr.Record, at time.Time) rr.Record {
	r.HealthyAt = at
	return r
}
