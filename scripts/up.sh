#!/usr/bin/env bash
# Sets everything up and starts the daemon: host packages, the binary, the runtimes' artifacts
# (`agentbox setup`, idempotent and cached), then `agentbox serve` in the foreground.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/host-deps.sh npm ca-certificates gcc libc6-dev
scripts/build.sh
bin/agentbox setup
exec bin/agentbox serve "$@"
