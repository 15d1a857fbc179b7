"""Exceptions: one class per error code of the API, and one for exceptions in the user's code.

Every answer the daemon refuses becomes an :class:`AgentboxError` subclass chosen by the stable
``error.code`` of the body (never by the message, which is for people). Switch on the class, or
on ``.code``:

=====================  ==========================  ======
code                   class                       status
=====================  ==========================  ======
invalid_request        InvalidRequest              400 (413, 405)
unauthorized           Unauthorized                401
policy_violation       PolicyViolation             403
forbidden              Forbidden                   403
not_found              NotFound                    404
timeout                TimeoutError                408
conflict               Conflict                    409
memory_limit           MemoryLimitExceeded         422
output_limit           OutputLimitExceeded         422
internal               InternalError               500
runtime_unavailable    RuntimeUnavailable          503
=====================  ==========================  ======

:class:`TimeoutError` also subclasses the built-in ``TimeoutError`` and :class:`DaemonUnreachable`
the built-in ``ConnectionError``, so code that already catches those keeps working. When a limit
ended a run, ``.result`` holds what the code produced before it.

A Python exception raised by the user's code is *not* an API error: the run returns a
:class:`~agentbox.models.Result` whose ``error`` is set. :meth:`Result.raise_for_error` raises it
as :class:`CodeError`; ``@task`` raises :class:`TaskError`.
"""

from __future__ import annotations

import builtins
import json
from typing import Dict, Optional, Type

from . import _codec
from .models import ErrorResponse, Result


def _rebuild(cls: type, args: tuple, state: dict) -> BaseException:
    """Unpickle an exception of this module without calling its __init__ (multiprocessing)."""
    e = cls.__new__(cls)
    e.args = args
    e.__dict__.update(state)
    return e


class AgentboxError(Exception):
    """An error the agentbox API answered with (or, for subclasses that say so, a transport error).

    Attributes:
        code: The stable error code (e.g. "timeout"); None when no daemon answered.
        message: What was wrong, for people.
        hint: What to do about it ("" when there is nothing to add).
        status: The HTTP status, or None.
        result: What the code produced before a limit ended the run, or None.
        request_id: The daemon's id of the request (X-Request-Id), to find it in its log.
        attempts: How many runs a ``@task`` call made before giving up; None elsewhere.
    """

    attempts: Optional[int] = None

    def __init__(self, code: Optional[str], message: str, *, hint: str = "", status: Optional[int] = None,
                 result: Optional[Result] = None, request_id: str = "") -> None:
        self.code = code
        self.message = message
        self.hint = hint
        self.status = status
        self.result = result
        self.request_id = request_id
        super().__init__(self._text())

    def _text(self) -> str:
        s = f"{self.code}: {self.message}" if self.code else self.message
        if self.hint:
            s += f" ({self.hint})"
        return s

    def __str__(self) -> str:
        return self._text()

    def __reduce__(self):  # type: ignore[override]
        return _rebuild, (type(self), self.args, dict(self.__dict__))


class InvalidRequest(AgentboxError):
    """invalid_request: a malformed request, or one asking for more than the server allows."""


class Unauthorized(AgentboxError):
    """unauthorized: the API key is missing or wrong."""


class PolicyViolation(AgentboxError):
    """policy_violation: the code did something the daemon's policy forbids."""


class Forbidden(AgentboxError):
    """forbidden: the API key is valid but lacks the scope the request needs (the message names it)."""


class NotFound(AgentboxError):
    """not_found: no such session, file, artifact or route (a session may have expired)."""


class TimeoutError(AgentboxError, builtins.TimeoutError):  # noqa: A001 - mirrors the API's "timeout"
    """timeout: the code ran past its timeout and was stopped. ``.result`` has the output so far.

    Also a built-in ``TimeoutError``. Note that ``from agentbox import TimeoutError`` shadows the
    built-in name in that module; ``agentbox.TimeoutError`` avoids that.
    """


class Conflict(AgentboxError):
    """conflict: the daemon's state does not allow it, e.g. its session cap is reached."""


class MemoryLimitExceeded(AgentboxError):
    """memory_limit: the code went over its memory limit and was killed."""


