#!/usr/bin/env bash
# Prints `-modfile=FILE`, the go flag that builds this tree against MODULE (at the version go.mod
# pins) with our patch scripts/NAME/SHORT-<version>.patch applied:
#
#   scripts/patched-module.sh NAME MODULE SHORT
#
# scripts/wazero-guard.sh and scripts/gvisor-patch.sh call it and say what their patches do.
# The patch is applied to a copy of the pinned module from the Go module cache (hard links, and
# real copies of the files the patch touches) under the data directory, which the build uses
# through a copy of go.mod with a replace (-modfile), so neither the module cache nor the tree
# changes and a plain `go build` still uses the upstream module. Cached by the patch's hash, the
# version, the module's directory and this script (the go.mod copy by go.mod's and go.sum's);
# idempotent, and safe to run twice at once (the first rename wins).
set -euo pipefail
name=$1 mod=$2 short=$3
cd "$(dirname "$0")/.."
ver=$(go list -m -f '{{.Version}}' "$mod")
patch=$PWD/scripts/$name/$short-$ver.patch
if [ ! -f "$patch" ]; then
	echo "$name: no patch for $mod $ver (scripts/$name/ has $(ls "scripts/$name")); port it to the new version" >&2
	exit 1
fi
# The files the patch touches are found by its `+++ b/PATH` lines (below): a patch whose new side
# is named otherwise (`diff -ruN a c` from another tree) would leave them hard links into the
# module cache while `patch` writes them.
if grep '^+++ ' "$patch" | grep -qv '^+++ b/'; then
	echo "$name: $patch has file headers other than +++ b/PATH; regenerate it with diff -ruN a b" >&2
	exit 1
fi
go mod download "$mod"
src=$(go list -m -f '{{.Dir}}' "$mod")
key=$( { echo "$ver $src"; cat "$patch" "$0"; } | sha256sum | cut -c1-16)
out=${AGENTBOX_DATA_DIR:-$HOME/.cache/agentbox}/$name/$key
if [ ! -f "$out/$short/go.mod" ]; then
	mkdir -p "$(dirname "$out")"
	tmp=$(mktemp -d "$out.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
	cp -al "$src" "$tmp/$short" 2>/dev/null || { rm -rf "$tmp/$short"; cp -r "$src" "$tmp/$short"; }
	# The directories are new (writable for patch); files stay links into the module cache
	# except those the patch touches, which become copies of their own before it runs.
	find "$tmp/$short" -type d -exec chmod u+w {} +
	for f in $(sed -n 's|^+++ b/||p' "$patch"); do
		if [ -f "$src/$f" ]; then
			rm -f "$tmp/$short/$f"
			cp "$src/$f" "$tmp/$short/$f"
			chmod u+w "$tmp/$short/$f"
		fi
	done
	if command -v patch >/dev/null; then
		patch -s -p1 -d "$tmp/$short" <"$patch"
	else # git apply works outside a repository; the ceiling keeps it from finding one above
		(cd "$tmp/$short" && GIT_CEILING_DIRECTORIES=$(dirname "$tmp") git apply -p1 "$patch")
	fi
	# Another build may have made it meanwhile: the first rename wins, the others drop theirs.
	mv -T "$tmp" "$out" 2>/dev/null || rm -rf "$tmp"
	trap - EXIT
fi
# The tree's go.mod with the replace, beside a copy of its go.sum (-modfile reads the go.sum next
# to the file it is given). The replace names $out by its absolute path, so the key holds it too:
# a data directory moved or copied elsewhere gets a go.mod of its own path, not one naming a
# directory that may be gone.
modkey=$( { cat go.mod go.sum; echo "$out"; } | sha256sum | cut -c1-16)
modfile=$out/mod-$modkey/go.mod
if [ ! -f "$modfile" ]; then
	tmp=$(mktemp -d "$out/mod.XXXXXX")
	cp go.sum "$tmp/go.sum"
	{ cat go.mod; printf '\nreplace %s %s => %s\n' "$mod" "$ver" "$out/$short"; } >"$tmp/go.mod"
	mv -T "$tmp" "$out/mod-$modkey" 2>/dev/null || rm -rf "$tmp"
fi
echo "-modfile=$modfile"
