"""Sandbox: run code, keep state between runs, move files in and out."""

from __future__ import annotations

import logging
import threading
import weakref
from typing import Callable, Dict, Iterable, List, Optional, TypeVar, Union

from .client import Client
from .config import SandboxConfig, parse_duration
from .errors import AgentboxError, NotFound
from .mcp import HostedMCP
from .models import (Notice, Artifact, Command, CommandRequest, CreateSessionRequest, FileInfo, InputFile, Intent, Result, Routing, RunRequest, Session, Step,
                     Output, StepDiff, StepInspection, StreamEvent)

log = logging.getLogger("agentbox")

FilesArg = Union[None, Dict[str, Union[bytes, str]], Iterable[InputFile]]
T = TypeVar("T")


def _input_files(files: FilesArg) -> Optional[List[InputFile]]:
    if not files:
        return None
    if isinstance(files, dict):
        return [InputFile(path=p, content=c.encode("utf-8") if isinstance(c, str) else bytes(c))
                for p, c in files.items()]
    return list(files)


def _seconds_text(secs: float) -> str:
    """A duration for people, as the daemon's config writes it: 600 -> "10m", 90 -> "1m30s"."""
    total = int(round(secs))
    h, rest = divmod(total, 3600)
    m, s = divmod(rest, 60)
    return "".join(f"{v}{u}" for v, u in ((h, "h"), (m, "m"), (s, "s")) if v) or f"{secs:g}s"


def _follow(s: Optional[Session], sid: str, res: Result, err: Optional[AgentboxError] = None) -> bool:
    """Whether ``res`` is a run of ``s``, the sandbox's session (``sid`` its id); if so and the
    run moved the session to another tier, ``s.runtime`` follows, the move is logged and ``err``'s
    hint says so. Shared by Sandbox and AsyncSandbox, which then keep ``res.routing``."""
    if s is None or s.id != sid or not res.runtime:
        return False
    if res.notice is not None:
        n = res.notice
        log.warning("agentbox: session %s moved from node %s to node %s and resumed from step %s (%s)",
                    sid, n.from_node or "?", n.to_node or "?", n.step or "?", n.reason or n.kind)
    if res.runtime == s.runtime:
        return True
    before, s.runtime = s.runtime, res.runtime
    why = "; ".join(res.routing.reasons) or "the daemon gave no reason"
    log.info("agentbox: session %s moved from %s to %s: %s", sid, before, res.runtime, why)
    if err is not None:
        moved = f"the session moved from {before} to {res.runtime} for this run ({why})"
        err.hint = f"{err.hint}; {moved}" if err.hint else moved
    return True


def _ended_hint(session_id: str, idle_timeout: float = 0.0) -> str:
    """The hint of a NotFound for a session the SDK thought open: why it may have ended, and what now.

    The daemon cannot say which of these happened (a closed session leaves nothing behind), so
    the hint names them all; ``idle_timeout`` is the session's own, when the SDK knows it.
    """
    idle = f"idle for {_seconds_text(idle_timeout)}" if idle_timeout > 0 else "idle past its idle timeout"
    return (f"session {session_id} has ended (closed, {idle}, or the daemon restarted) and its state is gone; "
            "create a new Sandbox")


#: Where the code starts in a sandbox, and what relative paths are relative to.
WORKDIR = "/home/user"


def _as_written(path: str, files: List[FileInfo]) -> List[FileInfo]:
    """The daemon lists absolute paths; under a relative ``path`` they become relative to WORKDIR,
    the way the caller writes them."""
    if path.startswith("/"):
        return files
    for f in files:
        if f.path == WORKDIR:
            f.path = "."
        elif f.path.startswith(WORKDIR + "/"):
            f.path = f.path[len(WORKDIR) + 1:]
    return files


