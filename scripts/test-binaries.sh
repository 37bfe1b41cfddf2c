#!/usr/bin/env bash
# Builds the real servers the tests run against and caches them under the
# user's cache directory, keyed by version. None of them can be downloaded as a
# prebuilt binary here, so each is compiled from the Go module proxy inside a
# throwaway wrapper module (their replace directives make `go install` refuse).
#
#   scripts/test-binaries.sh envtest   etcd + kube-apiserver  (prints the folder)
#   scripts/test-binaries.sh cluster   envtest's folder plus kube-controller-manager,
#                                      kube-scheduler, kwok and Flagger (prints the folder)
#   scripts/test-binaries.sh vault     Vault dev server        (prints the binary)
#   scripts/test-binaries.sh minio     MinIO                   (prints the binary)
#   scripts/test-binaries.sh nats      NATS server             (prints the binary)
#   scripts/test-binaries.sh node      the cluster's folder plus kubelet and kube-proxy,
#                                      for a node that runs pods (prints the folder)
#   scripts/test-binaries.sh flux      Flux's source-, kustomize- and notification-controller
#                                      and the flux CLI (prints their folder)
#   scripts/test-binaries.sh lint      golangci-lint           (prints the binary)
#   scripts/test-binaries.sh crds      the modules whose CRDs the control plane installs
#   scripts/test-binaries.sh missing   says which of them are not cached yet
set -euo pipefail

ETCD_VERSION=v3.6.8
KUBE_VERSION=v1.35.4
STAGING_VERSION=v0.35.4
VAULT_VERSION=v1.21.0
MINIO_VERSION=v0.0.0-20260212201848-7aac2a2c5b7c
KWOK_VERSION=v0.8.0
FLAGGER_VERSION=v1.41.0
GOLANGCI_LINT_VERSION=v2.15.0
NATS_VERSION=v2.15.2
# Flux v2.9.3's set: the newest whose controllers the module proxy serves
# whole for this Go.
FLUX_VERSION=v2.9.3
SOURCE_CONTROLLER_VERSION=v1.9.3
KUSTOMIZE_CONTROLLER_VERSION=v1.9.4
NOTIFICATION_CONTROLLER_VERSION=v1.9.2

CACHE="${DELIVERY_CACHE:-${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/delivery}"
export GOFLAGS=-mod=mod GOTOOLCHAIN=local

say() { printf '[test-binaries] %s\n' "$*" >&2; }

# Runs a step that fetches from the module proxy up to three times: one
# failed download must not cost a cold run the builds before it. A step that
# fails for another reason fails the same way again, quickly, since what it
# fetched and compiled is cached.
retry() {
	local attempt rc
	for attempt in 1 2 3; do
		rc=0
		"$@" || rc=$?
		[ "$rc" -ne 0 ] || return 0
		[ "$attempt" -eq 3 ] || { say "  failed ($rc); trying again in $((attempt * 10)) s"; sleep $((attempt * 10)); }
	done
	return "$rc"
}

# Keeps a long `go build` visibly alive: one line a minute until it ends.
build() {
	local what=$1; shift
	local start=$SECONDS
	say "building $what (cold builds take minutes; cached afterwards)"
	# Its output goes to stderr alone: a sleep left holding stdout would keep
	# a caller reading this script's answer waiting for up to a minute.
	( while sleep 60; do say "  still building $what ($(( (SECONDS - start) / 60 )) min)"; done ) >&2 &
	local ticker=$!
	local rc=0
	retry "$@" >&2 || rc=$?
	kill "$ticker" 2>/dev/null; wait "$ticker" 2>/dev/null || true
	[ "$rc" -eq 0 ] || { say "building $what failed"; exit "$rc"; }
	say "built $what in $(( SECONDS - start )) s"
}

wrapper() {
	local dir
	dir=$(mktemp -d)
	printf 'module wrapper\n\ngo 1.26\n' >"$dir/go.mod"
	echo "$dir"
}

