package release

import _ "embed"

// ReleasesSchema is the JSON Schema of the Release Gate's GET /releases: the
// gate answers in that shape, and the dashboards and the Reporter hold what
// they read to it.
//
//go:embed releases.schema.json
var ReleasesSchema []byte
