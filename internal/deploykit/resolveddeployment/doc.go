// Package resolveddeployment holds the Go types of deploy-kit's Resolved
// Deployment (resolved-deployment.schema.json): every Application of an
// estate as the render resolved it, its release gate among them.
// types_gen.go is generated from the schema vendored under
// third_party/deploy-kit by go-jsonschema (`make gen`); `make gen-check`
// fails while it differs from what the schema generates. What the types
// refuse, and what only the schema does, is said in
// internal/deploykit/corpustest's corpus_test.go.
package resolveddeployment

//go:generate go tool go-jsonschema --package resolveddeployment --tags json --capitalization API --output types_gen.go ../../../third_party/deploy-kit/spec/v1/schemas/resolved-deployment.schema.json
