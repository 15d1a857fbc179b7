"""Sandbox against a real daemon: sessions, routing, files, configuration."""

from __future__ import annotations

import datetime as dt
import hashlib

import pytest

import agentbox
from agentbox import Client, Sandbox, SandboxConfig

PANDAS = """import pandas as pd
df = pd.DataFrame({"a": [1, 2, 3], "b": [10, 20, 30]})
print(int(df["a"].sum() + df["b"].sum()))
"""


def test_session_keeps_state(daemon):
    with Sandbox() as box:
        box.run("import math\nx = 41")
        box.run("x += 1\ndef f(v):\n    return math.sqrt(v)")
        res = box.run("print(x, f(16))")
        assert res.stdout == "42 4.0\n"
        assert Client().get_session(box.session_id).runs == 3


def test_one_shot_runs_share_nothing(daemon):
    box = Sandbox(stateful=False)
    assert box.run("x = 1").ok
    res = box.run("print(x)")
    # An exception in the code is the result's, not an API error.
    assert res.exit_code == 1 and res.error.name == "NameError" and "x" in res.error.value
    assert "NameError" in res.error.traceback
    with pytest.raises(agentbox.CodeError, match="NameError"):
        res.raise_for_error()
    assert box.session is None


def test_pandas_routes_to_heavy(heavy):
    # One-shot: the daemon's router reads the imports.
    res = Sandbox(stateful=False).run(PANDAS)
    assert (res.runtime, res.routing.tier, res.stdout) == ("heavy", "heavy", "66\n"), res
    # Session: the session starts where the daemon routes its first code, and stays there.
    with Sandbox() as box:
        res = box.run(PANDAS)
        assert (res.runtime, res.routing.tier, box.runtime) == ("heavy", "heavy", "heavy"), res
        assert res.stdout == "66\n"
        assert box.run("print(len(df))").stdout == "3\n"


def test_packages_make_a_heavy_session(heavy):
    with Sandbox(SandboxConfig(packages=["pandas"])) as box:
        assert box.run("x = 5").runtime == "heavy"
        res = box.run("import pandas as pd\nprint(pd.Series([x, x]).sum())")
        assert res.stdout == "10\n" and box.session.runtime == "heavy"


def test_context_manager_closes_the_session(daemon):
    with Sandbox() as box:
        box.run("x = 1")
        sid = box.session_id
        assert sid in {s.id for s in Client().list_sessions()}
    assert box.closed
    with pytest.raises(agentbox.NotFound):
        Client().get_session(sid)
    with pytest.raises(ValueError, match="closed"):
        box.run("print(1)")
    box.close()  # idempotent


def test_a_session_the_daemon_ended_is_replaced_on_the_next_run(daemon):
    with Sandbox() as box:
        box.run("x = 1")
        Client().close_session(box.session_id)
        with pytest.raises(agentbox.NotFound) as e:
            box.run("print(x)")
        assert "state is gone" in e.value.hint
        res = box.run("print('fresh')")
        assert res.stdout == "fresh\n" and box.session_id is not None


def test_ended_session_hint_says_why(daemon):
    box = Sandbox()
    box.run("x = 1")
    sid = box.session_id
    Client().close_session(sid)
    with pytest.raises(agentbox.NotFound) as e:
        box.run("print(x)")
    assert e.value.hint.startswith(f"session {sid} has ended (closed, idle for 10m, or the daemon restarted)"), e.value.hint
    assert "create a new Sandbox" in e.value.hint and box.session is None
    box.close()


def test_connect_shares_the_session(daemon):
    with Sandbox() as first:
        first.run("x = 41")
        second = Sandbox.connect(first.session_id)
        assert second.session_id == first.session_id and second.runtime == first.runtime == "nano"
        assert second.session.runs == 1
        second.run("x += 1\ny = 'from the second'")
        res = first.run("print(x, y)")
        assert res.stdout == "42 from the second\n"
        # Collecting the attached Sandbox leaves the session open.
        del second
        import gc
        gc.collect()
        assert first.run("print(x)").stdout == "42\n"
        sid = first.session_id
        third = Sandbox.connect(sid)
    # The first Sandbox closed the session: the attached one learns why.
    with pytest.raises(agentbox.NotFound) as e:
        third.run("print(x)")
    assert "has ended" in e.value.hint and "create a new Sandbox" in e.value.hint
    with pytest.raises(agentbox.NotFound) as e:
        Sandbox.connect(sid)
    assert e.value.hint.startswith(f"no open session {sid} at {daemon.url}: the id is wrong, or the session has ended")


