package collector

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/deploykit/corpustest"
)

var capturedAt = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

func sampleFacts() Facts {
	return Facts{
		Bindings:   []Binding{{"data-postgres-0", "node-b"}, {"data-garage-0", "node-a"}},
		Placements: []Placement{{"web", "node-b"}, {"api", "node-a"}, {"web", "node-a"}, {"api", "node-a"}},
	}
}

func TestSnapshotRoundTrip(t *testing.T) {
	s := NewSnapshot("production", sampleFacts(), capturedAt.Add(500*time.Millisecond))
	data, err := Encode(s)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, s) {
		t.Fatalf("round trip changed the snapshot:\n%#v\n%#v", back, s)
	}
	if back.CapturedAt != "2026-11-30T09:00:00Z" {
		t.Fatalf("capturedAt %q", back.CapturedAt)
	}
	again, err := Encode(back)
	if err != nil || !bytes.Equal(again, data) {
		t.Fatalf("encoding is not stable:\n%s\n%s", data, again)
	}
}

func TestEncodeIsOrderedAndDeterministic(t *testing.T) {
	shuffled := sampleFacts()
	shuffled.Bindings[0], shuffled.Bindings[1] = shuffled.Bindings[1], shuffled.Bindings[0]
	a, err := Encode(NewSnapshot("production", sampleFacts(), capturedAt))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Encode(NewSnapshot("production", shuffled, capturedAt))
	if err != nil || !bytes.Equal(a, b) {
		t.Fatalf("the same facts in another order encode differently: %v", err)
	}
	want := header + `apiVersion: state.jorisjonkers.dev/v1
kind: ClusterState
schemaVersion: 1.0.0
cluster: production
capturedAt: "2026-11-30T09:00:00Z"
bindings:
  - claim: data-garage-0
    node: node-a
  - claim: data-postgres-0
    node: node-b
placements:
  - process: api
    node: node-a
  - process: web
    node: node-a
  - process: web
    node: node-b
`
	if string(a) != want {
		t.Fatalf("encoded:\n%s\nwant:\n%s", a, want)
	}
	empty, err := Encode(NewSnapshot("production", Facts{}, capturedAt))
	if err != nil || !strings.Contains(string(empty), "bindings: []\nplacements: []\n") {
		t.Fatalf("an empty snapshot encodes as:\n%s (%v)", empty, err)
	}
}

func TestDecodeRefuses(t *testing.T) {
	valid := "apiVersion: state.jorisjonkers.dev/v1\nkind: ClusterState\nschemaVersion: 1.0.0\ncluster: production\ncapturedAt: \"2026-09-30T00:00:00Z\"\n"
	cases := []struct {
		name, doc, reason string
	}{
		{"no lists", valid, "missing properties"},
		{"an unknown field", valid + "bindings: []\nplacements: []\ncolour: blue\n", "colour"},
		{"a placement without a node", valid + "bindings: []\nplacements: [{process: api}]\n", "node"},
		{"a binding with an extra field", valid + "bindings: [{claim: a, node: b, size: 1}]\nplacements: []\n", "size"},
		{"an offset time", strings.Replace(valid, "00:00:00Z", "00:00:00+02:00", 1) + "bindings: []\nplacements: []\n", "capturedAt"},
		{"a later major schema", strings.Replace(valid, "1.0.0", "2.0.0", 1) + "bindings: []\nplacements: []\n", "schemaVersion 2.0.0"},
		{"a duplicate key", valid + "bindings: []\nbindings: []\nplacements: []\n", `mapping key "bindings" already defined`},
		{"not YAML", "{", "not YAML"},
		{"empty", "", "want object"},
		{"a list", "- a\n", "want object"},
		{"another kind", strings.Replace(valid, "ClusterState", "Cluster", 1) + "bindings: []\nplacements: []\n", "kind"},
		{"a backups key that is not the older list", valid + "bindings: []\nplacements: []\nbackups: 5\n", "backups"},
		{"a second document", valid + "bindings: []\nplacements: []\n---\nkind: Something\n", "not one YAML document"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode([]byte(tc.doc))
			var refused *RefusedError
			if !errors.As(err, &refused) || !strings.Contains(err.Error(), tc.reason) {
				t.Fatalf("Decode = %v, want a refusal naming %q", err, tc.reason)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("the reason spans lines: %q", err)
			}
		})
	}
}

