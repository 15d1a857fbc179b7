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
- What the function refers to travels with it: the modules it uses (their imports), literal
  constants (numbers, strings, and lists, tuples, dicts of them), and the functions and classes
  of your own files it calls, by source, with what they refer to in turn; functions and classes
  of installed modules as imports. Anything else (an open client, a closure's variables, a
  global object) is refused with a TypeError when the task is made, not a NameError in the
  sandbox.
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
import os
import sys
import sysconfig
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


def _loaded_names(tree: ast.AST) -> set:
    """Names the source reads as plain names (not attributes), less those it binds itself."""
    loads, binds = set(), set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Name):
            (loads if isinstance(n.ctx, ast.Load) else binds).add(n.id)
        elif isinstance(n, ast.arg):
            binds.add(n.arg)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            binds.update((a.asname or a.name).split(".")[0] for a in n.names)
    return loads - binds


def _installed(module_name: str) -> bool:
    """Whether a module comes with Python or from installed packages (the sandbox may have it
    too: its import is carried) rather than from the user's own files (its source is carried)."""
    if module_name in sys.builtin_module_names:
        return True
    mod = sys.modules.get(module_name)
    f = getattr(mod, "__file__", None)
    if not f:
        return mod is not None and module_name != "__main__"
    f = os.path.realpath(f)
    paths = sysconfig.get_paths()
    roots = {os.path.realpath(paths[k]) for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}
    return any(f.startswith(r + os.sep) for r in roots) or "site-packages" in f or "dist-packages" in f


def _literal(v: Any) -> bool:
    """Whether repr(v) is a Python literal that makes the same value (so it can travel as source)."""
    if v is None or isinstance(v, (bool, int, float, complex, str, bytes)):
        try:
            return ast.literal_eval(repr(v)) == v
        except (ValueError, SyntaxError):
            return False
    if isinstance(v, (tuple, list, set, frozenset)):
        return type(v) in (tuple, list, set) and all(_literal(x) for x in v)
    if isinstance(v, dict):
        return type(v) is dict and all(_literal(k) and _literal(x) for k, x in v.items())
    return False


class _Shipment:
    """What a task's function needs besides itself: imports, constants and the source of the
    helpers (functions and classes of the user's own files) it refers to, theirs too."""

    def __init__(self, task_qual: str) -> None:
        self.task_qual = task_qual
        self.imports: List[str] = []
        self.constants: List[str] = []
        self.helpers: List[str] = []
        self.seen: Dict[Tuple[str, str], Any] = {}

    def lines(self) -> List[str]:
        return self.imports + self.constants + self.helpers

    def refuse(self, name: str, why: str) -> TypeError:
        return TypeError(f"@task: {self.task_qual} uses {name!r}, {why}; a task carries modules, literal constants, "
                         "and the functions and classes of your own files (by source): create the rest inside the "
                         "function, or pass it as an argument")

    def names(self, names: set, glb: Dict[str, Any]) -> None:
        for n in sorted(names):
            if n not in glb:
                continue  # a builtin, or a name the code defines at run time
            self.value(n, glb[n])

    def value(self, n: str, v: Any) -> None:
        key = (n, repr(type(v)))
        if key in self.seen and self.seen[key] is v:
            return
        if n in {k for k, _ in self.seen}:
            raise self.refuse(n, "a name two of the shipped functions use for different things")
        self.seen[key] = v
        if isinstance(v, types.ModuleType):
            self.imports.append(f"import {v.__name__}" if v.__name__ == n else f"import {v.__name__} as {n}")
            return
        if isinstance(v, Task):
            v = v.func
        mod = getattr(v, "__module__", None) or ""
        qual = getattr(v, "__qualname__", None)
        if isinstance(mod, str) and isinstance(qual, str) and mod and mod != "__main__" and _installed(mod):
            # Something an installed module offers by name (a function, a class, a builtin): the
            # sandbox imports it, if its image has the module.
            if "." in qual or "<" in qual or getattr(sys.modules.get(mod), qual, None) is not v:
                raise self.refuse(n, f"a {type(v).__name__} of {mod} that cannot be imported by name")
            self.imports.append(f"from {mod} import {qual}" + ("" if qual == n else f" as {n}"))
            return
        if inspect.isfunction(v) or inspect.isclass(v):
            self.helper(n, v)
            return
        if _literal(v):
            self.constants.append(f"{n} = {v!r}")
            return
        raise self.refuse(n, f"a global {type(v).__name__} that cannot travel to the sandbox")

    def helper(self, n: str, v: Any) -> None:
        qual = getattr(v, "__qualname__", n)
        if "<locals>" in qual:
            raise self.refuse(n, "a function or class defined inside another function")
        if inspect.isfunction(v) and v.__code__.co_freevars:
            raise self.refuse(n, "a function that uses variables of an enclosing function")
        try:
            src = textwrap.dedent(inspect.getsource(v))
        except (OSError, TypeError) as e:
            raise self.refuse(n, f"whose source cannot be read ({e})") from None
        tree = ast.parse(src)
        node = tree.body[0] if tree.body else None
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            raise self.refuse(n, "whose definition cannot be found in its source")
        # A helper that is itself a task runs as a plain function in the sandbox: its @task goes.
        if any(_is_task_decorator(d) for d in node.decorator_list):
            src = "\n".join(src.splitlines()[node.lineno - 1:])
            tree = ast.parse(src)
        glb = v.__globals__ if inspect.isfunction(v) else vars(sys.modules.get(v.__module__, types.ModuleType("m")))
        self.names(_loaded_names(tree), glb)
        self.helpers.append(src.rstrip() + "\n" + (f"{n} = {v.__name__}\n" if n != v.__name__ else ""))


def _is_task_decorator(d: ast.expr) -> bool:
    f = d.func if isinstance(d, ast.Call) else d
    return (isinstance(f, ast.Name) and f.id == "task") or (isinstance(f, ast.Attribute) and f.attr == "task")


def _function_source(func: Callable[..., Any]) -> Tuple[str, List[str]]:
    """The function's definition without decorators, and what must come before it in the
    sandbox: the imports of the modules it uses, the literal constants, and the source of the
    helpers of the user's own files it calls (and of theirs). Anything else it refers to is
    refused here, at decoration time, rather than failing with a NameError in the sandbox."""
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
    ship = _Shipment(qual)
    # The names the function reads as globals: in its code's names (globals and attributes) and
    # read as plain names in its source (not attributes).
    ship.seen[(target.__name__, repr(type(target)))] = target
    ship.names(_code_names(target.__code__) & _loaded_names(ast.parse(body)), target.__globals__)
    return body, ship.lines()


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
        #: The function's source, and what goes before it (imports, constants, helpers' source).
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
