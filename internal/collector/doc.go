// Package collector captures what the cluster alone can say about where
// things sit (which node holds each bound volume, where each deploy-kit
// process runs) and commits it as cluster-state.yml to the Estate repository,
// only when a fact changed and never over another writer's change.
package collector
