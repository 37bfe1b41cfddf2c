package composition

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/jsondoc"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/bus"
)

// Schemas are the JSON Schemas of a composition and of its signed envelope,
// published with the project (docs/mesh.md names them).
//
//go:embed schema/*.schema.json
var Schemas embed.FS

func mustSchema(file string) *jsondoc.Schema {
	return jsondoc.MustCompileFile(Schemas, "schema/"+file, jsondoc.AssertFormats())
}

var (
	documentSchema = mustSchema("composition.schema.json")
	envelopeSchema = mustSchema("envelope.schema.json")
)

// Document is what one node runs of one module at one fingerprint.
type Document struct {
	Module      string          `json:"module"`
	Fingerprint string          `json:"fingerprint"`
	Node        string          `json:"node"`
	Files       map[string]File `json:"files"`
	Command     Command         `json:"command"`
	Health      Health          `json:"health"`
	HoldsData   bool            `json:"holdsData"`
	// DataDir is where the module keeps its data, set exactly when it
	// holds data.
	DataDir string `json:"dataDir,omitempty"`
}

// File is one file the composition lays down.
type File struct {
	Content string `json:"content"`
	// Mode is the permission bits in octal, as 0644.
	Mode string `json:"mode"`
}

// Perm is the file's mode as the file system takes it.
func (f File) Perm() fs.FileMode {
	m, err := strconv.ParseUint(f.Mode, 8, 32)
	if err != nil {
		return 0 // not reached for a decoded document: the schema holds the form
	}
	return fs.FileMode(m) & fs.ModePerm
}

// Command is what the composition runs.
type Command struct {
	Argv []string          `json:"argv"`
	Env  map[string]string `json:"env,omitempty"`
	// Dir is the working directory inside the module's folder; empty is
	// the folder itself.
	Dir string `json:"dir,omitempty"`
}

// Health is the check that says the module runs healthy: an HTTP URL or a
// command, exactly one.
type Health struct {
	HTTP     string   `json:"http,omitempty"`
	Command  []string `json:"command,omitempty"`
	Interval Duration `json:"interval"`
	Timeout  Duration `json:"timeout"`
}

// Duration is a time.Duration written as Go writes one ("10s"), which a
// person reads and writes more surely than nanoseconds.
type Duration time.Duration

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads a duration string.
func (d *Duration) UnmarshalJSON(raw []byte) error {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return err
	}
	parsed, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(parsed)
	return nil
}

// ErrPath marks a path that would reach outside the module's folder or name
// it in more than one way.
var ErrPath = errors.New("not a clean relative path")

// CheckPath holds p to being relative, clean and inside the module's
// folder: no leading '/', no '.' or '..' element, no doubled or trailing
// '/', no backslash or NUL (which another system would read as a separator
// or an end).
func CheckPath(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("%w: the path is empty", ErrPath)
	case strings.ContainsAny(p, "\\\x00"):
		return fmt.Errorf("%w: %q holds a backslash or a NUL", ErrPath, p)
	case path.IsAbs(p):
		return fmt.Errorf("%w: %q is absolute", ErrPath, p)
	case path.Clean(p) != p:
		return fmt.Errorf("%w: %q is not clean (it is %q cleaned)", ErrPath, p, path.Clean(p))
	case p == "." || p == ".." || strings.HasPrefix(p, "../"):
		return fmt.Errorf("%w: %q is not inside the module's folder", ErrPath, p)
	}
	return nil
}

// Decode reads a composition document strictly: its schema, then what a
// schema cannot say (clean paths, names the bus can key, a timeout within
// the interval, a file that is not also the data directory's parent).
func Decode(raw []byte) (Document, error) {
	var d Document
	if err := documentSchema.DecodeStrict(raw, &d); err != nil {
		return Document{}, fmt.Errorf("composition: %w", err)
	}
	if err := d.check(); err != nil {
		return Document{}, fmt.Errorf("composition of %q at %q for %q: %w", d.Module, d.Fingerprint, d.Node, err)
	}
	return d, nil
}

func (d Document) check() error {
	for _, name := range []string{d.Module, d.Fingerprint, d.Node} {
		if _, err := bus.EncodeName(name); err != nil {
			return err
		}
	}
	for p := range d.Files {
		if err := CheckPath(p); err != nil {
			return fmt.Errorf("files: %w", err)
		}
	}
	for _, p := range []string{d.Command.Dir, d.DataDir} {
		if p == "" {
			continue
		}
		if err := CheckPath(p); err != nil {
			return err
		}
	}
	if d.HoldsData != (d.DataDir != "") {
		return errors.New("a data directory is named exactly when the module holds data")
	}
	if d.DataDir != "" {
		for p := range d.Files {
			if p == d.DataDir || strings.HasPrefix(p, d.DataDir+"/") {
				return fmt.Errorf("files: %q is inside the data directory %q, which the composition does not lay down", p, d.DataDir)
			}
		}
	}
	h := d.Health
	if (h.HTTP == "") == (len(h.Command) == 0) {
		return errors.New("health: an HTTP URL or a command, exactly one")
	}
	if h.HTTP != "" {
		if u, err := url.Parse(h.HTTP); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("health: %q is not an http(s) URL", h.HTTP)
		}
	}
	if h.Interval <= 0 || h.Timeout <= 0 || h.Timeout > h.Interval {
		return fmt.Errorf("health: interval %v and timeout %v: both above zero, the timeout at most the interval",
			time.Duration(h.Interval), time.Duration(h.Timeout))
	}
	return nil
}

// Names says whether the document is the one for node, module and
// fingerprint: a composition signed for one node and copied into another's
// bucket, or filed under another fingerprint, is not that node's.
func (d Document) Names(node, module, fingerprint string) error {
	if d.Node != node || d.Module != module || d.Fingerprint != fingerprint {
		return fmt.Errorf("the composition is of %q at %q for %q, not of %q at %q for %q",
			d.Module, d.Fingerprint, d.Node, module, fingerprint, node)
	}
	return nil
}

// Encode is the document as it is signed.
func (d Document) Encode() ([]byte, error) {
	if d.Files == nil {
		d.Files = map[string]File{}
	}
	raw, err := json.Marshal(d)
	if err != nil {
		return nil, err
	}
	// What is signed must be what a node decodes: hold it to the schema
	// here, not at the first node that refuses it.
	if _, err := Decode(raw); err != nil {
		return nil, err
	}
	return raw, nil
}
