// Package demo runs a whole release through the Release Gate on an embedded
// cluster that acts: kube-apiserver and etcd, kube-controller-manager,
// kube-scheduler, kwok's fake node, the real Flagger, the sample estate under
// examples/demo applied as Flux applies it, and the real release-gate binary.
// Nothing is played: the transcript is what Flagger recorded on the Canaries
// and every question Flagger asked the gate with its answer, as the gate
// logged them, so a newcomer sees the product work without a cluster of
// their own; with Once it is also an end-to-end test.
package demo
