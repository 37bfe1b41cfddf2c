// Package compositionlock holds the Go types of deploy-kit's composition lock
// (composition-lock.schema.json): the fragments an estate was composed from,
// the lock chain and the cluster-state digest. types_gen.go is generated from
// the schema vendored under third_party/deploy-kit by go-jsonschema
// (`make gen`); `make gen-check` fails while it differs from what the schema
// generates. What the types refuse, and what only the schema does, is said in
// internal/deploykit/corpustest's corpus_test.go.
package compositionlock

//go:generate go tool go-jsonschema --package compositionlock --tags json --capitalization API --output types_gen.go ../../../third_party/deploy-kit/spec/v1/schemas/composition-lock.schema.json
