"""What a new user met in the first hour, each fixed: input() meets EOF at once, no network says
so, an oversized upload names the limit, @task carries its helpers, a result prints small."""

from __future__ import annotations

import asyncio
import base64
import time

import pytest
from conftest import KEY, SMALL_MAX_BODY

import agentbox
from agentbox import AsyncClient, Client, Sandbox, SandboxConfig, _codec, models, task

INPUT = "import sys\nprint(repr(sys.stdin.read()))\nname = input('name? ')"


def _input_meets_eof(box: Sandbox) -> None:
    start = time.monotonic()
    res = box.run(INPUT, timeout=20)
    took = time.monotonic() - start
    assert res.error is not None and res.error.name == "EOFError", res
    assert res.stdout == "''\nname? ", res
    assert took < 10, f"input() took {took:.1f}s: it waited for the timeout instead of meeting EOF"


def test_input_raises_eof_at_once_in_nano(daemon):
    _input_meets_eof(Sandbox(SandboxConfig(runtime="nano"), stateful=False))
    with Sandbox(SandboxConfig(runtime="nano")) as box:  # a session too
        _input_meets_eof(box)


def test_input_raises_eof_at_once_in_heavy(heavy):
    with Sandbox(SandboxConfig(runtime="heavy")) as box:
        _input_meets_eof(box)


LOOKUP = """import socket
try:
    socket.create_connection(("example.com", 80), timeout=5)
except OSError as e:
    print(type(e).__name__, e)
"""


def test_no_network_in_nano_says_so(daemon):
    res = Sandbox(SandboxConfig(runtime="nano"), stateful=False).run(LOOKUP)
    assert res.stdout.startswith("gaierror ") and "has no network" in res.stdout and "network: true" in res.stdout, res


def test_no_network_in_heavy_says_so(heavy):
    with Sandbox(SandboxConfig(runtime="heavy")) as box:
        res = box.run(LOOKUP)
        assert res.stdout.startswith("gaierror ") and "has no network" in res.stdout and "network: true" in res.stdout, res
        # An auto run that needs a socket leaves nano for heavy, where the lookup fails the same way.
    res = Sandbox(stateful=False).run("import urllib.request\nurllib.request.urlopen('http://example.com/', timeout=5)")
    assert res.runtime == "heavy" and any("retried after" in r for r in res.routing.reasons), res.routing
    assert res.error is not None and "has no network" in res.error.value, res.error


def test_oversized_upload_names_the_limit(small_daemon):
    big = b"x" * (SMALL_MAX_BODY + 1)
    c = Client(small_daemon.url, KEY)
    # The 413 comes back before the body is sent: the session need not exist.
    with pytest.raises(agentbox.InvalidRequest) as ei:
        c.write_file("sb_0000000000000000", "big.bin", big)
    e = ei.value
    assert e.status == 413 and f"{SMALL_MAX_BODY} bytes" in e.message and "max_body_bytes" in e.hint, e
    with pytest.raises(agentbox.InvalidRequest, match=f"{SMALL_MAX_BODY} bytes"):
        Sandbox(url=small_daemon.url, api_key=KEY, stateful=False).run("print(1)", files={"big.bin": big})
    assert c.run(models.RunRequest(code="print(2)")).stdout == "2\n"  # the client goes on working

    async def main():
        async with AsyncClient(small_daemon.url, KEY) as ac:
            with pytest.raises(agentbox.InvalidRequest) as ei:
                await ac.write_file("sb_0000000000000000", "big.bin", big)
            assert ei.value.status == 413 and f"{SMALL_MAX_BODY} bytes" in ei.value.message
            assert (await ac.run(models.RunRequest(code="print(3)"))).stdout == "3\n"

    asyncio.run(main())


# --- @task carries what its function refers to ---------------------------------------------

SCALE = 10
WORDS = ("alpha", "beta")


def _square(x):
    return x * x


class _Point:
    def __init__(self, x):
        self.x = x

    def scaled(self):
        return _square(self.x) * SCALE


def _describe(v):
    from math import sqrt
    return {"scaled": _Point(v).scaled(), "root": sqrt(v), "words": list(WORDS)}


@task(compute="LOW", timeout="20s")
def uses_helpers(v):
    return _describe(v)


def test_task_ships_helpers_of_its_module(daemon):
    assert uses_helpers(4) == {"scaled": 160, "root": 2.0, "words": ["alpha", "beta"]}
    assert "def _describe(v):" in "\n".join(uses_helpers.imports)
    assert "class _Point:" in "\n".join(uses_helpers.imports)
    assert "SCALE = 10" in uses_helpers.imports


_client_global = Client("http://127.0.0.1:9", "k")


def test_task_refuses_what_cannot_travel_at_decoration():
    def uses_client():
        return _client_global.url

    with pytest.raises(TypeError, match="_client_global.*cannot travel"):
        task()(uses_client)


# --- printing a result ---------------------------------------------------------------------

def test_result_repr_is_small():
    big = base64.b64encode(b"\0" * 1_000_000).decode()
    res = _codec.decode(models.Result, {
        "stdout": "x" * 100_000, "exit_code": 0, "runtime": "nano",
        "files": [{"path": "/home/user/big.bin", "content": big, "size": 1_000_000}],
        "artifacts": [{"id": "art_1", "name": "figure-1.png", "mime": "image/png", "size": 5, "sha256": "00"}],
    })
    r = repr(res)
    assert len(r) < 2000, len(r)
    assert "OutputFile(path='/home/user/big.bin', size=1000000)" in r and "figure-1.png" in r
    assert "(100000 chars)" in r
    assert len(res.files[0].content) == 1_000_000
