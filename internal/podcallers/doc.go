// Package podcallers holds the one rule by which a service knows a caller by
// its pod: the connection's source address is a Running pod, off the host
// network, of a namespace, a selector and a ServiceAccount. The Release Gate
// holds Flagger to it on its webhooks, and the gate and the release record
// hold the metrics stack to it on /metrics; kept here, in no service's
// package, so that each service reads the same rule without importing
// another.
package podcallers
