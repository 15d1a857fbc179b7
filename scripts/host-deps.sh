#!/usr/bin/env bash
# Installs the Debian packages agentbox's setup, tests and benchmarks use, if any is missing.
# Idempotent: a machine that has them all is left alone (and apt is not even asked). A package
# whose name is also a command on PATH counts as present (npm from another source, say).
set -euo pipefail
need=()
have() { command -v "$1" >/dev/null 2>&1 || dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
for p in "$@"; do have "$p" || need+=("$p"); done
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ]; then
	echo "agentbox: missing Debian packages: ${need[*]}; run this as root (or: sudo apt-get install ${need[*]})" >&2
	exit 1
fi
echo "agentbox: installing ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