class OutputLimitExceeded(AgentboxError):
    """output_limit: the code went over an output or file limit."""


class InternalError(AgentboxError):
    """internal: a fault in the daemon, not in the request; its log has the details under request_id."""


class RuntimeUnavailable(AgentboxError):
    """runtime_unavailable: the tier is not on this daemon, not ready, or the daemon is stopping."""


class DaemonUnreachable(AgentboxError, builtins.ConnectionError):
    """No daemon answered at the URL (refused, reset, timed out). ``code`` and ``status`` are None."""


#: The exception class of each API error code.
ERROR_CLASSES: Dict[str, Type[AgentboxError]] = {
    "invalid_request": InvalidRequest,
    "unauthorized": Unauthorized,
    "policy_violation": PolicyViolation,
    "forbidden": Forbidden,
    "not_found": NotFound,
    "timeout": TimeoutError,
    "conflict": Conflict,
    "memory_limit": MemoryLimitExceeded,
    "output_limit": OutputLimitExceeded,
    "internal": InternalError,
    "runtime_unavailable": RuntimeUnavailable,
}


def _code_for_status(status: int) -> str:
    """A code for answers that do not carry the API's error body (a proxy's page, say)."""
    if status in (400, 405, 413):
        return "invalid_request"
    return {401: "unauthorized", 403: "policy_violation", 404: "not_found", 408: "timeout", 504: "timeout",
            409: "conflict", 502: "runtime_unavailable", 503: "runtime_unavailable"}.get(status, "internal")


#: The HTTP status of each error code (api/errors.go), for errors that arrive inside a stream.
STATUS_OF_CODE: Dict[str, int] = {
    "invalid_request": 400, "unauthorized": 401, "policy_violation": 403, "forbidden": 403, "not_found": 404,
    "timeout": 408, "conflict": 409, "memory_limit": 422, "output_limit": 422, "internal": 500,
    "runtime_unavailable": 503,
}


def from_response(status: int, body: bytes, request_id: str = "", client=None) -> AgentboxError:
    """Turn a failed HTTP answer into the exception of its error code."""
    try:
        doc = json.loads(body.decode("utf-8"))
        er = _codec.decode(ErrorResponse, doc)
        if not er.error.code:
            raise ValueError("no error code")
    except (ValueError, UnicodeDecodeError):
        excerpt = body.decode("utf-8", "replace").strip()
        if len(excerpt) > 200:
            excerpt = excerpt[:200] + "…"
        code = _code_for_status(status)
        msg = f"HTTP {status}" + (f": {excerpt}" if excerpt else "")
        return ERROR_CLASSES[code](code, msg, status=status, request_id=request_id,
                                   hint="the answer did not come from an agentbox daemon, or from an incompatible one; check the URL")
    if er.result is not None and client is not None:
        er.result._bind(client)
    cls = ERROR_CLASSES.get(er.error.code, AgentboxError)
    return cls(er.error.code, er.error.message, hint=er.error.hint, status=status, result=er.result,
               request_id=request_id)


class CodeError(Exception):
    """The user's code raised (or exited non-zero). Raised by :meth:`Result.raise_for_error`.

    Attributes:
        name, value, traceback: The remote exception ("" when the code called sys.exit).
        result: The whole :class:`~agentbox.models.Result`.
    """

    def __init__(self, result: Result, prefix: str = "the code") -> None:
        self.result = result
        err = result.error
        self.name = err.name if err else ""
        self.value = err.value if err else ""
        self.traceback = err.traceback if err else ""
        if err:
            head = f"{prefix} raised {err.name}" + (f": {err.value}" if err.value else "")
        else:
            head = f"{prefix} exited with status {result.exit_code}"
        super().__init__(head + (f"\n\nRemote traceback:\n{self.traceback.rstrip()}" if self.traceback else ""))

    def __reduce__(self):  # type: ignore[override]
        return _rebuild, (type(self), self.args, dict(self.__dict__))

    @property
    def stdout(self) -> str:
        return self.result.stdout

    @property
    def stderr(self) -> str:
        return self.result.stderr
