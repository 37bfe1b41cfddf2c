// Package releasehistory is what the release records are for once written:
// the sweep that says a stalled release and deletes records past their
// time (never the rollback window), whether an image may be rolled back
// to, the DORA figures computed from the records, and the read API and the
// release page that show them.
//
// The decisions (PlanSweep, RollbackEligible, Figures) are pure functions
// of the records and the time; the sweep's Kubernetes calls sit behind
// SweepCluster and the service's reads behind Records.
package releasehistory