func TestDecodeReadsAnUnquotedTimestampAsItsText(t *testing.T) {
	doc := "apiVersion: state.jorisjonkers.dev/v1\nkind: ClusterState\nschemaVersion: 1.0.0\ncluster: production\n" +
		"capturedAt: 2026-09-30T00:00:00Z\nbindings: []\nplacements: []\n"
	s, err := Decode([]byte(doc))
	if err != nil || s.CapturedAt != "2026-09-30T00:00:00Z" {
		t.Fatalf("Decode = %+v, %v", s, err)
	}
	if _, err := Decode([]byte(strings.Replace(doc, "00:00:00Z", "00:00:00+01:00", 1))); err == nil {
		t.Fatal("an unquoted timestamp with an offset was accepted")
	}
}

func TestOlderSnapshotsBackupsAreReadPastAndNotWritten(t *testing.T) {
	doc := "apiVersion: state.jorisjonkers.dev/v1\nkind: ClusterState\nschemaVersion: 1.0.0\ncluster: production\n" +
		"capturedAt: \"2026-09-30T00:00:00Z\"\nbindings: []\nplacements: [{process: api, node: node-a}]\n" +
		"backups:\n  - claim: data\n    target: s3://somewhere\n"
	s, err := Decode([]byte(doc))
	if err != nil {
		t.Fatalf("an older snapshot with backups was refused: %v", err)
	}
	if len(s.Placements) != 1 {
		t.Fatalf("decoded %+v", s)
	}
	// Equal facts commit nothing, the list notwithstanding.
	if _, _, write, err := Next(&s, "production", s.Facts(), capturedAt); err != nil || write {
		t.Fatalf("unchanged facts: write %v, %v", write, err)
	}
	next, _, write, err := Next(&s, "production", Facts{}, capturedAt)
	if err != nil || !write {
		t.Fatalf("Next = %v %v", write, err)
	}
	data, err := Encode(next)
	if err != nil || strings.Contains(string(data), "backups") {
		t.Fatalf("written:\n%s (%v)", data, err)
	}
}

func TestNext(t *testing.T) {
	committed := NewSnapshot("production", sampleFacts(), capturedAt)
	later := capturedAt.Add(10 * time.Minute)
	moved := sampleFacts()
	moved.Placements[0] = Placement{"web", "node-c"}

	t.Run("no snapshot yet: the first capture is written", func(t *testing.T) {
		next, msg, write, err := Next(nil, "production", sampleFacts(), later)
		if err != nil || !write || next.CapturedAt != "2026-11-30T09:10:00Z" ||
			msg != "cluster-state: production: first capture, 2 bindings and 3 placements" {
			t.Fatalf("%v %q %v %v", next, msg, write, err)
		}
	})
	t.Run("equal facts: nothing is written and capturedAt stays", func(t *testing.T) {
		shuffled := sampleFacts()
		shuffled.Placements[0], shuffled.Placements[2] = shuffled.Placements[2], shuffled.Placements[0]
		next, msg, write, err := Next(&committed, "production", shuffled, later)
		if err != nil || write || msg != "" || next.CapturedAt != committed.CapturedAt {
			t.Fatalf("%v %q %v %v", next, msg, write, err)
		}
	})
	t.Run("a moved pod: written with the change named", func(t *testing.T) {
		next, msg, write, err := Next(&committed, "production", moved, later)
		if err != nil || !write || next.CapturedAt != "2026-11-30T09:10:00Z" {
			t.Fatalf("%v %v %v", next, write, err)
		}
		want := "cluster-state: production: placements +1 -1\n\n+ process web on node-c\n- process web on node-b\n"
		if msg != want {
			t.Fatalf("message %q, want %q", msg, want)
		}
	})
	t.Run("another cluster's snapshot is never overwritten", func(t *testing.T) {
		_, _, write, err := Next(&committed, "staging", moved, later)
		if !errors.Is(err, ErrOtherCluster) || write || !strings.Contains(err.Error(), `"production"`) {
			t.Fatalf("%v %v", write, err)
		}
	})
}

