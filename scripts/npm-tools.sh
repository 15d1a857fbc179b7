#!/usr/bin/env bash
# Usage: scripts/npm-tools.sh NAME READY
# Installs the npm packages pinned in scripts/NAME/package.json and its lock into a cache
# directory, $AGENTBOX_<NAME>_TOOLS-style override or .cache/NAME (the override's variable is
# AGENTBOX_ followed by NAME in capitals with - as _, e.g. AGENTBOX_MCP_TOOLS), and prints that
# directory. READY is a file under it (e.g. node_modules/.bin/node) that an installed directory has.
# The shared part of scripts/mcp-tools.sh, scripts/ui-tools.sh and scripts/js-sdk-test.sh.
#
# Idempotent and cached: a directory installed from the same package.json and lock is left alone
# (npm is not even asked); a changed pin reinstalls. Concurrent runs wait for each other (flock).
# Needs npm (scripts/host-deps.sh npm). Exits 3 when the npm registry cannot be reached, so that
# a test can tell "offline" from "broken". $NPM_TOOLS_CHECK, when set, is a command run in the
# directory after an install; the install counts only if it succeeds.
set -euo pipefail
name=$1 ready=$2
root=$(cd "$(dirname "$0")/.." && pwd)
src=$root/scripts/$name
var=AGENTBOX_$(echo "$name" | tr 'a-z-' 'A-Z_')
dir=${!var:-$root/.cache/$name}
mkdir -p "$dir"
exec 9>"$dir/.lock"
flock 9
# ready: READY is there, and executable when it is a command (node_modules/.bin/...).
ready() { [ -e "$dir/$ready" ] && { [[ $ready != */.bin/* ]] || [ -x "$dir/$ready" ]; }; }
stamp=$(cat "$src/package.json" "$src/package-lock.json" | sha256sum | cut -d' ' -f1)
if [ "$(cat "$dir/.stamp" 2>/dev/null)" = "$stamp" ] && ready; then
	echo "$dir"
	exit 0
fi
if ! command -v npm >/dev/null; then
	echo "agentbox: npm is not installed (scripts/host-deps.sh npm)" >&2
	exit 1
fi
echo "agentbox: installing scripts/$name/package.json into $dir" >&2
rm -f "$dir/.stamp"
cp "$src/package.json" "$src/package-lock.json" "$dir/"
# PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD: playwright-core (scripts/ui-tools) fetches no browser, and
# must not start to.
if ! (cd "$dir" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error) >&2; then
	if ! timeout 30 npm ping >/dev/null 2>&1; then
		echo "agentbox: the npm registry ($(npm config get registry 2>/dev/null)) cannot be reached" >&2
		exit 3
	fi
	echo "agentbox: npm ci failed in $dir" >&2
	exit 1
fi
if ! ready; then
	echo "agentbox: npm ci in $dir installed no $ready" >&2
	exit 1
fi
if [ -n "${NPM_TOOLS_CHECK:-}" ] && ! (cd "$dir" && eval "$NPM_TOOLS_CHECK") >&2; then
	exit 1
fi
echo "$stamp" >"$dir/.stamp"
echo "$dir"
