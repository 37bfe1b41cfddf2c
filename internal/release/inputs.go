package release

import (
	_ "embed"
	"fmt"

	"github.com/JorisJonkers-dev/delivery/internal/jsondoc"
)

// InputsKey is the key of the inputs ConfigMap that holds the inputs.
const InputsKey = "releaseGate.json"

// InputsConfigMap names the ConfigMap deploy-kit renders beside an Application
// for the gate.
func InputsConfigMap(application string) string { return application + "-release-gate" }

//go:embed inputs.schema.json
var inputsSchemaJSON []byte

// inputsSchema is compiled once at start from the schema the binary embeds.
var inputsSchema = jsondoc.MustCompile(inputsSchemaJSON)

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
	var in Inputs
	if err := inputsSchema.DecodeStrict(raw, &in); err != nil {
		return nil, fmt.Errorf("inputs: %w", err)
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

// CheckInputs holds the inputs ConfigMap to the render's labels: inputs that
// do not say they are this Application's are not its inputs.
func CheckInputs(application string, cm ConfigMap) (*Inputs, error) {
	if cm.Labels[LabelPartOf] != application || cm.Labels[LabelManagedBy] != ManagedBy {
		return nil, fmt.Errorf("ConfigMap %s is not labelled %s=%s, %s=%s",
			InputsConfigMap(application), LabelPartOf, application, LabelManagedBy, ManagedBy)
	}
	raw, ok := cm.Data[InputsKey]
	if !ok {
		return nil, fmt.Errorf("ConfigMap %s has no key %s", InputsConfigMap(application), InputsKey)
	}
	in, err := DecodeInputs([]byte(raw))
	if err != nil {
		return nil, fmt.Errorf("ConfigMap %s: %w", InputsConfigMap(application), err)
	}
	return in, nil
}
