// Package bus is the mesh's delivery bus on NATS JetStream: the key-value
// buckets and the object store, the keys in them, the key-safe form of module
// and node names, the typed documents each key holds (each with its JSON
// Schema), and the writes that depend on what was read, every one a
// compare-and-swap on the key's revision.
package bus