def test_connect_from_another_process(daemon):
    import os
    import subprocess
    import sys

    box = Sandbox()
    box.run("notes = ['turn 1']")
    sid = box.detach()
    del box  # detached: collecting it leaves the session open
    script = ("import sys; from agentbox import Sandbox\n"
              "box = Sandbox.connect(sys.argv[1])\n"
              "print(box.run(\"notes.append('turn 2'); print(notes)\").stdout, end='')\n")
    for turn in (2, 3):
        p = subprocess.run([sys.executable, "-c", script.replace("turn 2", f"turn {turn}"), sid], capture_output=True,
                           text=True, timeout=120, env=dict(os.environ))
        assert p.returncode == 0, p.stderr
        assert p.stdout == repr([f"turn {i}" for i in range(1, turn + 1)]) + "\n"
    # The scripts exited without closing: the session is still there, with what they did.
    with Sandbox.connect(sid) as box:
        assert box.run("print(len(notes))").stdout == "3\n"
    assert sid not in {s.id for s in Client().list_sessions()}


def test_two_turns_plain_python_then_pandas(heavy):
    """The new user's example: turn 1 is plain Python (nano), turn 2 needs pandas. One Sandbox()
    carries x over; the session moves to heavy and says so."""
    with Sandbox() as box:
        first = box.run("rows = [3, 4, 5]\nx = sum(rows)\nprint(x)")
        assert (first.stdout, first.runtime, box.runtime) == ("12\n", "nano", "nano"), first
        second = box.run("import pandas as pd\nprint(int(pd.Series(rows).sum() + x))")
        assert second.ok, second.error
        assert (second.stdout, second.runtime, box.runtime) == ("24\n", "heavy", "heavy"), second
        assert any("nano" in r for r in second.routing.reasons), second.routing
        assert box.run("print(x)").stdout == "12\n"


def test_files(heavy):
    with Sandbox(SandboxConfig(runtime="heavy")) as box:
        box.files.write("data/in.txt", "hello")
        box.files.write("/home/user/data/raw.bin", b"\x00\x01\x02")
        res = box.run("s = open('data/in.txt').read()\nopen('out.txt', 'w').write(s.upper())\nprint(s)")
        assert res.stdout == "hello\n"
        assert box.files.read("out.txt") == b"HELLO"
        assert box.files.read_text("/home/user/data/in.txt") == "hello"
        # Listed as written: relative under a relative path (and by default), absolute under an absolute one.
        listed = {f.path: f for f in box.files.list("data")}
        assert set(listed) == {"data/in.txt", "data/raw.bin"}
        assert listed["data/raw.bin"].size == 3 and not listed["data/raw.bin"].dir
        assert {"data", "data/in.txt", "out.txt"} <= {f.path for f in box.files.list()}
        assert {f.path for f in box.files.list("/home/user/data")} == {"/home/user/data/in.txt", "/home/user/data/raw.bin"}
        box.files.remove("data")
        assert not [f.path for f in box.files.list() if f.path.startswith("data")]
    # Used before any run, files start a heavy session even with runtime auto.
    with Sandbox() as box:
        box.files.write("seed.txt", "1")
        assert box.runtime == "heavy"
        assert box.run("print(open('seed.txt').read())").stdout == "1\n"


def test_files_of_a_missing_path(heavy):
    with Sandbox(SandboxConfig(runtime="heavy")) as box:
        with pytest.raises(agentbox.NotFound):
            box.files.read("nope.txt")


def test_run_files_and_output_files(daemon, tmp_path):
    res = Sandbox(stateful=False).run("open('out.txt', 'w').write(open('in.txt').read() * 2)",
                                      files={"in.txt": "ab"})
    out = {f.path: f for f in res.files}
    assert out["/home/user/out.txt"].content == b"abab"
    p = out["/home/user/out.txt"].save(tmp_path / "out.txt")
    assert p.read_bytes() == b"abab"


