package assign

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/mesh/bus"
)

var now = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

func digest(node, module, fingerprint string) string {
	return bus.Digest([]byte(node + "/" + module + "/" + fingerprint))
}

// estate is web on n1, n2, n3 (db its provider) and db on the same nodes,
// every node online and db healthy everywhere, web built at f2 (f1 before)
// with its grant and compositions, n1..n3 running web f1 as the rules
// wanted. Each case changes what it is about.
func estate() Input {
	in := Input{Now: now, Wants: map[Place]bus.Want{}, Haves: map[Place]bus.Have{}}
	nodes := []string{"n3", "n1", "n2"} // out of order: the canary is by name
	in.Registrations = []bus.Registration{
		{Module: "web", Nodes: nodes, Providers: []string{"db"}},
		{Module: "db", Nodes: nodes, Providers: []string{}},
	}
	for i, f := range []string{"f1", "f2"} {
		in.Builds = append(in.Builds, bus.Build{Module: "web", Fingerprint: f, State: bus.BuildDone, At: now.Add(time.Duration(i-10) * time.Minute)})
		in.Grants = append(in.Grants, bus.Grant{Module: "web", Fingerprint: f})
		for _, n := range nodes {
			in.Compositions = append(in.Compositions, Composition{n, "web", f, digest(n, "web", f)})
		}
	}
	for _, n := range nodes {
		in.Haves[Place{Node: n, Module: "db"}] = bus.Have{Fingerprint: "d1", Phase: bus.PhaseRunning, Health: bus.Healthy, At: now.Add(-time.Minute)}
		in.Haves[Place{Node: n, Module: "web"}] = runs("f1", now.Add(-time.Minute))
		in.Wants[Place{Node: n, Module: "web"}] = rulesWant(n, "f1")
	}
	return in
}

func runs(fingerprint string, at time.Time) bus.Have {
	return bus.Have{Fingerprint: fingerprint, Phase: bus.PhaseRunning, Health: bus.Healthy, At: at}
}

// rolledBack is a have of web running fingerprint healthy, gone back from
// from.
func rolledBack(fingerprint, from string) bus.Have {
	return bus.Have{Fingerprint: fingerprint, Phase: bus.PhaseRolledBack, Health: bus.Healthy,
		Attempt: bus.Attempt{Fingerprint: from, Digest: digest("n1", "web", from)}, At: now}
}

func rulesWant(node, fingerprint string) bus.Want {
	return bus.Want{Fingerprint: fingerprint, Digest: digest(node, "web", fingerprint), Owner: bus.OwnerRules, At: now.Add(-time.Hour)}
}

// written is the writes as "node=fingerprint" for web, in order.
func written(writes []Write) string {
	var out []string
	for _, w := range writes {
		if w.Module != "web" {
			out = append(out, w.Node+"/"+w.Module+"="+w.Want.Fingerprint)
			continue
		}
		out = append(out, w.Node+"="+w.Want.Fingerprint)
	}
	return strings.Join(out, " ")
}

