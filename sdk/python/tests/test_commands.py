"""Commands in heavy sessions against a real daemon with gVisor: box.commands."""

from __future__ import annotations

import time

import pytest

import agentbox
from agentbox import Sandbox, SandboxConfig


def test_commands_run_stream_background_and_kill(heavy):
    with Sandbox(SandboxConfig(runtime="heavy")) as box:
        box.files.write("notes.txt", "from the files API\n")
        c = box.commands.run("cat notes.txt; echo err >&2; exit 2")
        assert (c.status, c.exit_code, c.stdout, c.stderr) == ("exited", 2, "from the files API\n", "err\n")

        c = box.commands.run(["sh", "-c", "pwd; tr a-z A-Z"], cwd="/tmp", stdin="loud\n", env={"X": "1"})
        assert c.stdout == "/tmp\nLOUD\n" and c.exit_code == 0

        lines, start, first = [], time.monotonic(), None

        def got(s: str) -> None:
            nonlocal first
            if first is None:
                first = time.monotonic() - start
            lines.append(s)

        c = box.commands.run("for i in 1 2 3 4 5 6 7 8; do echo n $i; sleep 0.2; done", on_stdout=got)
        total = time.monotonic() - start
        assert "".join(lines) == c.stdout and c.stdout.count("n ") == 8
        assert first is not None and total - first >= 1.0, (first, total)

        bg = box.commands.run("while true; do echo tick; sleep 0.1; done", background=True, timeout=120)
        assert bg.status == "running"
        deadline = time.monotonic() + 20
        seen = bg
        while time.monotonic() < deadline and seen.stdout.count("tick") < 3:
            time.sleep(0.1)
            seen = box.commands.get(bg.id)
        assert seen.status == "running" and seen.stdout.count("tick") >= 3
        assert bg.id in [x.id for x in box.commands.list()]
        killed = box.commands.kill(bg.id)
        assert killed.status == "killed" and killed.ended_at is not None
        assert box.run("print(6 * 7)").stdout == "42\n"


def test_a_nano_session_refuses_commands(daemon):
    with Sandbox(SandboxConfig(runtime="nano")) as box:
        box.run("x = 1")
        with pytest.raises(agentbox.InvalidRequest) as ei:
            box.commands.run("ls")
        assert "no processes" in str(ei.value) and "heavy" in ei.value.hint
