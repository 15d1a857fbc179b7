"""Sandbox: run code, keep state between runs, move files in and out."""

from __future__ import annotations

import logging
import threading
import weakref
from typing import Dict, Iterable, List, Optional, Union

from .client import Client
from .config import SandboxConfig, parse_duration
from .errors import AgentboxError, NotFound
from .models import CreateSessionRequest, FileInfo, InputFile, Intent, Result, Routing, RunRequest, Session

log = logging.getLogger("agentbox")

FilesArg = Union[None, Dict[str, Union[bytes, str]], Iterable[InputFile]]


def _input_files(files: FilesArg) -> Optional[List[InputFile]]:
    if not files:
        return None
    if isinstance(files, dict):
        return [InputFile(path=p, content=c.encode("utf-8") if isinstance(c, str) else bytes(c))
                for p, c in files.items()]
    return list(files)


class _SessionHandle:
    """The session a Sandbox holds, apart from the Sandbox so that a finalizer can close it."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.session: Optional[Session] = None

    def close(self) -> None:
        s, self.session = self.session, None
        if s is None:
            return
        try:
            self.client.close_session(s.id)
        except NotFound:
            pass  # expired or closed by the daemon: what close wanted

    def close_quietly(self) -> None:
        """Used at garbage collection and interpreter exit, where nobody could catch an error."""
        try:
            self.close()
        except Exception:  # noqa: BLE001
            pass


class Sandbox:
    """A place to run untrusted Python on an agentbox daemon.

    By default a Sandbox is a **session**: one interpreter that keeps variables, imports and
    files from one :meth:`run` to the next. The session is started by the first run (or the
    first use of :attr:`files`) and ended by :meth:`close`, by leaving a ``with`` block, when the
    Sandbox is garbage-collected or the program exits, or by the daemon after 10 idle minutes.
    ``stateful=False`` makes every run a fresh one-shot sandbox instead (``POST /v1/run``).

    **Which tier.** With ``runtime="auto"`` (the default), a one-shot run is routed by the daemon
    from its imports. A session's tier is fixed when it starts, so the Sandbox asks the daemon
    where the *first* code would go (``POST /v1/route``) and starts the session there: plain
    Python goes to nano, ``import pandas`` to heavy. If later runs need more than the first one,
    say so up front with ``packages=[...]`` or ``runtime="heavy"``. A daemon without
    ``/v1/route`` starts auto sessions on nano (its default for sessions) unless packages or an
    image are given. Using :attr:`files` before any run starts a heavy session, since session
    files are a heavy-tier feature.

    Args:
        config: What to ask of the daemon: runtime, packages, timeout, memory, env, image.
        url: The daemon. Default AGENTBOX_URL, else http://127.0.0.1:8420.
        api_key: Default AGENTBOX_API_KEY, else the daemon's api_key file (see :class:`Client`).
        stateful: False for one-shot runs that share nothing.
        client: A :class:`Client` to use instead of url and api_key.

    Example::

        from agentbox import Sandbox
        with Sandbox() as box:
            box.run("x = 21")
            print(box.run("print(x * 2)").stdout)  # 42
    """

    def __init__(self, config: Optional[SandboxConfig] = None, url: Optional[str] = None,
                 api_key: Optional[str] = None, *, stateful: bool = True, client: Optional[Client] = None) -> None:
        self.config = config if config is not None else SandboxConfig()
        self.client = client if client is not None else Client(url, api_key)
        self.stateful = stateful
        self.files = Files(self)
        self._lock = threading.Lock()
        self._handle = _SessionHandle(self.client)
        self._routing: Optional[Routing] = None
        self._closed = False
        # Close the session when the Sandbox is collected or the interpreter exits, so that a
        # script that never calls close() does not hold one of the daemon's sessions for 10 minutes.
        self._finalizer = weakref.finalize(self, _SessionHandle.close_quietly, self._handle)

    def __repr__(self) -> str:
        s = self._handle.session
        where = f"session {s.id} on {s.runtime}" if s else ("closed" if self._closed else "no session yet")
        return f"<Sandbox {self.client.url} {where}>"

    # --- state ---------------------------------------------------------------------------

    @property
    def session(self) -> Optional[Session]:
        """The session as the daemon described it when it started, or None before the first run."""
        return self._handle.session

    @property
    def session_id(self) -> Optional[str]:
        s = self._handle.session
        return s.id if s else None

    @property
    def runtime(self) -> Optional[str]:
        """The session's tier ("nano" or "heavy"), or None while there is no session."""
        s = self._handle.session
        return s.runtime if s else None

    @property
    def routing(self) -> Optional[Routing]:
        """Why the session runs on its tier: the daemon's routing of the first code, if it was asked."""
        return self._routing

    # --- runs ----------------------------------------------------------------------------

    def run(self, code: str, *, timeout: Union[None, float, str] = None, env: Optional[Dict[str, str]] = None,
            files: FilesArg = None) -> Result:
        """Run ``code`` and return its :class:`~agentbox.models.Result`.

        An exception in the code is in ``result.error`` (``result.raise_for_error()`` raises
        it); the daemon's refusals and the limits raise :class:`~agentbox.AgentboxError`
        subclasses, e.g. :class:`agentbox.TimeoutError` with the output so far in ``.result``.

        Args:
            code: Python source.
            timeout: Seconds (or "30s") for this run; default the config's, else the server's.
            env: Environment variables for this run, over the config's.
            files: Files to write before the code starts: {path: bytes or str} or InputFiles.
                Relative paths land in /home/user, where the code starts.
        """
        self._check_open()
        t = parse_duration(timeout) if timeout is not None else self.config.timeout_seconds
        if not self.stateful:
            cfg = self.config
            merged = {**cfg.env, **(env or {})}
            return self.client.run(RunRequest(
                code=code, runtime=cfg.runtime, timeout=t, memory_mb=cfg.memory_mb, env=merged or None,
                files=_input_files(files), packages=cfg.packages or None, image=cfg.image,
                network=cfg.network or None, egress_profile=cfg.egress_profile))
        created = self._ensure_session(first_code=code)
        sid = self._handle.session.id  # type: ignore[union-attr]
        try:
            res = self.client.run_in_session(sid, RunRequest(code=code, timeout=t, env=env or None,
                                                              files=_input_files(files)))
        except NotFound as e:
            self._lost_session(sid, e)
            raise
        except AgentboxError as e:
            if created and e.result is not None:
                self._annotate(e.result)
            raise
        if created:
            self._annotate(res)
        return res

    def _annotate(self, res: Result) -> None:
        """The run that started the session went to its tier for the reasons of that choice."""
        if self._routing is not None:
            res.routing.reasons = list(self._routing.reasons) + list(res.routing.reasons)

    def _lost_session(self, sid: str, e: NotFound) -> None:
        with self._lock:
            s = self._handle.session
            if s is not None and s.id == sid:
                self._handle.session = None
        e.hint = ("this Sandbox's session ended (closed, idle for too long, or stopped after a run ran past its "
                  "timeout) and its state is gone; the next run starts a new session")

    def _ensure_session(self, first_code: Optional[str] = None, for_files: bool = False) -> bool:
        """Start the session if there is none; say whether this call started it."""
        with self._lock:
            self._check_open()
            if self._handle.session is not None:
                return False
            cfg = self.config
            runtime = cfg.runtime
            routing: Optional[Routing] = None
            if runtime == "auto" and not cfg.wants_image:
                if first_code is not None:
                    routing = self._route(first_code)
                    if routing is not None:
                        runtime = routing.tier
                elif for_files:
                    runtime = "heavy"
                    routing = Routing(tier="heavy", reasons=["heavy: session files are used before any run"])
            self._handle.session = self.client.create_session(CreateSessionRequest(
                runtime=runtime, timeout=cfg.timeout_seconds, memory_mb=cfg.memory_mb, env=cfg.env or None,
                packages=cfg.packages or None, image=cfg.image, network=cfg.network or None,
                egress_profile=cfg.egress_profile))
            self._routing = routing
            log.debug("agentbox: session %s on %s", self._handle.session.id, self._handle.session.runtime)
            return True

    _warned_no_route = False

    def _route(self, code: str) -> Optional[Routing]:
        try:
            return self.client.route(RunRequest(code=code, runtime="auto"))
        except NotFound:
            if not Sandbox._warned_no_route:
                Sandbox._warned_no_route = True
                log.warning("agentbox: the daemon at %s has no POST /v1/route; auto sessions start on its default "
                            "tier (nano) unless packages or an image are given", self.client.url)
            return None

    # --- egress intents ------------------------------------------------------------------

    def set_intent(self, name: str, ttl: Union[None, float, str] = None) -> Intent:
        """Declare what the agent is about to do: the intent opens the egress rules the session's
        profile names for it (e.g. "weather-lookup" opens the weather API), for ``ttl`` (seconds
        or "10m"; default the intent's maximum) or until :meth:`clear_intent`. Needs
        ``SandboxConfig(network=True)``.
        """
        self._ensure_session(first_code=None)
        return self.client.set_intent(self._handle.session.id, name, parse_duration(ttl))  # type: ignore[union-attr]

    def clear_intent(self) -> None:
        """End the current intent: its rules close at once."""
        self._ensure_session(first_code=None)
        self.client.clear_intent(self._handle.session.id)  # type: ignore[union-attr]

    # --- lifecycle -----------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError("agentbox: this Sandbox is closed")

    def close(self) -> None:
        """End the session (if one started) and free what it holds on the daemon. Idempotent."""
        self._closed = True
        with self._lock:
            self._handle.close()

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
            return
        # Do not let a failing close hide the exception that ended the block.
        self._closed = True
        self._handle.close_quietly()


