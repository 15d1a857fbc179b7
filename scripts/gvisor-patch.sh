#!/usr/bin/env bash
# Prints the go flags that build runsc from the pinned gVisor module with our patch:
#
#   go build $(scripts/gvisor-patch.sh) ./cmd/agentbox-runsc   (or gvisor.dev/gvisor/runsc)
#
# The patch (scripts/gvisor-patch/gvisor-<version>.patch, ours) changes the sentry's fork
# (pkg/sentry/mm): the parent's written memory is write-protected in the stub instead of
# unmapped (so its reads do not fault again), and copy-behind: a child that parks in
# rt_sigtimedwait (a wait of a second or more) copies, 30 ms after the fork, the private memory
# its parent wrote since the fork before (capped at 64 MiB), so the parent's next writes take
# the originals without copying. A heavy session's per-step snapshot is a fork of its Python
# process that parks, and those copies were what the step after it paid (docs/RATIONALE.md,
# "Heavy snapshot latency, fifth pass").
# It is applied to a copy of the pinned module from the Go module cache (hard links, and real
# copies of the files the patch touches) under the data directory, which the build uses through a
# copy of go.mod with a replace (-modfile), so neither the module cache nor the tree changes.
# Cached by the patch's hash, the version and the module's directory (the go.mod copy by go.mod's
# and go.sum's); idempotent. `agentbox setup` (internal/setup/heavy.go) runs it in the source tree.
# The last line of the output is the flags; with -key it prints the patch's short hash instead
# (what the built runsc's version carries, so setup rebuilds runsc when the patch changes).
set -euo pipefail
cd "$(dirname "$0")/.."
mod=gvisor.dev/gvisor
ver=$(go list -m -f '{{.Version}}' "$mod")
patch=$PWD/scripts/gvisor-patch/gvisor-$ver.patch
if [ ! -f "$patch" ]; then
	echo "gvisor-patch: no patch for $mod $ver (scripts/gvisor-patch/ has $(ls scripts/gvisor-patch)); port it to the new version" >&2
	exit 1
fi
if [ "${1:-}" = -key ]; then
	sha256sum "$patch" | cut -c1-12
	exit 0
fi
go mod download "$mod"
src=$(go list -m -f '{{.Dir}}' "$mod")
key=$( { echo "$ver $src"; cat "$patch" "$0"; } | sha256sum | cut -c1-16)
out=${AGENTBOX_DATA_DIR:-$HOME/.cache/agentbox}/gvisor-patch/$key
if [ ! -f "$out/gvisor/go.mod" ]; then
	mkdir -p "$(dirname "$out")"
	tmp=$(mktemp -d "$out.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
	cp -al "$src" "$tmp/gvisor" 2>/dev/null || { rm -rf "$tmp/gvisor"; cp -r "$src" "$tmp/gvisor"; }
	# The directories are new (writable for patch); files stay links into the module cache
	# except those the patch touches, which become copies of their own before it runs.
	find "$tmp/gvisor" -type d -exec chmod u+w {} +
	for f in $(sed -n 's|^+++ b/||p' "$patch"); do
		if [ -f "$src/$f" ]; then
			rm -f "$tmp/gvisor/$f"
			cp "$src/$f" "$tmp/gvisor/$f"
			chmod u+w "$tmp/gvisor/$f"
		fi
	done
	if command -v patch >/dev/null; then
		patch -s -p1 -d "$tmp/gvisor" <"$patch"
	else # git apply works outside a repository; the ceiling keeps it from finding one above
		(cd "$tmp/gvisor" && GIT_CEILING_DIRECTORIES=$(dirname "$tmp") git apply -p1 "$patch")
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
	{ cat go.mod; printf '\nreplace %s %s => %s\n' "$mod" "$ver" "$out/gvisor"; } >"$tmp/go.mod"
	mv -T "$tmp" "$out/mod-$modkey" 2>/dev/null || rm -rf "$tmp"
fi
echo "-modfile=$modfile"