def test_config_env_and_timeout(daemon):
    cfg = SandboxConfig(runtime="nano", env={"A": "1"}, timeout="1s")
    with Sandbox(cfg) as box:
        res = box.run("import os\nprint(os.environ['A'], os.environ['B'])", env={"B": "2"})
        assert res.stdout == "1 2\n"
        with pytest.raises(agentbox.TimeoutError):
            box.run("while True: pass")
    res = Sandbox(cfg, stateful=False).run("import os\nprint(os.environ.get('A'))", timeout=5)
    assert res.stdout == "1\n"


# --- how a session picks its tier and follows its code, against a stub ------------------------

SESSION = {"id": "sb_1", "runtime": "nano", "limits": {}, "created_at": "2026-01-01T00:00:00Z",
           "last_used": "2026-01-01T00:00:00Z", "runs": 0, "idle_timeout": 600}


def _session_stub(runs=None):
    """Replies by path, as a daemon whose auto sessions start on nano: a session (on the tier asked
    for), and results on that tier, except that a run whose code imports pandas moves an auto
    session to heavy. ``runs`` maps a code to a reply of its own. Every path but these: 204."""
    from support import result_body

    state = {}

    def reply(req):
        path, body = req["path"], req["body"]
        if path == "/v1/sessions" and req["method"] == "POST":
            asked = body.get("runtime", "auto")
            state["auto"] = asked == "auto"
            state["tier"] = "nano" if asked == "auto" else asked
            return 201, dict(SESSION, runtime=state["tier"])
        if path == "/v1/sessions/sb_1/run":
            if runs and body["code"] in runs:
                return runs[body["code"]]
            reasons = [f"{state['tier']}: session sb_1"]
            if state["auto"] and "pandas" in body["code"] and state["tier"] == "nano":
                state["tier"] = "heavy"
                reasons = ["heavy: imports pandas (not in nano); session sb_1 moved from nano, 1 earlier run replayed"]
            t = state["tier"]
            return 200, result_body(runtime=t, routing={"tier": t, "reasons": reasons})
        return 204, b""
    return reply


def _paths(stub):
    return [(r["method"], r["path"]) for r in stub.requests]


def test_auto_session_is_created_auto_and_follows_its_runtime(stub):
    stub.script(_session_stub())
    with Sandbox(url=stub.url, api_key="k") as box:
        assert box.runtime is None and box.routing is None
        assert box.run("rows = [1, 2, 3]\nx = sum(rows)").runtime == "nano"
        assert box.runtime == "nano" and box.routing.reasons == ["nano: session sb_1"]
        res = box.run("import pandas as pd\nprint(pd.Series([x]).sum())")
        assert res.runtime == "heavy" and "moved from nano" in res.routing.reasons[0]
        assert box.runtime == "heavy" and box.session.runtime == "heavy" and box.routing is res.routing
        assert box.run("print(x)").runtime == "heavy"
    # No routing question first (POST /v1/route): the session follows its code instead.
    assert _paths(stub) == [("POST", "/v1/sessions"), ("POST", "/v1/sessions/sb_1/run"), ("POST", "/v1/sessions/sb_1/run"),
                            ("POST", "/v1/sessions/sb_1/run"), ("DELETE", "/v1/sessions/sb_1")]
    assert stub.requests[0]["body"] == {"runtime": "auto"}
    assert all("runtime" not in r["body"] for r in stub.requests[1:4])


def test_explicit_runtime_is_kept(stub):
    stub.script(_session_stub())
    with Sandbox(SandboxConfig(runtime="nano"), url=stub.url, api_key="k") as box:
        res = box.run("import pandas")
        assert res.runtime == "nano" and box.runtime == "nano"
    assert _paths(stub)[0] == ("POST", "/v1/sessions") and stub.requests[0]["body"] == {"runtime": "nano"}


def test_packages_skip_the_routing_question(stub):
    stub.script(_session_stub())
    with Sandbox(SandboxConfig(packages=["pandas"]), url=stub.url, api_key="k") as box:
        box.run("x = 1")
    assert [r["path"] for r in stub.requests][:1] == ["/v1/sessions"]
    assert stub.requests[0]["body"] == {"runtime": "auto", "packages": ["pandas"]}


