#!/usr/bin/env bash
# Runs the JavaScript SDK's tests (sdk/js/test) with Node's own test runner, against daemons the
# tests start from bin/agentbox. The SDK has no dependencies; from npm comes only the pinned
# TypeScript compiler that checks its types (scripts/js-sdk-tools). The tests run with the host's
# Node (Debian's nodejs, 18 or later), and again with the pinned Node 22 of scripts/mcp-tools.sh
# when that is there, so both ends of the supported range are tried. One test file at a time:
# each starts its own daemon. Extra arguments name test files.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/host-deps.sh nodejs
[ -x bin/agentbox ] || scripts/build.sh
export AGENTBOX_BIN="$PWD/bin/agentbox"
files=("$@")
[ ${#files[@]} -gt 0 ] || files=(sdk/js/test/*.test.js)
nodes=(node)
if node22=$(scripts/mcp-tools.sh 2>/dev/null)/node_modules/.bin/node && [ -x "$node22" ]; then
	nodes+=("$node22")
else
	echo "agentbox: the pinned Node 22 (scripts/mcp-tools.sh) is not there; the JS SDK is tested with $(node --version) only" >&2
fi
status=0
# The types: tsc (pinned in scripts/js-sdk-tools, installed into .cache/js-sdk-tools, cached by
# the lock's hash) compiles sdk/js/test/types.ts, a program using the SDK, against index.d.ts.
# (scripts/npm-tools.sh; $AGENTBOX_JS_SDK_TOOLS overrides the directory).
scripts/host-deps.sh npm
if tools=$(scripts/npm-tools.sh js-sdk-tools node_modules/.bin/tsc); then
	echo "agentbox: tsc --strict sdk/js/test/types.ts (index.d.ts)"
	"$tools/node_modules/.bin/tsc" --noEmit --strict --target es2022 --module nodenext --moduleResolution nodenext \
		--typeRoots "$tools/node_modules/@types" --types node sdk/js/test/types.ts || status=1
else
	echo "agentbox: the pinned TypeScript compiler (scripts/js-sdk-tools) could not be installed" >&2
	status=1
fi
for n in "${nodes[@]}"; do
	v=$("$n" --version)
	if [ "$(echo "$v" | sed 's/^v\([0-9]*\).*/\1/')" -lt 18 ]; then
		echo "agentbox: $n is $v; the JS SDK needs Node 18 or later" >&2
		status=1
		continue
	fi
	for f in "${files[@]}"; do
		echo "agentbox: node $v --test $f"
		"$n" --test "$f" || status=1
	done
done
exit "$status"
