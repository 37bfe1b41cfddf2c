package agent_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/mesh/agent"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/bus"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/composition"
)

var d1, d2, d3 = bus.Digest([]byte("v1")), bus.Digest([]byte("v2")), bus.Digest([]byte("v3"))

func TestDecide(t *testing.T) {
	want := bus.Want{Fingerprint: "f2", Digest: d2, Owner: bus.OwnerRules}
	cases := []struct {
		name    string
		running agent.Running
		offer   agent.Offer
		action  agent.Action
		why     string
	}{
		{"runs the want", agent.Running{Fingerprint: "f2", Digest: d2}, agent.Offer{Found: true, Digest: d2}, agent.ActionNone, "runs what the want names"},
		{"no composition yet", agent.Running{Fingerprint: "f1", Digest: d1}, agent.Offer{}, agent.ActionNone, "no composition"},
		{"the composition the want names, verified", agent.Running{Fingerprint: "f1", Digest: d1}, agent.Offer{Found: true, Digest: d2}, agent.ActionApply, "names f2"},
		{"nothing runs yet", agent.Running{}, agent.Offer{Found: true, Digest: d2}, agent.ActionApply, "names f2"},
		{"another composition of the fingerprint", agent.Running{Fingerprint: "f1", Digest: d1}, agent.Offer{Found: true, Digest: d1}, agent.ActionRefuse, "is not the want's"},
		{"the composition does not verify", agent.Running{Fingerprint: "f1", Digest: d1}, agent.Offer{Found: true, Digest: d2, Unverified: "signed by no trusted key"}, agent.ActionRefuse, "does not verify: signed by no trusted key"},
		{"the same fingerprint at another composition", agent.Running{Fingerprint: "f2", Digest: d1}, agent.Offer{Found: true, Digest: d2}, agent.ActionApply, "names f2"},
		{"a composition newer than what runs", agent.Running{Fingerprint: "f1", Digest: d1}, agent.Offer{Found: true, Digest: d2, Revision: 9, Runs: 4}, agent.ActionApply, "names f2"},
		{"a composition older than what runs", agent.Running{Fingerprint: "f1", Digest: d1}, agent.Offer{Found: true, Digest: d2, Revision: 4, Runs: 9}, agent.ActionRefuse, "older than the one that runs"},
		{"older, and what runs is held", agent.Running{Fingerprint: "f1", Digest: d1}, agent.Offer{Found: true, Digest: d2, Revision: 4, Runs: 9, RunsHeld: true}, agent.ActionApply, "names f2"},
		{"older, what runs written again since", agent.Running{Fingerprint: "f1", Digest: d1}, agent.Offer{Found: true, Digest: d2, Revision: 4}, agent.ActionApply, "names f2"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			action, why := agent.Decide(want, c.running, c.offer, agent.RolledBack{})
			if action != c.action || !strings.Contains(why, c.why) {
				t.Fatalf("%s (%s), want %s (%s)", action, why, c.action, c.why)
			}
		})
	}
}

// TestDecideOlder: only the operator's put or hand sends a node to a
// composition older than the one it runs; the rules, or an owner not known,
// do not.
func TestDecideOlder(t *testing.T) {
	f1 := agent.Running{Fingerprint: "f1", Digest: d1}
	older := agent.Offer{Found: true, Digest: d2, Revision: 4, Runs: 9}
	for _, c := range []struct {
		owner  bus.Owner
		action agent.Action
	}{
		{bus.OwnerRules, agent.ActionRefuse},
		{bus.OwnerHand, agent.ActionApply},
		{bus.PutOwner("ops"), agent.ActionApply},
		{"", agent.ActionRefuse},
		{"someone", agent.ActionRefuse},
	} {
		want := bus.Want{Fingerprint: "f2", Digest: d2, Owner: c.owner}
		if action, why := agent.Decide(want, f1, older, agent.RolledBack{}); action != c.action {
			t.Errorf("owner %q: %s (%s), want %s", c.owner, action, why, c.action)
		}
	}
}

