// Package e2e drives whole releases of a two-member Application through the
// real Flagger and the release-gate binary, on a control plane whose
// controllers, scheduler and kwok nodes make Deployments, pods and Jobs move
// (testenv.SharedCluster). Its tests are the proof that the gate's answers
// hold against the Flagger platform teams run, not an imitation of it.
package e2e
