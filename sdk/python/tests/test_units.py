"""What the SDK does on its own: parsing, the wire codec, @task's program. No daemon."""

from __future__ import annotations

import builtins
import datetime as dt
import json
import os

import pytest

import agentbox
from agentbox import _codec, models
from agentbox.sandbox import _ended_hint, _seconds_text
from agentbox.task import Task, _function_source


@pytest.mark.parametrize("given,want", [
    (30, 30.0), (1.5, 1.5), ("30", 30.0), ("30s", 30.0), ("1.5s", 1.5), ("500ms", 0.5), ("5m", 300.0),
    ("1h30m", 5400.0), ("1m30s", 90.0), (None, None),
])
def test_parse_duration(given, want):
    assert agentbox.parse_duration(given) == want


@pytest.mark.parametrize("bad", ["", "s", "30x", "-1s", "0", 0, -3, "1s garbage"])
def test_parse_duration_refuses(bad):
    with pytest.raises(ValueError):
        agentbox.parse_duration(bad)


@pytest.mark.parametrize("given,want", [
    (512, 512), ("512MB", 512), ("512MiB", 512), ("512M", 512), ("2GB", 2048), ("1.5G", 1536), ("1024KB", 1),
    ("100kb", 1), ("1GiB", 1024), (None, None),
])
def test_parse_memory(given, want):
    assert agentbox.parse_memory(given) == want


@pytest.mark.parametrize("bad", ["", "lots", "12XB", "-5MB", 0])
def test_parse_memory_refuses(bad):
    with pytest.raises(ValueError):
        agentbox.parse_memory(bad)


def test_config_validates_early():
    with pytest.raises(ValueError, match="runtime"):
        agentbox.SandboxConfig(runtime="gpu")
    with pytest.raises(ValueError):
        agentbox.SandboxConfig(timeout="soon")
    c = agentbox.SandboxConfig(packages="pandas", timeout="2m", memory="1GB")
    assert c.packages == ["pandas"] and c.timeout_seconds == 120 and c.memory_mb == 1024 and c.wants_image


def test_decode_result_with_everything():
    doc = {
        "stdout": "hi\n", "stderr": "", "exit_code": 1,
        "error": {"name": "ZeroDivisionError", "value": "division by zero", "traceback": "Traceback..."},
        "runtime": "heavy", "routing": {"tier": "heavy", "reasons": ["heavy: imports pandas"]},
        "stdout_truncated": False, "stderr_truncated": True,
        "files": [{"path": "/home/user/o.txt", "content": "aGk=", "size": 2}],
        "artifacts": [{"id": "art_1", "name": "figure-1.png", "mime": "image/png", "size": 3, "sha256": "00"}],
        "outputs": [{"text": "   a\n0  1", "html": "<table/>", "json": {"schema": {}, "data": [{"a": 1}]}}],
        "timings": {"queue_ms": 0.1, "start_ms": 0.2, "execute_ms": 1000, "total_ms": 1250, "pool": "warm"},
        "a_member_from_a_newer_daemon": {"x": 1},
    }
    r = _codec.decode(models.Result, doc)
    assert r.error.name == "ZeroDivisionError" and not r.ok
    assert r.routing.reasons == ["heavy: imports pandas"]
    assert r.files[0].content == b"hi" and r.files[0].size == 2
    assert r.artifacts[0].mime == "image/png"
    assert r.results is r.outputs and r.results[0].html == "<table/>" and r.results[0].json["data"] == [{"a": 1}]
    assert r.duration == 1.25 and r.stderr_truncated
    with pytest.raises(agentbox.CodeError, match="ZeroDivisionError: division by zero") as e:
        r.raise_for_error()
    assert e.value.traceback == "Traceback..." and e.value.result is r


def test_decode_times_with_nanoseconds():
    s = _codec.decode(models.Session, {"id": "sb_1", "runtime": "nano", "created_at": "2026-11-22T08:19:09.121979169Z",
                                       "limits": {"timeout": 30, "memory_mb": 256}})
    assert s.created_at == dt.datetime(2026, 11, 22, 8, 19, 9, 121979, tzinfo=dt.timezone.utc)
    assert s.limits.memory_mb == 256


def test_encode_leaves_out_unset_fields():
    req = models.RunRequest(code="print(1)", files=[models.InputFile("a.txt", b"hi")],
                            deterministic=models.Deterministic(time=dt.datetime(2024, 1, 2, 3, 4, 5), seed=7))
    assert _codec.encode(req) == {"code": "print(1)", "files": [{"path": "a.txt", "content": "aGk="}],
                                  "deterministic": {"time": "2024-01-02T03:04:05Z", "seed": 7}}


