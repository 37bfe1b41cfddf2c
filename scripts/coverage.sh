#!/usr/bin/env bash
# Reports statement coverage of the hand-written code in a cover profile and
# fails below a floor. Test-only packages (the test environment and its
# stand-ins for outside services) are not product code, and the Go types
# generated from deploy-kit's schemas are not hand-written: both are left out.
set -euo pipefail
profile=$1 floor=$2
filtered=$(mktemp)
trap 'rm -f "$filtered"' EXIT
grep -v -e '/internal/testenv/' -e '/internal/deploykit/[^/]*/types_gen\.go:' "$profile" >"$filtered"
total=$(go tool cover -func="$filtered" | awk '/^total:/ { sub("%", "", $3); print $3 }')
echo "statement coverage of hand-written code: ${total}% (floor ${floor}%)"
awk -v t="$total" -v f="$floor" 'BEGIN { exit !(t >= f) }' || { echo "coverage ${total}% is below ${floor}%" >&2; exit 1; }
