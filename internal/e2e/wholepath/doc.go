// Package wholepath drives releases along the whole path on a node that
// runs pods (testenv.Node): the real Flux pulls each release as its own
// artifact from a registry and applies it in its own order, the real
// Flagger runs as a pod and asks the Release Gate over pod networking, and
// the gate runs from its image under deploy/'s manifests, installed by Flux
// too, sending its own traffic to the members' real Canary Services. No
// Flux object's status and no pod's state is written by a test.
package wholepath
