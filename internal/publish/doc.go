// Package publish makes a release of the product as Flux's and Flagger's
// users expect one: every image for each release platform as one index,
// tagged with the version and referred to by digest, each signed with
// cosign and carrying a signed SPDX SBOM; the manifests as a Flux OCI
// artifact that pins every image by digest, signed the same way; and a
// file of every digest. tools/release is its command.
package publish
