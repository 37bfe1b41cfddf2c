// Command collector captures the cluster's volume bindings and pod placements
// when it starts and once every INTERVAL, and commits them as
// cluster-state.yml to the Estate repository through a GitHub App whenever a
// fact changed. GET /fresh is its liveness probe.
package main
