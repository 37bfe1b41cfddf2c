// Package testenv starts the real servers the tests (and the demo) run
// against: here a kube-apiserver and etcd with the CRDs the services read.
// Neither binary can be downloaded here, so scripts/test-binaries.sh builds
// them from the Go module proxy and caches them; this package only finds them.
package testenv
