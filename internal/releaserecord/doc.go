// Package releaserecord keeps one record per release and turns the facts
// the cluster shows about it into release events.
//
// A release is named by its release id, <chain id>:<cluster>/<env>. Its
// record is a ConfigMap of its own in the service's namespace; Reduce, a
// pure function of the record, one fact and the time, says what the record
// becomes and which events are due. The events go out as CDEvents over
// CloudEvents HTTP before the record is written, with ids a function of the
// release, the event and its outcome, so a repeat is the same event.
//
// The facts come from sources behind one interface each: the Flux units,
// their sources and Canaries this product's path runs on (observed), and
// Argo Rollouts' and Argo CD's notifications (pushed).
package releaserecord
