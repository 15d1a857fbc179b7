#!/usr/bin/env bash
# Builds the Nomad agent the cluster tests and scripts/cluster/nomad-local.sh run, from its Go
# module (this machine reaches the Go module proxy, not HashiCorp's release site), and prints the
# path of the binary. Cached by version under $AGENTBOX_NOMAD_CACHE, else DATA_DIR/tools/nomad
# (DATA_DIR: $AGENTBOX_DATA_DIR or ~/.cache/agentbox, where `agentbox setup` keeps the runtimes;
# outside the checkout, so a fresh clone on the same machine, as CI's is, finds it built): a
# second run prints the cached path at once. Cold it takes about 6.5 minutes on 2 cores.
# Exits 3 when the Go module proxy cannot be reached (tests skip then, or fail in CI).
#
# Why not `go install github.com/hashicorp/nomad@vX`: the proxy refuses the module's version list,
# and the module's go.mod replaces ./api, a nested module its zip omits. So: download the module,
# copy it, put the nested api module (fetched by the pseudo-version of the tag's commit) into
# ./api, and build the copy with -mod=mod.
set -euo pipefail
version=${NOMAD_VERSION:-1.10.5}
case "$version" in
1.10.5) api_version=v0.0.0-20250909143645-a3b86c697f38 ;; # the commit tagged v1.10.5
*) echo "nomad-build: no api pseudo-version known for Nomad $version; add it to $0" >&2; exit 2 ;;
esac
cache=${AGENTBOX_NOMAD_CACHE:-${AGENTBOX_DATA_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/agentbox}/tools/nomad}
out=$cache/v$version/nomad
mkdir -p "$cache/v$version"

cached() { [ -x "$out" ] && "$out" version 2>/dev/null | grep -q "^Nomad v$version\b"; }
if cached; then echo "$out"; exit 0; fi

# One build at a time per cache (CI or two shells starting together wait for the first).
exec 9>"$cache/.lock"
flock 9
if cached; then echo "$out"; exit 0; fi

command -v go >/dev/null || { echo "nomad-build: go is not on PATH" >&2; exit 1; }
moddir() { go mod download -json "$1" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p'; }

work=$(mktemp -d "$cache/build.XXXXXX")
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
start=$(date +%s)
src=$(moddir "github.com/hashicorp/nomad@v$version")
api=$(moddir "github.com/hashicorp/nomad/api@$api_version")
[ -d "$src" ] && [ -d "$api" ] || { echo "nomad-build: cannot download Nomad's modules from the Go module proxy" >&2; exit 3; }
cp -r "$src" "$work/src"
chmod -R u+w "$work/src"
rm -rf "$work/src/api"
cp -r "$api" "$work/src/api"
chmod -R u+w "$work/src/api"
(cd "$work/src" && GOFLAGS="-mod=mod -buildvcs=false" CGO_ENABLED=${CGO_ENABLED:-1} go build -trimpath -o "$work/nomad" .)
"$work/nomad" version | grep -q "^Nomad v$version\b" || { echo "nomad-build: built binary is not Nomad v$version" >&2; exit 1; }
mv -f "$work/nomad" "$out"
echo "nomad-build: built Nomad v$version in $(( $(date +%s) - start ))s" >&2
echo "$out"
