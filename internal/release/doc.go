// Package release is the release model the Release Gate, the release path
// and the demo share, so that each reads a release as the others do:
// Flagger's phases and deploy-kit's labels, an Application's inputs, the
// gate's record, the question a webhook asks, revision tags, and plain views
// of the Deployments, Canaries, Jobs, pods and ConfigMaps. It reads nothing
// itself: the client-go reads that fill the views are the release path's
// (releasepath.Objects). The one rule it holds is the barrier's test of a
// member that did not change in a release (Unchanged), which the Reporter
// applies to say a member is through exactly as the gate does.
package release
