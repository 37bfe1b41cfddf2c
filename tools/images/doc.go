// Command images builds an OCI image for every command of this module with
// no container daemon and no base image (make images): bin/images/<name>.tar
// for podman load or docker load, and every image in the OCI layout
// bin/images/oci. The same checkout and CA bundle give the same digests.
package main
