"""The SDK on asyncio: :class:`AsyncSandbox` and :class:`AsyncClient`, the same surface as
:class:`~agentbox.Sandbox` and :class:`~agentbox.Client` with ``await``.

Standard library only: HTTP/1.1 on asyncio streams with keep-alive, one bounded connection pool
per client (``max_connections``, default 32). Share one client between many sandboxes
(``AsyncSandbox(client=c)``): hundreds of concurrent sandboxes then use at most that many
connections, the rest of their requests waiting for one, instead of each opening its own::

    import asyncio
    from agentbox import AsyncClient, AsyncSandbox

    async def main():
        async with AsyncClient() as c:
            async with AsyncSandbox(client=c) as box:
                await box.run("x = 21")
                print((await box.run("print(x * 2)")).stdout)   # 42

    asyncio.run(main())

A client belongs to the event loop it is first used on. Proxies from the environment are not
used (the daemon is normally on this machine or a private network).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import urllib.parse
from typing import Any, Awaitable, Callable, Dict, List, Optional, Tuple, TypeVar, Union

from . import _codec, _http
from ._version import __version__
from .client import DEFAULT_TIMEOUT, ROUTES, RUN_MARGIN, route, RUN_TIMEOUT_UNKNOWN, Client, api_key_from_env, url_from_env
from .config import SandboxConfig, parse_duration
from .errors import STATUS_OF_CODE, AgentboxError, DaemonUnreachable, NotFound, from_response
from .mcp import AsyncHostedMCP, AsyncMCPSession, MCPTool, MCPToolResult
from .models import (Notice, Artifact, Command, CommandList, CommandRequest, CreateSessionRequest, FileInfo, FileList,
                     Health, Image, ImageList, Intent, MCPServer, MCPServerList, Output, Result, Routing, RunRequest,
                     Session, SessionList,
                     SetIntentRequest, Step, StepDiff, StepInspection, StepList, StepRequest, StreamEvent)
from .sandbox import FilesArg, _as_written, _ended_hint, _follow, _input_files

log = logging.getLogger("agentbox")

T = TypeVar("T")

#: A stream event handler: a function or a coroutine function of a StreamEvent.
EventHandler = Callable[[StreamEvent], Any]

#: Connections an AsyncClient keeps to its daemon at most.
DEFAULT_MAX_CONNECTIONS = 32
#: Bodies larger than this are sent with ``Expect: 100-continue`` (see agentbox._http).
EXPECT_CONTINUE_BYTES = 1 << 20


class AsyncClient:
    """A client of one agentbox daemon on asyncio, with a bounded pool of keep-alive connections.

    Args:
        url, api_key, timeout: As for :class:`~agentbox.Client`.
        max_connections: Connections kept to the daemon at most (default 32). Requests beyond
            that wait for a free connection; the time they wait counts in their timeout.

    Close it with ``await client.aclose()`` or ``async with``.
    """

    def __init__(self, url: Optional[str] = None, api_key: Optional[str] = None, *,
                 timeout: float = DEFAULT_TIMEOUT, max_connections: int = DEFAULT_MAX_CONNECTIONS) -> None:
        base = (url or url_from_env()).rstrip("/")
        u = urllib.parse.urlsplit(base)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"agentbox: URL {base!r} must be http:// or https:// with a host")
        self.url = base
        self.api_key = api_key_from_env() if api_key is None else api_key
        self.timeout = timeout
        self._prefix = u.path.rstrip("/")
        self._pool = _http.Pool(u.hostname, u.port or (443 if u.scheme == "https" else 80),
                                tls=u.scheme == "https", size=max_connections)
        self._sync: Optional[Client] = None

    def __repr__(self) -> str:
        return f"AsyncClient(url={self.url!r})"

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the pool's connections. Idempotent."""
        await self._pool.close()

    @property
    def open_connections(self) -> int:
        """Connections open to the daemon now (at most ``max_connections``)."""
        return self._pool.open_connections

    @property
    def sync(self) -> Client:
        """A :class:`~agentbox.Client` for the same daemon and key (for blocking calls such as
        ``artifact.read()`` outside the event loop)."""
        if self._sync is None:
            self._sync = Client(self.url, self.api_key, timeout=self.timeout)
        return self._sync

    # --- transport -----------------------------------------------------------------------

    async def _request(self, op: str, *, id: str = "", cid: str = "", step: str = "",
                       query: Optional[Dict[str, str]] = None, body: Any = None,
                       raw: Optional[bytes] = None, timeout: Optional[float] = None,
                       ok: Tuple[int, ...] = (200,), accept: str = "application/json",
                       on_data: Optional[Callable[[bytes], Awaitable[None]]] = None) -> Tuple[int, bytes, str]:
        method, path = route(op, id=id, cid=cid, step=step)
        target = self._prefix + path
        if query:
            target += "?" + urllib.parse.urlencode(query)
        headers = {"User-Agent": f"agentbox-python/{__version__} (asyncio)", "Accept": accept}
        data = None
        if body is not None:
            data = json.dumps(_codec.encode(body)).encode("utf-8")
            headers["Content-Type"] = "application/json"
        elif raw is not None:
            data = bytes(raw)
            headers["Content-Type"] = "application/octet-stream"
        if self.api_key:
            headers["Authorization"] = "Bearer " + self.api_key
        wait = timeout or self.timeout
        where = f"{method} {self.url}{path}"
        try:
            resp = await asyncio.wait_for(
                self._pool.request(method, target, headers, data, on_data=on_data,
                                   expect_continue=data is not None and len(data) > EXPECT_CONTINUE_BYTES), wait)
        except asyncio.TimeoutError:
            raise DaemonUnreachable(None, f"{where}: no answer within {wait:g}s",
                                    hint="is `agentbox serve` running there? AGENTBOX_URL sets the address") from None
        except (OSError, asyncio.IncompleteReadError, ValueError) as e:
            raise DaemonUnreachable(None, f"{where}: {e or type(e).__name__}",
                                    hint="is `agentbox serve` running there? AGENTBOX_URL sets the address") from e
        ctype = resp.headers.get("content-type", "")
        if resp.status in ok:
            return resp.status, resp.body, ctype
        err = from_response(resp.status, resp.body, resp.headers.get("x-request-id", ""))
        if err.result is not None:
            err.result._abind(self)
        raise err

    async def _json(self, op: str, cls: Any, **kw: Any) -> Any:
        _, payload, _ = await self._request(op, **kw)
        return _codec.decode(cls, json.loads(payload.decode("utf-8")))

    @staticmethod
    def _run_wait(timeout: Optional[float]) -> float:
        return (timeout + RUN_MARGIN) if timeout else RUN_TIMEOUT_UNKNOWN

    # --- runs ----------------------------------------------------------------------------

    async def run(self, req: RunRequest) -> Result:
        """Run code once in a fresh sandbox (``POST /v1/run``)."""
        res = await self._json("run", Result, body=req, timeout=self._run_wait(req.timeout))
        return res._abind(self)

    async def run_stream(self, req: RunRequest, on_event: Optional[EventHandler] = None) -> Result:
        """Run code once, streamed (``POST /v1/run`` with ``Accept: application/x-ndjson``):
        ``on_event`` (a function or a coroutine function) is called in order with each
        :class:`~agentbox.models.StreamEvent` as the daemon sends it. Returns the final result, or
        raises the error, as :meth:`run` does."""
        return await self._stream("run", req, on_event)

    async def run_in_session_stream(self, id: str, req: RunRequest,
                                    on_event: Optional[EventHandler] = None) -> Result:
        """Run code in a session's interpreter, streamed as :meth:`run_stream` is."""
        return await self._stream("runInSession", req, on_event, id=id)

    async def _stream(self, op: str, req: Any, on_event: Optional[EventHandler], id: str = "") -> Any:
        """A streamed run (or command): the events go to on_event; the last one, result (exit for
        a command) or error, ends it."""
        buf = bytearray()
        end: Dict[str, Any] = {}

        async def lines(piece: bytes) -> None:
            buf.extend(piece)
            while not end:
                i = buf.find(b"\n")
                if i < 0:
                    return
                line = bytes(buf[:i])
                del buf[:i + 1]
                if not line.strip():
                    continue
                ev = _codec.decode(StreamEvent, json.loads(line.decode("utf-8")))
                if ev.type in ("result", "error", "exit"):
                    end["event"] = ev
                    return
                if ev.artifact is not None:
                    ev.artifact._aclient = self
                if on_event is not None:
                    r = on_event(ev)
                    if inspect.isawaitable(r):
                        await r

        _, payload, ctype = await self._request(op, id=id, body=req, timeout=self._run_wait(req.timeout),
                                                accept="application/x-ndjson", on_data=lines)
        if ctype.startswith("application/json"):
            # A daemon that does not stream answered with the whole result.
            doc = json.loads(payload.decode("utf-8"))
            if op == "runCommand":
                return _codec.decode(Command, doc)
            return _codec.decode(Result, doc)._abind(self)
        ev = end.get("event")
        if ev is None:
            raise DaemonUnreachable(None, f"{ROUTES[op][0]} {self.url}{ROUTES[op][1]}: the stream ended without a result",
                                    hint="the daemon stopped or the connection was cut; run the code again")
        if ev.type == "result" and ev.result is not None:
            return ev.result._abind(self)
        if ev.type == "exit" and ev.command is not None:
            return ev.command
        code = ev.error.code if ev.error else "internal"
        body = json.dumps({"error": _codec.encode(ev.error),
                           "result": _codec.encode(ev.result) if ev.result else None}).encode("utf-8")
        err = from_response(STATUS_OF_CODE.get(code, 500), body)
        if err.result is not None:
            err.result._abind(self)
        raise err

    # --- time travel (steps) ---------------------------------------------------------------

    async def steps(self, id: str) -> StepList:
        """A session's steps, in the order they ran, and its head."""
        return await self._json("listSteps", StepList, id=id)

    async def step(self, id: str, step: str) -> Step:
        return await self._json("getStep", Step, id=id, step=step)

    async def inspect_step(self, id: str, step: str, context: Optional[str] = None) -> StepInspection:
        """The variables and files a step held, read in a throwaway copy of it; ``context``
        names one of the session's code contexts (default the main one)."""
        return await self._json("inspectStep", StepInspection, id=id, step=step,
                          query={"context": context} if context else None, timeout=max(self.timeout, 60.0))

    async def diff_steps(self, id: str, step: str, base: Optional[str] = None,
                   context: Optional[str] = None) -> StepDiff:
        """What changed from ``base`` (default the step's parent) to ``step``; ``context`` names the
        code context whose variables are compared (default the main one)."""
        query = {k: v for k, v in (("base", base), ("context", context)) if v}
        return await self._json("diffSteps", StepDiff, id=id, step=step, query=query or None,
                                timeout=max(self.timeout, 60.0))

    async def rewind(self, id: str, step: str) -> Session:
        return await self._json("rewindSession", Session, id=id, body=StepRequest(step=step))

    async def fork(self, id: str, step: str) -> Session:
        return await self._json("forkSession", Session, id=id, body=StepRequest(step=step), ok=(201,),
                                timeout=max(self.timeout, 120.0))

    async def pause(self, id: str) -> Session:
        return await self._json("pauseSession", Session, id=id, timeout=max(self.timeout, 120.0))

    async def resume(self, id: str) -> Session:
        return await self._json("resumeSession", Session, id=id, timeout=max(self.timeout, 120.0))

    # --- commands in sessions (heavy) ------------------------------------------------------

    async def run_command(self, id: str, req: CommandRequest, on_event: Optional[EventHandler] = None) -> Command:
        """Run a command in heavy session ``id`` (``POST /v1/sessions/{id}/commands``): the ended
        Command, its stdout and stderr streamed to ``on_event`` when given; with
        ``req.background``, at once, running."""
        if on_event is not None and not req.background:
            return await self._stream("runCommand", req, on_event, id=id)
        ok = (202,) if req.background else (200,)
        wait = self.timeout if req.background else self._run_wait(req.timeout)
        return await self._json("runCommand", Command, id=id, body=req, ok=ok, timeout=wait)

    async def commands(self, id: str) -> List[Command]:
        """The commands session ``id`` keeps, oldest first, with their output so far."""
        return (await self._json("listCommands", CommandList, id=id)).commands

    async def command(self, id: str, cid: str) -> Command:
        """Command ``cid`` of session ``id``: its status and output so far."""
        return await self._json("getCommand", Command, id=id, cid=cid)

    async def kill_command(self, id: str, cid: str) -> Command:
        """Kill command ``cid`` of session ``id``; returns it as it ended."""
        return await self._json("killCommand", Command, id=id, cid=cid)

    async def route(self, req: RunRequest) -> Routing:
        """Ask where the daemon would run ``req``, without running it (``POST /v1/route``)."""
        return await self._json("route", Routing, body=req)

    async def artifact(self, id: str) -> Tuple[bytes, str]:
        """Download an artifact: its bytes and media type (``GET /v1/artifacts/{id}``)."""
        _, payload, ctype = await self._request("getArtifact", id=id)
        return payload, ctype

    # --- sessions ------------------------------------------------------------------------

    async def create_session(self, req: Optional[CreateSessionRequest] = None) -> Session:
        return await self._json("createSession", Session, body=req or CreateSessionRequest(), ok=(201,),
                                timeout=max(self.timeout, 120.0))

    async def get_session(self, id: str) -> Session:
        return await self._json("getSession", Session, id=id)

    async def list_sessions(self) -> List[Session]:
        return (await self._json("listSessions", SessionList)).sessions

    async def close_session(self, id: str, keep: bool = False) -> Optional[Session]:
        """Close a session; with ``keep=True`` keep its state and steps (as :meth:`agentbox.Client.close_session`)."""
        if keep:
            return await self._json("closeSession", Session, id=id, query={"keep": "true"}, timeout=max(self.timeout, 120.0))
        await self._request("closeSession", id=id, ok=(204,))
        return None

    async def run_in_session(self, id: str, req: RunRequest) -> Result:
        res = await self._json("runInSession", Result, id=id, body=req, timeout=self._run_wait(req.timeout))
        return res._abind(self)

    # --- session files -------------------------------------------------------------------

    async def list_files(self, id: str, path: str = "/home/user") -> List[FileInfo]:
        return (await self._json("listFiles", FileList, id=id, query={"path": path})).files

    async def read_file(self, id: str, path: str) -> bytes:
        _, payload, _ = await self._request("readFile", id=id, query={"path": path})
        return payload

    async def write_file(self, id: str, path: str, data: bytes) -> None:
        await self._request("writeFile", id=id, query={"path": path}, raw=bytes(data), ok=(204,))

    async def remove_file(self, id: str, path: str) -> None:
        await self._request("removeFile", id=id, query={"path": path}, ok=(204,))

    # --- egress intents ------------------------------------------------------------------

    async def set_intent(self, id: str, name: str, ttl: Optional[float] = None) -> Intent:
        return await self._json("setIntent", Intent, id=id, body=SetIntentRequest(name=name, ttl=ttl))

    async def clear_intent(self, id: str) -> None:
        await self._request("clearIntent", id=id, ok=(204,))

    async def get_intent(self, id: str) -> Intent:
        return await self._json("getIntent", Intent, id=id)

    # --- operations ----------------------------------------------------------------------

    async def images(self) -> List[Image]:
        return (await self._json("listImages", ImageList)).images

    async def health(self) -> Health:
        return await self._json("health", Health, ok=(200, 503))

    # --- hosted MCP servers ---------------------------------------------------------------

    async def mcp_servers(self) -> List[MCPServer]:
        """The hosted MCP servers, by name (``GET /v1/mcp/servers``; a key with the admin scope)."""
        return (await self._json("listMCPServers", MCPServerList)).servers

    async def mcp_session(self, server: str, *, timeout: Optional[float] = None) -> AsyncMCPSession:
        """An initialized MCP exchange with hosted server ``server`` at ``/mcp/servers/NAME``, for
        several requests after one ``initialize``; ``await s.close()`` ends it."""
        return await AsyncMCPSession(self, server, timeout=timeout).initialize()

    async def mcp_list_tools(self, server: str) -> List[MCPTool]:
        """The tools of hosted server ``server`` (see :meth:`agentbox.Client.mcp_list_tools`)."""
        s = await self.mcp_session(server)
        try:
            return await s.list_tools()
        finally:
            await s.close()

    async def mcp_call(self, server: str, tool: str, arguments: Optional[Dict[str, Any]] = None, *,
                       timeout: Optional[float] = None) -> MCPToolResult:
        """Call ``tool`` of hosted server ``server`` in a session of its own (see
        :meth:`agentbox.Client.mcp_call`): a tool error or a refusal is a result with ``is_error``."""
        s = await self.mcp_session(server, timeout=timeout)
        try:
            return await s.call(tool, arguments)
        finally:
            await s.close()

    def mcp(self, server: str, *, timeout: Optional[float] = None) -> AsyncHostedMCP:
        """Hosted (or remote) MCP server ``server`` as an object whose methods are awaited:
        ``list_tools()``, ``call(tool, args)``, ``list_resources()``, ``read_resource(uri)``,
        ``list_prompts()``, ``get_prompt(name, args)``. Nothing is asked of the daemon until the
        first of those. Needs a key with the run scope."""
        return AsyncHostedMCP(self, server, timeout=timeout)


