package releasegate

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// InputsKey is the key of the inputs ConfigMap that holds the inputs.
const InputsKey = "releaseGate.json"

// InputsConfigMap names the ConfigMap deploy-kit renders beside an Application
// for the gate.
func InputsConfigMap(application string) string { return application + "-release-gate" }

//go:embed inputs.schema.json
var inputsSchemaJSON []byte

// inputsSchemaURL is the schema's own $id; the compiler needs a name for it.
const inputsSchemaURL = "https://github.com/JorisJonkers-dev/delivery/internal/releasegate/inputs.schema.json"

// inputsSchema is compiled once at start; the schema is part of the binary, so
// a schema that does not compile is a programming error.
var inputsSchema = func() *jsonschema.Schema {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(inputsSchemaJSON))
	if err != nil {
		panic(fmt.Sprintf("inputs schema: %v", err))
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(inputsSchemaURL, doc); err != nil {
		panic(fmt.Sprintf("inputs schema: %v", err))
	}
	return c.MustCompile(inputsSchemaURL)
}()

// Inputs are a gated Application's release-gate inputs: what the render says
// about its members, its analysis and its migration.
type Inputs struct {
	Endpoint  string     `json:"endpoint"`
	Deadline  string     `json:"deadline"`
	Analysis  Analysis   `json:"analysis"`
	Members   []Member   `json:"members"`
	Migration *Migration `json:"migration,omitempty"`
	// ErrorRate and Latency are the platform's thresholds for the gate's own
	// traffic to a new copy; nil and "" when the render carries none.
	ErrorRate *float64 `json:"errorRate,omitempty"`
	Latency   string   `json:"latency,omitempty"`
	// ProtectedPath is a path a Client's sign-in protects, served by the
	// member ProtectedBy; both "" when the Application has no such Client.
	ProtectedPath string `json:"protectedPath,omitempty"`
	ProtectedBy   string `json:"protectedBy,omitempty"`
}

// Analysis is the platform's analysis cadence.
type Analysis struct {
	Interval   string `json:"interval"`
	Iterations int    `json:"iterations"`
	Threshold  int    `json:"threshold"`
}

// Member is one blue-green Process of the Application.
type Member struct {
	Process   string    `json:"process"`
	Readiness Readiness `json:"readiness"`
	Checks    []string  `json:"checks,omitempty"`
}

// Readiness is a member's readiness probe: an HTTP path and port, or a TCP port.
type Readiness struct {
	Path string `json:"path,omitempty"`
	Port int    `json:"port,omitempty"`
	TCP  int    `json:"tcp,omitempty"`
}

// Migration is the Application's schema migration, run as Jobs of its identity.
type Migration struct {
	Identity         string `json:"identity"`
	TestedAgainst    string `json:"testedAgainst,omitempty"`
	NonTransactional bool   `json:"nonTransactional"`
}

// Member returns the member named process.
func (in *Inputs) Member(process string) (Member, bool) {
	for _, m := range in.Members {
		if m.Process == process {
			return m, true
		}
	}
	return Member{}, false
}

// DecodeInputs reads the inputs strictly: the document must pass the schema,
// every field must be one the gate knows, and each member appears once. A
// document that reads any other way is one the gate cannot answer from.
func DecodeInputs(raw []byte) (*Inputs, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("inputs are not JSON: %w", err)
	}
	if err := inputsSchema.Validate(doc); err != nil {
		return nil, fmt.Errorf("inputs do not match the schema: %s", oneLine(err))
	}
	// The schema has already refused unknown fields; the strict decode keeps
	// the Go type and the schema from drifting apart unnoticed.
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var in Inputs
	if err := dec.Decode(&in); err != nil {
		return nil, fmt.Errorf("inputs do not decode: %w", err)
	}
	seen := make(map[string]bool, len(in.Members))
	for _, m := range in.Members {
		if seen[m.Process] {
			return nil, fmt.Errorf("inputs name member %q twice", m.Process)
		}
		seen[m.Process] = true
	}
	return &in, nil
}

// oneLine folds a validation error's tree onto one line, because every cause
// is logged as one JSON line.
func oneLine(err error) string {
	var ve *jsonschema.ValidationError
	if errors.As(err, &ve) {
		printer := message.NewPrinter(language.English)
		var causes []string
		var walk func(*jsonschema.ValidationError)
		walk = func(e *jsonschema.ValidationError) {
			if len(e.Causes) == 0 {
				causes = append(causes, "/"+strings.Join(e.InstanceLocation, "/")+": "+e.ErrorKind.LocalizedString(printer))
				return
			}
			for _, c := range e.Causes {
				walk(c)
			}
		}
		walk(ve)
		return strings.Join(causes, "; ")
	}
	return strings.Join(strings.Fields(err.Error()), " ")
}
