// Package releasepath is the read model of a release's path through Flux and
// Flagger, which no service owns: the Projects' Flux units and the sources
// they apply, the blue-green members a unit's Canaries are, the Rollout
// annotations that name the release a unit's pin carries, the Release Gate's
// warmups as its GET /releases answers them, and Decide, the pure rule of
// where a release stands on the path; and the client-go reads that fill the
// release model's views of the objects a release moves (Objects), which the
// Release Gate reads through too.
//
// The Reporter says where a release stands as its GitHub Deployment's
// status; the release record says it as facts. Both read the path here, so
// they see a release the same way and neither imports the other.
package releasepath
