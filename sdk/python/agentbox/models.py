"""The API's JSON types, one dataclass per schema of api/openapi.yaml.

Field names are the wire names, member for member; a Go test (api/sdk_contract_test.go) reads
:data:`SCHEMAS` and checks it against the spec, so a renamed field fails CI instead of a user's
program. Units are the wire's: timeouts in seconds, memory in MiB, limits in bytes, timings in
milliseconds; file contents are ``bytes`` here (base64 on the wire).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import pathlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Union

if TYPE_CHECKING:  # pragma: no cover
    from .client import Client  # noqa: F401

PathLike = Union[str, pathlib.PurePath]


def _clip(s: str, n: int = 500) -> str:
    """s, or its first n characters and how long it was."""
    return s if len(s) <= n else f"{s[:n]}… ({len(s)} chars)"


# --- requests ------------------------------------------------------------------------------


@dataclass
class InputFile:
    """A file written into the sandbox before the code starts."""

    #: Absolute inside the sandbox, or relative to /home/user. ".." is refused.
    path: str = ""
    content: bytes = b""


@dataclass
class Deterministic:
    """Fixes the clock and the random source so the same request gives the same output."""

    #: What the wall clock reads at the start. Default (None) 1970-01-01T00:00:00Z.
    time: Optional[_dt.datetime] = None
    seed: int = 0


@dataclass
class RunRequest:
    """Body of ``POST /v1/run`` and ``POST /v1/sessions/{id}/run``. None means the server's default."""

    code: str = ""
    #: "auto" (default), "nano" or "heavy".
    runtime: Optional[str] = None
    #: Seconds (fractions allowed).
    timeout: Optional[float] = None
    memory_mb: Optional[int] = None
    stdout_limit: Optional[int] = None
    stderr_limit: Optional[int] = None
    files_limit: Optional[int] = None
    files: Optional[List[InputFile]] = None
    env: Optional[Dict[str, str]] = None
    deterministic: Optional[Deterministic] = None
    packages: Optional[List[str]] = None
    image: Optional[str] = None
    #: A way out through the daemon's egress gateway (heavy only), under egress_profile.
    network: Optional[bool] = None
    egress_profile: Optional[str] = None


@dataclass
class CreateSessionRequest:
    """Body of ``POST /v1/sessions``."""

    runtime: Optional[str] = None
    timeout: Optional[float] = None
    memory_mb: Optional[int] = None
    stdout_limit: Optional[int] = None
    stderr_limit: Optional[int] = None
    files_limit: Optional[int] = None
    env: Optional[Dict[str, str]] = None
    packages: Optional[List[str]] = None
    image: Optional[str] = None
    network: Optional[bool] = None
    egress_profile: Optional[str] = None
    #: Volumes to mount by name at absolute paths: {"data": "/mnt/data"} ("/mnt/data:ro" read-only).
    volumes: Optional[Dict[str, str]] = None


@dataclass
class SetIntentRequest:
    """Body of ``PUT /v1/sessions/{id}/intent``."""

    #: An intent the session's egress profile defines, e.g. "weather-lookup".
    name: str = ""
    #: Seconds the intent lasts; None means the intent's maximum.
    ttl: Optional[float] = None


@dataclass
class Intent:
    """A session's current intent; ``name`` is "" when it has none."""

    name: str = ""
    expires_at: Optional[_dt.datetime] = None


@dataclass
class ReloadResult:
    """Body of ``POST /v1/egress/reload``: the egress profiles now in force."""

    profiles: List[str] = field(default_factory=list)


# --- results -------------------------------------------------------------------------------


@dataclass
class PyError:
    """An exception raised by the user's code: not an API error, the run itself succeeded."""

    #: The exception's class name, e.g. "ZeroDivisionError".
    name: str = ""
    #: str() of the exception, e.g. "division by zero".
    value: str = ""
    #: The formatted traceback, as Python prints it.
    traceback: str = ""


@dataclass
class Routing:
    """Which tier ran the code and why, written for people."""

    tier: str = ""
    reasons: List[str] = field(default_factory=list)


