#!/usr/bin/env bash
# Builds the agentbox binary into bin/. Static (no cgo) unless a package needs cgo.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p bin
go build -trimpath -o bin/agentbox ./cmd/agentbox