def _event_handler(on_stdout: Optional[Callable[[str], Any]], on_stderr: Optional[Callable[[str], Any]],
                   on_result: Optional[Callable[[Output], Any]],
                   on_artifact: Optional[Callable[[Artifact], Any]]) -> Optional[EventHandler]:
    """One handler of stream events for the run's callbacks, or None when there are none (the run
    is then not streamed). A callback may return an awaitable; it is awaited."""
    if on_stdout is None and on_stderr is None and on_result is None and on_artifact is None:
        return None

    def handle(ev: StreamEvent) -> Any:
        if ev.type == "stdout" and on_stdout is not None:
            return on_stdout(ev.text)
        if ev.type == "stderr" and on_stderr is not None:
            return on_stderr(ev.text)
        if ev.type == "output" and ev.output is not None and on_result is not None:
            return on_result(ev.output)
        if ev.type == "artifact" and ev.artifact is not None and on_artifact is not None:
            return on_artifact(ev.artifact)
        if ev.type == "dropped" and ev.dropped is not None:
            log.warning("agentbox: the daemon dropped %d bytes of stdout and %d of stderr this client did not read "
                        "in time; the result has them", ev.dropped.stdout_bytes, ev.dropped.stderr_bytes)
        return None

    return handle


class AsyncSandbox:
    """:class:`~agentbox.Sandbox` on asyncio: a session by default (state persists between runs),
    started by the first run and ended by :meth:`close` or leaving ``async with``.

    Args:
        config, url, api_key, stateful: As for :class:`~agentbox.Sandbox`.
        client: An :class:`AsyncClient` to share (its connection pool) between sandboxes. A
            sandbox that makes its own client closes it in :meth:`close`.

    Unlike a Sandbox, an AsyncSandbox cannot close its session when it is garbage-collected
    (that needs the event loop): close it, or use ``async with``; a forgotten session ends after
    the daemon's idle timeout.
    """

    def __init__(self, config: Optional[SandboxConfig] = None, url: Optional[str] = None,
                 api_key: Optional[str] = None, *, stateful: bool = True, client: Optional[AsyncClient] = None) -> None:
        self.config = config if config is not None else SandboxConfig()
        self._own_client = client is None
        self.client = client if client is not None else AsyncClient(url, api_key)
        self.stateful = stateful
        self.files = AsyncFiles(self)
        self.commands = AsyncCommands(self)
        self._session: Optional[Session] = None
        self._creating: Optional[asyncio.Future] = None
        self._routing: Optional[Routing] = None
        self._notices: List[Notice] = []
        self._closed = False

    @classmethod
    async def connect(cls, session_id: str, url: Optional[str] = None, api_key: Optional[str] = None, *,
                      config: Optional[SandboxConfig] = None, client: Optional[AsyncClient] = None) -> "AsyncSandbox":
        """An AsyncSandbox attached to an open session by its id (see :meth:`Sandbox.connect`)."""
        if not isinstance(session_id, str) or not session_id:
            raise ValueError("agentbox: connect needs the id of an open session, e.g. box.session_id")
        box = cls(config, url, api_key, client=client)
        try:
            box._session = await box.client.get_session(session_id)
        except NotFound as e:
            box._closed = True
            e.hint = (f"no open session {session_id} at {box.client.url}: the id is wrong, or the session has ended "
                      "(closed, idle past its idle timeout, or the daemon restarted); create a new Sandbox")
            raise
        return box

    def __repr__(self) -> str:
        s = self._session
        where = f"session {s.id} on {s.runtime}" if s else ("closed" if self._closed else "no session yet")
        return f"<AsyncSandbox {self.client.url} {where}>"

    @property
    def session(self) -> Optional[Session]:
        return self._session

    @property
    def session_id(self) -> Optional[str]:
        return self._session.id if self._session else None

    @property
    def runtime(self) -> Optional[str]:
        return self._session.runtime if self._session else None

    @property
    def routing(self) -> Optional[Routing]:
        return self._routing

    @property
    def closed(self) -> bool:
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError("agentbox: this AsyncSandbox is closed")

    async def run(self, code: str, *, timeout: Union[None, float, str] = None, env: Optional[Dict[str, str]] = None,
                  files: FilesArg = None, on_stdout: Optional[Callable[[str], Any]] = None,
                  on_stderr: Optional[Callable[[str], Any]] = None, on_result: Optional[Callable[[Output], Any]] = None,
                  on_artifact: Optional[Callable[[Artifact], Any]] = None) -> Result:
        """Run ``code`` and return its Result (see :meth:`Sandbox.run`).

        With any of ``on_stdout``, ``on_stderr`` (each chunk of output as the code prints it),
        ``on_result`` (each rich value as it is displayed) or ``on_artifact`` (each figure), the
        run is streamed and they are called as it goes; each may be a function or a coroutine
        function (awaited before the next event is read).
        """
        self._check_open()
        t = parse_duration(timeout) if timeout is not None else self.config.timeout_seconds
        on_event = _event_handler(on_stdout, on_stderr, on_result, on_artifact)
        if not self.stateful:
            cfg = self.config
            merged = {**cfg.env, **(env or {})}
            req = RunRequest(
                code=code, runtime=cfg.runtime, timeout=t, memory_mb=cfg.memory_mb, env=merged or None,
                files=_input_files(files), packages=cfg.packages or None, image=cfg.image,
                network=cfg.network or None, egress_profile=cfg.egress_profile)
            if on_event is not None:
                return await self.client.run_stream(req, on_event)
            return await self.client.run(req)
        await self._ensure_session()
        sid = self._session.id  # type: ignore[union-attr]
        try:
            req = RunRequest(code=code, timeout=t, env=env or None, files=_input_files(files))
            if on_event is not None:
                res = await self.client.run_in_session_stream(sid, req, on_event)
            else:
                res = await self.client.run_in_session(sid, req)
        except NotFound as e:
            self._lost_session(sid, e)
            raise
        except AgentboxError as e:
            if e.result is not None:
                self._follow(sid, e.result, e)
            raise
        self._follow(sid, res)
        return res

    def _follow(self, sid: str, res: Result, err: Optional[AgentboxError] = None) -> None:
        if _follow(self._session, sid, res, err):
            self._routing = res.routing
            if res.notice is not None:
                self._notices.append(res.notice)

    @property
    def notices(self) -> List[Notice]:
        """What happened to the session between runs, oldest first (as ``Sandbox.notices``)."""
        return list(self._notices)

    def _lost_session(self, sid: str, e: NotFound) -> None:
        idle = 0.0
        s = self._session
        if s is not None and s.id == sid:
            idle = s.idle_timeout
            self._session = None
        e.hint = _ended_hint(sid, idle) + " (or run again: this AsyncSandbox then starts a new, empty session)"

    async def _session_call(self, call: Callable[[str], Awaitable[T]], *, for_files: bool = False) -> T:
        await self._ensure_session(for_files=for_files)
        sid = self._session.id  # type: ignore[union-attr]
        try:
            return await call(sid)
        except NotFound as e:
            try:
                await self.client.get_session(sid)
            except NotFound:
                self._lost_session(sid, e)
            except AgentboxError:
                pass
            raise

    async def _ensure_session(self, for_files: bool = False) -> None:
        self._check_open()
        if self._session is not None:
            return
        # Concurrent first runs share one creation instead of starting a session each.
        if self._creating is None:
            self._creating = asyncio.ensure_future(self._create(for_files))
        fut = self._creating
        try:
            await asyncio.shield(fut)
        finally:
            if fut.done() and self._creating is fut:
                self._creating = None
        self._check_open()

    async def _create(self, for_files: bool) -> None:
        cfg = self.config
        runtime = cfg.runtime
        if runtime == "auto" and not cfg.wants_image and for_files:
            runtime = "heavy"
            self._routing = Routing(tier="heavy", reasons=["heavy: session files are used before any run"])
        self._session = await self.client.create_session(CreateSessionRequest(
            runtime=runtime, timeout=cfg.timeout_seconds, memory_mb=cfg.memory_mb, env=cfg.env or None,
            packages=cfg.packages or None, image=cfg.image, network=cfg.network or None,
            egress_profile=cfg.egress_profile, volumes=cfg.volumes or None))
        log.debug("agentbox: session %s on %s", self._session.id, self._session.runtime)

    # --- time travel ---------------------------------------------------------------------

    async def steps(self) -> List[Step]:
        """The session's steps (each run is one), in the order they ran (see :meth:`Sandbox.steps`)."""
        return await self._session_call(lambda sid: self._steps(sid))

    async def _steps(self, sid: str) -> List[Step]:
        return (await self.client.steps(sid)).steps

    async def rewind(self, step: Union[str, Step]) -> Session:
        """Make the session's variables and files those of ``step``; the next run goes on from there."""
        st = step.id if isinstance(step, Step) else step
        return await self._session_call(lambda sid: self.client.rewind(sid, st))

    async def fork(self, step: Union[str, Step]) -> "AsyncSandbox":
        """A new AsyncSandbox, on this one's client, whose session starts from ``step`` (its own)."""
        st = step.id if isinstance(step, Step) else step
        s = await self._session_call(lambda sid: self.client.fork(sid, st))
        box = AsyncSandbox(self.config, client=self.client)
        box._session = s
        return box

    async def pause(self) -> Session:
        """Write the session's state to disk and free its sandbox; the next run brings it back."""
        return await self._session_call(self.client.pause)

    async def resume(self) -> Session:
        """Bring a paused session back ahead of its next run."""
        return await self._session_call(self.client.resume)

    async def inspect(self, step: Union[None, str, Step] = None, context: Optional[str] = None) -> StepInspection:
        """The variables and files of ``step`` (default the current one), read in a throwaway copy;
        ``context`` names the code context whose variables to show (default the main one)."""
        async def call(sid: str) -> StepInspection:
            st = step.id if isinstance(step, Step) else step
            if not st:
                st = (await self.client.steps(sid)).head
            return await self.client.inspect_step(sid, st, context=context)
        return await self._session_call(call)

    async def diff(self, step: Union[str, Step], base: Union[None, str, Step] = None,
                   context: Optional[str] = None) -> StepDiff:
        """What changed in variables and files from ``base`` (default the step's parent) to
        ``step``; ``context`` names the code context whose variables to compare."""
        st = step.id if isinstance(step, Step) else step
        b = base.id if isinstance(base, Step) else base
        return await self._session_call(lambda sid: self.client.diff_steps(sid, st, b, context=context))

    async def set_intent(self, name: str, ttl: Union[None, float, str] = None) -> Intent:
        t = parse_duration(ttl)
        return await self._session_call(lambda sid: self.client.set_intent(sid, name, t))

    async def clear_intent(self) -> None:
        await self._session_call(self.client.clear_intent)

    def mcp(self, server: str) -> AsyncHostedMCP:
        """Hosted (or remote) MCP server ``server`` of this sandbox's daemon, with its key:
        ``await box.mcp("memory").list_tools()``, ``await box.mcp("memory").call("read_graph")``.
        The server runs in a gVisor sandbox of its own (not this one); every call passes the
        daemon's gateway. See :meth:`agentbox.AsyncClient.mcp` and :meth:`agentbox.Sandbox.mcp`."""
        return self.client.mcp(server)

    async def close(self) -> None:
        """End the session (if there is one); close the client if this sandbox made it. Idempotent."""
        self._closed = True
        if self._creating is not None:
            try:
                await asyncio.shield(self._creating)
            except Exception:  # noqa: BLE001 - the creation's error was someone else's to see
                pass
        s, self._session = self._session, None
        try:
            if s is not None:
                try:
                    await self.client.close_session(s.id)
                except NotFound:
                    pass
        finally:
            if self._own_client:
                await self.client.aclose()

    def detach(self) -> Optional[str]:
        """Let go of the session without ending it and return its id (see :meth:`Sandbox.detach`).
        A client this sandbox made stays open for the session's other users to be none the wiser;
        close it with ``await box.client.aclose()``."""
        self._closed = True
        s, self._session = self._session, None
        return s.id if s else None

    async def __aenter__(self) -> "AsyncSandbox":
        return self

    async def __aexit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            await self.close()
            return
        try:
            await self.close()
        except Exception:  # noqa: BLE001 - do not hide the exception that ended the block
            pass