class Files:
    """The files of a Sandbox's session (``box.files``): heavy sessions only.

    Paths are absolute inside the sandbox or relative to /home/user, where the code starts;
    ".." is refused. A nano session answers InvalidRequest: give nano runs their files with
    ``run(code, files={...})`` instead.
    """

    def __init__(self, box: Sandbox) -> None:
        self._box = box

    def _sid(self) -> str:
        box = self._box
        if not box.stateful:
            raise ValueError("agentbox: files need a session; this Sandbox is stateful=False")
        box._ensure_session(for_files=True)
        return box._handle.session.id  # type: ignore[union-attr]

    def write(self, path: str, data: Union[bytes, str]) -> None:
        """Write ``data`` (str is encoded as UTF-8) to ``path``, creating parent directories."""
        if isinstance(data, str):
            data = data.encode("utf-8")
        self._box.client.write_file(self._sid(), path, data)

    def read(self, path: str) -> bytes:
        """The content of the file at ``path``."""
        return self._box.client.read_file(self._sid(), path)

    def read_text(self, path: str, encoding: str = "utf-8") -> str:
        return self.read(path).decode(encoding)

    def list(self, path: str = "/home/user") -> List[FileInfo]:
        """Every file and directory under ``path``, recursively, sorted by path."""
        return self._box.client.list_files(self._sid(), path)

    def remove(self, path: str) -> None:
        """Remove a file, or a directory with everything under it."""
        self._box.client.remove_file(self._sid(), path)