def test_exceptions_mirror_the_api_codes():
    assert set(agentbox.ERROR_CLASSES) == {
        "invalid_request", "unauthorized", "policy_violation", "forbidden", "not_found", "timeout", "conflict",
        "memory_limit", "output_limit", "internal", "runtime_unavailable"}
    assert issubclass(agentbox.TimeoutError, builtins.TimeoutError)
    assert issubclass(agentbox.DaemonUnreachable, builtins.ConnectionError)
    for cls in agentbox.ERROR_CLASSES.values():
        assert issubclass(cls, agentbox.AgentboxError)


def test_client_refuses_bad_urls():
    for u in ["127.0.0.1:8420", "ftp://x", "http://"]:
        with pytest.raises(ValueError):
            agentbox.Client(u, "k")


def test_client_finds_key_like_the_daemon(tmp_path, monkeypatch):
    (tmp_path / "api_key").write_text("file-key\n")
    monkeypatch.delenv("AGENTBOX_API_KEY", raising=False)
    monkeypatch.delenv("AGENTBOX_URL", raising=False)
    monkeypatch.setenv("AGENTBOX_DATA_DIR", str(tmp_path))
    c = agentbox.Client()
    assert c.api_key == "file-key" and c.url == agentbox.DEFAULT_URL
    monkeypatch.setenv("AGENTBOX_API_KEY", "env-key")
    monkeypatch.setenv("AGENTBOX_URL", "http://example.test:9/")
    c = agentbox.Client()
    assert c.api_key == "env-key" and c.url == "http://example.test:9"


@pytest.mark.parametrize("secs,want", [(600, "10m"), (90, "1m30s"), (3600, "1h"), (45, "45s"), (5400.4, "1h30m"), (0.5, "0.5s")])
def test_seconds_text(secs, want):
    assert _seconds_text(secs) == want


def test_ended_hint_says_why_and_what_to_do():
    assert _ended_hint("sb_1", 600) == ("session sb_1 has ended (closed, idle for 10m, or the daemon restarted) and its "
                                        "state is gone; create a new Sandbox")
    assert "idle past its idle timeout" in _ended_hint("sb_1")


# --- @task's program -----------------------------------------------------------------------

def _plain(a, b=2):
    return {"sum": a + b, "dump": json.dumps([a, b]), "sep": os.sep}


def test_task_source_drops_decorators_and_carries_module_imports():
    t = agentbox.task(name="plain", compute="LOW")(_plain)
    assert t.source.startswith("def _plain(a, b=2):")
    assert "import json" in t.imports and "import os" in t.imports
    assert t.runtime == "nano" and t.name == "plain" and t.local(1) == _plain(1)
    program = t.program((1,), {"b": 3}, "MARK")
    ns: dict = {}
    # The program runs as it would in a sandbox; here it prints the marker line.
    import contextlib
    import io
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(program, "<task>", "exec"), ns)
    line = out.getvalue().strip()
    assert line.startswith("MARK") and line.endswith("MARK")
    assert json.loads(line[4:-4]) == {"sum": 4, "dump": "[1, 3]", "sep": os.sep}


@agentbox.task(compute="high", ram="1GB", timeout="2m", max_retries=3)
def _decorated(x):
    return x


def test_task_options_map_to_the_api():
    assert isinstance(_decorated, Task)
    assert (_decorated.runtime, _decorated.memory_mb, _decorated.timeout, _decorated.max_retries) == ("heavy", 1024, 120.0, 3)
    assert "@agentbox.task" not in _decorated.source and _decorated.__name__ == "_decorated"
    assert agentbox.task()(_plain).runtime == "auto"


def test_task_refuses_what_cannot_travel():
    y = 1

    def closure():
        return y

    with pytest.raises(TypeError, match="enclosing function"):
        agentbox.task()(closure)

    async def coro():
        return 1

    with pytest.raises(TypeError, match="async"):
        agentbox.task()(coro)
    with pytest.raises(ValueError, match="compute"):
        agentbox.task(compute="HUGE")(_plain)
    with pytest.raises(TypeError, match="JSON"):
        agentbox.task()(_plain).program(({1, 2},), {}, "M")


def test_function_source_of_nested_function():
    def inner(v):
        return v * 2

    src, imports = _function_source(inner)
    assert src.startswith("def inner(v):") and imports == []


def test_exceptions_survive_pickling():
    import pickle

    res = _codec.decode(models.Result, {"exit_code": 1, "error": {"name": "E", "value": "v", "traceback": "t"}})
    for e in [agentbox.TimeoutError("timeout", "too slow", hint="h", status=408, result=res, request_id="r"),
              agentbox.DaemonUnreachable(None, "no daemon"),
              agentbox.TaskError("t", res, attempts=2)]:
        back = pickle.loads(pickle.dumps(e))
        assert type(back) is type(e) and str(back) == str(e) and back.__dict__.keys() == e.__dict__.keys()
    assert pickle.loads(pickle.dumps(agentbox.TimeoutError("timeout", "m", status=408))).status == 408
