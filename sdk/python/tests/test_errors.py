"""Each error kind of the API raises its exception.

Against a real daemon for every kind that a request can cause today: invalid_request,
unauthorized, not_found, timeout, conflict, memory_limit, runtime_unavailable. policy_violation
(the governance layer is planned), output_limit (the daemon's caps sit below what a response can
carry) and internal (a daemon fault) cannot be provoked by a request, so those, and the mapping of
all ten, are checked against a scripted stub that answers as the daemon does.
"""

from __future__ import annotations

import builtins

import pytest
from support import error_body, result_body

import agentbox
from agentbox import Client, Sandbox, SandboxConfig

STATUS = {
    "invalid_request": 400, "unauthorized": 401, "policy_violation": 403, "forbidden": 403, "not_found": 404, "timeout": 408,
    "conflict": 409, "memory_limit": 422, "output_limit": 422, "internal": 500, "runtime_unavailable": 503,
}


# --- a real daemon -------------------------------------------------------------------------

def test_invalid_request(daemon):
    with pytest.raises(agentbox.InvalidRequest) as e:
        Sandbox(stateful=False).run("print(1)", timeout=99999)
    assert e.value.code == "invalid_request" and e.value.status == 400
    assert "600" in e.value.message and e.value.hint and e.value.request_id
    with pytest.raises(agentbox.InvalidRequest, match="nano"):
        Sandbox(SandboxConfig(runtime="nano", packages=["pandas"]), stateful=False).run("print(1)")


def test_unauthorized(daemon):
    with pytest.raises(agentbox.Unauthorized) as e:
        Sandbox(api_key="not-the-key").run("print(1)")
    assert e.value.status == 401 and e.value.code == "unauthorized"


def test_not_found(daemon):
    with pytest.raises(agentbox.NotFound):
        Client().get_session("sb_0000000000000000")
    with pytest.raises(agentbox.NotFound):
        Client().artifact("art_000000000000000000000000")


def test_timeout_keeps_the_output_so_far(daemon):
    box = Sandbox(stateful=False)
    with pytest.raises(agentbox.TimeoutError) as e:
        box.run("import time\nprint('step 1', flush=True)\ntime.sleep(30)", timeout=1)
    assert isinstance(e.value, builtins.TimeoutError)
    assert e.value.status == 408 and isinstance(e.value.result, agentbox.Result)
    assert e.value.result.stdout == "step 1\n"


def test_memory_limit(heavy):
    box = Sandbox(SandboxConfig(runtime="heavy", memory="64MB"), stateful=False)
    with pytest.raises(agentbox.MemoryLimitExceeded) as e:
        box.run("x = bytearray(512 << 20)\nfor i in range(0, len(x), 4096):\n    x[i] = 1")
    assert e.value.status == 422 and e.value.result is not None and e.value.result.runtime == "heavy"


def test_runtime_unavailable(small_daemon):
    box = Sandbox(SandboxConfig(runtime="heavy"), url=small_daemon.url, stateful=False)
    with pytest.raises(agentbox.RuntimeUnavailable) as e:
        box.run("print(1)")
    assert e.value.status == 503


def test_conflict(small_daemon):
    boxes = []
    try:
        with pytest.raises(agentbox.Conflict) as e:
            for _ in range(3):  # the small daemon holds two sessions
                box = Sandbox(SandboxConfig(runtime="nano"), url=small_daemon.url)
                boxes.append(box)
                box.run("x = 1")
        assert e.value.status == 409 and len(boxes) == 3
    finally:
        for b in boxes:
            b.close()


def test_an_exception_in_the_code_is_not_an_api_error(daemon):
    res = Sandbox(stateful=False).run("1/0")
    assert res.exit_code == 1 and res.error.name == "ZeroDivisionError" and res.error.value == "division by zero"
    with pytest.raises(agentbox.CodeError) as e:
        res.raise_for_error()
    assert not isinstance(e.value, agentbox.AgentboxError)


def test_unreachable_daemon():
    c = Client("http://127.0.0.1:9", "k")  # discard port: nothing listens
    with pytest.raises(agentbox.DaemonUnreachable) as e:
        c.health()
    assert isinstance(e.value, builtins.ConnectionError) and e.value.code is None


# --- every code, against the stub ----------------------------------------------------------

@pytest.mark.parametrize("code", sorted(STATUS))
def test_each_code_raises_its_class(stub, code):
    partial = result_body(stdout="so far\n", exit_code=-1) if code in ("timeout", "memory_limit", "output_limit") else None
    stub.script((STATUS[code], error_body(code, "what went wrong", "what to do", partial)))
    with pytest.raises(agentbox.ERROR_CLASSES[code]) as e:
        Sandbox(url=stub.url, api_key="k", stateful=False).run("print(1)")
    err = e.value
    assert (err.code, err.status, err.message, err.hint) == (code, STATUS[code], "what went wrong", "what to do")
    assert err.request_id == "req-1"
    assert str(err) == f"{code}: what went wrong (what to do)"
    if partial:
        assert err.result.stdout == "so far\n"
    else:
        assert err.result is None
    assert stub.requests[0]["headers"]["Authorization"] == "Bearer k"


def test_an_answer_that_is_not_the_apis(stub):
    stub.script((502, b"<html>bad gateway</html>"))
    with pytest.raises(agentbox.RuntimeUnavailable) as e:
        Client(stub.url, "k").run(agentbox.models.RunRequest(code="x"))
    assert e.value.status == 502 and "bad gateway" in e.value.message and e.value.hint


def test_unknown_code_is_the_base_class(stub):
    stub.script((418, error_body("teapot")))
    with pytest.raises(agentbox.AgentboxError) as e:
        Client(stub.url, "k").images()
    assert type(e.value) is agentbox.AgentboxError and e.value.code == "teapot"