func TestCommitMessageListsBindingsAndBoundsItsBody(t *testing.T) {
	before := NewSnapshot("production", Facts{Bindings: []Binding{{"a", "n1"}}}, capturedAt)
	var many []Placement
	for i := range 60 {
		many = append(many, Placement{Process: "p" + strings.Repeat("x", i), Node: "n"})
	}
	after := NewSnapshot("production", Facts{Bindings: []Binding{{"b", "n2"}}, Placements: many}, capturedAt)
	msg := CommitMessage(&before, after)
	if !strings.HasPrefix(msg, "cluster-state: production: bindings +1 -1, placements +60 -0\n\n+ claim b bound on n2\n- claim a bound on n1\n") ||
		!strings.HasSuffix(msg, "... and 12 more\n") {
		t.Fatalf("message:\n%s", msg)
	}
	if first := CommitMessage(nil, NewSnapshot("c", Facts{Bindings: []Binding{{"a", "n"}}, Placements: []Placement{{"p", "n"}}}, capturedAt)); first != "cluster-state: c: first capture, 1 binding and 1 placement" {
		t.Fatalf("first: %q", first)
	}
}

// TestDeployKitCorpus runs every document of deploy-kit's corpus for the
// snapshot schema, vendored under third_party/deploy-kit, through the
// Collector's reader and agrees with each verdict.
func TestDeployKitCorpus(t *testing.T) {
	// The schema the project carries is deploy-kit's, so verdicts can agree.
	var a, b any
	if json.Unmarshal(corpustest.SchemaJSON(t, "cluster-state-snapshot"), &a) != nil || json.Unmarshal(schemaJSON, &b) != nil || !reflect.DeepEqual(a, b) {
		t.Fatal("the embedded schema differs from deploy-kit's cluster-state-snapshot.schema.json")
	}
	for _, tc := range corpustest.Cases(t, "cluster-state-snapshot") {
		t.Run(tc.Name, func(t *testing.T) {
			_, err := Decode(tc.Document)
			switch tc.Verdict {
			case corpustest.Accept:
				if err != nil {
					t.Fatalf("refused a document deploy-kit accepts: %v", err)
				}
			case corpustest.Refuse:
				if err == nil {
					t.Fatal("accepted a document deploy-kit refuses")
				}
			default:
				t.Fatalf("unknown verdict %q", tc.Verdict)
			}
		})
	}
}

func FuzzDecode(f *testing.F) {
	good, _ := Encode(NewSnapshot("production", sampleFacts(), capturedAt))
	f.Add(good)
	f.Add([]byte("apiVersion: state.jorisjonkers.dev/v1\nkind: ClusterState\nschemaVersion: 1.0.0\ncluster: production\ncapturedAt: \"2026-09-30T00:00:00Z\"\nbindings: []\nplacements: []\nbackups: [1]\n"))
	f.Add([]byte("{"))
	f.Add([]byte("{1: 2, .nan: [a, *b]}"))
	f.Add([]byte("capturedAt: &t 2026-09-30T00:00:00Z\ncluster: *t\n"))
	f.Add([]byte(""))
	f.Add([]byte("bindings: [{claim: a, node: b}, {claim: a, node: b}]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Decode(data)
		if err != nil {
			var refused *RefusedError
			if !errors.As(err, &refused) {
				t.Fatalf("a refusal of another type: %v", err)
			}
			return
		}
		// Whatever is accepted re-encodes to a document accepted with the same facts.
		out, err := Encode(s)
		if err != nil {
			t.Fatalf("an accepted snapshot does not encode: %v", err)
		}
		back, err := Decode(out)
		if err != nil || !back.Facts().Equal(s.Facts()) || back.Cluster != s.Cluster {
			t.Fatalf("re-encoding changed the snapshot: %v", err)
		}
	})
}
