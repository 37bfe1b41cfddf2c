// Package clusterstate holds the Go types of deploy-kit's ClusterState
// snapshot (cluster-state-snapshot.schema.json), the cluster-state.yml the
// Collector writes. types_gen.go is generated from the schema vendored under
// third_party/deploy-kit by go-jsonschema (`make gen`); `make gen-check`
// fails while it differs from what the schema generates. What the types
// refuse, and what only the schema does, is said in
// internal/deploykit/corpustest's corpus_test.go.
package clusterstate

//go:generate go tool go-jsonschema --package clusterstate --tags json,yaml --capitalization API --schema-root-type =ClusterState --output types_gen.go ../../../third_party/deploy-kit/spec/v1/schemas/cluster-state-snapshot.schema.json
