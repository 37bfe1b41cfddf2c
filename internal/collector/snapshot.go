package collector

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/JorisJonkers-dev/delivery/internal/deploykit/clusterstate"
	"github.com/JorisJonkers-dev/delivery/internal/jsondoc"
)

// The document's fixed identity and the schema version this Collector writes.
const (
	APIVersion    = "state.jorisjonkers.dev/v1"
	Kind          = "ClusterState"
	SchemaVersion = "1.0.0"
	// schemaMajor is the only major version this Collector reads; a snapshot
	// of a later major was written by a newer Collector and is not ours to rewrite.
	schemaMajor = "1"
	// legacyBackups is the list older snapshots carried; it is read past and
	// never written.
	legacyBackups = "backups"
)

//go:embed cluster-state-snapshot.schema.json
var schemaJSON []byte

// snapshotSchema is deploy-kit's ClusterState schema, compiled once.
var snapshotSchema = jsondoc.MustCompile(schemaJSON, jsondoc.AssertFormats())

// Snapshot is the cluster-state.yml document.
type Snapshot struct {
	APIVersion    string `json:"apiVersion" yaml:"apiVersion"`
	Kind          string `json:"kind" yaml:"kind"`
	SchemaVersion string `json:"schemaVersion" yaml:"schemaVersion"`
	Cluster       string `json:"cluster" yaml:"cluster"`
	// CapturedAt is kept as written (RFC 3339 in UTC), so an unchanged
	// snapshot round-trips to the same bytes.
	CapturedAt string      `json:"capturedAt" yaml:"capturedAt"`
	Bindings   []Binding   `json:"bindings" yaml:"bindings"`
	Placements []Placement `json:"placements" yaml:"placements"`
}

// Facts are the snapshot's facts, normalized.
func (s Snapshot) Facts() Facts {
	return Normalize(Facts{Bindings: s.Bindings, Placements: s.Placements})
}

// NewSnapshot records facts captured at a moment for a cluster.
func NewSnapshot(cluster string, facts Facts, at time.Time) Snapshot {
	f := Normalize(facts)
	return Snapshot{
		APIVersion: APIVersion, Kind: Kind, SchemaVersion: SchemaVersion, Cluster: cluster,
		CapturedAt: at.UTC().Truncate(time.Second).Format(time.RFC3339),
		Bindings:   f.Bindings, Placements: f.Placements,
	}
}

// RefusedError says a document is not a snapshot this Collector may read or
// write: the schema refuses it, or it was written by a later major version.
type RefusedError struct {
	Reason string
}

func (e *RefusedError) Error() string { return "not a valid ClusterState snapshot: " + e.Reason }

// Validate holds a decoded JSON document (as jsondoc.Parse gives
// it) to the ClusterState schema.
func Validate(doc any) error {
	if err := snapshotSchema.Validate(doc); err != nil {
		return &RefusedError{Reason: err.Error()}
	}
	return nil
}

// Decode reads a cluster-state.yml. An older snapshot's backups list is
// dropped before the schema sees it; anything else the schema refuses, a
// duplicate key, or a later major schema version is a *RefusedError.
func Decode(data []byte) (Snapshot, error) {
	root, doc, err := decodeYAML(data)
	if err != nil {
		return Snapshot{}, &RefusedError{Reason: err.Error()}
	}
	if m, ok := doc.(map[string]any); ok {
		// Only the list it was: a backups key of any other shape is not an
		// older snapshot's, and the schema refuses it.
		if _, isList := m[legacyBackups].([]any); isList {
			delete(m, legacyBackups)
		}
	}
	if err := Validate(doc); err != nil {
		return Snapshot{}, err
	}
	// The generated type is read from the same node tree the schema judged.
	var typed clusterstate.ClusterState
	if err := root.Decode(&typed); err != nil {
		return Snapshot{}, &RefusedError{Reason: jsondoc.OneLine(err)}
	}
	written, _ := doc.(map[string]any)["capturedAt"].(string)
	s := snapshotOf(typed, written)
	if major, _, _ := strings.Cut(s.SchemaVersion, "."); major != schemaMajor {
		return Snapshot{}, &RefusedError{Reason: fmt.Sprintf("schemaVersion %s is not %s.x, which this Collector writes", s.SchemaVersion, schemaMajor)}
	}
	return s, nil
}

