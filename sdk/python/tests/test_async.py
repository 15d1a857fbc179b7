"""AsyncSandbox and AsyncClient against a real daemon (and the stub for the transport's edges)."""

from __future__ import annotations

import asyncio
import time

import pytest
from support import result_body

import agentbox
from agentbox import AsyncClient, AsyncSandbox, SandboxConfig


def arun(coro):
    return asyncio.run(coro)


def test_200_concurrent_runs_on_one_client(daemon):
    """200 one-shot sandboxes on one client, all at once: every run succeeds, and the client holds
    no more connections than its pool allows (the rest of the requests wait for one)."""
    pool = 16

    async def main():
        peak = 0
        async with AsyncClient(max_connections=pool) as c:
            async def one(i):
                box = AsyncSandbox(SandboxConfig(runtime="nano", timeout="60s"), stateful=False, client=c)
                return await box.run(f"print({i} * 2)")

            async def watch():
                nonlocal peak
                while True:
                    peak = max(peak, c.open_connections)
                    await asyncio.sleep(0.005)

            w = asyncio.ensure_future(watch())
            try:
                results = await asyncio.gather(*(one(i) for i in range(200)), return_exceptions=True)
            finally:
                w.cancel()
            return results, peak

    results, peak = arun(main())
    errors = [r for r in results if isinstance(r, BaseException)]
    assert not errors, f"{len(errors)} of 200 runs failed, first: {errors[0]!r}"
    assert [r.stdout for r in results] == [f"{i * 2}\n" for i in range(200)]
    assert all(r.runtime == "nano" for r in results)
    assert 1 <= peak <= pool, peak


def test_async_session_keeps_state_and_closes(daemon):
    async def main():
        async with AsyncSandbox() as box:
            assert box.session_id is None
            # Concurrent first runs share one session.
            await asyncio.gather(box.run("a = 1"), box.run("b = 2"))
            res = await box.run("print(a + b)")
            assert res.stdout == "3\n" and res.runtime == "nano" and box.runtime == "nano"
            assert box.routing == res.routing and res.routing.reasons
            sid = box.session_id
            assert sum(s.id == sid for s in await box.client.list_sessions()) == 1
        assert box.closed
        async with AsyncClient() as c:
            with pytest.raises(agentbox.NotFound):
                await c.get_session(sid)
        with pytest.raises(ValueError, match="closed"):
            await box.run("1")

    arun(main())


def test_async_detach_and_connect(daemon):
    async def main():
        async with AsyncClient() as c:
            a = AsyncSandbox(client=c)
            await a.run("secret = 7")
            sid = a.detach()
            async with await AsyncSandbox.connect(sid, client=c) as b:
                assert (await b.run("print(secret)")).stdout == "7\n"
            with pytest.raises(agentbox.NotFound, match="create a new Sandbox"):
                await AsyncSandbox.connect(sid, client=c)

    arun(main())


def test_async_errors_are_typed(daemon):
    async def main():
        async with AsyncClient() as c:
            box = AsyncSandbox(stateful=False, client=c)
            with pytest.raises(agentbox.TimeoutError) as ei:
                await box.run('import time\nprint("started", flush=True)\nwhile True: time.sleep(0.05)', timeout=1)
            e = ei.value
            assert (e.code, e.status) == ("timeout", 408) and "started" in e.result.stdout
            with pytest.raises(agentbox.InvalidRequest, match="timeout"):
                await box.run("1", timeout=100000)
            res = await box.run("1/0")
            assert res.error.name == "ZeroDivisionError"
        bad = AsyncSandbox(api_key="wrong", stateful=False)
        with pytest.raises(agentbox.Unauthorized):
            await bad.run("1")
        await bad.close()
        with pytest.raises(agentbox.DaemonUnreachable, match="agentbox serve"):
            async with AsyncClient("http://127.0.0.1:9", "k", timeout=5) as c:
                await c.health()

    arun(main())


def test_async_files_and_artifacts(heavy, tmp_path):
    async def main():
        async with AsyncSandbox(SandboxConfig(runtime="heavy")) as box:
            await box.files.write("data/in.csv", "a,b\n1,2\n")
            assert await box.files.read_text("data/in.csv") == "a,b\n1,2\n"
            assert any(f.path.endswith("data/in.csv") for f in await box.files.list())
            streamed, values = [], []
            res = await box.run("import matplotlib.pyplot as plt\nplt.plot([1, 4, 9])\nplt.show()\n21 * 2",
                                on_artifact=streamed.append, on_result=values.append)
            assert res.ok and len(res.artifacts) == 1, res
            assert [a.id for a in streamed] == [res.artifacts[0].id] and [v.text for v in values] == ["42"]
            png = await res.artifacts[0].aread()
            assert png[1:4] == b"PNG"
            p = await res.artifacts[0].asave(tmp_path)
            assert p.read_bytes() == png
            await box.files.remove("data")
            with pytest.raises(agentbox.NotFound):
                await box.files.read("data/in.csv")

    arun(main())


