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


def test_files(heavy):
    with Sandbox(SandboxConfig(runtime="heavy")) as box:
        box.files.write("data/in.txt", "hello")
        box.files.write("/home/user/data/raw.bin", b"\x00\x01\x02")
        res = box.run("s = open('data/in.txt').read()\nopen('out.txt', 'w').write(s.upper())\nprint(s)")
        assert res.stdout == "hello\n"
        assert box.files.read("out.txt") == b"HELLO"
        assert box.files.read_text("/home/user/data/in.txt") == "hello"
        listed = {f.path: f for f in box.files.list("data")}
        assert set(listed) == {"/home/user/data/in.txt", "/home/user/data/raw.bin"}
        assert listed["/home/user/data/raw.bin"].size == 3 and not listed["/home/user/data/raw.bin"].dir
        box.files.remove("data")
        assert not [f.path for f in box.files.list() if f.path.startswith("/home/user/data")]
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


# --- how an auto session picks its tier, against a stub (POST /v1/route) ----------------------

def _session_stub(route_reply):
    """Replies by path: route_reply for /v1/route, a session, and a result echoing its runtime."""
    from support import result_body

    created = {}

    def reply(req):
        if req["path"] == "/v1/route":
            return route_reply
        if req["path"] == "/v1/sessions":
            created.update(req["body"])
            tier = req["body"].get("runtime", "auto")
            created["tier"] = "nano" if tier == "auto" else tier
            return 201, {"id": "sb_1", "runtime": created["tier"], "limits": {}, "created_at": "2026-01-01T00:00:00Z",
                         "last_used": "2026-01-01T00:00:00Z", "runs": 0, "idle_timeout": 600}
        if req["path"] == "/v1/sessions/sb_1/run":
            t = created["tier"]
            return 200, result_body(runtime=t, routing={"tier": t, "reasons": [f"{t}: session sb_1"]})
        return 204, b""
    return reply


def test_auto_session_starts_where_the_daemon_routes_the_first_code(stub):
    stub.script(_session_stub((200, {"tier": "heavy", "reasons": ["heavy: imports pandas"]})))
    with Sandbox(url=stub.url, api_key="k") as box:
        res = box.run("import pandas")
        assert box.runtime == "heavy" and box.routing.reasons == ["heavy: imports pandas"]
        assert res.routing.reasons == ["heavy: imports pandas", "heavy: session sb_1"]
        assert box.run("x = 1").routing.reasons == ["heavy: session sb_1"]
    paths = [(r["method"], r["path"]) for r in stub.requests]
    assert paths == [("POST", "/v1/route"), ("POST", "/v1/sessions"), ("POST", "/v1/sessions/sb_1/run"),
                     ("POST", "/v1/sessions/sb_1/run"), ("DELETE", "/v1/sessions/sb_1")]
    assert stub.requests[0]["body"] == {"code": "import pandas", "runtime": "auto"}
    assert stub.requests[1]["body"]["runtime"] == "heavy"


def test_auto_session_on_a_daemon_without_route(stub, caplog):
    from support import error_body

    stub.script(_session_stub((404, error_body("not_found", "no route POST /v1/route"))))
    with Sandbox(url=stub.url, api_key="k") as box:
        assert box.run("print(1)").runtime == "nano"
        assert box.routing is None
    assert stub.requests[1]["body"]["runtime"] == "auto"


def test_packages_skip_the_routing_question(stub):
    stub.script(_session_stub((500, {})))
    with Sandbox(SandboxConfig(packages=["pandas"]), url=stub.url, api_key="k") as box:
        box.run("x = 1")
    assert [r["path"] for r in stub.requests][:1] == ["/v1/sessions"]
    assert stub.requests[0]["body"] == {"runtime": "auto", "packages": ["pandas"]}


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