func TestDecide(t *testing.T) {
	canaryRuns := func(in *Input) {
		in.Wants[Place{Node: "n1", Module: "web"}] = rulesWant("n1", "f2")
		in.Haves[Place{Node: "n1", Module: "web"}] = runs("f2", now)
	}
	cases := []struct {
		what   string
		change func(*Input)
		want   string
	}{
		{"a new build: the canary alone", func(*Input) {}, "n1=f2"},
		{"the canary healthy at it: the others", canaryRuns, "n2=f2 n3=f2"},
		{"everything as the rules give: nothing", func(in *Input) {
			canaryRuns(in)
			for _, n := range []string{"n2", "n3"} {
				in.Wants[Place{Node: n, Module: "web"}] = rulesWant(n, "f2")
			}
		}, ""},
		{"an equal want written at another time: nothing", func(in *Input) {
			canaryRuns(in)
			for _, n := range []string{"n2", "n3"} {
				w := rulesWant(n, "f2")
				w.At = now.Add(-24 * time.Hour)
				in.Wants[Place{Node: n, Module: "web"}] = w
			}
		}, ""},

		// 1: the build is done.
		{"rule 1: the newest build failed", func(in *Input) {
			in.Builds[1].State = bus.BuildFailed
		}, ""},
		{"rule 1: a newer build failed, the done one stays", func(in *Input) {
			canaryRuns(in)
			in.Builds = append(in.Builds, bus.Build{Module: "web", Fingerprint: "f3", State: bus.BuildFailed, At: now})
		}, "n2=f2 n3=f2"},
		{"rule 1: no build at all", func(in *Input) { in.Builds = nil }, ""},
		{"rule 1: a build of another module", func(in *Input) {
			for i := range in.Builds {
				in.Builds[i].Module = "other"
			}
		}, ""},

		// 2: not held.
		{"rule 2: the newest held: the one before stays", func(in *Input) {
			in.Holds = []bus.Hold{{Module: "web", Fingerprint: "f2"}}
		}, ""},
		{"rule 2: held after the canary moved: the canary goes back first", func(in *Input) {
			canaryRuns(in)
			in.Holds = []bus.Hold{{Module: "web", Fingerprint: "f2"}}
		}, "n1=f1"},
		{"rule 2: every build held", func(in *Input) {
			in.Holds = []bus.Hold{{Module: "web", Fingerprint: "f1"}, {Module: "web", Fingerprint: "f2"}}
			delete(in.Wants, Place{Node: "n1", Module: "web"})
		}, ""},
		{"rule 2: a hold of the same fingerprint on another module", func(in *Input) {
			in.Holds = []bus.Hold{{Module: "db", Fingerprint: "f2"}}
		}, "n1=f2"},

		// 3: the canary, or the canary runs it healthy.
		{"rule 3: the canary wants it but is not healthy", func(in *Input) {
			in.Wants[Place{Node: "n1", Module: "web"}] = rulesWant("n1", "f2")
			in.Haves[Place{Node: "n1", Module: "web"}] = bus.Have{Fingerprint: "f2", Phase: bus.PhaseRunning, Health: bus.Unhealthy, At: now}
		}, ""},
		{"rule 3: the canary still applying", func(in *Input) {
			in.Wants[Place{Node: "n1", Module: "web"}] = rulesWant("n1", "f2")
			in.Haves[Place{Node: "n1", Module: "web"}] = bus.Have{Fingerprint: "f2", Phase: bus.PhaseApplying, Health: bus.Unknown, At: now}
		}, ""},
		{"rule 3: the canary applying, f1 running healthy beside the attempt", func(in *Input) {
			in.Wants[Place{Node: "n1", Module: "web"}] = rulesWant("n1", "f2")
			in.Haves[Place{Node: "n1", Module: "web"}] = bus.Have{Fingerprint: "f1", Phase: bus.PhaseApplying, Health: bus.Healthy,
				Attempt: bus.Attempt{Fingerprint: "f2", Digest: digest("n1", "web", "f2")}, At: now}
		}, ""},
		{"rule 3: the canary rolled back from it: the canary back to the one before, no other moves", func(in *Input) {
			in.Wants[Place{Node: "n1", Module: "web"}] = rulesWant("n1", "f2")
			in.Haves[Place{Node: "n1", Module: "web"}] = rolledBack("f1", "f2")
		}, "n1=f1"},
		{"rule 3: the canary rolled back and wants the one before: nothing", func(in *Input) {
			in.Haves[Place{Node: "n1", Module: "web"}] = rolledBack("f1", "f2")
		}, ""},
		{"rule 3: the canary rolled back from an older build: the newest is given", func(in *Input) {
			in.Haves[Place{Node: "n1", Module: "web"}] = rolledBack("f1", "f0")
		}, "n1=f2"},
		{"rule 3: a node rolled back after the canary proved it: that node alone goes back", func(in *Input) {
			canaryRuns(in)
			in.Wants[Place{Node: "n2", Module: "web"}] = rulesWant("n2", "f2")
			in.Haves[Place{Node: "n2", Module: "web"}] = rolledBack("f1", "f2")
		}, "n2=f1 n3=f2"},
		{"rule 3: the canary's process ended: not healthy", func(in *Input) {
			in.Wants[Place{Node: "n1", Module: "web"}] = rulesWant("n1", "f2")
			in.Haves[Place{Node: "n1", Module: "web"}] = bus.Have{Fingerprint: "f2", Phase: bus.PhaseFailed, Health: bus.Healthy, At: now}
		}, ""},
		{"rule 3: the canary healthy at another fingerprint", func(in *Input) {
			in.Haves[Place{Node: "n1", Module: "web"}] = runs("f0", now)
		}, "n1=f2"},
		{"rule 3: the first node offline: the next is the canary", func(in *Input) {
			for p, h := range in.Haves {
				if p.Node == "n1" {
					h.At = now.Add(-DefaultOnlineWindow - time.Second)
					in.Haves[p] = h
				}
			}
		}, "n2=f2"},
		{"rule 3: online by another module's have alone", func(in *Input) {
			h := in.Haves[Place{Node: "n1", Module: "web"}]
			h.At = now.Add(-time.Hour)
			in.Haves[Place{Node: "n1", Module: "web"}] = h
		}, "n1=f2"},
		{"rule 3: a have at the window's edge is online", func(in *Input) {
			for p, h := range in.Haves {
				if p.Node == "n1" {
					h.At = now.Add(-DefaultOnlineWindow)
					in.Haves[p] = h
				}
			}
		}, "n1=f2"},
		{"rule 3: a wider window keeps the first node the canary", func(in *Input) {
			in.OnlineWindow = 2 * time.Hour
			for p, h := range in.Haves {
				if p.Node == "n1" {
					h.At = now.Add(-time.Hour)
					in.Haves[p] = h
				}
			}
		}, "n1=f2"},
		{"rule 3: no node online", func(in *Input) {
			for p, h := range in.Haves {
				h.At = now.Add(-time.Hour)
				in.Haves[p] = h
			}
		}, ""},
		{"rule 3: the canary healthy, an offline node still moves", func(in *Input) {
			canaryRuns(in)
			for p, h := range in.Haves {
				if p.Node == "n3" {
					h.At = now.Add(-time.Hour)
					in.Haves[p] = h
				}
			}
		}, "n2=f2 n3=f2"},

		// 4: step.
		{"rule 4: step 1 lets one node ahead", func(in *Input) {
			canaryRuns(in)
			in.Registrations[0].Step = 1
		}, "n2=f2"},
		{"rule 4: step 1, one node still proving: no other", func(in *Input) {
			canaryRuns(in)
			in.Registrations[0].Step = 1
			in.Wants[Place{Node: "n2", Module: "web"}] = rulesWant("n2", "f2")
			in.Haves[Place{Node: "n2", Module: "web"}] = bus.Have{Fingerprint: "f2", Phase: bus.PhaseApplying, Health: bus.Unknown, At: now}
		}, ""},
		{"rule 4: step 1, the one ahead proved it: the next", func(in *Input) {
			canaryRuns(in)
			in.Registrations[0].Step = 1
			in.Wants[Place{Node: "n2", Module: "web"}] = rulesWant("n2", "f2")
			in.Haves[Place{Node: "n2", Module: "web"}] = runs("f2", now)
		}, "n3=f2"},
		{"rule 4: step 2 takes both", func(in *Input) {
			canaryRuns(in)
			in.Registrations[0].Step = 2
		}, "n2=f2 n3=f2"},
		{"rule 4: a put ahead counts against the step", func(in *Input) {
			canaryRuns(in)
			in.Registrations[0].Step = 1
			in.Wants[Place{Node: "n2", Module: "web"}] = bus.Want{Fingerprint: "f2", Digest: digest("n2", "web", "f2"), Owner: bus.PutOwner("op")}
		}, ""},
		{"rule 4: a node that already runs it healthy is not held back", func(in *Input) {
			canaryRuns(in)
			in.Registrations[0].Step = 1
			in.Wants[Place{Node: "n2", Module: "web"}] = rulesWant("n2", "f2")
			in.Haves[Place{Node: "n2", Module: "web"}] = bus.Have{Fingerprint: "f2", Phase: bus.PhaseApplying, At: now}
			in.Haves[Place{Node: "n3", Module: "web"}] = runs("f2", now)
		}, "n3=f2"},
		{"rule 4: step does not bind the canary", func(in *Input) {
			in.Registrations[0].Step = 1
			in.Wants[Place{Node: "n2", Module: "web"}] = bus.Want{Fingerprint: "f2", Digest: digest("n2", "web", "f2"), Owner: bus.OwnerHand}
		}, "n1=f2"},

		// 5: providers healthy on the node.
		{"rule 5: the canary's provider unhealthy", func(in *Input) {
			h := in.Haves[Place{Node: "n1", Module: "db"}]
			h.Health = bus.Unhealthy
			in.Haves[Place{Node: "n1", Module: "db"}] = h
		}, ""},
		{"rule 5: a provider absent on one node holds that node alone", func(in *Input) {
			canaryRuns(in)
			delete(in.Haves, Place{Node: "n2", Module: "db"})
		}, "n3=f2"},
		{"rule 5: a provider failed", func(in *Input) {
			canaryRuns(in)
			h := in.Haves[Place{Node: "n3", Module: "db"}]
			h.Phase = bus.PhaseFailed
			in.Haves[Place{Node: "n3", Module: "db"}] = h
		}, "n2=f2"},

		// 6: the grant.
		{"rule 6: no grant at the fingerprint", func(in *Input) {
			in.Grants = in.Grants[:1]
		}, ""},
		{"rule 6: a grant of another module", func(in *Input) {
			in.Grants = []bus.Grant{{Module: "db", Fingerprint: "f2"}}
		}, ""},

		// 7: the composition exists and verified.
		{"rule 7: none for the canary", func(in *Input) {
			in.Compositions = slices.DeleteFunc(in.Compositions, func(c Composition) bool { return c.Node == "n1" && c.Fingerprint == "f2" })
		}, ""},
		{"rule 7: none for one node holds that node alone", func(in *Input) {
			canaryRuns(in)
			in.Compositions = slices.DeleteFunc(in.Compositions, func(c Composition) bool { return c.Node == "n3" && c.Fingerprint == "f2" })
		}, "n2=f2"},
		{"rule 7: a new composition at the same fingerprint is wanted", func(in *Input) {
			canaryRuns(in)
			for _, n := range []string{"n2", "n3"} {
				in.Wants[Place{Node: n, Module: "web"}] = rulesWant(n, "f2")
			}
			for i, c := range in.Compositions {
				if c.Node == "n3" && c.Fingerprint == "f2" {
					in.Compositions[i].Digest = bus.Digest([]byte("resigned"))
				}
			}
		}, "n3=f2"},

		// Puts and hands.
		{"a put is never written over", func(in *Input) {
			canaryRuns(in)
			in.Wants[Place{Node: "n2", Module: "web"}] = bus.Want{Fingerprint: "f1", Digest: digest("n2", "web", "f1"), Owner: bus.PutOwner("op-1")}
		}, "n3=f2"},
		{"a hand want on the canary is never written over", func(in *Input) {
			in.Wants[Place{Node: "n1", Module: "web"}] = bus.Want{Fingerprint: "f0", Digest: bus.Digest([]byte("mine")), Owner: bus.OwnerHand}
		}, ""},
		{"a node without a want gets one", func(in *Input) {
			canaryRuns(in)
			delete(in.Wants, Place{Node: "n3", Module: "web"})
		}, "n2=f2 n3=f2"},

		// Combinations.
		{"the canary's provider down and its composition missing", func(in *Input) {
			delete(in.Haves, Place{Node: "n1", Module: "db"})
			in.Compositions = slices.DeleteFunc(in.Compositions, func(c Composition) bool { return c.Node == "n1" })
		}, ""},
		{"a put on the canary: the rules wait on its have", func(in *Input) {
			in.Wants[Place{Node: "n1", Module: "web"}] = bus.Want{Fingerprint: "f2", Digest: digest("n1", "web", "f2"), Owner: bus.PutOwner("op")}
			in.Haves[Place{Node: "n1", Module: "web"}] = runs("f2", now)
		}, "n2=f2 n3=f2"},
		{"held, and the canary offline: the next canary goes back", func(in *Input) {
			for _, n := range []string{"n1", "n2", "n3"} {
				in.Wants[Place{Node: n, Module: "web"}] = rulesWant(n, "f2")
				in.Haves[Place{Node: n, Module: "web"}] = runs("f2", now)
			}
			for p, h := range in.Haves {
				if p.Node == "n1" {
					h.At = now.Add(-time.Hour)
					in.Haves[p] = h
				}
			}
			in.Holds = []bus.Hold{{Module: "web", Fingerprint: "f2"}}
		}, "n2=f1"},
		{"db moves on its own canary while web waits", func(in *Input) {
			in.Builds = append(in.Builds, bus.Build{Module: "db", Fingerprint: "d2", State: bus.BuildDone, At: now})
			in.Grants = append(in.Grants, bus.Grant{Module: "db", Fingerprint: "d2"})
			for _, n := range []string{"n1", "n2", "n3"} {
				in.Compositions = append(in.Compositions, Composition{n, "db", "d2", digest(n, "db", "d2")})
			}
		}, "n1/db=d2 n1=f2"},
	}
	for _, c := range cases {
		in := estate()
		c.change(&in)
		got := Decide(in)
		if written(got) != c.want {
			t.Errorf("%s: wrote %q, want %q", c.what, written(got), c.want)
		}
		for _, w := range got {
			if w.Want.Owner != bus.OwnerRules || !w.Want.At.Equal(now) || w.Want.Digest == "" {
				t.Errorf("%s: wrote %+v", c.what, w)
			}
			if comp := digestOf(in, w); w.Want.Digest != comp {
				t.Errorf("%s: %s wants digest %s, its composition is %s", c.what, w.Node, w.Want.Digest, comp)
			}
		}
	}
}

