#!/usr/bin/env bash
# Holds the copies under third_party/ to their sources, the reference folder
# checked out beside the repository (../shared/reference, or $REFERENCE_DIR).
#
#   scripts/schemas-check.sh          fail when a vendored file, or a REF,
#                                     differs from what the source gives
#   scripts/schemas-check.sh refresh  copy the sources over third_party/ and
#                                     rewrite the REFs
#
# Both build the vendored tree the same way (vendor_into below); the check
# builds it in a temporary folder and compares, so a file the source added,
# changed or dropped is a difference. A source folder that is absent is said
# and passes: the copies in the repository are then all there is to hold to.
set -euo pipefail
cd "$(dirname "$0")/.."
reference=${REFERENCE_DIR:-../shared/reference}
mode=${1:-check}

# deploykit_into DEST: deploy-kit's schemas, their corpus, and the spec files
# the corpus names, with a REF naming each file's commit as the copy's
# version table (the Versions section of its CONTRACTS.md) records it.
deploykit_into() {
	local src=$reference/deploy-kit dest=$1
	local spec=spec/v1 files=() absent=()
	local f
	for f in "$src/$spec"/schemas/*.json "$src/$spec"/schemas/corpus/*.json; do
		files+=("${f#"$src/"}")
	done
	# The corpus names the documents it patches by their path under spec/v1.
	while IFS= read -r f; do
		if [ -f "$src/$spec/$f" ]; then files+=("$spec/$f"); else absent+=("$spec/$f"); fi
	done < <(sed -n 's/^ *"file": *"\([^"]*\)".*/\1/p' "$src/$spec"/schemas/corpus/*.json | sort -u)
	mapfile -t files < <(printf '%s\n' "${files[@]}" | sort -u)
	for f in "${files[@]}"; do
		mkdir -p "$dest/$(dirname "$f")"
		cp "$src/$f" "$dest/$f"
		chmod 644 "$dest/$f"
	done
	{
		echo "# deploy-kit (JorisJonkers-dev/deploy-kit), folder spec/v1: the files"
		echo "# vendored here. The copy they come from carries no single commit: each file"
		echo "# was taken at a commit of its own, named by its first 12 hex digits as the"
		echo "# copy's version table records it (\"unrecorded\" where it names none)."
		echo "# Written by scripts/schemas-check.sh refresh; checked by make schemas-check."
		for f in "${files[@]}"; do
			local version
			version=$(awk -F'|' -v p="\`$f\`" '{ gsub(/^ +| +$/, "", $2); gsub(/^ +| +$/, "", $3) } $2 == p { print $3; exit }' "$src/CONTRACTS.md")
			echo "$f ${version:-unrecorded}"
		done
		if [ "${#absent[@]}" -gt 0 ]; then
			echo "# Named by a corpus but not in the copy, so not vendored:"
			printf '#   %s\n' "${absent[@]}"
		fi
	} >"$dest/REF"
}

# garage_into DEST: Garage's admin API v2 description, with a REF naming the
# release and commit the source's VERSION-v2 records.
garage_into() {
	local src=$reference/garage dest=$1
	mkdir -p "$dest"
	cp "$src/garage-admin-v2.json" "$dest/"
	chmod 644 "$dest/garage-admin-v2.json"
	local tag commit
	{ read -r tag; read -r commit; } <"$src/VERSION-v2"
	{
		echo "# Garage, the Deuxfleurs object store: its admin API v2 OpenAPI document,"
		echo "# vendored here at the release and commit below."
		echo "# Written by scripts/schemas-check.sh refresh; checked by make schemas-check."
		echo "garage-admin-v2.json $tag $commit"
	} >"$dest/REF"
}

status=0
for name in deploy-kit garage; do
	if [ ! -d "$reference/$name" ]; then
		echo "schemas-check: $name: the source ($reference/$name) is absent; the vendored copy is not compared"
		continue
	fi
	into=deploykit_into
	[ "$name" = garage ] && into=garage_into
	case $mode in
	refresh)
		find "third_party/$name" -type f ! -name README.md -delete 2>/dev/null || true
		"$into" "third_party/$name"
		echo "schemas-check: $name: third_party/$name refreshed from $reference/$name"
		;;
	check)
		tmp=$(mktemp -d)
		"$into" "$tmp"
		if diff -r -x README.md "$tmp" "third_party/$name" >"$tmp.diff" 2>&1; then
			echo "schemas-check: $name: third_party/$name matches $reference/$name"
		else
			echo "schemas-check: $name: third_party/$name differs from $reference/$name (scripts/schemas-check.sh refresh copies it anew):" >&2
			sed 's/^/  /' "$tmp.diff" | head -40 >&2
			status=1
		fi
		rm -rf "$tmp" "$tmp.diff"
		;;
	*)
		echo "usage: $0 [check|refresh]" >&2
		exit 2
		;;
	esac
done
exit "$status"