def test_an_error_of_a_run_that_moved_the_session_says_so(stub):
    from support import error_body, result_body

    partial = result_body(stdout="so far\n", runtime="heavy",
                          routing={"tier": "heavy", "reasons": ["heavy: imports pandas; session moved from nano"]})
    stub.script(_session_stub({"import pandas; slow()": (408, error_body("timeout", "ran past 30s", "a hint", partial))}))
    with Sandbox(url=stub.url, api_key="k") as box:
        box.run("x = 1")
        with pytest.raises(agentbox.TimeoutError) as e:
            box.run("import pandas; slow()")
        assert e.value.hint == ("a hint; the session moved from nano to heavy for this run "
                                "(heavy: imports pandas; session moved from nano)")
        assert "moved from nano to heavy" in str(e.value) and box.runtime == "heavy"


def test_a_session_that_ended_says_why(stub):
    from support import error_body

    stub.script(_session_stub({"print(x)": (404, error_body("not_found", "no open session \"sb_1\""))}))
    with Sandbox(url=stub.url, api_key="k") as box:
        box.run("x = 1")
        with pytest.raises(agentbox.NotFound) as e:
            box.run("print(x)")
        assert e.value.hint.startswith("session sb_1 has ended (closed, idle for 10m, or the daemon restarted) and its "
                                       "state is gone; create a new Sandbox")
        assert box.session is None and box.runtime is None
        box.run("x = 2")  # a new, empty session
        assert box.session_id == "sb_1"
    assert [p for _, p in _paths(stub)].count("/v1/sessions") == 2


def test_a_missing_file_is_not_an_ended_session(stub):
    from support import error_body

    def reply(req):
        if req["path"].startswith("/v1/sessions/sb_1/files/content"):
            return 404, error_body("not_found", "no such file", "a hint")
        if req["path"] == "/v1/sessions/sb_1" and req["method"] == "GET":
            return 200, dict(SESSION, runtime="heavy")
        return _session_stub()(req)
    stub.script(reply)
    with Sandbox(SandboxConfig(runtime="heavy"), url=stub.url, api_key="k") as box:
        with pytest.raises(agentbox.NotFound) as e:
            box.files.read("nope.txt")
        assert e.value.hint == "a hint" and box.session_id == "sb_1"
        # The session itself gone: the file call's error says so.
        stub.script(lambda req: (404, error_body("not_found", "no open session", "daemon's hint")))
        with pytest.raises(agentbox.NotFound) as e:
            box.files.read("nope.txt")
        assert "session sb_1 has ended" in e.value.hint and box.session is None


def test_connect_attaches_to_a_session_by_id(stub):
    import gc

    from support import result_body

    def reply(req):
        if req["path"] == "/v1/sessions/sb_1" and req["method"] == "GET":
            return 200, dict(SESSION, runtime="heavy", runs=3)
        if req["path"] == "/v1/sessions/sb_1/run":
            return 200, result_body(runtime="heavy", stdout="42\n")
        return 204, b""
    stub.script(reply)
    box = Sandbox.connect("sb_1", url=stub.url, api_key="k")
    assert (box.session_id, box.runtime, box.session.runs) == ("sb_1", "heavy", 3)
    assert box.run("print(x)").stdout == "42\n"
    # Not this Sandbox's session: collecting it leaves the session open...
    del box
    gc.collect()
    assert _paths(stub) == [("GET", "/v1/sessions/sb_1"), ("POST", "/v1/sessions/sb_1/run")]
    # ...and close() ends it.
    box = Sandbox.connect("sb_1", url=stub.url, api_key="k")
    box.close()
    assert _paths(stub)[-1] == ("DELETE", "/v1/sessions/sb_1") and box.closed