// TestProvenOwner: a want is a put's or a hand's only when the operator's
// seal names that very want; whatever else the want says of its owner, it
// is the rules', and so cannot send a node back.
func TestProvenOwner(t *testing.T) {
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	put := bus.Want{Fingerprint: "f1", Digest: d1, Owner: bus.PutOwner("ops"), At: at}
	hand := bus.Want{Fingerprint: "f1", Digest: d1, Owner: bus.OwnerHand, At: at}
	with := func(w bus.Want, change func(*bus.Want)) *bus.Want { change(&w); return &w }
	for _, c := range []struct {
		name string
		want bus.Want
		seal *bus.Want
		is   bus.Owner
	}{
		{"a put under its seal", put, &put, put.Owner},
		{"a hand under its seal", hand, &hand, bus.OwnerHand},
		{"sealed, written again later", *with(put, func(w *bus.Want) { w.At = at.Add(time.Hour) }), &put, put.Owner},
		{"a put with no seal", put, nil, bus.OwnerRules},
		{"a hand with no seal", hand, nil, bus.OwnerRules},
		{"another put's seal", put, with(put, func(w *bus.Want) { w.Owner = bus.PutOwner("eve") }), bus.OwnerRules},
		{"a hand's seal on a put", put, &hand, bus.OwnerRules},
		{"the seal of another fingerprint", put, with(put, func(w *bus.Want) { w.Fingerprint = "f2" }), bus.OwnerRules},
		{"the seal of another composition", put, with(put, func(w *bus.Want) { w.Digest = d2 }), bus.OwnerRules},
		{"the rules' want", *with(put, func(w *bus.Want) { w.Owner = bus.OwnerRules }), &put, bus.OwnerRules},
		{"an owner not known, sealed as such", *with(put, func(w *bus.Want) { w.Owner = "someone" }), with(put, func(w *bus.Want) { w.Owner = "someone" }), bus.OwnerRules},
		{"a seal owned by the rules", *with(put, func(w *bus.Want) { w.Owner = bus.OwnerRules }), with(put, func(w *bus.Want) { w.Owner = bus.OwnerRules }), bus.OwnerRules},
	} {
		if got := agent.ProvenOwner(c.want, c.seal); got != c.is {
			t.Errorf("%s: %q, want %q", c.name, got, c.is)
		}
	}
	// What Decide then does with an older composition.
	older := agent.Offer{Found: true, Digest: d1, Revision: 4, Runs: 9}
	forged := put
	forged.Owner = agent.ProvenOwner(put, nil)
	if action, _ := agent.Decide(forged, agent.Running{Fingerprint: "f2", Digest: d2}, older, agent.RolledBack{}); action != agent.ActionRefuse {
		t.Errorf("a put's want with no seal sends the node back: %s", action)
	}
}

// TestDecideAfterARollback: the version a node went back from is not
// applied again for the want it failed under, nor another composition of
// it refused for that; a want written since tries it again.
func TestDecideAfterARollback(t *testing.T) {
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	f1 := agent.Running{Fingerprint: "f1", Digest: d1}
	back := agent.RolledBack{Running: agent.Running{Fingerprint: "f2", Digest: d2}, At: at}
	cases := []struct {
		name   string
		want   bus.Want
		offer  agent.Offer
		action agent.Action
	}{
		{"the want it failed under", bus.Want{Fingerprint: "f2", Digest: d2, At: at.Add(-time.Minute)}, agent.Offer{Found: true, Digest: d2}, agent.ActionNone},
		{"a want of the same time", bus.Want{Fingerprint: "f2", Digest: d2, At: at}, agent.Offer{Found: true, Digest: d2}, agent.ActionNone},
		{"a want written since", bus.Want{Fingerprint: "f2", Digest: d2, At: at.Add(time.Minute)}, agent.Offer{Found: true, Digest: d2}, agent.ActionApply},
		{"another composition of the fingerprint", bus.Want{Fingerprint: "f2", Digest: d3, At: at.Add(-time.Minute)}, agent.Offer{Found: true, Digest: d3}, agent.ActionApply},
		{"another fingerprint", bus.Want{Fingerprint: "f3", Digest: d3, At: at.Add(-time.Minute)}, agent.Offer{Found: true, Digest: d3}, agent.ActionApply},
		{"what runs", bus.Want{Fingerprint: "f1", Digest: d1, At: at.Add(-time.Minute)}, agent.Offer{Found: true, Digest: d1}, agent.ActionNone},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if action, why := agent.Decide(c.want, f1, c.offer, back); action != c.action {
				t.Fatalf("%s (%s), want %s", action, why, c.action)
			}
		})
	}
}

