package release

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/jsondoc"
)

// RecordKey is the key of a record ConfigMap that holds the record.
const RecordKey = "record.json"

// RecordSuffix ends the name of every record ConfigMap.
const RecordSuffix = "-release-record"

// RecordConfigMap names the record of the Application application in
// namespace. A namespace is a DNS label and holds no dot, so the name of one
// namespace's record is never another's.
func RecordConfigMap(namespace, application string) string {
	return namespace + "." + application + RecordSuffix
}

// Record is the gate's one piece of state per Application: what serves, with
// Flagger's digest of each primary at the time, and a revision applied but
// not yet serving with when the gate first saw it.
type Record struct {
	Namespace   string `json:"namespace"`
	Application string `json:"application"`
	// Serving is the last revision under which every member was settled and
	// every primary ran what its Deployment holds; "" when none has yet.
	Serving string `json:"serving,omitempty"`
	// Primaries is Flagger's digest of each member's primary (the Canary's
	// lastPromotedSpec) when Serving was recorded, by process.
	Primaries map[string]string `json:"primaries,omitempty"`
	// Pinned is a revision applied but not yet serving; Since is when the
	// gate first saw it.
	Pinned string     `json:"pinned,omitempty"`
	Since  *time.Time `json:"since,omitempty"`
	// Warmup is what warming Serving (or an earlier serving revision) up met.
	Warmup *WarmupRecord `json:"warmup,omitempty"`
	// Migrated is a revision whose migration ran and that neither came to
	// serve nor was undone: the schema is no longer Serving's, whatever
	// serves, so no later migration starts under a proof against Serving
	// until the operator clears it.
	Migrated string `json:"migrated,omitempty"`
	// Held is why the gate holds Pinned, as the last round that decided
	// about it said; nil when it does not. The gate's log and metrics said
	// it alone before, so the release record, which reads this record, had
	// to guess it: a record written before it existed holds none.
	Held *HeldRecord `json:"held,omitempty"`
}

// HeldRecord is a hold in the decision's own words.
type HeldRecord struct {
	// Reason names the hold: stale-proof, migration-failed or
	// analysis-failed.
	Reason string `json:"reason"`
	// Cause says what holds it, in words.
	Cause string `json:"cause"`
	// Since is when the gate first saw the revision it holds.
	Since time.Time `json:"since"`
}

// WarmupRecord is what warmup met for one revision. A revision is warmed
// once: a record naming it is never warmed again.
type WarmupRecord struct {
	Revision string         `json:"revision"`
	Warmed   bool           `json:"warmed"`
	Failed   *WarmupFailure `json:"failed,omitempty"`
}

// WarmupFailure is the request that stopped a warmup.
type WarmupFailure struct {
	// Request is host/path, or why no request could be made.
	Request string `json:"request"`
	// Status is the HTTP status met, 0 when no answer came.
	Status int `json:"status"`
}

// EncodeRecord writes a record as the ConfigMap's data.
func EncodeRecord(r Record) map[string]string {
	b, err := json.Marshal(r)
	if err != nil {
		// A Record holds strings, a map of strings, a time and booleans:
		// nothing json.Marshal can refuse.
		panic(fmt.Sprintf("encode a release record: %v", err))
	}
	return map[string]string{RecordKey: string(b)}
}

// DecodeRecord reads the record of namespace's Application application. A
// record that does not decode, names another Application or another
// namespace, or holds a revision that is not one is one the gate cannot
// answer from.
func DecodeRecord(namespace, application string, data map[string]string) (Record, error) {
	name := RecordConfigMap(namespace, application)
	raw, ok := data[RecordKey]
	if !ok {
		return Record{}, fmt.Errorf("record %s has no key %s", name, RecordKey)
	}
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.DisallowUnknownFields()
	var r Record
	if err := dec.Decode(&r); err != nil {
		return Record{}, fmt.Errorf("record %s does not decode: %s", name, jsondoc.OneLine(err))
	}
	if dec.More() {
		return Record{}, fmt.Errorf("record %s holds more than one JSON value", name)
	}
	switch {
	case r.Namespace != namespace:
		return Record{}, fmt.Errorf("record %s names namespace %q, not %q", name, Clip(r.Namespace), namespace)
	case r.Application != application:
		return Record{}, fmt.Errorf("record %s names Application %q, not %q", name, Clip(r.Application), application)
	}
	for what, rev := range map[string]string{"serving": r.Serving, "pinned": r.Pinned, "migrated": r.Migrated} {
		if rev != "" && !revisionPattern.MatchString(rev) {
			return Record{}, fmt.Errorf("record %s: %s %q is not a revision", name, what, Clip(rev))
		}
	}
	if (r.Pinned == "") != (r.Since == nil) {
		return Record{}, fmt.Errorf("record %s: a pinned revision and its time come together", name)
	}
	if r.Warmup != nil && !revisionPattern.MatchString(r.Warmup.Revision) {
		return Record{}, fmt.Errorf("record %s: warmup revision %q is not a revision", name, Clip(r.Warmup.Revision))
	}
	if h := r.Held; h != nil {
		// The gate holds only a revision it pinned, and names its reason as
		// a word its log and metrics can carry as a label value.
		switch {
		case r.Pinned == "":
			return Record{}, fmt.Errorf("record %s: a hold without a pinned revision", name)
		case !dnsLabel.MatchString(h.Reason):
			return Record{}, fmt.Errorf("record %s: hold reason %q is not a reason", name, Clip(h.Reason))
		case h.Since.IsZero():
			return Record{}, fmt.Errorf("record %s: a hold without its time", name)
		}
	}
	return r, nil
}

// SameRecord reports whether writing b over a would change nothing.
func SameRecord(a, b Record) bool {
	return bytes.Equal([]byte(EncodeRecord(a)[RecordKey]), []byte(EncodeRecord(b)[RecordKey]))
}

// ServingUnwarmed reports whether a revision serves that the record does not
// say was warmed.
func (r Record) ServingUnwarmed() bool {
	return r.Serving != "" && (r.Warmup == nil || r.Warmup.Revision != r.Serving)
}
