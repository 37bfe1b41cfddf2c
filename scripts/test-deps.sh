#!/usr/bin/env bash
# Installs and builds everything the tests need on a fresh Debian machine with
# Go: the Debian packages the tests start servers from, and the real servers
# that only the Go module proxy can give (see scripts/test-binaries.sh).
#
#   scripts/test-deps.sh          all of it
#   scripts/test-deps.sh node     the packages and what the whole path needs:
#                                 the cluster's, the node's and Flux's servers
#   scripts/test-deps.sh others   what only the rest of the suite needs:
#                                 Vault, MinIO and nats-server
set -euo pipefail
cd "$(dirname "$0")/.."

case "${1:-all}" in
all) servers=(crds envtest cluster node flux vault minio nats) ;;
node) servers=(crds envtest cluster node flux) ;;
others)
	for what in vault minio nats; do
		scripts/test-binaries.sh "$what" >/dev/null
	done
	exit 0
	;;
*) echo "usage: $0 [node|others]" >&2; exit 2 ;;
esac

# The demo, and its test, run the gate in a user and mount namespace of its
# own so that it reaches the demo's members through a private /etc/hosts.
if ! unshare --user --map-root-user --mount true 2>/dev/null; then
	echo "[test-deps] this system allows no unprivileged user namespace (unshare --user --map-root-user --mount);" >&2
	echo "[test-deps] the demo and its test need one: allow it (sysctl kernel.unprivileged_userns_clone=1, or a container's seccomp profile)" >&2
	exit 1
fi

# postgresql: the backup and catalog tests start a throwaway server.
# rabbitmq-server: the backup test starts a broker with its management API.
# sqlite3, age: the standard tools a restore is checked with.
# gcc, libc6-dev: go test -race needs cgo and a C toolchain.
PACKAGES=(postgresql rabbitmq-server sqlite3 age gcc libc6-dev)
# podman, runc: the images' test loads each image and runs it (runc, as crun
# fails on some hosts' cgroups). ca-certificates: the bundle the images carry.
PACKAGES+=(podman runc ca-certificates)
# chromium: the release page's test loads it in a real headless browser.
PACKAGES+=(chromium)
# containerd, containernetworking-plugins, iptables, conntrack: the node that
# runs pods (internal/testenv's Node) runs its containers with containerd and
# runc on a CNI bridge, and kube-proxy writes its rules with iptables.
PACKAGES+=(containerd containernetworking-plugins iptables conntrack)

missing=()
for p in "${PACKAGES[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
	echo "[test-deps] installing ${missing[*]}" >&2
	export DEBIAN_FRONTEND=noninteractive
	as_root=()
	if [ "$(id -u)" -ne 0 ]; then
		as_root=(sudo --preserve-env=DEBIAN_FRONTEND)
	fi
	"${as_root[@]}" apt-get -o Acquire::Retries=3 update -qq >&2
	"${as_root[@]}" apt-get -o Acquire::Retries=3 install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

scripts/test-binaries.sh missing
for what in "${servers[@]}"; do
	scripts/test-binaries.sh "$what" >/dev/null
done
