"""@task: arguments and results make the round trip; retries happen for sandbox failures only."""

from __future__ import annotations

import json
import logging
import re

import pytest
from support import error_body, result_body

import agentbox
from agentbox import task


@task(name="combine", compute="LOW", ram="128MB", timeout="20s")
def combine(a, b, *, label="sum", extra=None):
    return {"label": label, "value": a + b, "args": [a, b], "extra": extra,
            "text": json.dumps({"k": [1, 2]}, sort_keys=True)}


@task(compute="LOW", timeout="10s", max_retries=3)
def fails(kind):
    print("before the failure")
    raise ValueError(f"bad {kind}")


@task(compute="LOW", timeout="1s", max_retries=3)
def spins():
    while True:
        pass


@task(compute="LOW")
def returns_a_set():
    return {1, 2}


@task()  # MEDIUM: the daemon routes by the imports
def stdlib_only(n):
    import statistics
    return statistics.mean(range(n))


@task(compute="HIGH", ram="512MB", timeout="60s")
def numpy_mean(xs):
    import numpy as np
    return float(np.mean(xs))


def test_round_trip(daemon):
    got = combine(2, 3, label="total", extra={"nested": [1.5, None, True, "é", {"deep": []}]})
    assert got == {"label": "total", "value": 5, "args": [2, 3],
                   "extra": {"nested": [1.5, None, True, "é", {"deep": []}]}, "text": '{"k": [1, 2]}'}
    assert combine("a", "b")["value"] == "ab"
    assert combine.local(2, 3)["value"] == 5
    assert stdlib_only(5) == 2


def test_high_compute_runs_heavy(heavy):
    assert numpy_mean([1, 2, 3, 4]) == 2.5


def test_user_exceptions_are_raised_never_retried(daemon, caplog):
    caplog.set_level(logging.WARNING, logger="agentbox")
    with pytest.raises(agentbox.TaskError) as e:
        fails("input")
    err = e.value
    assert (err.name, err.value, err.attempts) == ("ValueError", "bad input", 1)
    assert "ValueError: bad input" in err.traceback and "before the failure" in err.stdout
    assert "Remote traceback" in str(err)
    assert not [r for r in caplog.records if "retrying" in r.getMessage()]


def test_timeouts_are_not_retried(daemon):
    with pytest.raises(agentbox.TimeoutError) as e:
        spins()
    assert e.value.attempts == 1


def test_unserialisable_values(daemon):
    with pytest.raises(TypeError, match="JSON"):
        combine({1}, 2)
    with pytest.raises(agentbox.TaskError, match="JSON cannot encode"):
        returns_a_set()


def test_sandbox_failures_are_retried_until_max_retries(small_daemon, caplog):
    # The small daemon has no heavy tier: every attempt of a HIGH task is runtime_unavailable.
    caplog.set_level(logging.WARNING, logger="agentbox")

    @task(compute="HIGH", max_retries=2, retry_delay=0.01, url=small_daemon.url, api_key="sdk-test-key")
    def needs_heavy():
        return 1

    with pytest.raises(agentbox.RuntimeUnavailable) as e:
        needs_heavy()
    assert e.value.attempts == 3
    assert len([r for r in caplog.records if "retrying" in r.getMessage()]) == 2


# --- the retry rule, step by step, against a stub --------------------------------------------

def _answer_with_value(value):
    """A stub reply that plays a sandbox returning value: it echoes the call's marker."""
    def reply(req):
        marker = re.search(r"__agentbox_task_[0-9a-f]+__", req["body"]["code"]).group(0)
        return 200, result_body(stdout=f"printed\n\n{marker}{json.dumps(value)}{marker}\n")
    return reply


def _stub_task(stub, **kw):
    @task(url=stub.url, api_key="k", retry_delay=0.01, **kw)
    def f(x):
        return x
    return f


@pytest.mark.parametrize("status,code", [(503, "runtime_unavailable"), (500, "internal")])
def test_retry_then_success(stub, status, code):
    stub.script((status, error_body(code)), _answer_with_value({"ok": [1]}))
    assert _stub_task(stub, max_retries=1)(1) == {"ok": [1]}
    assert len(stub.requests) == 2
    assert stub.requests[0]["body"] == stub.requests[1]["body"]  # the same call again


def test_no_retries_when_max_retries_is_zero(stub):
    stub.script((503, error_body("runtime_unavailable")), _answer_with_value(1))
    with pytest.raises(agentbox.RuntimeUnavailable):
        _stub_task(stub, max_retries=0)(1)
    assert len(stub.requests) == 1


@pytest.mark.parametrize("status,code", [(408, "timeout"), (422, "memory_limit"), (422, "output_limit"),
                                         (400, "invalid_request"), (403, "policy_violation"), (401, "unauthorized")])
def test_failures_of_the_code_or_request_are_not_retried(stub, status, code):
    stub.script((status, error_body(code)), _answer_with_value(1))
    with pytest.raises(agentbox.ERROR_CLASSES[code]):
        _stub_task(stub, max_retries=3)(1)
    assert len(stub.requests) == 1


def test_an_exception_in_the_function_is_not_retried(stub):
    err = {"name": "KeyError", "value": "'k'", "traceback": "Traceback (most recent call last):\nKeyError: 'k'\n"}
    stub.script((200, result_body(exit_code=1, error=err)), _answer_with_value(1))
    with pytest.raises(agentbox.TaskError) as e:
        _stub_task(stub, max_retries=3)(1)
    assert e.value.name == "KeyError" and len(stub.requests) == 1


def test_what_the_stub_sandbox_printed_is_kept_without_the_marker(stub):
    stub.script(_answer_with_value([1, 2]))
    f = _stub_task(stub)
    assert f(0) == [1, 2]
    sent = stub.requests[0]["body"]
    assert sent["runtime"] == "auto" and "def f(x):" in sent["code"] and "@task" not in sent["code"]


def test_unreachable_daemon_is_retried(caplog):
    caplog.set_level(logging.WARNING, logger="agentbox")

    @task(url="http://127.0.0.1:9", api_key="k", max_retries=2, retry_delay=0.01)
    def f():
        return 1

    with pytest.raises(agentbox.DaemonUnreachable) as e:
        f()
    assert e.value.attempts == 3
