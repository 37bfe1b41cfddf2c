// Package secretscan finds text shaped like a credential: a PEM private key,
// a GitHub token, an AWS access key id or a Vault token. Its test walks every
// file git tracks and fails on any such text outside the paths it allows (the
// fixtures the tests read), so a credential pasted into the tree stops
// `make check` before it is pushed.
package secretscan