def test_keep_alive_and_a_server_that_closes(stub):
    """The stub speaks HTTP/1.0 and closes each connection: the client must not reuse one."""
    stub.script((200, result_body(stdout="ok\n")))

    async def main():
        async with AsyncClient(stub.url, "k", max_connections=2) as c:
            box = AsyncSandbox(stateful=False, client=c)
            outs = await asyncio.gather(*(box.run("print('ok')") for _ in range(10)))
            assert [r.stdout for r in outs] == ["ok\n"] * 10
            assert c.open_connections == 0

    arun(main())
    assert len(stub.requests) == 10
    assert stub.requests[0]["headers"]["Authorization"] == "Bearer k"


def test_async_streamed_run_calls_back_as_the_code_prints(daemon):
    """A line every 100 ms for 2 s: the first chunk arrives while the cell runs and soon after its
    print (bounds that catch buffering without timing the machine); async callbacks are awaited."""
    code = "import time\nfor i in range(20):\n    print(i, time.time(), flush=True)\n    time.sleep(0.1)"

    async def main():
        chunks = []

        async def on_stdout(text):
            chunks.append((text, time.time()))

        async with AsyncSandbox(SandboxConfig(runtime="nano")) as box:
            res = await box.run(code, timeout=30, on_stdout=on_stdout)
            ended = time.time()
            assert "".join(t for t, _ in chunks) == res.stdout and res.stdout.count("\n") == 20
            first, at = chunks[0]
            assert ended - at > 1, f"first chunk {ended - at:.2f}s before the end"
            assert at - float(first.split()[1]) < 1, f"first chunk {at - float(first.split()[1]):.2f}s after its print"
            # A streamed run that hits its timeout raises TimeoutError with the output so far.
            seen = []
            with pytest.raises(agentbox.TimeoutError) as ei:
                await box.run('import time\nprint("started", flush=True)\nwhile True: time.sleep(0.05)',
                              timeout=1, on_stdout=seen.append)
            assert seen == ["started\n"] and "started" in ei.value.result.stdout
            # The session lives on after the stream.
            assert (await box.run("print(1)")).stdout == "1\n"

    arun(main())


def test_async_commands(heavy):
    """Commands on asyncio: a shell line, argv with a cwd, streamed output, a background command
    read while it runs and killed; a nano session refuses them with InvalidRequest."""

    async def main():
        async with AsyncSandbox() as box:  # the first command starts a heavy session
            await box.files.write("data/a.txt", "hello")
            ls = await box.commands.run("ls data && echo err >&2")
            assert (box.runtime, ls.status, ls.exit_code, ls.stdout, ls.stderr) == ("heavy", "exited", 0, "a.txt\n", "err\n")
            assert (await box.commands.run(["cat", "a.txt"], cwd="data")).stdout == "hello"
            assert (await box.commands.run("exit 3")).exit_code == 3
            chunks = []

            async def on_stdout(text):
                chunks.append(text)

            done = await box.commands.run("for i in 1 2 3; do echo $i; sleep 0.1; done", on_stdout=on_stdout)
            assert "".join(chunks) == done.stdout == "1\n2\n3\n"
            bg = await box.commands.run("echo started; sleep 60", background=True)
            assert bg.status == "running"
            seen = bg
            for _ in range(100):
                if "started" in seen.stdout:
                    break
                await asyncio.sleep(0.1)
                seen = await box.commands.get(bg.id)
            assert (seen.stdout, seen.status) == ("started\n", "running")
            assert (await box.commands.kill(bg.id)).status == "killed"
            assert any(c.id == bg.id for c in await box.commands.list())
        async with AsyncSandbox(SandboxConfig(runtime="nano")) as nano:
            await nano.run("x = 1")
            with pytest.raises(agentbox.InvalidRequest):
                await nano.commands.run("ls")

    arun(main())


def test_async_time_travel(daemon):
    """Steps, rewind, fork, inspect, diff, pause and resume on asyncio, as the sync Sandbox has them."""

    async def main():
        async with AsyncSandbox(SandboxConfig(runtime="nano")) as box:
            await box.run("x = 1")
            s2 = (await box.run("x = 2")).step
            await box.run("x = 3\ndel_me = 'later'")
            deadline = time.monotonic() + 30
            while True:
                steps = await box.steps()
                if all(s.snapshot.state == "durable" for s in steps):
                    break
                assert time.monotonic() < deadline, [s.snapshot for s in steps]
                await asyncio.sleep(0.02)
            assert [s.seq for s in steps] == [1, 2, 3] and steps[1].id == s2
            assert (await box.rewind(s2)).head == s2
            assert (await box.run("print(x)")).stdout == "2\n"
            other = await box.fork(steps[2])
            async with other:
                assert other.session_id != box.session_id
                assert (await other.run("print(x, del_me)")).stdout == "3 later\n"
            names = {v.name: v for v in (await box.inspect(steps[2])).variables}
            assert names["x"].repr == "3"
            diff = await box.diff(steps[2])
            assert diff.base == s2 and [v.name for v in diff.added] == ["del_me"]
            assert (await box.pause()).state == "paused"
            assert (await box.resume()).state == "live"
            assert (await box.run("print(x)")).stdout == "2\n"
            with pytest.raises(agentbox.NotFound):
                await box.rewind("st_nope")

    arun(main())
