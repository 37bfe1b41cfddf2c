package reporter

import (
	"bytes"
	_ "embed"
	"encoding/json"

	"github.com/JorisJonkers-dev/delivery/internal/jsondoc"
)

// DeploymentPayloadSchema is the JSON Schema of a Rollout Deployment's payload.
//
//go:embed deployment-payload.schema.json
var DeploymentPayloadSchema []byte

var payloadSchema = jsondoc.MustCompile(DeploymentPayloadSchema)

// PayloadNames reports whether a Deployment's payload names project and
// version. GitHub hands the payload back as the JSON value it was given: an
// object, or a string that may itself hold the object.
func PayloadNames(payload []byte, project, version string) bool {
	p, ok := decodePayload(payload)
	return ok && p.Project == project && p.Version == version
}

type payloadFields struct {
	Project string `json:"project"`
	Version string `json:"version"`
}

func decodePayload(raw []byte) (payloadFields, bool) {
	raw = bytes.TrimSpace(raw)
	var s string
	if len(raw) > 0 && raw[0] == '"' {
		if json.Unmarshal(raw, &s) != nil {
			return payloadFields{}, false
		}
		raw = []byte(s)
	}
	doc, err := jsondoc.Parse(raw)
	if err != nil || payloadSchema.Validate(doc) != nil {
		return payloadFields{}, false
	}
	// Read by exact key from what the schema checked: encoding/json would
	// match "Project" too, and another key could then name the Project.
	fields, ok := doc.(map[string]any)
	if !ok {
		return payloadFields{}, false
	}
	project, _ := fields["project"].(string)
	version, _ := fields["version"].(string)
	return payloadFields{Project: project, Version: version}, true
}