@dataclass
class OutputFile:
    """A file the code created or changed."""

    #: Absolute inside the sandbox.
    path: str = ""
    content: bytes = b""
    size: int = 0

    def __repr__(self) -> str:
        # The content can be megabytes: the repr says how much, not what.
        return f"OutputFile(path={self.path!r}, size={self.size})"

    def save(self, path: PathLike) -> pathlib.Path:
        """Write the file's content to ``path`` on this machine and return that path."""
        p = pathlib.Path(path)
        p.write_bytes(self.content)
        return p


@dataclass
class Artifact:
    """Something a run made besides output and files, e.g. a matplotlib figure as PNG.

    The daemon keeps the content for its artifacts_ttl (24 hours by default); :meth:`read`
    downloads it and :meth:`save` writes it to a file.
    """

    id: str = ""
    #: e.g. "figure-1.png".
    name: str = ""
    #: The media type, e.g. "image/png".
    mime: str = ""
    size: int = 0
    #: Hex-encoded sha256 of the content.
    sha256: str = ""
    #: For a matplotlib figure (heavy tier): what it shows, read from its axes, as E2B's result
    #: "chart" (type, title, axes and elements; "truncated": True when cut to its bounds).
    chart: Optional[Dict[str, Any]] = None
    # The client that downloads the content (a Client; Any so that get_type_hints need not import it).
    _client: Any = field(default=None, repr=False, compare=False)
    _content: Optional[bytes] = field(default=None, repr=False, compare=False)
    # The AsyncClient of an async run (an agentbox.aio.AsyncClient), for aread and asave.
    _aclient: Any = field(default=None, repr=False, compare=False)

    def _check(self, data: bytes) -> bytes:
        if self.sha256 and hashlib.sha256(data).hexdigest() != self.sha256.lower():
            from .errors import AgentboxError

            raise AgentboxError(None, f"artifact {self.id}: the download does not match its sha256",
                                hint="download it again; if it keeps failing, the daemon's artifact store is damaged")
        return data

    def read(self) -> bytes:
        """Download the content (``GET /v1/artifacts/{id}``) once, checking it against sha256.
        Blocking; in async code use :meth:`aread`."""
        if self._content is None:
            client = self._client
            if client is None and self._aclient is not None:
                client = self._aclient.sync
            if client is None:
                raise ValueError(f"artifact {self.id} is not bound to a client; use Client.artifact")
            data, _ = client.artifact(self.id)
            self._content = self._check(data)
        return self._content

    async def aread(self) -> bytes:
        """:meth:`read` on asyncio, for an artifact of an :class:`~agentbox.AsyncSandbox`'s run."""
        if self._content is None:
            if self._aclient is None:
                raise ValueError(f"artifact {self.id} is not bound to an AsyncClient; use read()")
            data, _ = await self._aclient.artifact(self.id)
            self._content = self._check(data)
        return self._content

    async def asave(self, path: PathLike) -> pathlib.Path:
        """:meth:`save` on asyncio (the download is async; the file is written at once)."""
        await self.aread()
        return self.save(path)

    def save(self, path: PathLike) -> pathlib.Path:
        """Download the artifact and write it to ``path`` (a PNG for figures); return the path.

        A directory as ``path`` keeps the artifact's own name inside it.
        """
        p = pathlib.Path(path)
        if p.is_dir():
            p = p / (pathlib.PurePosixPath(self.name).name or self.id)
        p.write_bytes(self.read())
        return p


@dataclass
class Output:
    """A rich value the run displayed (the value of its last expression when not None).

    ``text`` is always there; ``html`` and ``json`` when the value offers them (a pandas
    DataFrame offers both). The SDK lists these as :attr:`Result.results`.
    """

    text: str = ""
    html: Optional[str] = None
    json: Any = None


@dataclass
class Timings:
    """Where the time went, in milliseconds."""

    queue_ms: float = 0.0
    start_ms: float = 0.0
    execute_ms: float = 0.0
    total_ms: float = 0.0
    #: "warm" when a ready interpreter served the run, "cold" when one was started for it.
    pool: str = ""


@dataclass
class Notice:
    """What happened to a session since its last answer, given once with the next run's result.

    ``kind`` "session_moved": the session's node was gone or drained and another node resumed
    it from its latest durable step (``step``); runs after that step, if any, were lost.
    """

    kind: str = ""
    from_node: str = ""
    to_node: str = ""
    #: The step the session resumed from.
    step: str = ""
    reason: str = ""


