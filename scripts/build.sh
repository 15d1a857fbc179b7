#!/usr/bin/env bash
# Builds the agentbox binary into bin/. It uses cgo (the router's tree-sitter grammar is C); the
# guest agent and runsc are static builds of their own (CGO_ENABLED=0), made by setup.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p bin
go build -trimpath -o bin/agentbox ./cmd/agentbox
