// Package garagecatalog applies a bucket catalog to Garage through its admin
// API: one S3 key per consuming Project, kept in Vault, the Project's buckets,
// and read and write grants of the key on them. It never deletes a key, a
// bucket or a grant, and a run over a Garage and Vault that already hold the
// catalog writes nothing.
package garagecatalog
