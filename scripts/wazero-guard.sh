#!/usr/bin/env bash
# Prints the go flags that build agentbox with wazero patched for guard-page memories:
#
#   go build $(scripts/wazero-guard.sh) ./cmd/agentbox
#
# The patch (scripts/wazero-guard/wazero-<version>.patch, ours) lets wazero's optimizing compiler
# drop the bounds check of every load and store for a memory that reserves 8 GiB of address space
# with its unused part inaccessible (docs/RATIONALE.md, "Guard pages instead of bounds checks").
# It is applied to a copy of the pinned module from the Go module cache (hard links, and real
# copies of the files the patch touches) under the data directory, which the build uses through a
# copy of go.mod with a replace (-modfile), so neither the module cache nor the tree changes and a
# plain `go build` still uses upstream wazero with its checks. The tag agentbox_wazeroguard turns
# the engine's side on (internal/runtimes/nano/engine/guard_on.go); without the patched module that
# file does not compile, so the two go together. Cached by the patch's hash, the version and the
# module's directory (the go.mod copy by go.mod's and go.sum's); idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
mod=github.com/tetratelabs/wazero
ver=$(go list -m -f '{{.Version}}' "$mod")
patch=$PWD/scripts/wazero-guard/wazero-$ver.patch
if [ ! -f "$patch" ]; then
	echo "wazero-guard: no patch for $mod $ver (scripts/wazero-guard/ has $(ls scripts/wazero-guard)); port it to the new version" >&2
	exit 1
fi
go mod download "$mod"
src=$(go list -m -f '{{.Dir}}' "$mod")
key=$( { echo "$ver $src"; cat "$patch" "$0"; } | sha256sum | cut -c1-16)
out=${AGENTBOX_DATA_DIR:-$HOME/.cache/agentbox}/wazero-guard/$key
if [ ! -f "$out/wazero/go.mod" ]; then
	mkdir -p "$(dirname "$out")"
	tmp=$(mktemp -d "$out.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
	cp -al "$src" "$tmp/wazero" 2>/dev/null || { rm -rf "$tmp/wazero"; cp -r "$src" "$tmp/wazero"; }
	# The directories are new (writable for patch); files stay links into the module cache
	# except those the patch touches, which become copies of their own before it runs.
	find "$tmp/wazero" -type d -exec chmod u+w {} +
	for f in $(sed -n 's|^+++ b/||p' "$patch"); do
		if [ -f "$src/$f" ]; then
			rm -f "$tmp/wazero/$f"
			cp "$src/$f" "$tmp/wazero/$f"
			chmod u+w "$tmp/wazero/$f"
		fi
	done
	if command -v patch >/dev/null; then
		patch -s -p1 -d "$tmp/wazero" <"$patch"
	else # git apply works outside a repository; the ceiling keeps it from finding one above
		(cd "$tmp/wazero" && GIT_CEILING_DIRECTORIES=$(dirname "$tmp") git apply -p1 "$patch")
	fi
	# Another build may have made it meanwhile: the first rename wins, the others drop theirs.
	mv -T "$tmp" "$out" 2>/dev/null || rm -rf "$tmp"
	trap - EXIT
fi
# The tree's go.mod with the replace, beside a copy of its go.sum (-modfile reads the go.sum next
# to the file it is given).
modkey=$(cat go.mod go.sum | sha256sum | cut -c1-16)
modfile=$out/mod-$modkey/go.mod
if [ ! -f "$modfile" ]; then
	tmp=$(mktemp -d "$out/mod.XXXXXX")
	cp go.sum "$tmp/go.sum"
	{ cat go.mod; printf '\nreplace %s %s => %s\n' "$mod" "$ver" "$out/wazero"; } >"$tmp/go.mod"
	mv -T "$tmp" "$out/mod-$modkey" 2>/dev/null || rm -rf "$tmp"
fi
echo "-modfile=$modfile -tags=agentbox_wazeroguard"
