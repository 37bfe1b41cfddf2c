package releasegate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/JorisJonkers-dev/delivery/internal/owntraffic"
	"github.com/JorisJonkers-dev/delivery/internal/release"
)

type warmerFunc func(ctx context.Context, hosts, paths []string) (owntraffic.Warmup, error)

func (f warmerFunc) Warm(ctx context.Context, hosts, paths []string) (owntraffic.Warmup, error) {
	return f(ctx, hosts, paths)
}

// Two members sharing a host may hand more paths together than one call of
// the warmer takes: every path is still requested, a call's worth at a time.
func TestWarmRequestsEveryPathOfASharedHost(t *testing.T) {
	var paths []string
	for i := range 2 * owntraffic.MaxPaths {
		paths = append(paths, fmt.Sprintf("/p%d", i))
	}
	requested := map[string]bool{}
	reconciler := &Reconciler{warmer: warmerFunc(func(_ context.Context, hosts, paths []string) (owntraffic.Warmup, error) {
		if len(paths) > owntraffic.MaxPaths+1 {
			return owntraffic.Warmup{}, fmt.Errorf("%d paths, more than %d", len(paths), owntraffic.MaxPaths+1)
		}
		for _, p := range paths {
			requested[hosts[0]+p] = true
		}
		return owntraffic.Warmup{Requests: len(paths)}, nil
	})}
	got, ok := reconciler.warm(t.Context(), &Warm{Revision: "r", Targets: []WarmTarget{{Host: "auth.example.com", Paths: paths}}})
	if !ok || !got.Warmed || got.Failed != nil || len(requested) != len(paths) {
		t.Fatalf("warmed %+v (%v), %d of %d paths requested", got, ok, len(requested), len(paths))
	}
}

func TestWarmupVerdict(t *testing.T) {
	cases := []struct {
		name    string
		warmup  owntraffic.Warmup
		err     error
		warmed  bool
		request string
		status  int
	}{
		{"every request passed", owntraffic.Warmup{Requests: 4}, nil, true, "", 0},
		{"no public host reaches it: warmed without a request", owntraffic.Warmup{Unreachable: []string{"a.example.com"}}, nil, true, "", 0},
		{"a 5xx stops it", owntraffic.Warmup{Requests: 2, Failure: &owntraffic.Answer{Host: "a.example.com", Path: "/api", Status: 502}}, nil, false, "a.example.com/api", 502},
		{"a status HTTP has not is no answer", owntraffic.Warmup{Requests: 1, Failure: &owntraffic.Answer{Host: "a.example.com", Path: "/", Status: 999}}, nil, false, "a.example.com/", 0},
		{"no answer stops it", owntraffic.Warmup{Requests: 1, Failure: &owntraffic.Answer{Host: "a.example.com", Path: "/", Cause: "no answer within 10s"}}, nil, false, "a.example.com/", 0},
		{"a host that is not one", owntraffic.Warmup{}, errors.New(`host "x" is a single label`), false, `host "x" is a single label`, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := WarmupVerdict(rev, c.warmup, c.err)
			if got.Revision != rev || got.Warmed != c.warmed {
				t.Fatalf("verdict %+v", got)
			}
			if c.warmed != (got.Failed == nil) {
				t.Fatalf("warmed %v with failure %+v", got.Warmed, got.Failed)
			}
			if got.Failed != nil && (got.Failed.Request != c.request || got.Failed.Status != c.status) {
				t.Fatalf("failed %+v, want %q %d", got.Failed, c.request, c.status)
			}
		})
	}
}

func TestWarmTargets(t *testing.T) {
	withMeta := func(process string, mds ...map[string]string) MemberView {
		return MemberView{MemberState: release.MemberState{Process: process, Canary: release.Canary{Webhooks: mds}, HasCanary: true}}
	}
	got, err := WarmTargets([]MemberView{
		withMeta("auth-api",
			map[string]string{"application": "auth", MetadataHosts: `["auth.example.com","id.example.com"]`, metadataWarmupPaths: `["/api","/health"]`},
			map[string]string{"application": "auth", MetadataHosts: `["auth.example.com"]`, metadataWarmupPaths: `["/api","/login"]`}),
		withMeta("worker", map[string]string{"application": "auth"}),
		withMeta("auth-ui", map[string]string{MetadataHosts: `["auth.example.com"]`, metadataWarmupPaths: `["/","/api"]`}),
		withMeta("auth-admin", map[string]string{MetadataHosts: `["admin.example.com"]`}),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Host != "auth.example.com" || strings.Join(got[0].Paths, " ") != "/api /health /login /" ||
		got[1].Host != "id.example.com" || strings.Join(got[1].Paths, " ") != "/api /health /login" {
		t.Fatalf("targets %+v", got)
	}
	for _, bad := range []string{`/api`, `["/a",1]`, `{"a":1}`} {
		if _, err := WarmTargets([]MemberView{withMeta("a", map[string]string{metadataWarmupPaths: bad})}); err == nil {
			t.Errorf("paths %s read", bad)
		}
		if _, err := WarmTargets([]MemberView{withMeta("a", map[string]string{MetadataHosts: bad})}); err == nil {
			t.Errorf("hosts %s read", bad)
		}
	}
}
