// Package vaultpolicy applies the Vault policies and Kubernetes-auth roles
// deploy-kit renders, one pair per identity that holds a grant, and refuses
// any document wider than a grant derives. The render is read and checked
// whole before Vault is touched; what Vault receives is this package's own
// encoding of what it checked, never the file's bytes.
package vaultpolicy
