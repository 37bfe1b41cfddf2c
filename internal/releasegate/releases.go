package releasegate

import (
	"context"
	_ "embed"
	"encoding/json"
	"log/slog"
	"net/http"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/release"
	"github.com/JorisJonkers-dev/delivery/internal/server"
)

// Most Applications /releases lists, how long one read answers it, and how
// long that read may take: it lists every gated Application's Canaries, which
// takes the API server a second or two at 1,000 Applications under load.
const (
	ReleasesMost        = 1000
	ReleasesMaxAge      = 15 * time.Second
	releasesReadTimeout = 10 * time.Second
)

// Releases is the answer of GET /releases; releases.schema.json is its shape.
type Releases struct {
	ReadAt       time.Time            `json:"readAt"`
	Truncated    bool                 `json:"truncated"`
	Applications []ReleaseApplication `json:"applications"`
}

// ReleaseApplication is one gated Application in /releases.
type ReleaseApplication struct {
	Namespace   string           `json:"namespace"`
	Application string           `json:"application"`
	Members     []ReleaseMember  `json:"members"`
	Migration   *ReleaseMigrated `json:"migration"`
	Record      *ReleaseRecord   `json:"record"`
	Unreadable  *string          `json:"unreadable"`
}

// ReleaseMember is a member and the revision its Canary carries.
type ReleaseMember struct {
	Process  string  `json:"process"`
	Revision *string `json:"revision"`
}

// ReleaseMigrated is the inputs' migration.
type ReleaseMigrated struct {
	Identity         string  `json:"identity"`
	TestedAgainst    *string `json:"testedAgainst"`
	NonTransactional bool    `json:"nonTransactional"`
}

// ReleaseRecord is the gate's record as /releases shows it.
type ReleaseRecord struct {
	Serving *string        `json:"serving"`
	Pinned  *string        `json:"pinned"`
	Since   *time.Time     `json:"since"`
	Warmup  *ReleaseWarmup `json:"warmup"`
	// Migrated is a revision whose migration ran and that neither served
	// nor was undone: the schema is no longer Serving's.
	Migrated *string `json:"migrated"`
}

// ReleaseWarmup is what warmup met.
type ReleaseWarmup struct {
	Revision string                 `json:"revision"`
	Warmed   bool                   `json:"warmed"`
	Failed   *release.WarmupFailure `json:"failed"`
}

func orNull(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// ReleasesOf builds the /releases answer from one read of the cluster.
func releasesOf(s *snapshot, namespace string, readAt time.Time) Releases {
	out := Releases{ReadAt: readAt.UTC(), Applications: []ReleaseApplication{}}
	for _, o := range s.inputs {
		if len(out.Applications) == ReleasesMost {
			out.Truncated = true
			break
		}
		v := s.view(namespace, o, readAt)
		a := ReleaseApplication{Namespace: o.Namespace, Application: o.Application, Members: []ReleaseMember{}}
		switch {
		case v.InputsErr != nil:
			a.Unreadable = orNull(v.InputsErr.Error())
		case v.RecordErr != nil:
			a.Unreadable = orNull(v.RecordErr.Error())
		}
		if v.Inputs != nil {
			for _, m := range v.Members {
				rm := ReleaseMember{Process: m.Process}
				if m.HasCanary {
					if _, rev, err := release.CanaryRelease(m.Canary); err == nil && release.IsRevision(rev) {
						rm.Revision = &rev
					}
				}
				a.Members = append(a.Members, rm)
			}
			if mig := v.Inputs.Migration; mig != nil {
				a.Migration = &ReleaseMigrated{Identity: mig.Identity, TestedAgainst: orNull(mig.TestedAgainst), NonTransactional: mig.NonTransactional}
			}
		}
		if r := v.Record; r != nil {
			a.Record = &ReleaseRecord{Serving: orNull(r.Serving), Pinned: orNull(r.Pinned), Since: r.Since, Migrated: orNull(r.Migrated)}
			if w := r.Warmup; w != nil {
				a.Record.Warmup = &ReleaseWarmup{Revision: w.Revision, Warmed: w.Warmed, Failed: w.Failed}
			}
		}
		out.Applications = append(out.Applications, a)
	}
	return out
}

// ReleasesHandler answers GET /releases. It writes nothing and checks no
// caller.
func (t *Reconciler) ReleasesHandler() http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, err := t.releasesRead.Get(r.Context())
		if err != nil {
			t.logger.LogAttrs(r.Context(), slog.LevelError, "cannot list releases", slog.String("cause", err.Error()))
			server.Answer(w, http.StatusServiceUnavailable, "the release gate cannot read the cluster now; its log names the cause")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}
}

func (t *Reconciler) readReleases(ctx context.Context, now time.Time) ([]byte, error) {
	s, err := read(ctx, t.cluster, t.namespace, false)
	if err != nil {
		return nil, err
	}
	body, err := json.Marshal(releasesOf(s, t.namespace, now))
	if err != nil {
		return nil, err
	}
	return append(body, '\n'), nil
}
