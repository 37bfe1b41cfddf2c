// Package pinannotations holds the Go types of deploy-kit's pin annotations
// (pin-annotations.schema.json): the pause and Rollback annotations on a
// Project's pinned OCIRepository. types_gen.go is generated from the schema
// vendored under third_party/deploy-kit by go-jsonschema (`make gen`);
// `make gen-check` fails while it differs from what the schema generates.
// What the types refuse, and what only the schema does, is said in
// internal/deploykit/corpustest's corpus_test.go.
package pinannotations

//go:generate go tool go-jsonschema --package pinannotations --tags json --capitalization API --output types_gen.go ../../../third_party/deploy-kit/spec/v1/schemas/pin-annotations.schema.json
