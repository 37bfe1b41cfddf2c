package releasegate

import (
	"testing"

	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"

	"github.com/JorisJonkers-dev/delivery/internal/release"
)

func TestIdentify(t *testing.T) {
	in := inputs(false)
	cases := []struct {
		name    string
		q       release.Question
		c       release.Canary
		found   bool
		outcome Outcome
		reason  string
	}{
		{"a member asking at the revision its Canary carries", ask, canary("auth-api", flaggerv1.CanaryPhaseProgressing), true, Yes, ""},
		{"a process that is no member", release.Question{Namespace: "auth-system", Application: "auth", Process: "billing", Revision: rev}, release.Canary{}, false, Unanswerable, "no member"},
		{"a Canary that is not there", ask, release.Canary{}, false, NotYet, "does not carry revision " + tag},
		{"a replaced render reads the same as a missing Canary", ask, release.Canary{Name: "auth-api", Webhooks: hooks("auth", prevRev)}, true, NotYet, "Canary auth-api does not carry revision " + tag},
		{"a Canary of another Application", ask, release.Canary{Name: "auth-api", Webhooks: hooks("billing", rev)}, true, Unanswerable, "belongs to Application billing"},
		{"a Canary whose webhooks carry two releases", ask, release.Canary{Name: "auth-api", Webhooks: append(hooks("auth", rev), map[string]string{"application": "auth", "revision": prevRev})}, true, Unanswerable, "two releases"},
		{"a Canary without the gate's webhooks", ask, release.Canary{Name: "auth-api", Webhooks: []map[string]string{{}}}, true, NotYet, "does not carry"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, ok := Identify(c.q, in, c.c, c.found)
			if c.outcome == Yes {
				if !ok {
					t.Fatalf("refused: %+v", a)
				}
				return
			}
			if ok {
				t.Fatal("identified")
			}
			want(t, a, c.outcome, c.reason)
		})
	}
}

func TestListKeepsReasonsShort(t *testing.T) {
	got := list([]string{"a", "b", "c", "d", "e", "f", "g"})
	if got != "a; b; c; d; e; and 2 more" {
		t.Fatalf("list = %q", got)
	}
}
