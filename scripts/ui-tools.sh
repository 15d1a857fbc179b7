#!/usr/bin/env bash
# Installs what the web console's browser tests run from npm, pinned in scripts/ui-tools/package.json
# and its lock: playwright-core, which drives Debian's Chromium (scripts/host-deps.sh chromium) and
# downloads no browser of its own. Node 22 comes from scripts/mcp-tools.sh. They go into a cache
# directory, $AGENTBOX_UI_TOOLS or .cache/ui-tools, and the script prints that directory.
#
# Idempotent and cached: a directory installed from the same package.json and lock is left alone
# (npm is not even asked); a changed pin reinstalls. Concurrent runs wait for each other (flock).
# Needs npm (scripts/host-deps.sh npm). Exits 3 when the npm registry cannot be reached, so that
# a test can tell "offline" from "broken".
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
src=$root/scripts/ui-tools
dir=${AGENTBOX_UI_TOOLS:-$root/.cache/ui-tools}
mkdir -p "$dir"
exec 9>"$dir/.lock"
flock 9
stamp=$(cat "$src/package.json" "$src/package-lock.json" | sha256sum | cut -d' ' -f1)
if [ "$(cat "$dir/.stamp" 2>/dev/null)" = "$stamp" ] && [ -f "$dir/node_modules/playwright-core/package.json" ]; then
	echo "$dir"
	exit 0
fi
if ! command -v npm >/dev/null; then
	echo "agentbox: npm is not installed (scripts/host-deps.sh npm)" >&2
	exit 1
fi
echo "agentbox: installing playwright-core into $dir" >&2
rm -f "$dir/.stamp"
cp "$src/package.json" "$src/package-lock.json" "$dir/"
# PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD: playwright-core fetches no browser, and must not start to.
if ! (cd "$dir" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error) >&2; then
	if ! timeout 30 npm ping >/dev/null 2>&1; then
		echo "agentbox: the npm registry ($(npm config get registry 2>/dev/null)) cannot be reached" >&2
		exit 3
	fi
	echo "agentbox: npm ci failed in $dir" >&2
	exit 1
fi
echo "$stamp" >"$dir/.stamp"
echo "$dir"
