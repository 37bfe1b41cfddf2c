// Package corpustest reads the corpus of accepted and refused documents
// deploy-kit publishes for each of its schemas, vendored under
// third_party/deploy-kit, and holds a schema and the Go types generated from
// it (internal/deploykit's packages) to every verdict. It serves the tests of
// those packages and of the services that read the documents.
package corpustest
