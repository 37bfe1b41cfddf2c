#!/usr/bin/env bash
# Runs the suite as `make test` does: every package under the race detector
# against the real servers, with one coverage profile of the module.
#
# The whole-path package needs only the cluster's, the node's and Flux's
# servers and spends its time waiting on the node, so it starts as soon as
# those are built; Vault, MinIO and nats-server build beside it, and the rest
# of the suite runs after them. On a new machine this overlaps most of the
# servers' builds with the whole path's waits; on a warm one both start at
# once. The two profiles are merged, as go test merges one run's packages.
#
#   scripts/test.sh <coverage floor>
set -euo pipefail
cd "$(dirname "$0")/.."
floor=${1:?usage: $0 <coverage floor>}
GO=${GO:-go}
wholepath=./internal/e2e/wholepath/
# 45m per package: one node runs on a machine at a time, so a second suite
# beside this one has its whole-path package wait out the first's before its
# own.
run=(test -race -count=1 -timeout 45m -coverpkg=./...)

scripts/test-deps.sh node
profiles=$(mktemp -d)
trap 'rm -rf "$profiles"' EXIT
"$GO" "${run[@]}" -coverprofile="$profiles/wholepath.out" "$wholepath" &
whole=$!

others=0
scripts/test-deps.sh others || others=$?
if [ "$others" -eq 0 ]; then
	mapfile -t packages < <("$GO" list ./... | grep -vx 'github.com/JorisJonkers-dev/delivery/internal/e2e/wholepath')
	"$GO" "${run[@]}" -coverprofile="$profiles/others.out" "${packages[@]}" || others=$?
fi
path=0
wait "$whole" || path=$?
[ "$others" -eq 0 ] && [ "$path" -eq 0 ] || exit 1

{
	head -n 1 "$profiles/wholepath.out"
	tail -q -n +2 "$profiles/wholepath.out" "$profiles/others.out"
} >cover.out
scripts/coverage.sh cover.out "$floor"
