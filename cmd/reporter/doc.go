// Command reporter keeps every release's GitHub Deployment status current as
// Flux and Flagger move it: a pass when it starts, on every event Flux's
// notification Provider posts to POST /flux, and once every INTERVAL. An
// event only prompts a pass; its body is read, bounded, and discarded. GET
// /fresh is its liveness probe.
package main
