"""Time travel against a real daemon: steps, rewind, fork, inspect, diff, pause and resume."""

from __future__ import annotations

import time

import pytest

import agentbox
from agentbox import Sandbox, SandboxConfig


def durable(box: Sandbox) -> list:
    deadline = time.monotonic() + 30
    while True:
        steps = box.steps()
        if all(s.snapshot.state == "durable" for s in steps):
            return steps
        assert time.monotonic() < deadline, [s.snapshot for s in steps]
        time.sleep(0.02)


def test_steps_rewind_fork_inspect(daemon):
    with Sandbox(SandboxConfig(runtime="nano")) as box:
        box.run("x = 1\nopen('/home/user/n.txt', 'w').write('1')")
        s2 = box.run("x = 2\nopen('/home/user/n.txt', 'w').write('2')").step
        box.run("x = 3\ndel_me = 'later'")
        steps = durable(box)
        assert [s.seq for s in steps] == [1, 2, 3] and steps[1].id == s2 and steps[1].parent == steps[0].id
        assert box.session.id and steps[2].code.startswith("x = 3")

        session = box.rewind(s2)
        assert session.head == s2
        assert box.run("print(x, open('/home/user/n.txt').read())").stdout == "2 2\n"
        assert box.steps()[-1].parent == s2  # the run after a rewind starts a branch

        other = box.fork(steps[2])
        try:
            assert other.session_id != box.session_id
            other.run("x = 30")
            assert box.run("print(x)").stdout == "2\n"
            assert other.run("print(x, del_me)").stdout == "30 later\n"
        finally:
            other.close()

        inspected = box.inspect(steps[2])
        names = {v.name: v for v in inspected.variables}
        assert names["x"].repr == "3" and names["x"].type == "int" and names["del_me"].type == "str"
        assert [f.path for f in inspected.files] == ["/home/user/n.txt"]
        diff = box.diff(steps[2])
        assert diff.base == s2 and [v.name for v in diff.added] == ["del_me"] and [v.name for v in diff.changed] == ["x"]

        assert box.client.read_step_file(box.session_id, steps[0].id, "n.txt") == b"1"
        with pytest.raises(agentbox.NotFound):
            box.client.read_step_file(box.session_id, steps[0].id, "nope.txt")
        with pytest.raises(agentbox.NotFound):
            box.rewind("st_nope")


def test_pause_resume(daemon):
    with Sandbox(SandboxConfig(runtime="nano")) as box:
        box.run("items = [1]")
        for i in range(2, 6):
            assert box.pause().state == "paused"
            if i % 2:
                assert box.resume().state == "live"
            box.run(f"items.append({i})")
        assert box.run("print(items)").stdout == "[1, 2, 3, 4, 5]\n"


def test_close_keep(daemon):
    box = Sandbox(SandboxConfig(runtime="nano"))
    box.run("kept = 41")
    durable(box)
    sid = box.session_id
    session = box.close(keep=True)
    assert session is not None and session.id == sid and session.state == "paused"
    assert session.kept_until is not None and session.steps == 1
    assert box.closed
    with Sandbox.connect(sid) as again:  # the kept session goes on where it was
        assert again.run("print(kept + 1)").stdout == "42\n"
        assert len(again.steps()) == 2
    with pytest.raises(agentbox.NotFound):
        box.client.close_session(sid)  # the plain close above freed everything
