// Package composition is a module's signed composition for one node at one
// fingerprint: the files it lays down, the command it runs, its health check
// and its data directory, as a JSON document its schema holds, signed as a
// DSSE envelope under Ed25519 keys. An envelope is verified against the
// trusted keys before its payload is read at all, so a document nobody
// trusted signing is never parsed.
package composition
