"""The seed's example, exactly as a user would run it: a script with nothing configured but the
daemon's address and key in the environment."""

from __future__ import annotations

import os
import subprocess
import sys

from agentbox import Client, Sandbox

SEED = """from agentbox import Sandbox; box = Sandbox(); print(box.run('import json; print(json.dumps({"status": "ok"}))').stdout)"""


def test_seed_example_prints_status_ok(daemon):
    before = {s.id for s in Client().list_sessions()}
    p = subprocess.run([sys.executable, "-c", SEED], capture_output=True, text=True, timeout=120, env=dict(os.environ))
    assert p.returncode == 0, p.stderr
    assert p.stdout == '{"status": "ok"}\n\n'  # the run's stdout, then print's own newline
    # The script never closed its Sandbox; the SDK closed the session when the interpreter exited.
    assert {s.id for s in Client().list_sessions()} == before


def test_seed_example_routes_to_nano(daemon):
    box = Sandbox()
    res = box.run('import json; print(json.dumps({"status": "ok"}))')
    assert res.stdout == '{"status": "ok"}\n'
    assert res.runtime == "nano" and box.runtime == "nano"
    assert res.routing.tier == "nano", res.routing
    assert res.exit_code == 0 and res.error is None and res.ok
    assert res.duration > 0
    box.close()