func digestOf(in Input, w Write) string {
	for _, c := range in.Compositions {
		if c.Node == w.Node && c.Module == w.Module && c.Fingerprint == w.Want.Fingerprint {
			return c.Digest
		}
	}
	return ""
}

func TestDecideIsIndependentOfOrder(t *testing.T) {
	in := estate()
	in.Builds = append(in.Builds, bus.Build{Module: "web", Fingerprint: "f0", State: bus.BuildDone, At: in.Builds[1].At})
	first := written(Decide(in))
	slices.Reverse(in.Builds)
	slices.Reverse(in.Registrations)
	slices.Reverse(in.Compositions)
	if again := written(Decide(in)); again != first || first != "n1=f2" {
		t.Fatalf("reordered input wrote %q, first %q; builds at one time are ordered by fingerprint", again, first)
	}
}

// Large is an estate of nodes × modules in which every module has a build
// done that no node wants yet and each canary runs it healthy: the pass
// that writes every other node's want.
func Large(nodes, modules int) Input {
	in := Input{Now: now, Wants: make(map[Place]bus.Want, nodes*modules), Haves: make(map[Place]bus.Have, nodes*modules)}
	names := make([]string, nodes)
	for i := range names {
		names[i] = fmt.Sprintf("node-%04d", i)
	}
	for m := range modules {
		module := fmt.Sprintf("module-%02d", m)
		in.Registrations = append(in.Registrations, bus.Registration{Module: module, Nodes: names, Providers: []string{}})
		in.Builds = append(in.Builds, bus.Build{Module: module, Fingerprint: "new", State: bus.BuildDone, At: now})
		in.Grants = append(in.Grants, bus.Grant{Module: module, Fingerprint: "new"})
		for i, n := range names {
			in.Compositions = append(in.Compositions, Composition{n, module, "new", bus.Digest([]byte(n + module))})
			have := runs("old", now)
			if i == 0 {
				have = runs("new", now)
			}
			in.Haves[Place{Node: n, Module: module}] = have
		}
	}
	return in
}

func TestDecideLarge(t *testing.T) {
	writes := Decide(Large(100, 5))
	if len(writes) != 100*5 {
		t.Fatalf("%d writes, want every node's of every module", len(writes))
	}
}

// BenchmarkDecide is the pure rules over 1,000 nodes × 50 modules, every
// want to write at once.
func BenchmarkDecide(b *testing.B) {
	in := Large(1000, 50)
	b.ReportAllocs()
	for b.Loop() {
		if n := len(Decide(in)); n != 1000*50 {
			b.Fatalf("%d writes", n)
		}
	}
}