def test_connect_to_a_session_that_is_gone(stub):
    from support import error_body

    stub.script((404, error_body("not_found", "no open session \"sb_9\"", "daemon's hint")))
    with pytest.raises(agentbox.NotFound) as e:
        Sandbox.connect("sb_9", url=stub.url, api_key="k")
    assert e.value.hint == (f"no open session sb_9 at {stub.url}: the id is wrong, or the session has ended (closed, idle "
                            "past its idle timeout, or the daemon restarted); create a new Sandbox")
    with pytest.raises(ValueError):
        Sandbox.connect("", url=stub.url, api_key="k")


def test_detach_leaves_the_session_open(stub):
    import gc

    stub.script(_session_stub())
    box = Sandbox(url=stub.url, api_key="k")
    assert box.detach() is None  # no session yet
    box = Sandbox(url=stub.url, api_key="k")
    box.run("x = 1")
    assert box.detach() == "sb_1" and box.closed and box.session is None
    with pytest.raises(ValueError, match="closed"):
        box.run("print(x)")
    box.close()
    del box
    gc.collect()
    assert ("DELETE", "/v1/sessions/sb_1") not in _paths(stub)


# --- the audit log ---------------------------------------------------------------------------

def test_audit_query_is_sent_and_decoded(stub):
    rec = {"seq": 7, "time": "2026-11-22T08:40:00.123456789Z", "kind": "run", "session": "sb_1", "decision": "allow",
           "run": {"code_sha256": "ab" * 32, "code_bytes": 8, "tier": "nano", "reasons": ["nano: stub"],
                   "outcome": "exception", "exception": "ZeroDivisionError", "exit_code": 1, "duration_ms": 2.5},
           "prev": "cd" * 32, "hash": "ef" * 32}
    stub.script((200, {"records": [rec]}))
    since = dt.datetime(2026, 11, 22, 8, 0, tzinfo=dt.timezone.utc)
    got = Client(stub.url, "k").audit(session="sb_1", kind="run", decision="allow", since=since, limit=5)
    path = stub.requests[0]["path"]
    assert path.startswith("/v1/audit?") and "session=sb_1" in path and "kind=run" in path and "limit=5" in path
    assert "since=2026-11-22T08%3A00%3A00Z" in path
    assert len(got) == 1 and got[0].seq == 7 and got[0].run.exception == "ZeroDivisionError"
    assert got[0].time.microsecond == 123456 and got[0].run.reasons == ["nano: stub"]


def test_audit_records_runs(daemon):
    code = "print('audited')"
    Sandbox(stateful=False).run(code)
    want = hashlib.sha256(code.encode()).hexdigest()
    runs = Client().audit(kind="run", limit=1000)
    assert any(r.run.code_sha256 == want and r.run.outcome == "ok" and r.run.reasons for r in runs)


def test_a_session_that_moved_node_says_so_once(stub, caplog):
    """The first run after the session moved to another node (issue 18) carries a notice:
    result.notice, box.notices, and a warning in the log; later runs do not."""
    from support import result_body

    moved = {"kind": "session_moved", "from_node": "a", "to_node": "b", "step": "st_2_ab", "reason": "node a is gone"}
    stub.script(_session_stub({"print(x)": (200, result_body(stdout="1\n", notice=moved))}))
    with caplog.at_level("WARNING", logger="agentbox"):
        with Sandbox(url=stub.url, api_key="k") as box:
            assert box.run("x = 1").notice is None and box.notices == []
            res = box.run("print(x)")
            assert res.notice == agentbox.Notice(**moved)
            assert box.notices == [res.notice]
            assert box.run("y = 2").notice is None and len(box.notices) == 1
    assert any("moved from node a to node b and resumed from step st_2_ab" in r.getMessage() for r in caplog.records)


def test_async_session_that_moved_node_says_so(stub):
    import asyncio

    from support import result_body

    moved = {"kind": "session_moved", "from_node": "a", "to_node": "b", "step": "st_2_ab", "reason": "node a is gone"}
    stub.script(_session_stub({"print(x)": (200, result_body(stdout="1\n", notice=moved))}))

    async def main():
        async with agentbox.AsyncSandbox(url=stub.url, api_key="k") as box:
            await box.run("x = 1")
            res = await box.run("print(x)")
            assert res.notice is not None and res.notice.step == "st_2_ab"
            assert [n.to_node for n in box.notices] == ["b"]

    asyncio.run(main())
