package releasehistory

import (
	"time"

	rr "github.com/JorisJonkers-dev/delivery/internal/releaserecord"
)

// Eligibility is the answer to whether a service may be rolled back to an
// image.
type Eligibility struct {
	Eligible bool   `json:"eligible"`
	App      string `json:"app"`
	Env      string `json:"env"`
	Cluster  string `json:"cluster"`
	Image    string `json:"image"`
	// ReleaseID, HealthyAt and Image name the release that ran the image,
	// when eligible.
	ReleaseID string     `json:"releaseId,omitempty"`
	HealthyAt *time.Time `json:"healthyAt,omitempty"`
	Why       string     `json:"why"`
}

// RollbackEligible answers yes when one of the newest keep records of the
// service that reached healthy ran image, naming the newest such; no
// otherwise. Outside that window the record may be gone at the next sweep,
// and with it what the rollback would be checked against.
func RollbackEligible(recs []rr.Record, svc ServiceKey, image string, keep int) Eligibility {
	out := Eligibility{App: svc.App, Env: svc.Env, Cluster: svc.Cluster, Image: image}
	group := healthyByService(recs)[svc]
	for i, r := range group {
		if i == keep {
			break
		}
		if r.Image == image {
			at := r.HealthyAt.UTC()
			out.Eligible, out.ReleaseID, out.HealthyAt = true, r.ReleaseID, &at
			out.Why = "the release " + r.ReleaseID + " ran the image and reached healthy"
			return out
		}
	}
	switch {
	case len(group) == 0:
		out.Why = "no release of the service reached healthy"
	case keep <= 0:
		out.Why = "the rollback window keeps no release"
	default:
		out.Why = "none of the newest releases of the service that reached healthy ran the image"
	}
	return out
}