func doc(fingerprint string, files map[string]composition.File) composition.Document {
	return composition.Document{Module: "web/api", Fingerprint: fingerprint, Node: "n1", Files: files,
		Command: composition.Command{Argv: []string{"bin/web"}},
		Health:  composition.Health{Command: []string{"true"}, Interval: composition.Duration(time.Second), Timeout: composition.Duration(time.Second)}}
}

func TestInstallAndSwitch(t *testing.T) {
	l := agent.Layout{Root: t.TempDir()}
	if r, _, err := l.Current("web/api"); err != nil || r != (agent.Running{}) {
		t.Fatalf("a module never switched runs %+v, %v", r, err)
	}
	v1 := doc("f1", map[string]composition.File{"bin/web": {Content: "#!/bin/sh\n", Mode: "0755"}, "etc/web.conf": {Content: "a=1\n", Mode: "0600"}})
	dir, err := l.Install(v1, d1)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Switch("web/api", d1); err != nil {
		t.Fatal(err)
	}
	r, current, err := l.Current("web/api")
	if err != nil || r != (agent.Running{Fingerprint: "f1", Digest: d1}) || current != dir {
		t.Fatalf("runs %+v from %s (%v), want f1 from %s", r, current, err, dir)
	}
	for p, mode := range map[string]os.FileMode{"bin/web": 0o755, "etc/web.conf": 0o600} {
		info, err := os.Stat(filepath.Join(current, p))
		if err != nil || info.Mode().Perm() != mode {
			t.Fatalf("%s: %v %v, want mode %o", p, info.Mode(), err, mode)
		}
	}
	// The module's folder is its key-safe name: no '/' nests it.
	if mods, err := l.Modules(); err != nil || len(mods) != 1 || mods[0] != "web/api" {
		t.Fatalf("modules %v, %v", mods, err)
	}
	// Installed again: the same folder, untouched.
	if again, err := l.Install(v1, d1); err != nil || again != dir {
		t.Fatalf("%s %v", again, err)
	}
}

