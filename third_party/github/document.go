// Package github carries GitHub's REST API description, cut to the operations
// the services call, for the GitHub double to validate against. It is
// embedded rather than read from the tree so that a double started outside a
// test's folder (the demo's, the whole-path estate's) holds to it as well.
package github

import _ "embed"

// Document is api.github.com.json: the subset of @octokit/openapi's
// generated/api.github.com.json that operations.txt names (see README.md).
//
//go:embed api.github.com.json
var Document []byte

// Operations is operations.txt, the list the subset was cut to.
//
//go:embed operations.txt
var Operations string