class AsyncFiles:
    """The files of an AsyncSandbox's session (``box.files``): heavy sessions only."""

    def __init__(self, box: AsyncSandbox) -> None:
        self._box = box

    async def _call(self, call: Callable[[str], Awaitable[T]]) -> T:
        if not self._box.stateful:
            raise ValueError("agentbox: files need a session; this AsyncSandbox is stateful=False")
        return await self._box._session_call(call, for_files=True)

    async def write(self, path: str, data: Union[bytes, str]) -> None:
        if isinstance(data, str):
            data = data.encode("utf-8")
        await self._call(lambda sid: self._box.client.write_file(sid, path, data))

    async def read(self, path: str) -> bytes:
        return await self._call(lambda sid: self._box.client.read_file(sid, path))

    async def read_text(self, path: str, encoding: str = "utf-8") -> str:
        return (await self.read(path)).decode(encoding)

    async def list(self, path: str = ".") -> List[FileInfo]:
        """Every file and directory under ``path``, paths as written (see :meth:`Files.list`)."""
        return _as_written(path, await self._call(lambda sid: self._box.client.list_files(sid, path)))

    async def remove(self, path: str) -> None:
        await self._call(lambda sid: self._box.client.remove_file(sid, path))


class AsyncCommands:
    """Shell commands in an AsyncSandbox's session (``box.commands``), as :class:`~agentbox.Commands`:
    a heavy session, which the first command starts when there is none yet."""

    def __init__(self, box: AsyncSandbox) -> None:
        self._box = box

    async def _call(self, call: Callable[[str], Awaitable[T]]) -> T:
        if not self._box.stateful:
            raise ValueError("agentbox: commands need a session; this AsyncSandbox is stateful=False")
        return await self._box._session_call(call, for_files=True)

    async def run(self, cmd: Union[str, List[str]], *, cwd: Optional[str] = None, env: Optional[Dict[str, str]] = None,
                  timeout: Union[None, float, str] = None, stdin: Optional[str] = None, background: bool = False,
                  on_stdout: Optional[Callable[[str], Any]] = None,
                  on_stderr: Optional[Callable[[str], Any]] = None) -> Command:
        """Run ``cmd`` (a shell line, or a list: a program and its arguments); see :meth:`Commands.run`."""
        req = CommandRequest(cwd=cwd, env=env or None, stdin=stdin, background=background or None,
                             timeout=parse_duration(timeout) if timeout is not None else None)
        if isinstance(cmd, str):
            req.cmd = cmd
        else:
            req.argv = list(cmd)
        on_event = _event_handler(on_stdout, on_stderr, None, None)
        return await self._call(lambda sid: self._box.client.run_command(sid, req, on_event))

    async def get(self, id: str) -> Command:
        return await self._call(lambda sid: self._box.client.command(sid, id))

    async def list(self) -> List[Command]:
        return await self._call(lambda sid: self._box.client.commands(sid))

    async def kill(self, id: str) -> Command:
        return await self._call(lambda sid: self._box.client.kill_command(sid, id))


__all__ = ["AsyncClient", "AsyncSandbox", "AsyncFiles", "AsyncCommands", "DEFAULT_MAX_CONNECTIONS"]