@dataclass
class Result:
    """What a run produced.

    A Python exception in the code is not an API error: the run answers normally,
    :attr:`exit_code` is 1 and :attr:`error` holds the exception; :meth:`raise_for_error` turns
    it into a Python exception when you would rather have one. Limits (timeout, memory, output)
    are API errors; their exception carries this object as ``.result``.
    """

    stdout: str = ""
    stderr: str = ""
    #: 0 when the code ran to the end, 1 after an uncaught exception, else sys.exit's argument.
    exit_code: int = 0
    #: The exception the code raised, or None.
    error: Optional[PyError] = None
    #: The tier that ran the code: "nano" or "heavy".
    runtime: str = ""
    routing: Routing = field(default_factory=Routing)
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    #: Files the code created or changed.
    files: List[OutputFile] = field(default_factory=list)
    #: Figures and other things to download; see :meth:`Artifact.save`.
    artifacts: List[Artifact] = field(default_factory=list)
    #: Rich values on the wire; read them as :attr:`results`.
    outputs: List[Output] = field(default_factory=list)
    timings: Timings = field(default_factory=Timings)
    #: The session step this run made (see ``Sandbox.steps()``); "" for one-shot runs.
    step: str = ""
    #: Set once, on the first run after the session moved to another node (``Sandbox.notices``).
    notice: Optional[Notice] = None

    def __repr__(self) -> str:
        # What the run did at a glance: long output is cut, files and artifacts are named with
        # their sizes (their content is in .files[i].content and .artifacts[i].read()).
        err = f"{self.error.name}: {_clip(self.error.value, 200)}" if self.error else None
        return (f"Result(exit_code={self.exit_code}, runtime={self.runtime!r}, stdout={_clip(self.stdout)!r}, "
                f"stderr={_clip(self.stderr)!r}, error={err!r}, files={self.files!r}, artifacts={self.artifacts!r}, "
                f"outputs={len(self.outputs)}, routing={self.routing!r}, duration={self.duration:.3f})")

    @property
    def results(self) -> List[Output]:
        """Rich values the run displayed (the API's ``outputs``), each with text/html/json."""
        return self.outputs

    @property
    def duration(self) -> float:
        """Seconds the run took inside the daemon (``timings.total_ms``)."""
        return self.timings.total_ms / 1000.0

    @property
    def ok(self) -> bool:
        """True when the code ran to the end without an exception and exited 0."""
        return self.error is None and self.exit_code == 0

    def raise_for_error(self) -> "Result":
        """Raise :class:`agentbox.CodeError` if the code raised or exited non-zero; else return self."""
        if not self.ok:
            from .errors import CodeError

            raise CodeError(self)
        return self

    def _bind(self, client: "Client") -> "Result":
        for a in self.artifacts:
            a._client = client
        return self

    def _abind(self, aclient: Any) -> "Result":
        for a in self.artifacts:
            a._aclient = aclient
        return self


# --- sessions and files --------------------------------------------------------------------


@dataclass
class Limits:
    """A session's effective limits, in the units of RunRequest."""

    timeout: float = 0.0
    memory_mb: int = 0
    stdout_limit: int = 0
    stderr_limit: int = 0
    files_limit: int = 0


@dataclass
class Session:
    """An open session."""

    id: str = ""
    #: The tier the session runs on now: "nano" or "heavy" (an auto session may move to heavy).
    runtime: str = ""
    limits: Limits = field(default_factory=Limits)
    created_at: Optional[_dt.datetime] = None
    last_used: Optional[_dt.datetime] = None
    runs: int = 0
    #: Seconds the session may stay unused before the daemon closes it.
    idle_timeout: float = 0.0
    #: The session reaches out through the egress gateway, under egress_profile.
    network: bool = False
    egress_profile: str = ""
    #: "live" (the session holds a sandbox) or "paused" (its state is on disk).
    state: str = ""
    #: The step whose state the session holds; "" before its first run.
    head: str = ""
    #: How many steps (runs) the session has.
    steps: int = 0
    #: "session/step" for a session forked from another's step.
    forked_from: str = ""
    #: Set for a session closed with ``keep=True``: it is paused, its state and steps kept until then.
    kept_until: Optional[_dt.datetime] = None


