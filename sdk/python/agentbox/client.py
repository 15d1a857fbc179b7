"""The low-level client: one method per operation of api/openapi.yaml, wire types in and out.

Most programs want :class:`agentbox.Sandbox`; this is what it is built on, and what to use for
listing sessions, images or the daemon's health.
"""

from __future__ import annotations

import datetime as _dt
import http.client
import ipaddress
import json
import os
import pathlib
import select
import socket
import urllib.error
import urllib.parse
import urllib.request
from http.client import HTTPException
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

from . import _codec
from ._version import __version__
from .config import parse_duration
from .errors import STATUS_OF_CODE, DaemonUnreachable, from_response
from .mcp import HostedMCP, MCPSession, MCPTool, MCPToolResult
from .models import (AuditList, AuditRecord, CreatedKey, CreateKeyRequest, CreateSessionRequest, FileInfo, FileList,
                     Health, Image, ImageList, Intent, Key, KeyList, MCPServer, MCPServerList, ReloadResult, Result,
                     Routing, RunRequest, Session, SessionList, SetIntentRequest, Step, StepDiff, StepInspection,
                     StepList, StepRequest, StreamEvent, Command, CommandList, CommandRequest,
                     CreateVolumeRequest, Volume, VolumeList)

#: Where ``agentbox serve`` listens unless told otherwise.
DEFAULT_URL = "http://127.0.0.1:8420"

#: Every operation the SDK calls, as (method, path) with the spec's {id} placeholders. A Go test
#: (api/sdk_contract_test.go) checks each against api/openapi.yaml.
ROUTES: Dict[str, Tuple[str, str]] = {
    "run": ("POST", "/v1/run"),
    "route": ("POST", "/v1/route"),
    "listSessions": ("GET", "/v1/sessions"),
    "createSession": ("POST", "/v1/sessions"),
    "getSession": ("GET", "/v1/sessions/{id}"),
    "closeSession": ("DELETE", "/v1/sessions/{id}"),
    "runInSession": ("POST", "/v1/sessions/{id}/run"),
    "runCommand": ("POST", "/v1/sessions/{id}/commands"),
    "listCommands": ("GET", "/v1/sessions/{id}/commands"),
    "getCommand": ("GET", "/v1/sessions/{id}/commands/{cid}"),
    "killCommand": ("DELETE", "/v1/sessions/{id}/commands/{cid}"),
    "listSteps": ("GET", "/v1/sessions/{id}/steps"),
    "getStep": ("GET", "/v1/sessions/{id}/steps/{step}"),
    "inspectStep": ("GET", "/v1/sessions/{id}/steps/{step}/inspect"),
    "diffSteps": ("GET", "/v1/sessions/{id}/steps/{step}/diff"),
    "readStepFile": ("GET", "/v1/sessions/{id}/steps/{step}/files/content"),
    "rewindSession": ("POST", "/v1/sessions/{id}/rewind"),
    "forkSession": ("POST", "/v1/sessions/{id}/fork"),
    "pauseSession": ("POST", "/v1/sessions/{id}/pause"),
    "resumeSession": ("POST", "/v1/sessions/{id}/resume"),
    "listFiles": ("GET", "/v1/sessions/{id}/files"),
    "removeFile": ("DELETE", "/v1/sessions/{id}/files"),
    "readFile": ("GET", "/v1/sessions/{id}/files/content"),
    "writeFile": ("PUT", "/v1/sessions/{id}/files/content"),
    "getIntent": ("GET", "/v1/sessions/{id}/intent"),
    "setIntent": ("PUT", "/v1/sessions/{id}/intent"),
    "clearIntent": ("DELETE", "/v1/sessions/{id}/intent"),
    "reloadEgressPolicy": ("POST", "/v1/egress/reload"),
    "getArtifact": ("GET", "/v1/artifacts/{id}"),
    "listImages": ("GET", "/v1/images"),
    "listVolumes": ("GET", "/v1/volumes"),
    "createVolume": ("POST", "/v1/volumes"),
    "getVolume": ("GET", "/v1/volumes/{name}"),
    "deleteVolume": ("DELETE", "/v1/volumes/{name}"),
    "readVolumeFile": ("GET", "/v1/volumes/{name}/files/{path}"),
    "writeVolumeFile": ("PUT", "/v1/volumes/{name}/files/{path}"),
    "queryAudit": ("GET", "/v1/audit"),
    "listKeys": ("GET", "/v1/keys"),
    "createKey": ("POST", "/v1/keys"),
    "rotateKey": ("POST", "/v1/keys/{id}/rotate"),
    "revokeKey": ("DELETE", "/v1/keys/{id}"),
    "health": ("GET", "/v1/health"),
    "listMCPServers": ("GET", "/v1/mcp/servers"),
}


