package releaserecord_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	rr "github.com/JorisJonkers-dev/delivery/internal/releaserecord"
)

func TestReleaseID(t *testing.T) {
	id := mustID(t, "docs@2.1.0:prod-eu/prod")
	if id.App() != "docs" || id.Version() != "2.1.0" || id.Cluster != "prod-eu" || id.Env != "prod" || id.String() != "docs@2.1.0:prod-eu/prod" {
		t.Fatalf("%+v", id)
	}
	if made, err := rr.NewReleaseID("docs", "2.1.0", "prod-eu", "prod"); err != nil || made != id {
		t.Fatalf("%+v %v", made, err)
	}
	for _, bad := range []string{"", "docs@2.1.0", "docs@2.1.0:prod-eu", "docs:prod-eu/prod", "Docs@2.1.0:prod-eu/prod",
		"docs@2.1.0:Prod/prod", "docs@2.1.0:prod-eu/prod/x", "docs@:prod-eu/prod", "docs@2.1.0:prod-eu/-prod", strings.Repeat("a", 300) + "@1:c/e"} {
		if _, err := rr.ParseReleaseID(bad); !errors.Is(err, rr.ErrMalformedID) {
			t.Errorf("%q: %v", bad, err)
		}
	}
	name := rr.RecordName(id.String())
	if !strings.HasPrefix(name, "release-") || len(name) != len("release-")+32 || name != rr.RecordName("docs@2.1.0:prod-eu/prod") || name == rr.RecordName("docs@2.1.0:prod-eu/stage") {
		t.Fatalf("name %q", name)
	}
}

func fullRecord(t testing.TB) rr.Record {
	r := rr.NewRecord(rr.Release{ID: mustID(t, "docs@2.1.0-rb.1:prod-eu/prod"), Kind: rr.KindRollback, RollbackOf: "docs@2.2.0:prod-eu/prod",
		RollbackReason: "the error rate", Image: "registry.example/estate/docs@sha256:" + strings.Repeat("a", 64),
		GitURL: "https://github.com/acme/docs", GitRevision: "0123abc"}, t0)
	r.State, r.StateAt, r.HealthyAt, r.LastFactAt, r.LastFactPhase = rr.StateHealthy, now, now, now, "Healthy"
	r.PodHash, r.Drift, r.LastError = "5d8f7c", "the pod hash moved from a to b", "apply failed"
	r.EmittedLive, r.EmittedShadow = []string{"deployed", "deploying"}, []string{"deploying"}
	r.SyncStartedAt, r.ObjectGeneration = t0.Add(-time.Minute), "Rollout/docs/docs=12"
	r.Held, r.Objects = "analysis-failed", rr.ObjectsOf([]string{"Rollout/docs/docs", "Canary/docs/web", "not an object"})
	return r
}

