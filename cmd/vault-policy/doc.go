// Command vault-policy applies the Vault policies and Kubernetes-auth roles
// deploy-kit renders into a mounted ConfigMap, once, and exits: 0 when Vault
// holds the render, 1 on a refused render or a failed call.
package main
