// Package fakegarage is a Garage admin API v2 test double for the tests of
// code that drives Garage, which cannot run on the test machines. It keeps
// state as Garage does (keys, buckets, global aliases, per-key bucket
// permissions), checks the bearer admin token, and validates every request it
// receives and every response it gives against Garage's published OpenAPI
// document with kin-openapi, failing the test on any drift.
package fakegarage
