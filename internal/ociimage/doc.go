// Package ociimage builds an OCI image per command of this module with no
// container daemon and no base image: each image is one layer holding the
// static binary, a CA bundle, the nonroot user and /tmp, with a config fixed
// to the epoch so that the same inputs always give the same digest. It writes
// each image as an archive podman or docker loads and all of them as one OCI
// layout. tools/images is its command line.
package ociimage
