package view_test

import (
	"bytes"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/mesh/bus"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/view"
)

var (
	t0     = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	dA, dB = bus.Digest([]byte("a")), bus.Digest([]byte("b"))
)

func want(fp, digest string, at time.Time) bus.Want {
	return bus.Want{Fingerprint: fp, Digest: digest, Owner: bus.OwnerRules, At: at}
}

func have(fp, digest string, phase bus.Phase, health bus.Health, at time.Time) bus.Have {
	return bus.Have{Fingerprint: fp, Digest: digest, Phase: phase, Health: health, At: at}
}

func TestJudgeAPlace(t *testing.T) {
	now := t0.Add(time.Hour)
	cases := []struct {
		name string
		want bus.Want
		have *bus.Have
		is   view.State
	}{
		{"no have yet, wanted just now", want("f1", dA, now.Add(-time.Minute)), nil, view.StateMoving},
		{"no have, wanted long ago", want("f1", dA, now.Add(-11*time.Minute)), nil, view.StateStuck},
		{"running healthy at the want", want("f1", dA, t0), new(have("f1", dA, bus.PhaseRunning, bus.Healthy, t0)), view.StateSettled},
		{"running healthy at another composition of the fingerprint", want("f1", dA, t0), new(have("f1", dB, bus.PhaseRunning, bus.Healthy, t0)), view.StateStuck},
		{"running the fingerprint before", want("f2", dB, now.Add(-time.Minute)), new(have("f1", dA, bus.PhaseRunning, bus.Healthy, t0)), view.StateMoving},
		{"applying, moved a minute ago", want("f2", dB, t0), new(have("f2", dB, bus.PhaseApplying, bus.Unknown, now.Add(-time.Minute))), view.StateMoving},
		{"running unhealthy for ten minutes", want("f2", dB, t0), new(have("f2", dB, bus.PhaseRunning, bus.Unhealthy, now.Add(-10*time.Minute))), view.StateStuck},
		{"failed long ago", want("f2", dB, t0), new(have("f2", dB, bus.PhaseFailed, bus.Unknown, t0)), view.StateStuck},
		{"refused just now", want("f2", dB, t0), new(have("f2", dB, bus.PhaseRefused, bus.Unknown, now)), view.StateMoving},
		{"unhealthy, said again just now, unchanged for ten minutes", want("f2", dB, t0), new(since(have("f2", dB, bus.PhaseRunning, bus.Unhealthy, now), now.Add(-10*time.Minute))), view.StateStuck},
		{"unhealthy, changed a minute ago", want("f2", dB, t0), new(since(have("f2", dB, bus.PhaseRunning, bus.Unhealthy, now), now.Add(-time.Minute))), view.StateMoving},
		{"rolled back to what the want names, healthy", want("f1", dA, t0), new(bus.Have{Fingerprint: "f1", Digest: dA, Phase: bus.PhaseRolledBack, Health: bus.Healthy,
			Attempt: bus.Attempt{Fingerprint: "f2", Digest: dB}, At: t0}), view.StateSettled},
		{"applying the want, what ran before healthy", want("f2", dB, t0), new(bus.Have{Fingerprint: "f1", Digest: dA, Phase: bus.PhaseApplying, Health: bus.Healthy,
			Attempt: bus.Attempt{Fingerprint: "f2", Digest: dB}, At: now}), view.StateMoving},
		{"its process ended, health not yet said", want("f2", dB, t0), new(have("f2", dB, bus.PhaseFailed, bus.Healthy, now)), view.StateMoving},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			place := view.Place{Node: "n1", Module: "web"}
			haves := map[view.Place]bus.Have{}
			if c.have != nil {
				haves[place] = *c.have
			}
			p := view.Judge(view.Input{Wants: map[view.Place]bus.Want{place: c.want}, Haves: haves, Now: now, StuckAfter: view.DefaultStuckAfter})
			if len(p.Cells) != 1 || p.Cells[0].State != c.is {
				t.Fatalf("%+v, want %s", p.Cells, c.is)
			}
		})
	}
}

// since is h, saying what it says since at.
func since(h bus.Have, at time.Time) bus.Have {
	h.Since = at
	return h
}

func at(node, module string) view.Place { return view.Place{Node: node, Module: module} }