func TestRecordRoundTrip(t *testing.T) {
	r := fullRecord(t)
	data := r.Data()
	if got := sortedKeys(data); !slices.Equal(got, sortedCopy(rr.Keys)) {
		t.Fatalf("keys %v", got)
	}
	back, err := rr.DecodeRecord(r.Name(), data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflectEqual(back, r) {
		t.Fatalf("round trip:\n%+v\n%+v", back, r)
	}
	if l := r.Labels(); l[rr.LabelManagedBy] != "release-record" || l[rr.LabelApp] != "docs" || l[rr.LabelEnv] != "prod" || l[rr.LabelCluster] != "prod-eu" {
		t.Fatalf("labels %v", l)
	}
	// An empty record's times and sets are "".
	empty := rr.NewRecord(rr.Release{ID: mustID(t, "docs@1.0.0:c/e")}, t0).Data()
	if empty["healthyAt"] != "" || empty["emittedLive"] != "" || empty["mergedAt"] != "2026-12-02T10:00:00Z" {
		t.Fatalf("empty %v", empty)
	}
}

// since are the keys records gained after they were first written: the
// record writes them, and one written before them still reads.
var since = []string{"syncStartedAt", "objectGeneration", "held", "objects"}

// TestObjectsOf: the objects a release moved are kept in one order, once,
// and only in the shape the schema holds them to.
func TestObjectsOf(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want string
	}{
		{nil, ""},
		{[]string{"Kustomization/flux-system/project-docs", "Canary/docs/web", "Canary/docs/web"}, "Canary/docs/web,Kustomization/flux-system/project-docs"},
		{[]string{"Canary/Docs/web", "Canary/docs", "Canary/docs/web,x", "Canary/docs/<b>"}, ""},
		{[]string{strings.Repeat("Canary/docs/"+strings.Repeat("w", 250)+",", 20)}, ""},
	} {
		if got := rr.ObjectsOf(tc.in); got != tc.want {
			t.Errorf("ObjectsOf(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	var many []string
	for i := range 40 {
		many = append(many, fmt.Sprintf("Canary/docs/%03d-%s", i, strings.Repeat("w", 120)))
	}
	if got := rr.ObjectsOf(many); got != "" {
		t.Errorf("past the schema's bound: %d bytes kept", len(got))
	}
}

// TestSchemaListsEveryKey: the schema describes exactly the keys the record
// writes, in the order Keys lists them, and requires all but the later ones.
func TestSchemaListsEveryKey(t *testing.T) {
	var s struct {
		Required   []string       `json:"required"`
		Properties map[string]any `json:"properties"`
	}
	if err := json.Unmarshal(rr.RecordSchema, &s); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(append(slices.Clone(s.Required), since...), rr.Keys) || len(s.Properties) != len(rr.Keys) {
		t.Fatalf("schema %v, keys %v", s.Required, rr.Keys)
	}
}

// TestARecordFromBeforeTheOrderKeysReads: a record written before the
// order keys existed reads with them zero, and is written with them.
func TestARecordFromBeforeTheOrderKeysReads(t *testing.T) {
	r := fullRecord(t)
	data := r.Data()
	for _, k := range since {
		delete(data, k)
	}
	back, err := rr.DecodeRecord(r.Name(), data)
	if err != nil || !back.SyncStartedAt.IsZero() || back.ObjectGeneration != "" || back.Held != "" || back.Objects != "" {
		t.Fatalf("%+v %v", back, err)
	}
	if got := back.Data(); got["syncStartedAt"] != "" || got["objectGeneration"] != "" || len(got) != len(rr.Keys) {
		t.Fatalf("written again %v", got)
	}
}

func TestUnreadableRecords(t *testing.T) {
	good := fullRecord(t)
	for name, change := range map[string]func(map[string]string){
		"a key missing":       func(d map[string]string) { delete(d, "drift") },
		"a key more":          func(d map[string]string) { d["note"] = "x" },
		"an unknown state":    func(d map[string]string) { d["state"] = "sideways" },
		"a time not RFC 3339": func(d map[string]string) { d["stateAt"] = "yesterday" },
		"a sent set of other keys": func(d map[string]string) {
			d["emittedLive"] = "deploying,shipped"
		},
		"a malformed release id":     func(d map[string]string) { d["releaseId"] = "docs" },
		"another release's id":       func(d map[string]string) { d["releaseId"] = "docs@9.9.9:prod-eu/prod" },
		"an app not the id's":        func(d map[string]string) { d["app"] = "api" },
		"an unknown kind":            func(d map[string]string) { d["kind"] = "hotfix" },
		"a generation of no Rollout": func(d map[string]string) { d["objectGeneration"] = "7" },
		"a sync start not a time":    func(d map[string]string) { d["syncStartedAt"] = "soon" },
	} {
		data := good.Data()
		change(data)
		if _, err := rr.DecodeRecord(good.Name(), data); !errors.Is(err, rr.ErrUnreadable) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func FuzzDecodeRecord(f *testing.F) {
	good := fullRecord(f)
	raw, _ := json.Marshal(good.Data())
	f.Add(good.Name(), raw)
	f.Add("release-x", []byte(`{"releaseId":"a@1:c/e"}`))
	f.Fuzz(func(t *testing.T, name string, raw []byte) {
		var data map[string]string
		if json.Unmarshal(raw, &data) != nil {
			return
		}
		r, err := rr.DecodeRecord(name, data)
		if err != nil {
			return
		}
		// What decodes encodes back to what was read.
		back, err := rr.DecodeRecord(r.Name(), r.Data())
		if err != nil || !reflectEqual(back, r) {
			t.Fatalf("%v: %+v then %+v", err, r, back)
		}
	})
}

func FuzzParseReleaseID(f *testing.F) {
	for _, s := range []string{"docs@2.1.0:prod-eu/prod", "a@1:c/e", ":/", "docs@2.1.0:prod-eu/prod/x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := rr.ParseReleaseID(s)
		if err != nil {
			return
		}
		if id.String() != s {
			t.Fatalf("%q read as %q", s, id)
		}
	})
}

func sortedKeys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func sortedCopy(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}