// TestACutShortInstallLeavesTheOldVersion: an install that fails half way,
// or a crash's leftover folder, never shows: current names the old version
// until a complete new one is switched to.
func TestACutShortInstallLeavesTheOldVersion(t *testing.T) {
	l := agent.Layout{Root: t.TempDir()}
	if _, err := l.Install(doc("f1", map[string]composition.File{"a": {Content: "1", Mode: "0644"}}), d1); err != nil {
		t.Fatal(err)
	}
	if err := l.Switch("web/api", d1); err != nil {
		t.Fatal(err)
	}
	// "a" a file and a folder at once: the second write fails.
	broken := doc("f2", map[string]composition.File{"a": {Content: "2", Mode: "0644"}, "a/b": {Content: "2", Mode: "0644"}})
	if _, err := l.Install(broken, d2); err == nil {
		t.Fatal("an install that cannot be laid down succeeded")
	}
	if err := l.Switch("web/api", d2); err == nil {
		t.Fatal("switched to a version never laid down whole")
	}
	if r, _, _ := l.Current("web/api"); r.Fingerprint != "f1" {
		t.Fatalf("runs %+v after a failed install", r)
	}
	// A crash's leftover: removed by the next install, never switched to.
	folder := filepath.Join(l.Root, "web_2fapi", "releases")
	leftover := filepath.Join(folder, ".install-dead")
	if err := os.MkdirAll(filepath.Join(leftover, "half"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Install(doc("f2", map[string]composition.File{"a": {Content: "2", Mode: "0644"}}), d2); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(leftover); !os.IsNotExist(err) {
		t.Fatalf("the leftover stays: %v", err)
	}
	if r, _, _ := l.Current("web/api"); r.Fingerprint != "f1" {
		t.Fatalf("an install alone switched to %+v", r)
	}
	if err := l.Switch("web/api", d2); err != nil {
		t.Fatal(err)
	}
	if r, dir, _ := l.Current("web/api"); r.Fingerprint != "f2" || readFile(t, filepath.Join(dir, "a")) != "2" {
		t.Fatalf("runs %+v", r)
	}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	raw, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

func TestPrune(t *testing.T) {
	at := func(m int) time.Time { return time.Date(2026, 3, 4, 5, m, 0, 0, time.UTC) }
	five := []agent.Version{{Name: "a", At: at(1)}, {Name: "e", At: at(5)}, {Name: "c", At: at(3)}, {Name: "b", At: at(2)}, {Name: "d", At: at(4)}}
	cases := []struct {
		name     string
		versions []agent.Version
		keep     int
		spare    []string
		gone     []string
	}{
		{"the newest kept", five, 3, nil, []string{"b", "a"}},
		{"fewer than keep", five[:2], 3, nil, nil},
		{"what runs and what ran healthy spared besides", five, 2, []string{"a", "c"}, []string{"b"}},
		{"a spare among the newest counts among them", five, 2, []string{"e"}, []string{"c", "b", "a"}},
		{"one kept", five, 1, nil, []string{"d", "c", "b", "a"}},
		{"the same time: by name", []agent.Version{{Name: "x", At: at(1)}, {Name: "y", At: at(1)}}, 1, nil, []string{"x"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := agent.Prune(c.versions, c.keep, c.spare...); !slices.Equal(got, c.gone) {
				t.Fatalf("removes %v, want %v", got, c.gone)
			}
		})
	}
}

// TestCollectKeepsWhatRunsAndWhatRanHealthy: of five versions, keep 2
// leaves the newest two, the one current names and the one that last ran
// healthy.
func TestCollectKeepsWhatRunsAndWhatRanHealthy(t *testing.T) {
	l := agent.Layout{Root: t.TempDir()}
	var digests []string
	for i := range 5 {
		d := bus.Digest([]byte{byte(i)})
		digests = append(digests, d)
		dir, err := l.Install(doc(fmt.Sprintf("f%d", i), map[string]composition.File{}), d)
		if err != nil {
			t.Fatal(err)
		}
		when := time.Date(2026, 3, 4, 5, i, 0, 0, time.UTC)
		if err := os.Chtimes(filepath.Join(dir, ".release.json"), when, when); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Switch("web/api", digests[1]); err != nil {
		t.Fatal(err)
	}
	if err := l.MarkHealthy("web/api", agent.Running{Fingerprint: "f0", Digest: digests[0]}); err != nil {
		t.Fatal(err)
	}
	gone, err := l.Collect("web/api", 2)
	if err != nil || len(gone) != 1 || gone[0] != strings.TrimPrefix(digests[2], "sha256:") {
		t.Fatalf("removed %v, %v; want f2's alone", gone, err)
	}
	for i, d := range digests {
		if has := l.Has("web/api", d); has != (i != 2) {
			t.Errorf("f%d laid down: %v", i, has)
		}
	}
	if r, _, err := l.Current("web/api"); err != nil || r.Fingerprint != "f1" {
		t.Fatalf("current %+v, %v", r, err)
	}
}