def route(op: str, *, id: str = "", cid: str = "", step: str = "", name: str = "",
          fpath: str = "") -> Tuple[str, str]:
    """The method and path of operation ``op`` (ROUTES) with its parameters filled in, quoted;
    shared by :class:`Client` and :class:`~agentbox.AsyncClient`. A parameter the path needs
    and was not given is a ValueError, before any request is made."""
    method, path = ROUTES[op]
    for key, value, what in (("{id}", id, "an id"), ("{cid}", cid, "a command id"),
                             ("{step}", step, "a step"), ("{name}", name, "a name")):
        if key in path:
            if not value:
                raise ValueError(f"agentbox: {op} needs {what}")
            path = path.replace(key, urllib.parse.quote(value, safe=""))
    if "{path}" in path:
        if not fpath.strip("/"):
            raise ValueError(f"agentbox: {op} needs a file path")
        path = path.replace("{path}", urllib.parse.quote(fpath.lstrip("/"), safe="/"))
    return method, path

#: Seconds a call other than a run may take. Runs get their own timeout plus RUN_MARGIN.
DEFAULT_TIMEOUT = 60.0
#: Seconds added to a run's own timeout for the HTTP wait (start, queue, transfer).
RUN_MARGIN = 30.0
#: The HTTP wait of a run that names no timeout: the server's default maximum (600 s) plus margin.
RUN_TIMEOUT_UNKNOWN = 600.0 + RUN_MARGIN


#: Bodies larger than this are sent with ``Expect: 100-continue``: the daemon refuses an oversized
#: body by its Content-Length before reading it, and its 413 (naming max_body_bytes) reaches the
#: caller instead of a connection reset mid-upload.
EXPECT_CONTINUE_BYTES = 1 << 20
#: How long to wait for the daemon's go-ahead before sending the body anyway (RFC 9110 10.1.1).
EXPECT_WAIT = 3.0


def _send_expecting_continue(method: str, url: str, headers: Dict[str, str], data: bytes,
                             timeout: float) -> Tuple[int, bytes, Any]:
    """One request whose body waits for ``100 Continue`` (plain HTTP; proxies are not used).

    http.client sends no Expect by itself and reads past a 100 in getresponse(), so the go-ahead
    is read off the socket here: a final answer (413) arrives instead of it and is read without
    sending the body.
    """
    u = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=timeout)
    try:
        target = u.path + ("?" + u.query if u.query else "")
        conn.putrequest(method, target, skip_accept_encoding=True)
        for k, v in headers.items():
            conn.putheader(k, v)
        conn.putheader("Content-Length", str(len(data)))
        conn.putheader("Expect", "100-continue")
        conn.endheaders()
        sock = conn.sock
        ready, _, _ = select.select([sock], [], [], EXPECT_WAIT)
        if ready:
            head = sock.recv(4096, socket.MSG_PEEK)
            if head.startswith((b"HTTP/1.1 100", b"HTTP/1.0 100")):
                # Consume the 100 answer (status line and its empty header block), then send.
                end = head.find(b"\r\n\r\n")
                while end < 0 and len(head) < 65536:
                    more = sock.recv(65536, socket.MSG_PEEK)
                    if len(more) == len(head):
                        break
                    head = more
                    end = head.find(b"\r\n\r\n")
                if end < 0:
                    raise HTTPException("a 100 Continue answer without its end")
                sock.recv(end + 4)
                sock.sendall(data)
            # else: the final answer came instead of the go-ahead; the body is not sent.
        else:
            sock.sendall(data)
        resp = conn.getresponse()
        return resp.status, resp.read(), resp.headers
    finally:
        conn.close()


