"""Streamed runs against real daemons: output reaches the callbacks as the code prints it, on
both tiers, and a client that stops reading does not make the daemon hold more than the caps."""

from __future__ import annotations

import json
import socket
import time
import urllib.parse

import pytest

import agentbox
from agentbox import Sandbox, SandboxConfig
from conftest import KEY

# A line every 100 ms for 2 s.
TICKER = "import time\nfor i in range(20):\n    print('tick', i, flush=True)\n    time.sleep(0.1)\n"


def _timed(box: Sandbox, code: str, **kw):
    """Run code streamed; return (seconds to the first stdout chunk, seconds in all, chunks, result)."""
    chunks = []
    start = time.monotonic()
    res = box.run(code, on_stdout=lambda s: chunks.append((time.monotonic() - start, s)), **kw)
    return chunks[0][0] if chunks else None, time.monotonic() - start, chunks, res


def _check_streamed(first, total, chunks, res, tier):
    assert res.runtime == tier
    assert "".join(c for _, c in chunks) == res.stdout
    assert res.stdout.count("tick") == 20
    # The lines are printed over 1.9 s from the code's start: a first chunk 1.5 s or more before
    # the end came within about 0.4 s of its print, long before the run ended.
    assert first is not None and total >= 2.0 and total - first >= 1.5, (first, total)


def test_on_stdout_streams_a_nano_run(daemon):
    first, total, chunks, res = _timed(Sandbox(SandboxConfig(runtime="nano"), stateful=False), TICKER, timeout=20)
    print(f"nano one-shot: first chunk after {first:.3f}s of {total:.3f}s")
    _check_streamed(first, total, chunks, res, "nano")


def test_on_stdout_streams_a_nano_session(daemon):
    with Sandbox(SandboxConfig(runtime="nano")) as box:
        box.run("x = 1")
        first, total, chunks, res = _timed(box, TICKER, timeout=20)
    print(f"nano session: first chunk after {first:.3f}s of {total:.3f}s")
    _check_streamed(first, total, chunks, res, "nano")


def test_on_stdout_streams_a_heavy_session(heavy):
    with Sandbox(SandboxConfig(runtime="heavy")) as box:
        box.run("x = 1", timeout=60)
        first, total, chunks, res = _timed(box, TICKER, timeout=30)
    print(f"heavy session: first chunk after {first:.3f}s of {total:.3f}s")
    _check_streamed(first, total, chunks, res, "heavy")


def test_on_result_and_on_artifact(heavy):
    outs, arts, errs = [], [], []
    with Sandbox(SandboxConfig(runtime="heavy")) as box:
        res = box.run("import sys, pandas as pd, matplotlib.pyplot as plt\nprint('oops', file=sys.stderr)\n"
                      "plt.plot([1, 2]); plt.show()\npd.DataFrame({'a': [1, 2]})",
                      timeout=60, on_result=outs.append, on_artifact=arts.append, on_stderr=errs.append)
    assert len(outs) == 1 and "<table" in (outs[0].html or "") and outs[0].text == res.results[0].text
    assert len(arts) == 1 and arts[0].mime == "image/png" and arts[0].read()[:4] == b"\x89PNG"
    assert "".join(errs) == res.stderr and "oops" in res.stderr


def test_a_limit_error_keeps_what_was_streamed(daemon):
    got = []
    box = Sandbox(SandboxConfig(runtime="nano"), stateful=False)
    box.run("pass")  # a warm interpreter, so the timeout is the code's own
    with pytest.raises(agentbox.TimeoutError) as ei:
        box.run("import time\nprint('before', flush=True)\ntime.sleep(30)", timeout=3, on_stdout=got.append)
    assert got == ["before\n"] and ei.value.result.stdout == "before\n"


def test_a_refused_run_raises_as_without_streaming(daemon):
    with pytest.raises(agentbox.InvalidRequest):
        Sandbox(SandboxConfig(runtime="nano", packages=["pandas"]), stateful=False).run("print(1)", on_stdout=print)


def _rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_a_client_that_stops_reading_does_not_grow_the_daemon(daemon):
    """The code writes 256 MiB under an 8 MiB stdout cap while the client reads nothing: the
    daemon's memory grows by less than a small multiple of the cap (a daemon that buffered for
    the client would grow by the whole output), the run ends on its own, and when the client
    reads again it is told what was dropped and gets the capped result."""
    cap = 8 << 20
    code = "import sys\nblock = 'x' * (1 << 20)\nfor i in range(256):\n    sys.stdout.write(block)\n"
    body = json.dumps({"code": code, "runtime": "nano", "timeout": 60, "stdout_limit": cap}).encode()
    u = urllib.parse.urlsplit(daemon.url)
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    # A small receive buffer, so the kernel does not read much for the client either (it is
    # raised again when the client reads: a tiny window makes reading 16 MiB take minutes).
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 10)
    s.connect((u.hostname, u.port))
    before = _rss_kib(daemon.proc.pid)
    s.sendall(b"POST /v1/run HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + KEY.encode() +
              b"\r\nAccept: application/x-ndjson\r\nContent-Type: application/json\r\nContent-Length: " +
              str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" + body)
    peak = before
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        peak = max(peak, _rss_kib(daemon.proc.pid))
        time.sleep(0.05)
    grew = (peak - before) * 1024
    print(f"daemon RSS {before} KiB before, {peak} KiB at most while the client did not read (+{grew >> 20} MiB)")
    assert grew < 4 * cap, f"the daemon grew by {grew >> 20} MiB for a client that does not read"
    buf = bytearray()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    s.settimeout(60)
    t0 = time.monotonic()
    while True:
        b = s.recv(1 << 20)
        if not b:
            break
        buf += b
    s.close()
    data = bytes(buf)
    print(f"read {len(data) >> 20} MiB in {time.monotonic() - t0:.1f}s after the stall")
    events = [json.loads(line) for line in data.split(b"\r\n\r\n", 1)[1].split(b"\n") if line.strip().startswith(b"{")]
    kinds = [e["type"] for e in events]
    assert "dropped" in kinds and kinds[-1] == "result", kinds[-5:]
    res = events[-1]["result"]
    assert len(res["stdout"]) == cap and res["stdout_truncated"]
    streamed = sum(len(e.get("text", "")) for e in events if e["type"] == "stdout")
    dropped = sum(e["dropped"]["stdout_bytes"] for e in events if e["type"] == "dropped")
    assert streamed + dropped == cap, (streamed, dropped)
