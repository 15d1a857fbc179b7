#!/usr/bin/env bash
# Installs what the web console's browser tests run from npm, pinned in scripts/ui-tools/package.json
# and its lock: playwright-core, which drives Debian's Chromium (scripts/host-deps.sh chromium) and
# downloads no browser of its own. Node 22 comes from scripts/mcp-tools.sh. They go into a cache
# directory, $AGENTBOX_UI_TOOLS or .cache/ui-tools, and the script prints that directory.
#
# Idempotent and cached, exits 3 when the npm registry cannot be reached: scripts/npm-tools.sh.
set -euo pipefail
exec "$(cd "$(dirname "$0")" && pwd)/npm-tools.sh" ui-tools node_modules/playwright-core/package.json