class _SessionHandle:
    """The session a Sandbox holds, apart from the Sandbox so that a finalizer can close it.

    ``owned`` is False for a session this Sandbox attached to (:meth:`Sandbox.connect`): garbage
    collection and interpreter exit leave such a session open for whoever else uses it.
    """

    def __init__(self, client: Client) -> None:
        self.client = client
        self.session: Optional[Session] = None
        self.owned = True

    def close(self, keep: bool = False) -> Optional[Session]:
        s, self.session = self.session, None
        if s is None:
            return None
        try:
            return self.client.close_session(s.id, keep=keep)
        except NotFound:
            if keep:
                raise  # nothing was kept: the caller must know
            return None  # expired or closed by the daemon: what close wanted

    def close_quietly(self) -> None:
        """Used at garbage collection and interpreter exit, where nobody could catch an error."""
        if not self.owned:
            return
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
    :meth:`connect` attaches to a session another Sandbox (in this process or another) started,
    and :meth:`detach` hands one over.

    **Which tier.** With ``runtime="auto"`` (the default) and no packages, image or network, the
    session is created with runtime ``auto``: the daemon starts it on nano and moves it to heavy,
    with its state, when a later run needs what nano lacks (``import pandas`` after plain
    Python), saying so in the run's routing reasons. :attr:`runtime` is the tier of the latest
    run. An explicit ``runtime="nano"`` or ``"heavy"``, or ``packages``, an ``image`` or
    ``network`` (which mean heavy), fix the tier for the session's life. Using :attr:`files`
    before any run starts a heavy session, since session files are a heavy-tier feature.
    A one-shot run is routed by the daemon from its imports.

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
        self.commands = Commands(self)
        self._lock = threading.Lock()
        self._handle = _SessionHandle(self.client)
        self._routing: Optional[Routing] = None
        self._notices: List[Notice] = []
        self._closed = False
        # Close the session when the Sandbox is collected or the interpreter exits, so that a
        # script that never calls close() does not hold one of the daemon's sessions for 10 minutes.
        self._finalizer = weakref.finalize(self, _SessionHandle.close_quietly, self._handle)

    @classmethod
    def connect(cls, session_id: str, url: Optional[str] = None, api_key: Optional[str] = None, *,
                config: Optional[SandboxConfig] = None, client: Optional[Client] = None) -> "Sandbox":
        """A Sandbox attached to an open session, by its id: to continue, from another process (or
        another object), a session that a Sandbox started, with its variables, imports and files.

        It asks the daemon for the session (``GET /v1/sessions/{id}``), so a wrong or ended id
        fails here, with :class:`~agentbox.NotFound`, rather than at the first run.

        The session is not this Sandbox's: garbage collection and interpreter exit leave it open.
        :meth:`close` (or leaving a ``with`` block) ends it for everyone, as the daemon has one
        session per id; :meth:`detach` lets go of it without ending it. The Sandbox that started
        the session closes it when it is collected or its program exits, unless it was detached
        first: ``sid = box.detach()`` in the first process, ``Sandbox.connect(sid)`` in the next.

        Args:
            session_id: The session's id (:attr:`session_id`, e.g. "sb_1f2e3d4c5b6a7980").
            url, api_key, client: The daemon, as for :class:`Sandbox`.
            config: Used if the session is lost and this Sandbox starts a new one; default
                ``SandboxConfig()``. The session's own settings were fixed when it was created.
        """
        if not isinstance(session_id, str) or not session_id:
            raise ValueError("agentbox: connect needs the id of an open session, e.g. box.session_id")
        box = cls(config, url, api_key, client=client)
        box._handle.owned = False
        try:
            s = box.client.get_session(session_id)
        except NotFound as e:
            box._closed = True
            e.hint = (f"no open session {session_id} at {box.client.url}: the id is wrong, or the session has ended "
                      "(closed, idle past its idle timeout, or the daemon restarted); create a new Sandbox")
            raise
        box._handle.session = s
        log.debug("agentbox: connected to session %s on %s", s.id, s.runtime)
        return box

    def __repr__(self) -> str:
        s = self._handle.session
        where = f"session {s.id} on {s.runtime}" if s else ("closed" if self._closed else "no session yet")
        return f"<Sandbox {self.client.url} {where}>"

    # --- state ---------------------------------------------------------------------------

    @property
    def session(self) -> Optional[Session]:
        """The session as the daemon described it when it started (or when :meth:`connect`
        attached to it), its ``runtime`` kept up to date from each run; None before the first run."""
        return self._handle.session

    @property
    def session_id(self) -> Optional[str]:
        s = self._handle.session
        return s.id if s else None

    @property
    def runtime(self) -> Optional[str]:
        """The session's tier now ("nano" or "heavy"), as the latest run reported it; None while
        there is no session. An auto session can move from nano to heavy."""
        s = self._handle.session
        return s.runtime if s else None

    @property
    def routing(self) -> Optional[Routing]:
        """Where the latest run of the session went and why (its ``result.routing``), or None."""
        return self._routing

    # --- runs ----------------------------------------------------------------------------

    def run(self, code: str, *, timeout: Union[None, float, str] = None, env: Optional[Dict[str, str]] = None,
            files: FilesArg = None, on_stdout: Optional[Callable[[str], None]] = None,
            on_stderr: Optional[Callable[[str], None]] = None, on_result: Optional[Callable[[Output], None]] = None,
            on_artifact: Optional[Callable[[Artifact], None]] = None) -> Result:
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
            on_stdout, on_stderr: Called with each chunk of the code's output as it prints it
                (whole lines as a rule), in this thread, while the run goes on. Giving any
                ``on_`` callback streams the run; the result still has all of the output.
            on_result: Called with each rich value the run displayed (an
                :class:`~agentbox.models.Output`, e.g. a DataFrame with text and HTML).
            on_artifact: Called with each artifact (a figure) the run made.
        """
        self._check_open()
        on_event = _event_handler(on_stdout, on_stderr, on_result, on_artifact)
        t = parse_duration(timeout) if timeout is not None else self.config.timeout_seconds
        if not self.stateful:
            cfg = self.config
            if cfg.volumes:
                raise ValueError("agentbox: volumes are mounted into a session; this Sandbox is stateful=False")
            merged = {**cfg.env, **(env or {})}
            one = RunRequest(
                code=code, runtime=cfg.runtime, timeout=t, memory_mb=cfg.memory_mb, env=merged or None,
                files=_input_files(files), packages=cfg.packages or None, image=cfg.image,
                network=cfg.network or None, egress_profile=cfg.egress_profile)
            if on_event is not None:
                return self.client.run_stream(one, on_event)
            return self.client.run(one)
        self._ensure_session()
        sid = self._handle.session.id  # type: ignore[union-attr]
        try:
            req = RunRequest(code=code, timeout=t, env=env or None, files=_input_files(files))
            if on_event is not None:
                res = self.client.run_in_session_stream(sid, req, on_event)
            else:
                res = self.client.run_in_session(sid, req)
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
        """Keep :attr:`runtime` and :attr:`routing` up to date from a run of session ``sid``: an
        auto session moves to another tier when its code needs one, and the run says so."""
        if _follow(self._handle.session, sid, res, err):
            self._routing = res.routing
            if res.notice is not None:
                self._notices.append(res.notice)

    @property
    def notices(self) -> List[Notice]:
        """What happened to the session between runs, oldest first: a ``session_moved``
        :class:`~agentbox.models.Notice` each time its node was gone or drained and another node
        resumed it (from ``notice.step``). The run that first met it has it as ``result.notice``."""
        return list(self._notices)

    def _lost_session(self, sid: str, e: NotFound) -> None:
        """The daemon no longer has session ``sid``: forget it (the next run starts a new one) and
        say in the error why that happens."""
        idle = 0.0
        with self._lock:
            s = self._handle.session
            if s is not None and s.id == sid:
                idle = s.idle_timeout
                self._handle.session = None
                self._handle.owned = True  # a session this Sandbox starts next is its own
        e.hint = _ended_hint(sid, idle) + " (or run again: this Sandbox then starts a new, empty session)"

    def _session_call(self, call: Callable[[str], T], *, for_files: bool = False) -> T:
        """Call ``call(session_id)`` on the session (started if need be). A NotFound there may be
        the session's or a file's: the session is asked for, and if it is gone the error says so."""
        self._ensure_session(for_files=for_files)
        sid = self._handle.session.id  # type: ignore[union-attr]
        try:
            return call(sid)
        except NotFound as e:
            try:
                self.client.get_session(sid)
            except NotFound:
                self._lost_session(sid, e)
            except AgentboxError:
                pass
            raise

    def _ensure_session(self, for_files: bool = False) -> bool:
        """Start the session if there is none; say whether this call started it.

        No question is asked of the daemon first (``POST /v1/route``): an auto session follows its
        code from tier to tier, so its first code need not choose for the rest.
        """
        with self._lock:
            self._check_open()
            if self._handle.session is not None:
                return False
            cfg = self.config
            runtime = cfg.runtime
            if runtime == "auto" and not cfg.wants_image and for_files:
                runtime = "heavy"
                self._routing = Routing(tier="heavy", reasons=["heavy: session files are used before any run"])
            self._handle.session = self.client.create_session(CreateSessionRequest(
                runtime=runtime, timeout=cfg.timeout_seconds, memory_mb=cfg.memory_mb, env=cfg.env or None,
                packages=cfg.packages or None, image=cfg.image, network=cfg.network or None,
                egress_profile=cfg.egress_profile, volumes=cfg.volumes or None))
            self._handle.owned = True
            log.debug("agentbox: session %s on %s", self._handle.session.id, self._handle.session.runtime)
            return True

    # --- hosted MCP servers -------------------------------------------------------------

    def mcp(self, server: str) -> HostedMCP:
        """Hosted (or remote) MCP server ``server`` of the daemon this Sandbox talks to, with this
        Sandbox's key: ``box.mcp("memory").list_tools()``, ``.call("read_graph")``, its resources
        and prompts. The server runs in a gVisor sandbox of its own (not this one); every call
        passes the daemon's gateway (pinning, allow and deny lists, DLP, prompt scanning, audit).
        See :meth:`agentbox.Client.mcp`."""
        return self.client.mcp(server)

    # --- egress intents ------------------------------------------------------------------

    def set_intent(self, name: str, ttl: Union[None, float, str] = None) -> Intent:
        """Declare what the agent is about to do: the intent opens the egress rules the session's
        profile names for it (e.g. "weather-lookup" opens the weather API), for ``ttl`` (seconds
        or "10m"; default the intent's maximum) or until :meth:`clear_intent`. Needs
        ``SandboxConfig(network=True)``.
        """
        t = parse_duration(ttl)
        return self._session_call(lambda sid: self.client.set_intent(sid, name, t))

    def clear_intent(self) -> None:
        """End the current intent: its rules close at once."""
        self._session_call(self.client.clear_intent)

    # --- time travel ---------------------------------------------------------------------

    def steps(self) -> List[Step]:
        """The session's steps (each run is one), in the order they ran. A step's ``parent`` is
        the step the session was at; after :meth:`rewind` the next run starts a branch."""
        return self._session_call(lambda sid: self.client.steps(sid).steps)

    def rewind(self, step: Union[str, Step]) -> Session:
        """Make the session's variables and files those of ``step`` (a :class:`Step` or its id);
        the next run goes on from there."""
        sid_step = step.id if isinstance(step, Step) else step
        s = self._session_call(lambda sid: self.client.rewind(sid, sid_step))
        return s

    def fork(self, step: Union[str, Step]) -> "Sandbox":
        """A new Sandbox whose session starts from ``step``; it and this one go on independently.
        The new session is the returned Sandbox's own (closed with it)."""
        sid_step = step.id if isinstance(step, Step) else step
        s = self._session_call(lambda sid: self.client.fork(sid, sid_step))
        box = Sandbox(self.config, client=self.client)
        box._handle.session, box._handle.owned = s, True
        return box

    def pause(self) -> Session:
        """Write the session's state to disk and free its sandbox; the next run (or
        :meth:`resume`) brings it back. A paused session survives a restart of the daemon."""
        return self._session_call(self.client.pause)

    def resume(self) -> Session:
        """Bring a paused session back ahead of its next run."""
        return self._session_call(self.client.resume)

    def inspect(self, step: Union[None, str, Step] = None, context: Optional[str] = None) -> StepInspection:
        """The variables and files of ``step`` (default the session's current step), read in a
        throwaway copy: the session itself is not touched. ``context`` names one of the session's
        code contexts (a run's ``context``) whose variables to show; default the main one."""
        def call(sid: str) -> StepInspection:
            st = step.id if isinstance(step, Step) else step
            if not st:
                st = self.client.steps(sid).head
            return self.client.inspect_step(sid, st, context=context)
        return self._session_call(call)

    def diff(self, step: Union[str, Step], base: Union[None, str, Step] = None,
             context: Optional[str] = None) -> StepDiff:
        """What changed in variables and files from ``base`` (default the step's parent) to
        ``step``; ``context`` names the code context whose variables to compare."""
        st = step.id if isinstance(step, Step) else step
        b = base.id if isinstance(base, Step) else base
        return self._session_call(lambda sid: self.client.diff_steps(sid, st, b, context=context))

    # --- lifecycle -----------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError("agentbox: this Sandbox is closed")

    def close(self, keep: bool = False) -> Optional[Session]:
        """End the session (if there is one) and free what it holds on the daemon. Idempotent.

        This ends a session attached with :meth:`connect` too, for every Sandbox using it; use
        :meth:`detach` to let go of a session without ending it.

        With ``keep=True`` the daemon writes a durable snapshot first and keeps the session's
        state and steps (within its retention, until the returned session's ``kept_until``), so
        that :meth:`connect` and a run, or ``client.fork``, can go on from it later.
        """
        self._closed = True
        with self._lock:
            return self._handle.close(keep=keep)

    def detach(self) -> Optional[str]:
        """Let go of the session without ending it and return its id (None if there was none), so
        that another process can continue it with :meth:`connect`. This Sandbox is closed for
        use afterwards; the session ends when someone closes it or after its idle timeout."""
        self._closed = True
        with self._lock:
            s, self._handle.session = self._handle.session, None
        return s.id if s else None

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
            return
        # Do not let a failing close hide the exception that ended the block. (Not close_quietly:
        # leaving the block ends an attached session too, as close() does.)
        self._closed = True
        try:
            self._handle.close()
        except Exception:  # noqa: BLE001
            pass


class Commands:
    """Shell commands in the Sandbox's session (``box.commands``): a heavy session, which the
    first command starts when the Sandbox has none yet (as files do).

    They run beside the session's interpreter: the same files, user, environment and way out.
    A nano session has no processes and answers :class:`~agentbox.InvalidRequest`.
    """

    def __init__(self, box: Sandbox) -> None:
        self._box = box

    def _call(self, call: Callable[[str], T]) -> T:
        box = self._box
        if not box.stateful:
            raise ValueError("agentbox: commands need a session; this Sandbox is stateful=False")
        return box._session_call(call, for_files=True)

    def run(self, cmd: Union[str, List[str]], *, cwd: Optional[str] = None, env: Optional[Dict[str, str]] = None,
            timeout: Union[None, float, str] = None, stdin: Optional[str] = None, background: bool = False,
            on_stdout: Optional[Callable[[str], None]] = None,
            on_stderr: Optional[Callable[[str], None]] = None) -> Command:
        """Run ``cmd`` (a shell line, or a list: a program and its arguments).

        Returns the :class:`~agentbox.models.Command` once it has ended (``exit_code``,
        ``stdout``, ``stderr``, ``status``); with ``background=True`` at once, running: read it
        with :meth:`get`, stop it with :meth:`kill`. ``on_stdout``/``on_stderr`` get a foreground
        command's output as it comes. A non-zero exit is not an exception.
        """
        req = CommandRequest(cwd=cwd, env=env or None, stdin=stdin, background=background or None,
                             timeout=parse_duration(timeout) if timeout is not None else None)
        if isinstance(cmd, str):
            req.cmd = cmd
        else:
            req.argv = list(cmd)
        on_event = _event_handler(on_stdout, on_stderr, None, None)
        return self._call(lambda sid: self._box.client.run_command(sid, req, on_event))

    def get(self, id: str) -> Command:
        """A command's status and output so far (also while it runs)."""
        return self._call(lambda sid: self._box.client.command(sid, id))

    def list(self) -> List[Command]:
        """The session's commands, oldest first."""
        return self._call(lambda sid: self._box.client.commands(sid))

    def kill(self, id: str) -> Command:
        """Kill a command; returns it as it ended."""
        return self._call(lambda sid: self._box.client.kill_command(sid, id))


class Files:
    """The files of a Sandbox's session (``box.files``): heavy sessions only.

    Paths are absolute inside the sandbox or relative to /home/user, where the code starts;
    ".." is refused. :meth:`list` answers in the style of its argument (relative by default). A nano session answers InvalidRequest: give nano runs their files with
    ``run(code, files={...})`` instead.
    """

    def __init__(self, box: Sandbox) -> None:
        self._box = box

    def _call(self, call: Callable[[str], T]) -> T:
        box = self._box
        if not box.stateful:
            raise ValueError("agentbox: files need a session; this Sandbox is stateful=False")
        return box._session_call(call, for_files=True)

    def write(self, path: str, data: Union[bytes, str]) -> None:
        """Write ``data`` (str is encoded as UTF-8) to ``path``, creating parent directories."""
        if isinstance(data, str):
            data = data.encode("utf-8")
        self._call(lambda sid: self._box.client.write_file(sid, path, data))

    def read(self, path: str) -> bytes:
        """The content of the file at ``path``."""
        return self._call(lambda sid: self._box.client.read_file(sid, path))

    def read_text(self, path: str, encoding: str = "utf-8") -> str:
        return self.read(path).decode(encoding)

    def list(self, path: str = ".") -> List[FileInfo]:
        """Every file and directory under ``path``, recursively, sorted by path.

        Paths come back as ``path`` is written: under a relative ``path`` (the default, ".", is
        the work directory /home/user) they are relative to /home/user, as ``write`` and ``read``
        take them ("data/in.csv"); under an absolute one they are absolute."""
        return _as_written(path, self._call(lambda sid: self._box.client.list_files(sid, path)))

    def remove(self, path: str) -> None:
        """Remove a file, or a directory with everything under it."""
        self._call(lambda sid: self._box.client.remove_file(sid, path))


def _event_handler(on_stdout: Optional[Callable[[str], None]], on_stderr: Optional[Callable[[str], None]],
                   on_result: Optional[Callable[[Output], None]],
                   on_artifact: Optional[Callable[[Artifact], None]]) -> Optional[Callable[[StreamEvent], None]]:
    """One handler of stream events for the run's callbacks, or None when there are none (the run
    is then not streamed)."""
    if on_stdout is None and on_stderr is None and on_result is None and on_artifact is None:
        return None

    def handle(ev: StreamEvent) -> None:
        if ev.type == "stdout" and on_stdout is not None:
            on_stdout(ev.text)
        elif ev.type == "stderr" and on_stderr is not None:
            on_stderr(ev.text)
        elif ev.type == "output" and ev.output is not None and on_result is not None:
            on_result(ev.output)
        elif ev.type == "artifact" and ev.artifact is not None and on_artifact is not None:
            on_artifact(ev.artifact)
        elif ev.type == "dropped" and ev.dropped is not None:
            log.warning("agentbox: the daemon dropped %d bytes of stdout and %d of stderr this client did not read "
                        "in time; the result has them", ev.dropped.stdout_bytes, ev.dropped.stderr_bytes)

    return handle
