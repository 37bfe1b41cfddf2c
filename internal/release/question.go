package release

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
)

// Question is what one webhook call asks: which member of which Application,
// at which revision. It is read from Flagger's payload, whose metadata the
// render fills from the Canary's webhook.
type Question struct {
	// Namespace is the Canary's, which is the Application's.
	Namespace   string
	Application string
	// Process is the member asking; Flagger names the payload after its Canary,
	// which is named for the Process.
	Process string
	// Revision is the Application revision, sha256:<64 hex>.
	Revision string
	// Phase is the Canary's phase as Flagger sent it; informational only,
	// because the gate reads the Canary itself.
	Phase string
}

// Tag is the revision's first 12 hex digits, the suffix of its Jobs' names.
func (q Question) Tag() string { return RevisionTag(q.Revision) }

// RevisionTag is the first 12 hex digits of a revision, or "" when it has none.
func RevisionTag(revision string) string {
	if !revisionPattern.MatchString(revision) {
		return ""
	}
	return revision[len("sha256:") : len("sha256:")+12]
}

// payload is Flagger's CanaryWebhookPayload. Flagger's own type is not used so
// that a field Flagger adds later does not change what the gate accepts;
// unknown top-level fields are Flagger's and are ignored.
type payload struct {
	Name      string            `json:"name"`
	Namespace string            `json:"namespace"`
	Phase     string            `json:"phase"`
	Checksum  string            `json:"checksum"`
	Metadata  map[string]string `json:"metadata"`
}

var (
	revisionPattern = regexp.MustCompile(`^sha256:[a-f0-9]{64}$`)
	// dnsLabel is what a namespace, an Application id and a Process name all
	// are: each becomes part of an object name or a label value.
	dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)
)

// IsRevision reports whether s is an Application revision, sha256:<64 hex>.
func IsRevision(s string) bool { return revisionPattern.MatchString(s) }

// IsName reports whether s can be a namespace, an Application id or a
// Process name: a DNS label, since each becomes part of an object name or a
// label value.
func IsName(s string) bool { return dnsLabel.MatchString(s) }

// ErrNoQuestion marks a payload that asks nothing the gate can answer (400).
var ErrNoQuestion = errors.New("the payload asks no question")

// DecodeQuestion reads a webhook body. Every error wraps ErrNoQuestion and
// names what is wrong in one line.
func DecodeQuestion(r io.Reader) (Question, error) {
	dec := json.NewDecoder(r)
	var p payload
	if err := dec.Decode(&p); err != nil {
		// The cause stays in the chain: a body cut at the server's bound is
		// answered as too large, not as a bad payload.
		return Question{}, fmt.Errorf("%w: the body is not a JSON object: %w", ErrNoQuestion, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Question{}, fmt.Errorf("%w: the body holds more than one JSON value", ErrNoQuestion)
	}
	return p.question()
}

// DecodeQuestionBytes is DecodeQuestion over a byte slice.
func DecodeQuestionBytes(b []byte) (Question, error) { return DecodeQuestion(bytes.NewReader(b)) }

func (p payload) question() (Question, error) {
	if p.Metadata == nil {
		return Question{}, fmt.Errorf("%w: no metadata", ErrNoQuestion)
	}
	q := Question{
		Namespace:   p.Namespace,
		Application: p.Metadata["application"],
		Process:     p.Metadata["process"],
		Revision:    p.Metadata["revision"],
		Phase:       p.Phase,
	}
	switch {
	case q.Application == "":
		return Question{}, fmt.Errorf("%w: metadata has no application", ErrNoQuestion)
	case q.Process == "":
		return Question{}, fmt.Errorf("%w: metadata has no process", ErrNoQuestion)
	case q.Revision == "":
		return Question{}, fmt.Errorf("%w: metadata has no revision", ErrNoQuestion)
	case p.Name != q.Process:
		return Question{}, fmt.Errorf("%w: name %q is not the process %q", ErrNoQuestion, Clip(p.Name), Clip(q.Process))
	case !revisionPattern.MatchString(q.Revision):
		return Question{}, fmt.Errorf("%w: revision %q is not sha256:<64 hex>", ErrNoQuestion, Clip(q.Revision))
	case !dnsLabel.MatchString(q.Namespace):
		return Question{}, fmt.Errorf("%w: namespace %q is not a namespace name", ErrNoQuestion, Clip(q.Namespace))
	case !dnsLabel.MatchString(q.Application):
		return Question{}, fmt.Errorf("%w: application %q is not an Application id", ErrNoQuestion, Clip(q.Application))
	case !dnsLabel.MatchString(q.Process):
		return Question{}, fmt.Errorf("%w: process %q is not a Process name", ErrNoQuestion, Clip(q.Process))
	}
	return q, nil
}

// Clip keeps text a caller or an object's writer chose short in a reply or
// an error; %q then keeps it on one line.
func Clip(s string) string {
	const most = 80
	if len(s) > most {
		return s[:most] + "..."
	}
	return s
}
