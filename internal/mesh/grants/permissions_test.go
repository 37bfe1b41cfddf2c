package grants

import (
	"errors"
	"strings"
	"testing"
)

// matches is the server's subject match: * is one token, > the rest.
func matches(pattern, subject string) bool {
	p, s := strings.Split(pattern, "."), strings.Split(subject, ".")
	for i, tok := range p {
		if tok == ">" {
			return len(s) > i
		}
		if i >= len(s) || tok != "*" && tok != s[i] {
			return false
		}
	}
	return len(p) == len(s)
}

func allowed(patterns []string, subject string) bool {
	for _, p := range patterns {
		if matches(p, subject) {
			return true
		}
	}
	return false
}

func TestFor(t *testing.T) {
	const (
		wantsN1   = "$JS.API.CONSUMER.CREATE.KV_mesh_wants.c1.$KV.mesh_wants.want.n1.>"
		wantsAll  = "$JS.API.CONSUMER.CREATE.KV_mesh_wants.c1.$KV.mesh_wants.>"
		composed1 = "$JS.API.STREAM.INFO.KV_composed-n1"
		composed2 = "$JS.API.STREAM.INFO.KV_composed-n2"
		watch2    = "$JS.API.CONSUMER.CREATE.KV_composed-n2.c1.$KV.composed-n2.>"
		getWant2  = "$JS.API.DIRECT.GET.KV_mesh_wants.$KV.mesh_wants.want.n2.web"
	)
	for _, tc := range []struct {
		name    string
		part    Part
		node    string
		subject string
		sub     bool // a subscription, not a publish
		want    bool
	}{
		{"the agent watches its own wants", Agent, "n1", wantsN1, false, true},
		{"the agent reads its own want", Agent, "n1", "$JS.API.DIRECT.GET.KV_mesh_wants.$KV.mesh_wants.want.n1.web", false, true},
		{"the agent does not watch every want", Agent, "n1", wantsAll, false, false},
		{"the agent does not read another node's want", Agent, "n1", getWant2, false, false},
		{"the agent does not pull from the wants' stream", Agent, "n1", "$JS.API.STREAM.MSG.GET.KV_mesh_wants", false, false},
		{"the agent binds its own compositions", Agent, "n1", composed1, false, true},
		{"the agent does not bind another node's compositions", Agent, "n1", composed2, false, false},
		{"the agent does not watch another node's compositions", Agent, "n1", watch2, false, false},
		{"the agent does not write a want", Agent, "n1", "$KV.mesh_wants.want.n1.web", false, false},
		{"the agent writes its own have", Agent, "n1", "$KV.mesh_haves.have.n1.web", false, true},
		{"the agent does not write another node's have", Agent, "n1", "$KV.mesh_haves.have.n2.web", false, false},
		{"the agent asks its own backup worker", Agent, "n1", "mesh.backup.n1", false, true},
		{"the agent does not ask another backup worker", Agent, "n1", "mesh.backup.n2", false, false},
		{"the agent hears on its own inbox", Agent, "n1", "_mesh_inbox.agent.n1.x", true, true},
		{"the agent does not hear another agent's inbox", Agent, "n1", "_mesh_inbox.agent.n2.x", true, false},
		{"the agent does not hear every inbox", Agent, "n1", "_INBOX.x", true, false},
		{"an escaped node name keys its own wants", Agent, "web.api", "$KV.mesh_haves.have.web_2eapi.m", false, true},
		{"the backup worker answers its node", BackupWorker, "n1", "mesh.backup.n1", true, true},
		{"the backup worker does not answer another node", BackupWorker, "n1", "mesh.backup.n2", true, false},
		{"the agent binds the builds", Agent, "n1", "$JS.API.STREAM.INFO.KV_mesh_builds", false, true},
		{"the agent does not read a build", Agent, "n1", "$JS.API.DIRECT.GET.KV_mesh_builds.$KV.mesh_builds.build.web.f1", false, false},
		{"the agent reads a hold", Agent, "n1", "$JS.API.DIRECT.GET.KV_mesh_holds.$KV.mesh_holds.hold.web.f1", false, true},
		{"the agent does not write a hold", Agent, "n1", "$KV.mesh_holds.hold.web.f1", false, false},
		{"the backup worker binds nothing", BackupWorker, "n1", "$JS.API.STREAM.INFO.KV_mesh_wants", false, false},
		{"the backup worker writes nothing on the bus", BackupWorker, "n1", "$KV.mesh_haves.have.n1.web", false, false},
		{"the assigner writes wants", Assigner, "", "$KV.mesh_wants.want.n2.web", false, true},
		{"the assigner watches every want", Assigner, "", wantsAll, false, true},
		{"the assigner does not write haves", Assigner, "", "$KV.mesh_haves.have.n1.web", false, false},
		{"the assigner does not write holds", Assigner, "", "$KV.mesh_holds.hold.web.f1", false, false},
		{"the assigner reads every registered node's compositions", Assigner, "", watch2, false, true},
		{"the assigner reads an escaped node's compositions", Assigner, "", "$JS.API.STREAM.INFO.KV_composed-web_2eapi", false, true},
		{"the assigner does not write a composition", Assigner, "", "$KV.composed-n1.composition.web.f1", false, false},
		{"the assigner reads a node's large compositions", Assigner, "", "$JS.API.CONSUMER.CREATE.OBJ_composed-n2.c1.$O.composed-n2.C.abc", false, true},
		{"the assigner does not write an object store", Assigner, "", "$O.composed-n2.C.abc", false, false},
		{"the agent binds its own object store", Agent, "n1", "$JS.API.STREAM.INFO.OBJ_composed-n1", false, true},
		{"the agent reads its own large composition", Agent, "n1", "$JS.API.CONSUMER.CREATE.OBJ_composed-n1.c1.$O.composed-n1.C.abc", false, true},
		{"the agent reads its own object's name", Agent, "n1", "$JS.API.DIRECT.GET.OBJ_composed-n1.$O.composed-n1.M.abc", false, true},
		{"the agent does not bind another node's object store", Agent, "n1", "$JS.API.STREAM.INFO.OBJ_composed-n2", false, false},
		{"the agent does not read another node's large composition", Agent, "n1", "$JS.API.CONSUMER.CREATE.OBJ_composed-n2.c1.$O.composed-n2.C.abc", false, false},
		{"the agent does not get another node's object by message", Agent, "n1", "$JS.API.STREAM.MSG.GET.OBJ_composed-n2", false, false},
		{"the agent does not write its object store", Agent, "n1", "$O.composed-n1.C.abc", false, false},
		{"the agent does not read the old shared object store", Agent, "n1", "$JS.API.CONSUMER.CREATE.OBJ_mesh_compositions.c1.$O.mesh_compositions.C.abc", false, false},
		{"the assigner does not write a seal", Assigner, "", "$KV.mesh_seals.seal.n1.web", false, false},
		{"the assigner binds the seals", Assigner, "", "$JS.API.STREAM.INFO.KV_mesh_seals", false, true},
		{"the agent reads its own seal", Agent, "n1", "$JS.API.DIRECT.GET.KV_mesh_seals.$KV.mesh_seals.seal.n1.web", false, true},
		{"the agent does not read another node's seal", Agent, "n1", "$JS.API.DIRECT.GET.KV_mesh_seals.$KV.mesh_seals.seal.n2.web", false, false},
		{"the agent does not write its seal", Agent, "n1", "$KV.mesh_seals.seal.n1.web", false, false},
		{"the watchman binds the seals", Watchman, "", "$JS.API.STREAM.INFO.KV_mesh_seals", false, true},
		{"the watchman does not write a seal", Watchman, "", "$KV.mesh_seals.seal.n1.web", false, false},
		{"CI does not write a seal", Source, "", "$KV.mesh_seals.seal.n1.web", false, false},
		{"the assigner makes no stream", Assigner, "", "$JS.API.STREAM.CREATE.KV_mesh_wants", false, false},
		{"the watchman says an event", Watchman, "", "mesh.events.stall", false, true},
		{"the watchman writes what was said", Watchman, "", "$KV.mesh_said.stall.x", false, true},
		{"the watchman does not write a want", Watchman, "", "$KV.mesh_wants.want.n1.web", false, false},
		{"the watchman does not read compositions", Watchman, "", composed1, false, false},
		{"the view reads the source", View, "", "$JS.API.DIRECT.GET.KV_mesh_sources.$KV.mesh_sources.source.main", false, true},
		{"the view does not write the source", View, "", "$KV.mesh_sources.source.main", false, false},
		{"the view does not write a have", View, "", "$KV.mesh_haves.have.n1.web", false, false},
		{"CI writes the source", Source, "", "$KV.mesh_sources.source.main", false, true},
		{"CI writes nothing else", Source, "", "$KV.mesh_sources.source.other", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			perms, err := For(tc.part, tc.node)
			if err != nil {
				t.Fatal(err)
			}
			list := perms.Pub
			if tc.sub {
				list = perms.Sub
			}
			if got := allowed(list, tc.subject); got != tc.want {
				t.Errorf("%s on %q: allowed %v, want %v", tc.part, tc.subject, got, tc.want)
			}
		})
	}
}

func TestForRespond(t *testing.T) {
	for _, p := range Parts {
		perms, err := For(p, "n1")
		if err != nil {
			t.Fatal(err)
		}
		if perms.Respond != (p == BackupWorker) {
			t.Errorf("%s responds %v", p, perms.Respond)
		}
	}
}

func TestForRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		part Part
		node string
	}{
		{"an unknown part", "operator", ""},
		{"an agent of no node", Agent, ""},
		{"a backup worker of a node with a space", BackupWorker, "n 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := For(tc.part, tc.node); !errors.Is(err, ErrPart) {
				t.Errorf("err = %v, want ErrPart", err)
			}
		})
	}
}
