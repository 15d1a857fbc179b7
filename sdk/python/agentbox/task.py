"""@task: run a plain Python function in a fresh sandbox, in the style of the capsule project.

::

    from agentbox import task

    @task(name="add", compute="LOW", ram="128MB", timeout="10s", max_retries=1)
    def add(a, b):
        return a + b

    add(2, 3)  # 5, computed in a sandbox

Each call sends the function's source (without its decorators) and its JSON-encoded arguments
to ``POST /v1/run``; the sandbox calls the function and prints the JSON-encoded return value
between markers, which the SDK reads back. So:

- Arguments and the return value go through JSON: dicts, lists, str, numbers, bools, None.
  Tuples come back as lists. Anything else is a TypeError (locally for arguments, a TaskError
  for a return value).
- The function must be self-contained: what it uses must be imported inside it, or be a module
  imported at the top of its own file (those imports are carried along). Other globals, closures
  and methods do not travel.
- ``compute`` picks the tier, since the API has no CPU knob: LOW is nano (WebAssembly, starts in
  milliseconds, standard library only), MEDIUM (the default) lets the daemon route by the
  function's imports, HIGH is heavy (gVisor, numpy/pandas/matplotlib).
- ``ram`` is the memory cap ("512MB" = 512 MiB), ``timeout`` the run's wall-clock budget.
- ``max_retries`` (default 1) retries only failures of the sandbox itself: the daemon answered
  runtime_unavailable or internal, or could not be reached. The function's own exceptions raise
  :class:`TaskError` at once and are never retried, nor are timeout, memory_limit, output_limit
  (the code's own resource use: it would fail again) or refusals of the request. Retries wait
  ``retry_delay`` seconds, doubling each time. A retried call may have run partly before the
  failure, so keep task functions idempotent.
"""

from __future__ import annotations

import ast
import functools
import inspect
import json
import logging
import textwrap
import time
import types
import uuid
from typing import Any, Callable, Dict, List, Optional, Tuple, TypeVar, Union

from .client import Client
from .config import parse_duration, parse_memory
from .errors import AgentboxError, CodeError, DaemonUnreachable, InternalError, RuntimeUnavailable
from .models import Result, RunRequest

log = logging.getLogger("agentbox")

#: The tier each compute level runs on.
COMPUTE_RUNTIME = {"LOW": "nano", "MEDIUM": "auto", "HIGH": "heavy"}
#: What a task retries: failures of the sandbox, not of the code.
RETRYABLE = (RuntimeUnavailable, InternalError, DaemonUnreachable)

F = TypeVar("F", bound=Callable[..., Any])


class TaskError(CodeError):
    """The task's function raised (or exited non-zero) in the sandbox. Never retried.

    Attributes:
        task: The task's name.
        name, value, traceback: The remote exception; ``traceback`` is the sandbox's.
        result: The run's :class:`~agentbox.models.Result` (stdout, stderr...).
        attempts: How many runs the call made.
    """

    def __init__(self, task: str, result: Result, attempts: int = 1, detail: str = "") -> None:
        self.task = task
        self.attempts = attempts
        super().__init__(result, prefix=f"task {task!r}")
        if detail:
            self.args = (f"task {task!r}: {detail}",)