envtest() {
	local out="$CACHE/envtest-etcd-$ETCD_VERSION-kube-$KUBE_VERSION"
	if [ -x "$out/etcd" ] && [ -x "$out/kube-apiserver" ]; then echo "$out"; return; fi
	mkdir -p "$out"
	local w
	if [ ! -x "$out/etcd" ]; then
		w=$(wrapper)
		printf 'package wrapper\n\nimport _ "go.etcd.io/etcd/server/v3"\n' >"$w/tools.go"
		(cd "$w" && go mod edit -require=go.etcd.io/etcd/server/v3@$ETCD_VERSION && retry go mod tidy >&2)
		build "etcd $ETCD_VERSION" bash -c "cd '$w' && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o '$out/etcd.tmp' go.etcd.io/etcd/server/v3"
		mv "$out/etcd.tmp" "$out/etcd"
		rm -rf "$w"
	fi
	if [ ! -x "$out/kube-apiserver" ]; then
		w=$(wrapper)
		local kdir
		kdir=$(retry go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
		printf 'package wrapper\n\nimport _ "k8s.io/kubernetes/cmd/kube-apiserver/app"\n' >"$w/tools.go"
		local args=(-require="k8s.io/kubernetes@$KUBE_VERSION")
		# Every staging module kubernetes replaces with a local folder is taken
		# at its published version instead.
		local m
		for m in $(sed -n 's#^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/.*#\1#p' "$kdir/go.mod"); do
			args+=(-replace="$m=$m@$STAGING_VERSION")
		done
		(cd "$w" && go mod edit "${args[@]}" && retry go mod tidy >&2)
		local pkg=k8s.io/component-base/version
		build "kube-apiserver $KUBE_VERSION" bash -c "cd '$w' && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=35' -o '$out/kube-apiserver.tmp' k8s.io/kubernetes/cmd/kube-apiserver"
		mv "$out/kube-apiserver.tmp" "$out/kube-apiserver"
		rm -rf "$w"
	fi
	echo "$out"
}

# installed puts the binary name of package@version into folder by go install,
# through a folder of its own so a failed build leaves nothing half written.
installed() {
	local folder=$1 name=$2 package=$3
	[ -x "$folder/$name" ] && return 0
	local tmp
	tmp=$(mktemp -d)
	build "$name ${package##*@}" env GOBIN="$tmp" CGO_ENABLED=0 go install -trimpath -ldflags='-s -w' "$package"
	mv "$tmp/$name" "$folder/$name"
	rm -rf "$tmp"
}

# kube_components builds the named commands of kubernetes (k8s.io/kubernetes/
# cmd/<name>) into folder from one wrapper module that also imports the
# kube-apiserver, so the modules resolve as for its build and its build
# cache serves: every staging module kubernetes replaces with a local
# folder is taken at its published version instead.
kube_components() {
	local folder=$1; shift
	local c missing=()
	for c in "$@"; do [ -x "$folder/$c" ] || missing+=("$c"); done
	[ "${#missing[@]}" -gt 0 ] || return 0
	local w kdir
	w=$(wrapper)
	kdir=$(retry go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	{
		printf 'package wrapper\n\nimport (\n\t_ "k8s.io/kubernetes/cmd/kube-apiserver/app"\n'
		for c in "${missing[@]}"; do printf '\t_ "k8s.io/kubernetes/cmd/%s/app"\n' "$c"; done
		printf ')\n'
	} >"$w/tools.go"
	local args=(-require="k8s.io/kubernetes@$KUBE_VERSION") m
	for m in $(sed -n 's#^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/.*#\1#p' "$kdir/go.mod"); do
		args+=(-replace="$m=$m@$STAGING_VERSION")
	done
	(cd "$w" && go mod edit "${args[@]}" && retry go mod tidy >&2)
	local pkg=k8s.io/component-base/version
	for c in "${missing[@]}"; do
		build "$c $KUBE_VERSION" bash -c "cd '$w' && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=35' -o '$folder/$c.tmp' k8s.io/kubernetes/cmd/$c"
		mv "$folder/$c.tmp" "$folder/$c"
	done
	rm -rf "$w"
}

# The controllers, kwok and Flagger that make a control plane act: the two
# controllers from the kube-apiserver's wrapper (so its build cache serves),
# kwok and Flagger by go install (neither has replace directives). They live
# beside etcd and kube-apiserver, so one folder names the whole cluster.
cluster() {
	local out
	out=$(envtest)
	kube_components "$out" kube-controller-manager kube-scheduler
	installed "$out" kwok "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
	installed "$out" flagger "github.com/fluxcd/flagger/cmd/flagger@$FLAGGER_VERSION"
	# kwok's default stages and Flagger's grant are read from their modules.
	(cd "${TMPDIR:-/tmp}" && GOWORK=off retry go mod download "sigs.k8s.io/kwok@$KWOK_VERSION" "github.com/fluxcd/flagger@$FLAGGER_VERSION") >&2
	echo "$out"
}

# kubelet and kube-proxy, for the node that runs pods, from the same wrapper
# as the control plane's binaries (its build cache serves most of them).
node() {
	local out
	out=$(cluster)
	kube_components "$out" kubelet kube-proxy
	echo "$out"
}

# controllers builds Flux's three controllers from one wrapper module:
# kustomize-controller's go.mod (whose replace directives include the other
# two's) with source- and notification-controller required beside it, so
# the packages the three share (controller-runtime, client-go, Flux's own)
# compile once for all of them rather than once each. Each replace of
# ./api is dropped so the published api modules serve. The files keep the
# controllers' names, which client-go sends as the user agent.
controllers() {
	local folder=$1 name missing=()
	for name in source-controller kustomize-controller notification-controller; do
		[ -x "$folder/$name" ] || missing+=("$name")
	done
	[ "${#missing[@]}" -gt 0 ] || return 0
	local w dir module requires=()
	w=$(wrapper)
	: >"$w/go.sum"
	for module in "source-controller@$SOURCE_CONTROLLER_VERSION" "notification-controller@$NOTIFICATION_CONTROLLER_VERSION" "kustomize-controller@$KUSTOMIZE_CONTROLLER_VERSION"; do
		dir=$(retry go mod download -json "github.com/fluxcd/$module" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
		cat "$dir/go.sum" >>"$w/go.sum"
		requires+=(-require="github.com/fluxcd/$module")
	done
	# The last read, kustomize-controller's, is the wrapper's go.mod.
	cp "$dir/go.mod" "$w/go.mod"
	chmod u+w "$w/go.mod" "$w/go.sum"
	sed -i -e 's#^module .*#module wrapper#' -e '/=> \.\/api/d' "$w/go.mod"
	(cd "$w" && sort -u -o go.sum go.sum && go mod edit "${requires[@]}")
	for name in "${missing[@]}"; do
		build "$name" bash -c "cd '$w' && CGO_ENABLED=0 go build -mod=mod -trimpath -ldflags='-s -w' -o '$folder/$name.tmp' 'github.com/fluxcd/$name'"
		mv "$folder/$name.tmp" "$folder/$name"
	done
	rm -rf "$w"
}

# Flux's three controllers the tests run, and the flux CLI that pushes a
# release as Flux's own artifact. The CLI embeds install manifests that only
# Flux's release process generates, so it builds inside a copy of its module
# with one placeholder there (its own replace directives then apply).
flux() {
	local out="$CACHE/flux-$FLUX_VERSION"
	mkdir -p "$out"
	controllers "$out"
	if [ ! -x "$out/flux" ]; then
		local dir w
		dir=$(retry go mod download -json "github.com/fluxcd/flux2/v2@$FLUX_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
		w=$(mktemp -d)
		cp -r "$dir/." "$w/"
		chmod -R u+w "$w"
		mkdir -p "$w/cmd/flux/manifests"
		printf '# not used: the tests push artifacts, they do not install Flux with this CLI\n' >"$w/cmd/flux/manifests/placeholder.yaml"
		build "flux CLI $FLUX_VERSION" bash -c "cd '$w' && CGO_ENABLED=0 go build -mod=mod -trimpath -ldflags='-s -w -X main.VERSION=${FLUX_VERSION#v}' -o '$out/flux.tmp' ./cmd/flux"
		mv "$out/flux.tmp" "$out/flux"
		rm -rf "$w"
	fi
	echo "$out"
}

vault() {
	local out="$CACHE/vault-$VAULT_VERSION/vault"
	if [ -x "$out" ]; then echo "$out"; return; fi
	mkdir -p "$(dirname "$out")"
	local w vdir
	w=$(wrapper)
	vdir=$(retry go mod download -json "github.com/hashicorp/vault@$VAULT_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	# Vault's own go.mod pins what it was tested with; its local replaces
	# (api, sdk, plugins) are dropped so the published modules are used.
	cp "$vdir/go.mod" "$vdir/go.sum" "$w/"
	chmod u+w "$w/go.mod" "$w/go.sum"
	sed -i -e 's#^module .*#module wrapper#' -e '/=> \.\//d' "$w/go.mod"
	(cd "$w" && go mod edit -require="github.com/hashicorp/vault@$VAULT_VERSION")
	build "vault $VAULT_VERSION" bash -c "cd '$w' && CGO_ENABLED=0 go build -mod=mod -trimpath -ldflags='-s -w' -o '$out.tmp' github.com/hashicorp/vault"
	mv "$out.tmp" "$out"
	rm -rf "$w"
	echo "$out"
}

minio() {
	local out="$CACHE/minio-$MINIO_VERSION/minio"
	if [ -x "$out" ]; then echo "$out"; return; fi
	mkdir -p "$(dirname "$out")"
	build "minio $MINIO_VERSION" env GOBIN="$(dirname "$out")" CGO_ENABLED=0 go install -trimpath -ldflags='-s -w' "github.com/minio/minio@$MINIO_VERSION"
	echo "$out"
}

nats() {
	local out="$CACHE/nats-server-$NATS_VERSION/nats-server"
	if [ -x "$out" ]; then echo "$out"; return; fi
	mkdir -p "$(dirname "$out")"
	build "nats-server $NATS_VERSION" env GOBIN="$(dirname "$out")" CGO_ENABLED=0 go install -trimpath -ldflags='-s -w' "github.com/nats-io/nats-server/v2@$NATS_VERSION"
	echo "$out"
}

lint() {
	local out="$CACHE/golangci-lint-$GOLANGCI_LINT_VERSION/golangci-lint"
	if [ -x "$out" ]; then echo "$out"; return; fi
	mkdir -p "$(dirname "$out")"
	build "golangci-lint $GOLANGCI_LINT_VERSION" env GOBIN="$(dirname "$out")" go install "github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$GOLANGCI_LINT_VERSION"
	echo "$out"
}

# The modules internal/testenv/controlplane.go reads its CRDs from (its
# crdSources), fetched here with retries rather than inside a test's start
# deadline on a machine busy compiling.
crds() {
	local module modules
	modules=$(sed -n 's/^\t{"\([^"]*@[^"]*\)", .*/\1/p' "$(dirname "$0")/../internal/testenv/controlplane.go")
	[ -n "$modules" ] || { say "no CRD module found in internal/testenv/controlplane.go"; exit 1; }
	for module in $modules; do
		(cd "${TMPDIR:-/tmp}" && GOWORK=off retry go mod download "$module") || { say "could not download $module"; exit 1; }
	done
}

# Says which servers a run would have to build, with what each took cold on
# two cores, so a fresh machine's first run says up front why it is slow.
missing() {
	local plan=() minutes=0
	[ -x "$CACHE/envtest-etcd-$ETCD_VERSION-kube-$KUBE_VERSION/etcd" ] || { plan+=("etcd $ETCD_VERSION (about 1 min)"); minutes=$((minutes + 1)); }
	[ -x "$CACHE/envtest-etcd-$ETCD_VERSION-kube-$KUBE_VERSION/kube-apiserver" ] || { plan+=("kube-apiserver $KUBE_VERSION (about 10 min)"); minutes=$((minutes + 10)); }
	[ -x "$CACHE/vault-$VAULT_VERSION/vault" ] || { plan+=("vault $VAULT_VERSION (about 19 min)"); minutes=$((minutes + 19)); }
	[ -x "$CACHE/minio-$MINIO_VERSION/minio" ] || { plan+=("minio (about 4 min)"); minutes=$((minutes + 4)); }
	[ -x "$CACHE/nats-server-$NATS_VERSION/nats-server" ] || { plan+=("nats-server $NATS_VERSION (about 1 min)"); minutes=$((minutes + 1)); }
	local dir="$CACHE/envtest-etcd-$ETCD_VERSION-kube-$KUBE_VERSION"
	{ [ -x "$dir/kube-controller-manager" ] && [ -x "$dir/kube-scheduler" ]; } || { plan+=("kube-controller-manager and kube-scheduler $KUBE_VERSION (about 3 min once kube-apiserver built)"); minutes=$((minutes + 3)); }
	[ -x "$dir/kwok" ] || { plan+=("kwok $KWOK_VERSION (about 2 min)"); minutes=$((minutes + 2)); }
	[ -x "$dir/flagger" ] || { plan+=("flagger $FLAGGER_VERSION (about 3 min)"); minutes=$((minutes + 3)); }
	{ [ -x "$dir/kubelet" ] && [ -x "$dir/kube-proxy" ]; } || { plan+=("kubelet and kube-proxy $KUBE_VERSION (about 4 min once kube-apiserver built)"); minutes=$((minutes + 4)); }
	local flux="$CACHE/flux-$FLUX_VERSION"
	[ -x "$flux/source-controller" ] || { plan+=("source-controller $SOURCE_CONTROLLER_VERSION (about 7 min)"); minutes=$((minutes + 7)); }
	[ -x "$flux/kustomize-controller" ] || { plan+=("kustomize-controller $KUSTOMIZE_CONTROLLER_VERSION (about 1 min after source-controller: one wrapper serves the three)"); minutes=$((minutes + 1)); }
	[ -x "$flux/notification-controller" ] || { plan+=("notification-controller $NOTIFICATION_CONTROLLER_VERSION (about 1 min after those)"); minutes=$((minutes + 1)); }
	[ -x "$flux/flux" ] || { plan+=("flux CLI $FLUX_VERSION (about 2 min after those)"); minutes=$((minutes + 2)); }
	[ "${#plan[@]}" -gt 0 ] || return 0
	say "cold setup: nothing cached in $CACHE for:"
	local p
	for p in "${plan[@]}"; do say "  - $p"; done
	say "about $minutes minutes of builds on two cores, once; later runs reuse the cache"
}

case "${1:-}" in
envtest | cluster | node | flux | vault | minio | nats | lint | crds | missing) "$1" ;;
*) echo "usage: $0 envtest|cluster|node|flux|vault|minio|nats|lint|crds|missing" >&2; exit 2 ;;
esac