@dataclass
class SessionList:
    sessions: List[Session] = field(default_factory=list)


@dataclass
class FileInfo:
    """A file or directory of a session."""

    #: Absolute inside the sandbox.
    path: str = ""
    size: int = 0
    dir: bool = False
    mod_time: Optional[_dt.datetime] = None


@dataclass
class FileList:
    files: List[FileInfo] = field(default_factory=list)


# --- operations ----------------------------------------------------------------------------


@dataclass
class Image:
    """A heavy image the daemon can run, and the Python packages it offers."""

    name: str = ""
    hash: str = ""
    default: bool = False
    python: str = ""
    packages: Dict[str, str] = field(default_factory=dict)
    size_bytes: int = 0
    built: Optional[_dt.datetime] = None


@dataclass
class ImageList:
    images: List[Image] = field(default_factory=list)


@dataclass
class CreateVolumeRequest:
    """Body of ``POST /v1/volumes``."""

    name: str = ""
    #: The most the volume holds, in bytes (at least 1 MiB); None means the server's default.
    quota_bytes: Optional[int] = None


@dataclass
class Volume:
    """A named volume of the caller's tenant: kept beyond sessions and daemon restarts."""

    name: str = ""
    quota_bytes: int = 0
    created_at: Optional[_dt.datetime] = None
    #: Sessions mounting it now, read-write (0 or 1) and read-only.
    mounted_rw: int = 0
    mounted_ro: int = 0


@dataclass
class VolumeList:
    volumes: List[Volume] = field(default_factory=list)


@dataclass
class RuntimeHealth:
    name: str = ""
    ok: bool = False
    state: str = ""


@dataclass
class Health:
    #: "ok", "degraded" or "unavailable".
    status: str = ""
    version: str = ""
    runtimes: List[RuntimeHealth] = field(default_factory=list)


@dataclass
class ErrorDetail:
    code: str = ""
    message: str = ""
    hint: str = ""


@dataclass
class ErrorResponse:
    error: ErrorDetail = field(default_factory=ErrorDetail)
    result: Optional[Result] = None


# --- commands in sessions ------------------------------------------------------------------


@dataclass
class CommandRequest:
    """Body of ``POST /v1/sessions/{id}/commands``: ``argv`` or ``cmd`` (a shell line)."""

    argv: Optional[List[str]] = None
    cmd: Optional[str] = None
    cwd: Optional[str] = None
    env: Optional[Dict[str, str]] = None
    stdin: Optional[str] = None
    timeout: Optional[float] = None
    background: Optional[bool] = None


@dataclass
class Command:
    """A command of a heavy session: running, or how it ended, with its output so far.

    ``status`` is running, exited, killed, timeout or failed; ``exit_code`` is -1 after a signal.
    """

    id: str = ""
    session: str = ""
    argv: List[str] = field(default_factory=list)
    cwd: str = ""
    status: str = ""
    exit_code: int = 0
    stdout: str = ""
    stderr: str = ""
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    started_at: Optional[_dt.datetime] = None
    ended_at: Optional[_dt.datetime] = None
    duration_ms: float = 0.0
    error: str = ""


@dataclass
class CommandList:
    commands: List[Command] = field(default_factory=list)


# --- streamed runs -------------------------------------------------------------------------


@dataclass
class StreamDropped:
    """Bytes of stream chunks the daemon dropped because the client read too slowly (the final
    result still has them)."""

    stdout_bytes: int = 0
    stderr_bytes: int = 0


@dataclass
class StreamEvent:
    """One event of a streamed run (``Accept: text/event-stream`` or ``application/x-ndjson``).

    ``type`` is stdout, stderr (``text`` set), output, artifact, dropped, result (the whole
    ``result``) or error (``error`` and the partial ``result``); the last event is result or
    error.
    """

    type: str = ""
    text: str = ""
    output: Optional[Output] = None
    artifact: Optional[Artifact] = None
    dropped: Optional[StreamDropped] = None
    result: Optional[Result] = None
    error: Optional[ErrorDetail] = None
    #: The end of a streamed command (type "exit").
    command: Optional[Command] = None
    #: What happened to the session since its last answer (type "notice", the first event).
    notice: Optional[Notice] = None


