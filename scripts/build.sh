#!/usr/bin/env bash
# Builds the agentbox binary into bin/. It uses cgo (the router's tree-sitter grammar is C); the
# guest agent and runsc are static builds of their own (CGO_ENABLED=0), made by setup. A plain
# `go build ./cmd/agentbox` works too, with upstream wazero (bounds-checked, ~30% slower nano compute).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p bin
# The nano tier's wazero is patched for guard-page memories (its compiled code then has no bounds
# check per load and store); scripts/wazero-guard.sh prints the flags that build with it.
go build -trimpath $(scripts/wazero-guard.sh) -o bin/agentbox ./cmd/agentbox
