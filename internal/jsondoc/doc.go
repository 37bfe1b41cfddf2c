// Package jsondoc holds documents from outside the process to the JSON Schema
// the project publishes for them, and decodes them strictly: a document that
// passes is one the Go types read whole, and a refusal is one line naming
// where the document is wrong.
package jsondoc
