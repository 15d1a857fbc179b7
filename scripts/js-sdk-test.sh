#!/usr/bin/env bash
# Runs the JavaScript SDK's tests (sdk/js/test) with Node's own test runner, against daemons the
# tests start from bin/agentbox. The SDK has no dependencies, so nothing is installed from npm
# for it: the tests run with the host's Node (Debian's nodejs, 18 or later), and again with the
# pinned Node 22 of scripts/mcp-tools.sh when that is there, so both ends of the supported range
# are tried. One test file at a time: each starts its own daemon. Extra arguments name test files.
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