# --- tenant keys (admin) -------------------------------------------------------------------


@dataclass
class Key:
    """A tenant API key as the daemon keeps it: never the key itself nor its hash."""

    #: 16 hex digits; the key itself is ``abt_ID.SECRET``.
    id: str = ""
    tenant: str = ""
    #: Who the key was issued to, for the audit log; None when nobody in particular.
    agent: Optional[str] = None
    #: run, sessions, files, egress-intent, policy-admin, audit-read, admin.
    scopes: List[str] = field(default_factory=list)
    created: Optional[_dt.datetime] = None
    #: When the key stops working; None for never.
    expires: Optional[_dt.datetime] = None
    #: When the key was revoked (or rotated out); None while it is not.
    revoked: Optional[_dt.datetime] = None

    def active(self, now: Optional[_dt.datetime] = None) -> bool:
        """Whether the key works (at ``now``, default the current time): not revoked, not expired."""
        if self.revoked is not None:
            return False
        if self.expires is None:
            return True
        now = now or _dt.datetime.now(_dt.timezone.utc)
        return now < self.expires


@dataclass
class KeyList:
    keys: List[Key] = field(default_factory=list)


@dataclass
class CreateKeyRequest:
    """Body of ``POST /v1/keys``."""

    tenant: str = ""
    agent: Optional[str] = None
    scopes: List[str] = field(default_factory=list)
    #: Seconds the key lives; None for a key that does not expire.
    ttl: Optional[float] = None


@dataclass
class CreatedKey:
    """A key just made or rotated: the key, shown this once (the daemon keeps only its hash), and
    its record."""

    key: str = ""
    record: Key = field(default_factory=Key)

    def __repr__(self) -> str:
        # The key is a secret: keep it out of logs and tracebacks that print the object.
        return f"CreatedKey(key='abt_{self.record.id}.…', record={self.record!r})"


# --- audit log -----------------------------------------------------------------------------


@dataclass
class AuditLimits:
    """The effective limits of an audited run or session (milliseconds and bytes)."""

    timeout_ms: int = 0
    memory_bytes: int = 0
    stdout_bytes: int = 0
    stderr_bytes: int = 0
    files_bytes: int = 0


@dataclass
class AuditRun:
    """One run: the code's SHA-256 (not the code), where it went and why, and how it ended."""

    code_sha256: str = ""
    code_bytes: int = 0
    tier: Optional[str] = None
    reasons: Optional[List[str]] = None
    limits: Optional[AuditLimits] = None
    packages: Optional[List[str]] = None
    image: Optional[str] = None
    network: Optional[bool] = None
    egress_profile: Optional[str] = None
    #: "ok", "exception", "exit_nonzero" or "error".
    outcome: str = ""
    exception: Optional[str] = None
    exit_code: int = 0
    error_kind: Optional[str] = None
    error: Optional[str] = None
    duration_ms: float = 0.0


@dataclass
class AuditLifecycle:
    """A session's creation or end."""

    tier: Optional[str] = None
    limits: Optional[AuditLimits] = None
    packages: Optional[List[str]] = None
    image: Optional[str] = None
    network: Optional[bool] = None
    egress_profile: Optional[str] = None
    #: Why a session ended, e.g. "idle for 10m0s".
    reason: Optional[str] = None
    runs: Optional[int] = None
    age_ms: Optional[float] = None
    error_kind: Optional[str] = None
    error: Optional[str] = None


@dataclass
class AuditEgress:
    """A request a sandbox made through the egress gateway, secrets redacted."""

    method: str = ""
    url: str = ""
    addr: Optional[str] = None
    status: Optional[int] = None
    #: The gateway's: allowed, denied, blocked, redacted, warned, refused or failed.
    decision: str = ""
    profile: Optional[str] = None
    mode: Optional[str] = None
    intent: Optional[str] = None
    rules: Optional[List[str]] = None
    detectors: Optional[List[str]] = None
    reason: Optional[str] = None
    headers: Optional[Dict[str, str]] = None
    body_excerpt: Optional[str] = None
    duration_ms: Optional[float] = None