// snapshotOf is the Snapshot of a document decoded into the type generated
// from deploy-kit's schema. capturedAt is the text written, not the generated
// time.Time, so an unchanged snapshot re-encodes to the same bytes.
func snapshotOf(typed clusterstate.ClusterState, capturedAt string) Snapshot {
	bindings := make([]Binding, len(typed.Bindings))
	for i, b := range typed.Bindings {
		bindings[i] = Binding(b)
	}
	placements := make([]Placement, len(typed.Placements))
	for i, p := range typed.Placements {
		placements[i] = Placement{Process: p.Process, Node: p.Node}
	}
	return Snapshot{
		APIVersion: typed.APIVersion, Kind: typed.Kind, SchemaVersion: typed.SchemaVersion, Cluster: typed.Cluster,
		CapturedAt: capturedAt, Bindings: bindings, Placements: placements,
	}
}

// decodeYAML parses YAML once into a node tree and the plain value the
// schema validator reads (maps, slices, strings, numbers, booleans). A
// duplicate key is an error. Timestamps stay the text they were written as,
// as JSON would carry them, so the schema judges the text.
func decodeYAML(data []byte) (*yaml.Node, any, error) {
	var root yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&root); err != nil && !errors.Is(err, io.EOF) {
		return nil, nil, fmt.Errorf("not YAML: %s", jsondoc.OneLine(err))
	}
	// A second document would be dropped unseen by the next write.
	var more yaml.Node
	if err := dec.Decode(&more); !errors.Is(err, io.EOF) {
		return nil, nil, errors.New("not one YAML document: something follows the snapshot")
	}
	if len(root.Content) == 0 {
		return &root, nil, nil
	}
	timestampsAsText(&root)
	var doc any
	if err := root.Decode(&doc); err != nil {
		return nil, nil, fmt.Errorf("not YAML: %s", jsondoc.OneLine(err))
	}
	return &root, doc, nil
}

func timestampsAsText(n *yaml.Node) {
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!timestamp" {
		n.Tag = "!!str"
	}
	for _, c := range n.Content {
		timestampsAsText(c)
	}
}

// header opens every file the Collector writes.
const header = "# The cluster's volume bindings and process placements, captured by the\n" +
	"# delivery Collector. Written by machine; an edit is overwritten by the next\n" +
	"# capture that finds a fact changed.\n"

// Encode writes the snapshot as YAML in a fixed order (the schema's fields in
// order, facts normalized), so the same facts always give the same bytes. It
// refuses to produce a document the schema would refuse.
func Encode(s Snapshot) ([]byte, error) {
	f := s.Facts()
	s.Bindings, s.Placements = f.Bindings, f.Placements
	if err := Validate(s.document()); err != nil {
		return nil, fmt.Errorf("the snapshot to write: %w", err)
	}
	var buf bytes.Buffer
	buf.WriteString(header)
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(s); err != nil {
		return nil, fmt.Errorf("encode the snapshot: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("encode the snapshot: %w", err)
	}
	return buf.Bytes(), nil
}

// document is the snapshot as the plain value the schema validator reads.
func (s Snapshot) document() map[string]any {
	bindings := make([]any, len(s.Bindings))
	for i, b := range s.Bindings {
		bindings[i] = map[string]any{"claim": b.Claim, "node": b.Node}
	}
	placements := make([]any, len(s.Placements))
	for i, p := range s.Placements {
		placements[i] = map[string]any{"process": p.Process, "node": p.Node}
	}
	return map[string]any{
		"apiVersion": s.APIVersion, "kind": s.Kind, "schemaVersion": s.SchemaVersion, "cluster": s.Cluster,
		"capturedAt": s.CapturedAt, "bindings": bindings, "placements": placements,
	}
}
