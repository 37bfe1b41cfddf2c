// Package reporter keeps every release's GitHub Deployment status current as
// the cluster moves it, stage by stage: applied by Flux, each blue-green
// member through its analysis, promoted, warmed up by the Release Gate, or
// where it failed. A pass reads the cluster and the gate, compares with each
// Deployment's latest status and writes only what moved, so a pass that finds
// nothing new costs no GitHub rate-limit units.
package reporter