func TestDelivered(t *testing.T) {
	src := view.Source{Revision: "abc123", Modules: map[string]string{"web": "f2", "db": "g1"}}
	settled := func(fp, d string) bus.Have { return have(fp, d, bus.PhaseRunning, bus.Healthy, t0) }
	all := map[view.Place]bus.Want{
		at("n1", "web"): want("f2", dB, t0), at("n2", "web"): want("f2", dB, t0), at("n1", "db"): want("g1", dA, t0),
	}
	allHaves := map[view.Place]bus.Have{
		at("n1", "web"): settled("f2", dB), at("n2", "web"): settled("f2", dB), at("n1", "db"): settled("g1", dA),
	}
	regs := []bus.Registration{{Module: "web", Nodes: []string{"n1", "n2"}}, {Module: "db", Nodes: []string{"n1"}}}
	withN3 := []bus.Registration{{Module: "web", Nodes: []string{"n1", "n2", "n3"}}, {Module: "db", Nodes: []string{"n1"}}}
	n3Online := with(allHaves, at("n3", "db"), have("", "", bus.PhaseRunning, bus.Unknown, t0))
	cases := []struct {
		name      string
		src       view.Source
		regs      []bus.Registration
		wants     map[view.Place]bus.Want
		haves     map[view.Place]bus.Have
		delivered bool
		offline   []string
	}{
		{"every want the revision's and every have its want", src, regs, all, allHaves, true, nil},
		{"no source revision", view.Source{}, regs, all, allHaves, false, nil},
		{"one node still runs the fingerprint before", src, regs, all, with(allHaves, at("n2", "web"), settled("f1", dA)), false, nil},
		{"one want is not the revision's fingerprint", src, regs, with(all, at("n2", "web"), want("f1", dA, t0)),
			with(allHaves, at("n2", "web"), settled("f1", dA)), false, nil},
		{"a module the revision names no node wants", view.Source{Revision: "abc123", Modules: map[string]string{"web": "f2", "db": "g1", "cache": "h1"}},
			append(regs, bus.Registration{Module: "cache", Nodes: []string{"n1"}}), all, allHaves, false, nil},
		{"a module the revision names is not registered", view.Source{Revision: "abc123", Modules: map[string]string{"web": "f2", "db": "g1", "cache": "h1"}},
			regs, all, allHaves, false, nil},
		{"a module the revision does not name is not held to it", view.Source{Revision: "abc123", Modules: map[string]string{"web": "f2"}},
			regs, all, with(allHaves, at("n1", "db"), have("g1", dA, bus.PhaseFailed, bus.Unknown, t0)), true, nil},
		{"a registered node online with no want yet", src, withN3, all, n3Online, false, nil},
		{"a registered node offline with no want: delivered without it, named", src, withN3, all, allHaves, true, []string{"n3"}},
		{"every node offline: delivered nowhere", src, regs, all, map[view.Place]bus.Have{}, false, nil},
		{"a node long silent is offline", src, withN3, all, with(allHaves, at("n3", "db"), have("", "", bus.PhaseRunning, bus.Unknown, t0.Add(-time.Hour))), true, []string{"n3"}},
		{"a registered node online, wanting it and not settled", src, withN3, with(all, at("n3", "web"), want("f2", dB, t0)),
			with(n3Online, at("n3", "web"), have("f1", dA, bus.PhaseRunning, bus.Healthy, t0)), false, nil},
		{"an unregistered node that wants it online and not settled", src, regs, with(all, at("n3", "web"), want("f2", dB, t0)),
			with(n3Online, at("n3", "web"), have("f1", dA, bus.PhaseRunning, bus.Healthy, t0)), false, nil},
		{"a node rolled back, online", src, regs, all, with(allHaves, at("n2", "web"), bus.Have{Fingerprint: "f1", Digest: dA, Phase: bus.PhaseRolledBack,
			Health: bus.Healthy, Attempt: bus.Attempt{Fingerprint: "f2", Digest: dB}, At: t0}), false, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := view.Judge(view.Input{Source: c.src, Registrations: c.regs, Wants: c.wants, Haves: c.haves, Now: t0.Add(time.Minute), StuckAfter: view.DefaultStuckAfter})
			if p.Delivered != c.delivered || !slices.Equal(p.Offline, c.offline) {
				t.Fatalf("delivered %v without %v, want %v without %v: %+v", p.Delivered, p.Offline, c.delivered, c.offline, p.Cells)
			}
			var kinds []view.Kind
			for _, e := range view.Events(p) {
				kinds = append(kinds, e.What)
				if e.What == view.KindDelivered && !slices.Equal(e.Offline, c.offline) {
					t.Fatalf("the delivered event names offline %v", e.Offline)
				}
			}
			if slices.Contains(kinds, view.KindDelivered) != c.delivered {
				t.Fatalf("events %v", kinds)
			}
		})
	}
}

