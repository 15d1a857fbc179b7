#!/usr/bin/env bash
# Prints the go flags that build agentbox with wazero patched for guard-page memories:
#
#   go build $(scripts/wazero-guard.sh) ./cmd/agentbox
#
# The patch (scripts/wazero-guard/wazero-<version>.patch, ours) lets wazero's optimizing compiler
# drop the bounds check of every load and store for a memory that reserves 8 GiB of address space
# with its unused part inaccessible (docs/RATIONALE.md, "Guard pages instead of bounds checks").
# The tag agentbox_wazeroguard turns the engine's side on
# (internal/runtimes/nano/engine/guard_on.go); without the patched module that file does not
# compile, so the two go together. The patch is applied to a copy of the pinned module by
# scripts/patched-module.sh (cached, idempotent), so a plain `go build` still uses upstream wazero
# with its checks.
set -euo pipefail
cd "$(dirname "$0")/.."
flags=$(scripts/patched-module.sh wazero-guard github.com/tetratelabs/wazero wazero)
echo "$flags -tags=agentbox_wazeroguard"
