#!/usr/bin/env bash
# Builds SeaweedFS's `weed` binary, the S3-compatible server the shared store's tests run
# (internal/sharedstore, internal/cli's cluster tests), from its Go module, and prints the path of
# the binary. Cached by version under $AGENTBOX_SEAWEEDFS_CACHE, else DATA_DIR/tools/seaweedfs
# (DATA_DIR: $AGENTBOX_DATA_DIR or ~/.cache/agentbox, outside the checkout, so a fresh clone on
# the same machine, as CI's is, finds it built): a second run prints the cached path at once.
# Exits 3 when the Go module proxy cannot be reached (tests skip then, or fail in CI).
#
# Why not `go install github.com/seaweedfs/seaweedfs/weed@V`: the module's go.mod has a replace
# directive (go-bip39), which `go install pkg@version` refuses. So: download the module, copy
# it, and build the copy with -mod=mod. SeaweedFS is Apache-2.0 (MinIO's server is AGPL: not used).
set -euo pipefail
version=${SEAWEEDFS_VERSION:-v0.0.0-20261109003541-7506e5f91cd6}
cache=${AGENTBOX_SEAWEEDFS_CACHE:-${AGENTBOX_DATA_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/agentbox}/tools/seaweedfs}
out=$cache/$version/weed
mkdir -p "$cache/$version"

cached() { [ -x "$out" ] && [ -f "$out.ok" ]; }
if cached; then echo "$out"; exit 0; fi

# One build at a time per cache (CI or two shells starting together wait for the first).
exec 9>"$cache/.lock"
flock 9
if cached; then echo "$out"; exit 0; fi

command -v go >/dev/null || { echo "seaweedfs-build: go is not on PATH" >&2; exit 1; }
moddir() { go mod download -json "$1" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p'; }

work=$(mktemp -d "$cache/build.XXXXXX")
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
start=$(date +%s)
src=$(moddir "github.com/seaweedfs/seaweedfs@$version")
[ -d "$src" ] || { echo "seaweedfs-build: cannot download SeaweedFS's module from the Go module proxy" >&2; exit 3; }
cp -r "$src" "$work/src"
chmod -R u+w "$work/src"
(cd "$work/src" && GOFLAGS="-mod=mod -buildvcs=false" CGO_ENABLED=0 go build -trimpath -o "$work/weed" ./weed)
"$work/weed" version >/dev/null 2>&1 || { echo "seaweedfs-build: the built binary does not run" >&2; exit 1; }
mv -f "$work/weed" "$out"
touch "$out.ok"
echo "seaweedfs-build: built SeaweedFS $version in $(( $(date +%s) - start ))s" >&2
echo "$out"