@dataclass
class AuditPolicy:
    """A policy change (egress profiles reloaded, an intent set or cleared)."""

    actor: Optional[str] = None
    summary: str = ""
    error: Optional[str] = None
    before: Any = None
    after: Any = None


@dataclass
class AuditAlert:
    """Something to look at: ``source`` "audit" (tampering found at start) or "egress" (violations)."""

    source: str = ""
    message: str = ""
    profile: Optional[str] = None
    violations: Optional[int] = None
    window: Optional[str] = None
    ended: Optional[bool] = None


@dataclass
class AuditRepair:
    """What the daemon cut from the end of its log at start (a write a crash cut short)."""

    line: int = 0
    bytes: int = 0
    sha256: str = ""
    excerpt: Optional[str] = None
    reason: str = ""


@dataclass
class AuditLostSession:
    """A session the daemon had open when it stopped without shutting down."""

    id: str = ""
    tier: Optional[str] = None
    tenant: Optional[str] = None
    agent: Optional[str] = None
    created: Optional[_dt.datetime] = None


@dataclass
class AuditRestart:
    """The daemon started after one that did not shut down cleanly; ``sessions`` were lost."""

    previous_pid: int = 0
    previous_start: Optional[_dt.datetime] = None
    sessions: List[AuditLostSession] = field(default_factory=list)


@dataclass
class AuditMCP:
    """What the gateway of the hosted MCP servers did: a call (mcp.call), a pin (mcp.pin), a
    refused change (mcp.refused) or an approval (mcp.approve); digests and redacted excerpts only."""

    server: str = ""
    tool: Optional[str] = None
    intent: Optional[str] = None
    reason: Optional[str] = None
    args_sha256: Optional[str] = None
    args_excerpt: Optional[str] = None
    result_sha256: Optional[str] = None
    result_excerpt: Optional[str] = None
    findings: List[str] = field(default_factory=list)
    flagged: List[str] = field(default_factory=list)
    duration_ms: Optional[float] = None
    pin_hash: Optional[str] = None
    changes: List[str] = field(default_factory=list)


@dataclass
class MCPServer:
    """A hosted MCP server as registered (``/v1/mcp/servers``)."""

    name: str = ""
    image: Optional[str] = None
    profile: Optional[str] = None
    command: List[str] = field(default_factory=list)
    #: a remote server's streamable-HTTP endpoint (instead of image and command)
    url: Optional[str] = None
    allow: List[str] = field(default_factory=list)
    deny: List[str] = field(default_factory=list)
    added: Optional[_dt.datetime] = None
    running: bool = False


@dataclass
class MCPServerList:
    """Body of ``GET /v1/mcp/servers``."""

    servers: List[MCPServer] = field(default_factory=list)


@dataclass
class MCPPin:
    """A hosted server's tool definitions as pinned, bound to its image."""

    server: str = ""
    image_hash: str = ""
    hash: str = ""
    tools: Dict[str, str] = field(default_factory=dict)
    flagged: Dict[str, List[str]] = field(default_factory=dict)
    pinned: Optional[_dt.datetime] = None
    approved: bool = False


@dataclass
class AuditRecord:
    """One record of the daemon's audit log; one of run, lifecycle, egress, policy, alert, repair, restart, mcp is set."""

    seq: int = 0
    time: Optional[_dt.datetime] = None
    #: session.create, session.close, session.expire, run, egress, policy.change, alert, log.repair
    #: daemon.restart, or a hosted MCP server's mcp.call, mcp.pin, mcp.approve, mcp.refused,
    #: mcp.read, mcp.prompt, mcp.list.
    kind: str = ""
    session: Optional[str] = None
    #: allow or deny (runs, session creations, policy changes); allow, deny, redact or warn (egress).
    decision: Optional[str] = None
    #: The tenant and the agent of the API key that asked; None for the daemon's own tenant.
    tenant: Optional[str] = None
    agent: Optional[str] = None
    run: Optional[AuditRun] = None
    lifecycle: Optional[AuditLifecycle] = None
    egress: Optional[AuditEgress] = None
    policy: Optional[AuditPolicy] = None
    alert: Optional[AuditAlert] = None
    repair: Optional[AuditRepair] = None
    restart: Optional[AuditRestart] = None
    mcp: Optional[AuditMCP] = None
    prev: Optional[str] = None
    hash: str = ""


