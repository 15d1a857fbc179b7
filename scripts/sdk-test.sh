#!/usr/bin/env bash
# Runs the Python SDK's tests (sdk/python/tests) with Debian's pytest, against daemons the tests
# start from bin/agentbox. The SDK is installed the way a user would (`pip install ./sdk/python`,
# offline: its build backend needs nothing from an index) into a venv kept in .cache/sdk-venv,
# which sees the system's pytest. Idempotent; extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/host-deps.sh python3-pytest python3-venv
# Debian's interpreter, the one python3-pytest is installed for (a pyenv python3 may come first on PATH).
py=${PYTHON:-/usr/bin/python3}
[ -x "$py" ] || py=python3
venv=.cache/sdk-venv
if ! "$venv/bin/python" -c 'import pytest' >/dev/null 2>&1; then
	rm -rf "$venv"
	"$py" -m venv --system-site-packages "$venv"
fi
"$venv/bin/python" -m pip install --quiet --no-index --no-deps --force-reinstall --disable-pip-version-check ./sdk/python
# The tests must import the installed SDK, not the source tree.
"$venv/bin/python" -c 'import agentbox, sys; assert "site-packages" in agentbox.__file__, agentbox.__file__'
[ -x bin/agentbox ] || scripts/build.sh
export AGENTBOX_BIN="$PWD/bin/agentbox"
exec "$venv/bin/python" -m pytest -q -o cache_dir=.cache/pytest sdk/python/tests "$@"