def _code_names(code: types.CodeType) -> set:
    names = set(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            names |= _code_names(c)
    return names


def _function_source(func: Callable[..., Any]) -> Tuple[str, List[str]]:
    """The function's definition without decorators, and the imports of modules it uses."""
    target = inspect.unwrap(func)
    qual = getattr(target, "__qualname__", repr(target))
    if not inspect.isfunction(target):
        raise TypeError(f"@task needs a plain function, not {type(target).__name__}")
    if inspect.iscoroutinefunction(target):
        raise TypeError(f"@task: {qual} is async; a task is a plain function")
    if target.__code__.co_freevars:
        raise TypeError(f"@task: {qual} uses variables of an enclosing function "
                        f"({', '.join(target.__code__.co_freevars)}); a task must be self-contained")
    try:
        src = textwrap.dedent(inspect.getsource(target))
    except (OSError, TypeError) as e:
        raise TypeError(f"@task needs the source of {qual} (a function defined in a file): {e}") from None
    tree = ast.parse(src)
    node = tree.body[0] if tree.body else None
    if not isinstance(node, ast.FunctionDef) or node.name != target.__name__:
        raise TypeError(f"@task: cannot find the definition of {qual} in its source")
    body = "\n".join(src.splitlines()[node.lineno - 1:])
    imports = []
    for n in sorted(_code_names(target.__code__)):
        v = target.__globals__.get(n)
        if isinstance(v, types.ModuleType):
            imports.append(f"import {v.__name__}" if v.__name__ == n else f"import {v.__name__} as {n}")
    return body, imports


_PROGRAM = '''{imports}
{source}


def _agentbox_task_main():
    import json as _json, sys as _sys
    _call = _json.loads({payload!r})
    _value = {fname}(*_call["args"], **_call["kwargs"])
    try:
        _out = _json.dumps(_value)
    except (TypeError, ValueError) as _e:
        raise TypeError("task " + {task!r} + " returned a " + type(_value).__name__ + ", which JSON cannot encode: "
                        + str(_e) + "; return dicts, lists, str, numbers, bools or None") from None
    _sys.stdout.flush()
    _sys.stdout.write("\\n" + {marker!r} + _out + {marker!r} + "\\n")
    _sys.stdout.flush()


_agentbox_task_main()
'''


class Task:
    """A function that runs in a sandbox when called. Made by :func:`task`; see that module's doc.

    ``Task.local(*args, **kwargs)`` calls the original function in this process.
    """

    def __init__(self, func: Callable[..., Any], *, name: Optional[str], compute: str, ram: Union[None, int, str],
                 timeout: Union[None, float, str], max_retries: int, env: Optional[Dict[str, str]],
                 packages: Optional[List[str]], url: Optional[str], api_key: Optional[str],
                 retry_delay: float) -> None:
        c = (compute or "MEDIUM").upper()
        if c not in COMPUTE_RUNTIME:
            raise ValueError(f"@task compute {compute!r}: use LOW, MEDIUM or HIGH")
        if max_retries is None:
            max_retries = 1
        if max_retries < 0:
            raise ValueError("@task max_retries must not be negative")
        self.func = func
        self.name = name or func.__name__
        self.compute = c
        self.runtime = COMPUTE_RUNTIME[c]
        self.memory_mb = parse_memory(ram)
        self.timeout = parse_duration(timeout)
        self.max_retries = int(max_retries)
        self.env = dict(env or {})
        self.packages = list(packages or [])
        self.retry_delay = retry_delay
        self._url, self._api_key = url, api_key
        self.source, self.imports = _function_source(func)
        functools.update_wrapper(self, func)

    def __repr__(self) -> str:
        return f"<Task {self.name} compute={self.compute} runtime={self.runtime}>"

    def local(self, *args: Any, **kwargs: Any) -> Any:
        """Call the function here, without a sandbox (for tests and debugging)."""
        return self.func(*args, **kwargs)

    def program(self, args: tuple, kwargs: dict, marker: str) -> str:
        """The code sent to the sandbox for one call."""
        try:
            payload = json.dumps({"args": list(args), "kwargs": kwargs})
        except (TypeError, ValueError) as e:
            raise TypeError(f"task {self.name!r}: arguments must be JSON-serialisable: {e}") from None
        return _PROGRAM.format(imports="\n".join(self.imports), source=self.source, payload=payload,
                               fname=self.func.__name__, task=self.name, marker=marker)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        marker = f"__agentbox_task_{uuid.uuid4().hex}__"
        code = self.program(args, kwargs, marker)
        client = Client(self._url, self._api_key)
        req = RunRequest(code=code, runtime=self.runtime, timeout=self.timeout, memory_mb=self.memory_mb,
                         env=self.env or None, packages=self.packages or None)
        attempts = 0
        while True:
            attempts += 1
            try:
                res = client.run(req)
            except RETRYABLE as e:
                if attempts > self.max_retries:
                    e.attempts = attempts
                    raise
                delay = self.retry_delay * (2 ** (attempts - 1))
                log.warning("agentbox: task %r: attempt %d of %d failed (%s); retrying in %.2gs",
                            self.name, attempts, self.max_retries + 1, e, delay)
                time.sleep(delay)
                continue
            except AgentboxError as e:
                e.attempts = attempts
                raise
            return self._value(res, marker, attempts)

    def _value(self, res: Result, marker: str, attempts: int) -> Any:
        if res.error is not None or res.exit_code != 0:
            raise TaskError(self.name, self._strip(res, marker), attempts)
        end = res.stdout.rfind(marker)
        start = res.stdout.rfind(marker, 0, end) if end > 0 else -1
        if start < 0:
            why = ("its output went over the stdout limit, so the return value was cut off"
                   if res.stdout_truncated else "the function ended the process before returning")
            raise TaskError(self.name, res, attempts, detail=why)
        value = json.loads(res.stdout[start + len(marker):end])
        self._strip(res, marker)
        return value

    @staticmethod
    def _strip(res: Result, marker: str) -> Result:
        """Drop the marker line from stdout, leaving what the function itself printed."""
        i = res.stdout.find("\n" + marker)
        if i >= 0:
            j = res.stdout.find("\n", res.stdout.rfind(marker))
            res.stdout = res.stdout[:i] + (res.stdout[j + 1:] if j >= 0 else "")
        return res


def task(name: Optional[str] = None, compute: str = "MEDIUM", ram: Union[None, int, str] = None,
         timeout: Union[None, float, str] = None, max_retries: int = 1, *, env: Optional[Dict[str, str]] = None,
         packages: Optional[List[str]] = None, url: Optional[str] = None, api_key: Optional[str] = None,
         retry_delay: float = 0.5) -> Callable[[F], Task]:
    """Make a plain function run in a fresh sandbox each time it is called.

    Args:
        name: The task's name in logs and errors. Default the function's name.
        compute: "LOW" (nano), "MEDIUM" (auto: routed by imports; the default) or "HIGH" (heavy).
        ram: Memory cap: MiB or a size like "512MB", "2GB". Default the server's (256 MiB).
        timeout: Seconds or a duration like "30s", "5m". Default the server's (30 s).
        max_retries: Extra attempts after a sandbox failure (runtime_unavailable, internal,
            daemon unreachable). Default 1. Never used for the function's own exceptions.
        env: Environment variables of the run.
        packages: Packages the function needs (they mean heavy, like compute="HIGH").
        url, api_key: The daemon, default from AGENTBOX_URL and AGENTBOX_API_KEY at call time.
        retry_delay: Seconds before the first retry, doubling for each next one.

    Raises (when the task is called):
        TaskError: the function raised or exited non-zero (carries the remote traceback).
        agentbox.TimeoutError, MemoryLimitExceeded, ...: a limit stopped the run.
        RuntimeUnavailable, InternalError, DaemonUnreachable: still failing after the retries.
    """

    def decorate(func: F) -> Task:
        return Task(func, name=name, compute=compute, ram=ram, timeout=timeout, max_retries=max_retries, env=env,
                    packages=packages, url=url, api_key=api_key, retry_delay=retry_delay)

    return decorate