@dataclass
class AuditList:
    """Body of ``GET /v1/audit``."""

    records: List[AuditRecord] = field(default_factory=list)


# --- time travel -----------------------------------------------------------------------------


@dataclass
class StepSnapshot:
    """What is kept of a step's state: ``state`` is pending, kept (daemon memory), durable (on
    disk: survives a restart), dropped (``reason`` says why) or none."""

    state: str = ""
    reason: str = ""
    #: What the snapshot leaves out (heavy: threads the code left running).
    note: str = ""
    bytes: int = 0
    took_ms: float = 0.0
    durable_ms: float = 0.0


@dataclass
class Step:
    """One run of a session. Steps form a tree: ``parent`` is the step the session was at."""

    id: str = ""
    parent: str = ""
    session: str = ""
    seq: int = 0
    runtime: str = ""
    code: str = ""
    #: The code context the run ran in (``""``: the main one); ``inspect``/``diff`` take it.
    context: str = ""
    stdout: str = ""
    stderr: str = ""
    truncated: bool = False
    exit_code: int = 0
    error: Optional[PyError] = None
    error_code: str = ""
    artifacts: List[Artifact] = field(default_factory=list)
    #: The rich values the run displayed (a DataFrame's text, HTML and JSON).
    outputs: List[Output] = field(default_factory=list)
    #: The ids (``seq``) of the audit records written for the session while the step ran.
    audit_records: List[int] = field(default_factory=list)
    started: Optional[_dt.datetime] = None
    duration_ms: float = 0.0
    snapshot: StepSnapshot = field(default_factory=StepSnapshot)


@dataclass
class StepList:
    head: str = ""
    steps: List[Step] = field(default_factory=list)


@dataclass
class StepRequest:
    step: str = ""


@dataclass
class Variable:
    """A global of a step's interpreter: a bounded ``repr``; arrays and DataFrames as ``shape``,
    ``dtypes`` and ``head``."""

    name: str = ""
    type: str = ""
    size: int = 0
    repr: str = ""
    shape: List[int] = field(default_factory=list)
    dtypes: Dict[str, str] = field(default_factory=dict)
    head: str = ""


@dataclass
class InspectedFile:
    path: str = ""
    size: int = 0
    sha256: str = ""


@dataclass
class StepInspection:
    """What a step's interpreter held (read in a throwaway copy; the session is not touched)."""

    step: str = ""
    variables: List[Variable] = field(default_factory=list)
    files: List[InspectedFile] = field(default_factory=list)
    truncated: bool = False
    took_ms: float = 0.0
    context: str = ""  # the code context whose variables these are; "" the main one


@dataclass
class StepDiff:
    """What changed in variables and files from step ``base`` to ``step``."""

    base: str = ""
    step: str = ""
    added: List[Variable] = field(default_factory=list)
    removed: List[Variable] = field(default_factory=list)
    changed: List[Variable] = field(default_factory=list)
    files_added: List[InspectedFile] = field(default_factory=list)
    files_removed: List[InspectedFile] = field(default_factory=list)
    files_changed: List[InspectedFile] = field(default_factory=list)


#: Every wire type by the name of its schema in api/openapi.yaml.
SCHEMAS = {
    cls.__name__: cls
    for cls in (
        InputFile, Deterministic, RunRequest, StreamEvent, Notice, StreamDropped, CommandRequest, Command, CommandList, CreateSessionRequest, PyError, Routing, OutputFile,
        Artifact, Output, Timings, Result, Limits, Session, SessionList, FileInfo, FileList, Image,
        ImageList, RuntimeHealth, Health, ErrorDetail, ErrorResponse, SetIntentRequest, Intent,
        ReloadResult, AuditList, AuditRecord, AuditRun, AuditLimits, AuditLifecycle, AuditEgress, AuditPolicy,
        AuditAlert, AuditRepair, AuditRestart, AuditLostSession, AuditMCP,
        MCPServer, MCPServerList, MCPPin,
        Key, KeyList, CreateKeyRequest, CreatedKey,
        Step, StepSnapshot, StepList, StepRequest, Variable, InspectedFile, StepInspection, StepDiff,
        Volume, VolumeList, CreateVolumeRequest,
    )
}
