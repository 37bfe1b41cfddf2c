// Package vaultlogin signs a job in to Vault as the Kubernetes-auth role it
// runs as, the one way every job of this module reaches Vault.
package vaultlogin