def default_data_dir() -> pathlib.Path:
    """The daemon's default data directory: AGENTBOX_DATA_DIR, else $XDG_CACHE_HOME/agentbox or
    ~/.cache/agentbox (the daemon's own rule)."""
    d = os.environ.get("AGENTBOX_DATA_DIR")
    if d:
        return pathlib.Path(d)
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return pathlib.Path(cache) / "agentbox"


#: The data directory of a system install (scripts/install-system.sh: the agentbox service). Its
#: api_key is readable by the members of the group agentbox.
SYSTEM_DATA_DIR = pathlib.Path("/var/lib/agentbox")


def api_key_from_env() -> str:
    """The key the daemon expects, found as the CLI and the Go client find it: AGENTBOX_API_KEY,
    else the api_key file in the user's own data directory (AGENTBOX_DATA_DIR, else
    ~/.cache/agentbox: a daemon this user started), else the system install's
    /var/lib/agentbox/api_key (readable by the group agentbox), else ""."""
    k = os.environ.get("AGENTBOX_API_KEY", "")
    if k:
        return k
    for d in (default_data_dir(), SYSTEM_DATA_DIR):
        try:
            k = (d / "api_key").read_text().strip()
        except OSError:
            continue
        if k:
            return k
    return ""


def url_from_env() -> str:
    """AGENTBOX_URL, else DEFAULT_URL."""
    return os.environ.get("AGENTBOX_URL") or DEFAULT_URL


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Client:
    """A client of one agentbox daemon. Safe to share between threads (it keeps no connection).

    Args:
        url: The daemon's base URL. Default AGENTBOX_URL, else http://127.0.0.1:8420.
        api_key: The bearer key. Default AGENTBOX_API_KEY, else the api_key file in the daemon's
            data directory (AGENTBOX_DATA_DIR or ~/.cache/agentbox), which ``agentbox serve``
            creates on first start, else that of the system install (/var/lib/agentbox/api_key,
            readable by the group agentbox). An empty key is allowed: health() needs none, and
            other calls then raise :class:`~agentbox.Unauthorized` with a hint.
        timeout: Seconds a call other than a run may take (default 60). A run waits for its own
            timeout plus 30 s.

    Proxies from the environment (http_proxy...) are used except for loopback addresses, as
    Go's HTTP client does.
    """

    def __init__(self, url: Optional[str] = None, api_key: Optional[str] = None, *,
                 timeout: float = DEFAULT_TIMEOUT) -> None:
        base = (url or url_from_env()).rstrip("/")
        u = urllib.parse.urlsplit(base)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"agentbox: URL {base!r} must be http:// or https:// with a host")
        self.url = base
        self.api_key = api_key_from_env() if api_key is None else api_key
        self.timeout = timeout
        handlers = [urllib.request.ProxyHandler({})] if _is_loopback(u.hostname) else []
        self._opener = urllib.request.build_opener(*handlers)

    def __repr__(self) -> str:
        return f"Client(url={self.url!r})"

    # --- transport -----------------------------------------------------------------------

    def _request(self, op: str, *, id: str = "", query: Optional[Dict[str, str]] = None, body: Any = None,
                 raw: Optional[bytes] = None, timeout: Optional[float] = None,
                 ok: Tuple[int, ...] = (200,), step: str = "", cid: str = "", name: str = "",
                 fpath: str = "") -> Tuple[int, bytes, str]:
        method, path = route(op, id=id, cid=cid, step=step, name=name, fpath=fpath)
        url = self.url + path
        if query:
            url += "?" + urllib.parse.urlencode(query)
        headers = {"User-Agent": f"agentbox-python/{__version__}", "Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(_codec.encode(body)).encode("utf-8")
            headers["Content-Type"] = "application/json"
        elif raw is not None:
            data = raw
            headers["Content-Type"] = "application/octet-stream"
        if self.api_key:
            headers["Authorization"] = "Bearer " + self.api_key
        if data is not None and len(data) > EXPECT_CONTINUE_BYTES and url.startswith("http://"):
            try:
                status, payload, hdrs = _send_expecting_continue(method, url, headers, data,
                                                                 timeout or self.timeout)
            except (HTTPException, OSError, socket.timeout) as e:
                raise DaemonUnreachable(None, f"{method} {url}: {e}",
                                        hint="is `agentbox serve` running there? AGENTBOX_URL sets the address") from e
            if status in ok:
                return status, payload, hdrs.get("Content-Type", "")
            raise from_response(status, payload, hdrs.get("X-Request-Id", ""), self)
        req = urllib.request.Request(url, data=data, headers=headers, method=method)
        try:
            with self._opener.open(req, timeout=timeout or self.timeout) as resp:
                return resp.status, resp.read(), resp.headers.get("Content-Type", "")
        except urllib.error.HTTPError as e:
            status, payload, rid = e.code, e.read(), e.headers.get("X-Request-Id", "")
            e.close()
            if status in ok:
                return status, payload, e.headers.get("Content-Type", "")
            raise from_response(status, payload, rid, self) from None
        except (urllib.error.URLError, HTTPException, OSError, socket.timeout) as e:
            reason = getattr(e, "reason", e)
            raise DaemonUnreachable(None, f"{method} {url}: {reason}",
                                    hint="is `agentbox serve` running there? AGENTBOX_URL sets the address") from e

    def _json(self, op: str, cls: Any, **kw: Any) -> Any:
        _, payload, _ = self._request(op, **kw)
        return _codec.decode(cls, json.loads(payload.decode("utf-8")))

    @staticmethod
    def _run_wait(timeout: Optional[float]) -> float:
        return (timeout + RUN_MARGIN) if timeout else RUN_TIMEOUT_UNKNOWN

    # --- runs ----------------------------------------------------------------------------

    def run(self, req: RunRequest) -> Result:
        """Run code once in a fresh sandbox (``POST /v1/run``)."""
        res = self._json("run", Result, body=req, timeout=self._run_wait(req.timeout))
        return res._bind(self)

    def run_stream(self, req: RunRequest, on_event: Optional[Callable[[StreamEvent], None]] = None) -> Result:
        """Run code once, streamed (``POST /v1/run`` with ``Accept: application/x-ndjson``).

        ``on_event`` is called, in this thread and in order, with each
        :class:`~agentbox.models.StreamEvent` as the daemon sends it: stdout and stderr chunks as
        the code prints them, outputs, artifacts, dropped markers. Returns the final result, or
        raises the error, as :meth:`run` does.
        """
        return self._stream("run", req, on_event)

    def run_in_session_stream(self, id: str, req: RunRequest,
                              on_event: Optional[Callable[[StreamEvent], None]] = None) -> Result:
        """Run code in a session's interpreter, streamed as :meth:`run_stream` is."""
        return self._stream("runInSession", req, on_event, id=id)

    def _stream(self, op: str, req: Any, on_event: Optional[Callable[[StreamEvent], None]],
                id: str = "") -> Any:
        method, path = route(op, id=id)
        url = self.url + path
        headers = {"User-Agent": f"agentbox-python/{__version__}", "Accept": "application/x-ndjson",
                   "Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = "Bearer " + self.api_key
        data = json.dumps(_codec.encode(req)).encode("utf-8")
        hreq = urllib.request.Request(url, data=data, headers=headers, method=method)
        failed: Optional[Exception] = None
        try:
            # The timeout bounds each read: a run that prints nothing for a while is still within it.
            with self._opener.open(hreq, timeout=self._run_wait(req.timeout)) as resp:
                rid = resp.headers.get("X-Request-Id", "")
                if resp.headers.get("Content-Type", "").startswith("application/json"):
                    # A daemon that does not stream answered with the whole result.
                    doc = json.loads(resp.read().decode("utf-8"))
                    if op == "runCommand":
                        return _codec.decode(Command, doc)
                    return _codec.decode(Result, doc)._bind(self)
                for line in resp:
                    if not line.strip():
                        continue
                    ev = _codec.decode(StreamEvent, json.loads(line.decode("utf-8")))
                    if ev.type == "result" and ev.result is not None:
                        return ev.result._bind(self)
                    if ev.type == "exit" and ev.command is not None:
                        return ev.command
                    if ev.type == "error":
                        code = ev.error.code if ev.error else "internal"
                        body = json.dumps({"error": _codec.encode(ev.error),
                                           "result": _codec.encode(ev.result) if ev.result else None}).encode("utf-8")
                        # Raised outside the try: agentbox.TimeoutError is an OSError too.
                        failed = from_response(STATUS_OF_CODE.get(code, 500), body, rid, self)
                        break
                    if ev.artifact is not None:
                        ev.artifact._client = self
                    if on_event is not None:
                        on_event(ev)
        except urllib.error.HTTPError as e:
            status, payload, rid = e.code, e.read(), e.headers.get("X-Request-Id", "")
            e.close()
            raise from_response(status, payload, rid, self) from None
        except (urllib.error.URLError, HTTPException, OSError, socket.timeout) as e:
            reason = getattr(e, "reason", e)
            raise DaemonUnreachable(None, f"{method} {url}: {reason}",
                                    hint="is `agentbox serve` running there? AGENTBOX_URL sets the address") from e
        if failed is not None:
            raise failed
        raise DaemonUnreachable(None, f"{method} {url}: the stream ended without a result",
                                hint="the daemon stopped or the connection was cut; run the code again")

    # --- commands in sessions --------------------------------------------------------------

    def run_command(self, id: str, req: CommandRequest,
                    on_event: Optional[Callable[[StreamEvent], None]] = None) -> Command:
        """Run a command in heavy session ``id`` (``POST /v1/sessions/{id}/commands``).

        In the foreground it returns the ended :class:`~agentbox.models.Command`; with
        ``on_event`` its stdout and stderr stream to it as they come. With ``req.background`` it
        returns at once, the command running.
        """
        wait = self._run_wait(req.timeout)
        if on_event is not None and not req.background:
            return self._stream("runCommand", req, on_event, id=id)
        ok = (202,) if req.background else (200,)
        _, payload, _ = self._request("runCommand", id=id, body=req, ok=ok, timeout=wait)
        return _codec.decode(Command, json.loads(payload.decode("utf-8")))

    def commands(self, id: str) -> List[Command]:
        """The commands session ``id`` keeps, oldest first, with their output so far."""
        return self._json("listCommands", CommandList, id=id).commands

    def command(self, id: str, cid: str) -> Command:
        """Command ``cid`` of session ``id``: its status and output so far."""
        return self._json("getCommand", Command, id=id, cid=cid)

    def kill_command(self, id: str, cid: str) -> Command:
        """Kill command ``cid`` of session ``id``; returns it as it ended."""
        return self._json("killCommand", Command, id=id, cid=cid)

    def route(self, req: RunRequest) -> Routing:
        """Ask where the daemon would run ``req``, without running it (``POST /v1/route``).

        Raises :class:`~agentbox.NotFound` on a daemon that does not offer the route.
        """
        return self._json("route", Routing, body=req)

    def artifact(self, id: str) -> Tuple[bytes, str]:
        """Download an artifact: its bytes and media type (``GET /v1/artifacts/{id}``)."""
        _, payload, ctype = self._request("getArtifact", id=id)
        return payload, ctype

    # --- sessions ------------------------------------------------------------------------

    def create_session(self, req: Optional[CreateSessionRequest] = None) -> Session:
        """Start a stateful session (``POST /v1/sessions``)."""
        return self._json("createSession", Session, body=req or CreateSessionRequest(), ok=(201,),
                          timeout=max(self.timeout, 120.0))

    def get_session(self, id: str) -> Session:
        return self._json("getSession", Session, id=id)

    def list_sessions(self) -> List[Session]:
        """Open sessions, oldest first."""
        return self._json("listSessions", SessionList).sessions

    def close_session(self, id: str, keep: bool = False) -> Optional[Session]:
        """Close a session (``DELETE /v1/sessions/{id}``); a run in progress is stopped.

        With ``keep=True`` the daemon writes a durable snapshot first and keeps the session's
        state and steps until the returned session's ``kept_until``: :meth:`resume` (or a run)
        brings it back, :meth:`fork` starts a new session from any of its steps."""
        if keep:
            return self._json("closeSession", Session, id=id, query={"keep": "true"}, timeout=max(self.timeout, 120.0))
        self._request("closeSession", id=id, ok=(204,))
        return None

    def run_in_session(self, id: str, req: RunRequest) -> Result:
        """Run code in a session's interpreter (``POST /v1/sessions/{id}/run``)."""
        res = self._json("runInSession", Result, id=id, body=req, timeout=self._run_wait(req.timeout))
        return res._bind(self)

    # --- time travel ---------------------------------------------------------------------

    def steps(self, id: str) -> StepList:
        """A session's steps, in the order they ran, and its head (``GET /v1/sessions/{id}/steps``)."""
        return self._json("listSteps", StepList, id=id)

    def step(self, id: str, step: str) -> Step:
        return self._json("getStep", Step, id=id, step=step)

    def inspect_step(self, id: str, step: str, context: Optional[str] = None) -> StepInspection:
        """The variables and files a step held, read in a throwaway copy of it; ``context``
        names one of the session's code contexts (default the main one)."""
        return self._json("inspectStep", StepInspection, id=id, step=step,
                          query={"context": context} if context else None, timeout=max(self.timeout, 60.0))

    def diff_steps(self, id: str, step: str, base: Optional[str] = None,
                   context: Optional[str] = None) -> StepDiff:
        """What changed from ``base`` (default the step's parent) to ``step``; ``context`` names the
        code context whose variables are compared (default the main one)."""
        query = {k: v for k, v in (("base", base), ("context", context)) if v}
        return self._json("diffSteps", StepDiff, id=id, step=step, query=query or None,
                          timeout=max(self.timeout, 60.0))

    def read_step_file(self, id: str, step: str, path: str) -> bytes:
        """A file as the session's step held it, read in a throwaway copy of the step (at most 8 MiB)."""
        _, payload, _ = self._request("readStepFile", id=id, step=step, query={"path": path},
                                      timeout=max(self.timeout, 60.0))
        return payload

    def rewind(self, id: str, step: str) -> Session:
        """Make a session's state that of one of its steps (``POST /v1/sessions/{id}/rewind``)."""
        return self._json("rewindSession", Session, id=id, body=StepRequest(step=step))

    def fork(self, id: str, step: str) -> Session:
        """Start a new session from one of a session's steps (``POST /v1/sessions/{id}/fork``)."""
        return self._json("forkSession", Session, id=id, body=StepRequest(step=step), ok=(201,),
                          timeout=max(self.timeout, 120.0))

    def pause(self, id: str) -> Session:
        """Write a session's state to disk and free its sandbox (``POST /v1/sessions/{id}/pause``)."""
        return self._json("pauseSession", Session, id=id, timeout=max(self.timeout, 120.0))

    def resume(self, id: str) -> Session:
        """Bring a paused session back ahead of its next run (``POST /v1/sessions/{id}/resume``)."""
        return self._json("resumeSession", Session, id=id, timeout=max(self.timeout, 120.0))

    # --- session files (heavy sessions) --------------------------------------------------

    def list_files(self, id: str, path: str = "/home/user") -> List[FileInfo]:
        """Everything under ``path`` in a session, recursively, sorted by path."""
        return self._json("listFiles", FileList, id=id, query={"path": path}).files

    def read_file(self, id: str, path: str) -> bytes:
        _, payload, _ = self._request("readFile", id=id, query={"path": path})
        return payload

    def write_file(self, id: str, path: str, data: bytes) -> None:
        """Upload ``data`` to ``path``, creating parent directories and replacing a file."""
        self._request("writeFile", id=id, query={"path": path}, raw=bytes(data), ok=(204,))

    def remove_file(self, id: str, path: str) -> None:
        """Remove a file, or a directory with everything under it."""
        self._request("removeFile", id=id, query={"path": path}, ok=(204,))

    # --- egress (sessions with network) ---------------------------------------------------

    def set_intent(self, id: str, name: str, ttl: Optional[float] = None) -> Intent:
        """Make ``name`` the session's current intent for ``ttl`` seconds (None: its maximum).

        The intent opens the egress rules the session's profile names for it, until it expires
        or is cleared.
        """
        return self._json("setIntent", Intent, id=id, body=SetIntentRequest(name=name, ttl=ttl))

    def clear_intent(self, id: str) -> None:
        """End the session's current intent."""
        self._request("clearIntent", id=id, ok=(204,))

    def get_intent(self, id: str) -> Intent:
        """The session's current intent (``name`` "" when none)."""
        return self._json("getIntent", Intent, id=id)

    def reload_egress_policy(self) -> List[str]:
        """Read the daemon's egress profiles again; returns their names."""
        return self._json("reloadEgressPolicy", ReloadResult).profiles

    # --- operations ----------------------------------------------------------------------

    # --- volumes ---------------------------------------------------------------------------

    def volumes(self) -> List[Volume]:
        """The caller's tenant's volumes, by name."""
        return self._json("listVolumes", VolumeList).volumes

    def create_volume(self, name: str, quota_bytes: Optional[int] = None) -> Volume:
        """Make a named volume of ``quota_bytes`` (default the server's, 256 MiB). Mount it in a
        heavy session with ``SandboxConfig(volumes={name: "/mnt/data"})``."""
        return self._json("createVolume", Volume, body=CreateVolumeRequest(name=name, quota_bytes=quota_bytes), ok=(201,))

    def get_volume(self, name: str) -> Volume:
        return self._json("getVolume", Volume, name=name)

    def delete_volume(self, name: str) -> None:
        """Remove a volume and its files (Conflict while a session mounts it)."""
        self._request("deleteVolume", name=name, ok=(204,))

    def read_volume_file(self, name: str, path: str) -> bytes:
        """A file of a volume, without a session."""
        _, payload, _ = self._request("readVolumeFile", name=name, fpath=path)
        return payload

    def write_volume_file(self, name: str, path: str, data: bytes) -> None:
        """Write a file into a volume no session mounts. Past the quota: LimitExceeded, and the
        file stays as it was."""
        self._request("writeVolumeFile", name=name, fpath=path, raw=bytes(data), ok=(204,))

    def images(self) -> List[Image]:
        """The heavy tier's images, the default first, with the packages each offers."""
        return self._json("listImages", ImageList).images

    def audit(self, *, session: Optional[str] = None, kind: Optional[str] = None, decision: Optional[str] = None,
              since: Optional[_dt.datetime] = None, until: Optional[_dt.datetime] = None,
              limit: Optional[int] = None, tenant: Optional[str] = None,
              agent: Optional[str] = None) -> List[AuditRecord]:
        """Records of the daemon's audit log (``GET /v1/audit``), oldest first: the most recent
        ``limit`` (default 100, at most 1000) that match every filter given. ``kind`` "session"
        matches session.create, session.close and session.expire; ``since <= time < until``.
        A tenant's key sees its own tenant's records only.
        """
        query: Dict[str, str] = {}
        for name, v in (("session", session), ("kind", kind), ("decision", decision),
                        ("tenant", tenant), ("agent", agent)):
            if v:
                query[name] = v
        for name, t in (("since", since), ("until", until)):
            if t is not None:
                query[name] = _codec.format_time(t)
        if limit is not None:
            query["limit"] = str(limit)
        return self._json("queryAudit", AuditList, query=query).records

    # --- tenant keys (a key with the admin scope) -----------------------------------------

    def keys(self, tenant: Optional[str] = None) -> List[Key]:
        """The tenant keys (``GET /v1/keys``), in the order they were made, revoked and expired
        ones too; ``tenant`` keeps one tenant's. Never a key itself: only its id, tenant, agent,
        scopes and times. Needs a key with the admin scope (the daemon's own key has it)."""
        return self._json("listKeys", KeyList, query={"tenant": tenant} if tenant else None).keys

    def create_key(self, tenant: str, scopes: List[str], *, agent: Optional[str] = None,
                   ttl: Union[None, float, str] = None) -> CreatedKey:
        """Make a tenant key (``POST /v1/keys``) with ``scopes`` (run, sessions, files,
        egress-intent, policy-admin, audit-read, admin) for ``agent`` (optional, for the audit
        log), living ``ttl`` (seconds or "720h"; None: it does not expire).

        The answer's ``key`` is shown this once: the daemon keeps only its hash. It works from
        the next request on. A bad tenant name or scope raises InvalidRequest saying which.
        """
        if isinstance(scopes, str):
            scopes = [s.strip() for s in scopes.split(",") if s.strip()]
        req = CreateKeyRequest(tenant=tenant, agent=agent or None, scopes=list(scopes), ttl=parse_duration(ttl))
        return self._json("createKey", CreatedKey, body=req, ok=(201,))

    def rotate_key(self, id: str) -> CreatedKey:
        """Revoke key ``id`` and make a new one with its tenant, agent, scopes and lifetime
        (``POST /v1/keys/{id}/rotate``). The new key is shown this once."""
        return self._json("rotateKey", CreatedKey, id=id, ok=(201,))

    def revoke_key(self, id: str) -> None:
        """Revoke key ``id`` (``DELETE /v1/keys/{id}``): the daemon refuses it from its next
        request on. Raises NotFound for an unknown id."""
        self._request("revokeKey", id=id, ok=(204,))

    # --- hosted MCP servers ---------------------------------------------------------------

    def mcp_servers(self) -> List[MCPServer]:
        """The hosted MCP servers, by name (``GET /v1/mcp/servers``; a key with the admin scope)."""
        return self._json("listMCPServers", MCPServerList).servers

    def mcp_session(self, server: str, *, timeout: Optional[float] = None) -> MCPSession:
        """An initialized MCP exchange with hosted server ``server`` at ``/mcp/servers/NAME``, for
        several requests after one ``initialize``. Needs a key with the run scope."""
        return MCPSession(self, server, timeout=timeout).initialize()

    def mcp_list_tools(self, server: str) -> List[MCPTool]:
        """The tools of hosted server ``server`` (MCP ``tools/list`` at ``/mcp/servers/NAME``).
        The gateway starts the server on first use and refuses its definitions while a change
        awaits ``agentbox mcp approve``: that is an :class:`~agentbox.mcp.MCPError`."""
        s = self.mcp_session(server)
        try:
            return s.list_tools()
        finally:
            s.close()

    def mcp_call(self, server: str, tool: str, arguments: Optional[Dict[str, Any]] = None, *,
                 timeout: Optional[float] = None) -> MCPToolResult:
        """Call ``tool`` of hosted server ``server`` with ``arguments`` (MCP ``tools/call`` at
        ``/mcp/servers/NAME``), every call governed by the gateway (pinning, allow and deny lists,
        DLP both ways, prompt scanning, an audit record). Each call initializes a session of its
        own and ends it. A tool error, and a call the gateway refused, is a result with
        ``is_error`` set and the reason in ``text``; a protocol error raises MCPError."""
        s = self.mcp_session(server, timeout=timeout)
        try:
            return s.call(tool, arguments)
        finally:
            s.close()

    def mcp(self, server: str, *, timeout: Optional[float] = None) -> HostedMCP:
        """Hosted (or remote) MCP server ``server`` as an object: ``list_tools()``,
        ``call(tool, args)``, ``list_resources()``, ``read_resource(uri)``, ``list_prompts()``,
        ``get_prompt(name, args)``, through ``/mcp/servers/NAME``. Nothing is asked of the daemon
        until the first of those. Needs a key with the run scope."""
        if not server:
            raise ValueError("agentbox: an MCP server's name is needed")
        return HostedMCP(self, server, timeout=timeout)

    #: The same as :meth:`mcp_list_tools`.
    list_tools = mcp_list_tools

    def health(self) -> Health:
        """The daemon's version and each runtime's state. Needs no key; a 503 still returns Health."""
        return self._json("health", Health, ok=(200, 503))
