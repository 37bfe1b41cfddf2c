package releasehistory_test

import (
	"testing"

	rh "github.com/JorisJonkers-dev/delivery/internal/releasehistory"
	rr "github.com/JorisJonkers-dev/delivery/internal/releaserecord"
)

func TestRollbackEligible(t *testing.T) {
	docs := rh.ServiceKey{App: "docs", Env: "prod", Cluster: "prod-eu"}
	history := func(t *testing.T) []rr.Record {
		return []rr.Record{
			healthy(rec(t, "1", rr.StateSuperseded, ago(40*day), ago(38*day)), ago(39*day)),
			healthy(rec(t, "2", rr.StateSuperseded, ago(37*day), ago(35*day)), ago(36*day)),
			rec(t, "3", rr.StateAborted, ago(34*day), ago(33*day)),
			healthy(rec(t, "4", rr.StateHealthy, ago(31*day), ago(30*day)), ago(30*day)),
		}
	}
	for _, tc := range []struct {
		name     string
		svc      rh.ServiceKey
		image    string
		keep     int
		eligible bool
		release  string
	}{
		{"the newest healthy", docs, "ghcr.io/acme/docs:4", 2, true, "docs@4:prod-eu/prod"},
		{"within the window", docs, "ghcr.io/acme/docs:2", 2, true, "docs@2:prod-eu/prod"},
		{"outside the window", docs, "ghcr.io/acme/docs:1", 2, false, ""},
		{"a wider window takes it", docs, "ghcr.io/acme/docs:1", 5, true, "docs@1:prod-eu/prod"},
		{"a release that never reached healthy", docs, "ghcr.io/acme/docs:3", 5, false, ""},
		{"an image never run", docs, "ghcr.io/acme/docs:9", 5, false, ""},
		{"another service", rh.ServiceKey{App: "docs", Env: "stage", Cluster: "prod-eu"}, "ghcr.io/acme/docs:4", 5, false, ""},
		{"a window of none", docs, "ghcr.io/acme/docs:4", 0, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := rh.RollbackEligible(history(t), tc.svc, tc.image, tc.keep)
			if got.Eligible != tc.eligible || got.ReleaseID != tc.release || got.Why == "" || got.Image != tc.image {
				t.Fatalf("got %+v", got)
			}
			if got.Eligible != (got.HealthyAt != nil) {
				t.Fatalf("healthyAt is given with yes alone: %+v", got)
			}
		})
	}
}