// with is m with k set to v, m itself unchanged.
func with[K comparable, V any](m map[K]V, k K, v V) map[K]V {
	out := maps.Clone(m)
	out[k] = v
	return out
}

// TestEventIDs holds each event to once per revision, and once per place
// at one composition and kind.
func TestEventIDs(t *testing.T) {
	a := view.Event{What: view.KindSettled, Node: "n1", Module: "web", Digest: dA, Since: t0}
	later := a
	later.Since = t0.Add(time.Hour)
	other := a
	other.Digest = dB
	if a.ID() != later.ID() || a.ID() == other.ID() {
		t.Fatalf("%s %s %s", a.ID(), later.ID(), other.ID())
	}
	d1 := view.Event{What: view.KindDelivered, Revision: "r1"}
	d2 := view.Event{What: view.KindDelivered, Revision: "r2"}
	if d1.ID() == d2.ID() {
		t.Fatal("two revisions, one id")
	}
}

func TestRender(t *testing.T) {
	place := view.Place{Node: "n1", Module: "web"}
	p := view.Judge(view.Input{Source: view.Source{Revision: "abc123", Modules: map[string]string{"web": "f2"}},
		Registrations: []bus.Registration{{Module: "web", Nodes: []string{"n1"}}},
		Wants:         map[view.Place]bus.Want{place: {Fingerprint: "f2", Digest: dB, Owner: bus.PutOwner("op"), At: t0}},
		Haves:         map[view.Place]bus.Have{place: have("f2", dB, bus.PhaseRunning, bus.Healthy, t0)}, Now: t0.Add(time.Minute), StuckAfter: view.DefaultStuckAfter})
	var plain, coloured bytes.Buffer
	if err := view.Render(&plain, p, t0.Add(time.Minute), false); err != nil {
		t.Fatal(err)
	}
	_ = view.Render(&coloured, p, t0.Add(time.Minute), true)
	out := plain.String()
	for _, s := range []string{"revision abc123: delivered", "web", "n1", "f2 (put:op)", "f2 running/healthy", "settled", "1m0s ago"} {
		if !strings.Contains(out, s) {
			t.Errorf("the table lacks %q:\n%s", s, out)
		}
	}
	if strings.Contains(out, "\x1b[") || !strings.Contains(coloured.String(), "\x1b[32msettled") {
		t.Errorf("colour only on a terminal:\n%q\n%q", out, coloured.String())
	}
}

func TestDecodeSource(t *testing.T) {
	good := `{"revision":"abc123","modules":{"web":"f2"},"at":"2026-12-02T12:00:00Z"}`
	if s, err := view.DecodeSource([]byte(good)); err != nil || s.Modules["web"] != "f2" {
		t.Fatalf("%+v %v", s, err)
	}
	for _, bad := range []string{
		`{}`, `{"revision":"","modules":{"web":"f2"},"at":"2026-12-02T12:00:00Z"}`,
		`{"revision":"abc","modules":{},"at":"2026-12-02T12:00:00Z"}`,
		`{"revision":"abc","modules":{"web":"f2"},"at":"yesterday"}`,
		`{"revision":"abc","modules":{"web":"f2"},"at":"2026-12-02T12:00:00Z","extra":1}`,
		`{"revision":"a b","modules":{"web":"f2"},"at":"2026-12-02T12:00:00Z"}`,
		`{"revision":"abc","modules":{"":"f2"},"at":"2026-12-02T12:00:00Z"}`,
	} {
		if _, err := view.DecodeSource([]byte(bad)); err == nil {
			t.Errorf("%s decoded", bad)
		}
	}
}

func FuzzDecodeSource(f *testing.F) {
	f.Add([]byte(`{"revision":"abc123","modules":{"web":"f2"},"at":"2026-12-02T12:00:00Z"}`))
	f.Add([]byte(`{"revision":"abc","modules":{"a..b":"f2"},"at":"2026-12-02T12:00:00Z"}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		s, err := view.DecodeSource(raw)
		if err != nil {
			return
		}
		// What decodes is what the bus can key, and encodes back to a
		// document that decodes the same.
		again, err := view.DecodeSource(bus.Encode(s))
		if err != nil || again.Revision != s.Revision || len(again.Modules) != len(s.Modules) {
			t.Fatalf("%+v did not survive: %v", s, err)
		}
	})
}
