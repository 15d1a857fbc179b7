"""agentbox: run untrusted Python on an agentbox daemon. Standard library only, Python 3.9+.

::

    from agentbox import Sandbox
    box = Sandbox()
    print(box.run('import json; print(json.dumps({"status": "ok"}))').stdout)

- :class:`Sandbox` runs code; by default it keeps one session, so state persists between runs.
- :class:`SandboxConfig` says what to ask for: runtime, packages, timeout, memory, env.
- :class:`~agentbox.models.Result` is what a run produced: stdout, stderr, exit_code, error,
  runtime, routing, artifacts (figures: ``artifact.save("chart.png")``), results, files, duration.
- :class:`AsyncSandbox` is the same on asyncio; share one :class:`AsyncClient` (a bounded pool
  of keep-alive connections) between many of them.
- :func:`task` turns a plain function into one that runs in a sandbox.
- Errors: :class:`AgentboxError` and one subclass per API error code (:class:`TimeoutError`,
  :class:`PolicyViolation`, ...); an exception in the user's code is ``result.error`` instead.
- :class:`Client` is the low-level API client the rest is built on; ``Client.mcp_servers()``,
  ``mcp_list_tools(server)`` and ``mcp_call(server, tool, arguments)`` reach hosted MCP servers;
  ``Client.mcp(server)`` and ``Sandbox.mcp(server)`` give one as an object (:class:`HostedMCP`);
  ``AsyncClient.mcp(server)`` and ``AsyncSandbox.mcp(server)`` the same awaited (:class:`AsyncHostedMCP`).

The daemon is found at AGENTBOX_URL (default http://127.0.0.1:8420) with the key
AGENTBOX_API_KEY, else the api_key file that ``agentbox serve`` keeps in its data directory, else
that of the system service (/var/lib/agentbox/api_key, readable by the group agentbox).
"""

from ._version import __version__
from .client import DEFAULT_URL, Client
from .config import SandboxConfig, parse_duration, parse_memory
from .errors import (ERROR_CLASSES, AgentboxError, CodeError, Conflict, DaemonUnreachable, Forbidden, InternalError,
                     InvalidRequest, MemoryLimitExceeded, NotFound, OutputLimitExceeded, PolicyViolation,
                     RuntimeUnavailable, TimeoutError, Unauthorized)
from .models import (Notice, Artifact, FileInfo, Health, Image, InputFile, Intent, Output, OutputFile, PyError, Result, Routing,
                     Session, Step, StepDiff, StepInspection, Timings, Variable)
from .mcp import AsyncHostedMCP, HostedMCP, MCPError, MCPTool, MCPToolResult
from .sandbox import Files, Sandbox
from .aio import AsyncClient, AsyncCommands, AsyncFiles, AsyncSandbox
from .task import Task, TaskError, task

__all__ = [
    "__version__",
    "DEFAULT_URL", "Client",
    "Sandbox", "SandboxConfig", "Files", "AsyncSandbox", "AsyncClient", "AsyncFiles", "AsyncCommands", "parse_duration", "parse_memory",
    "Result", "Notice", "PyError", "Routing", "Artifact", "Output", "OutputFile", "Timings", "InputFile", "FileInfo",
    "Session", "Image", "Health", "Intent", "Step", "StepInspection", "StepDiff", "Variable",
    "task", "Task", "TaskError",
    "AgentboxError", "CodeError", "ERROR_CLASSES", "InvalidRequest", "Unauthorized", "PolicyViolation", "Forbidden", "NotFound",
    "TimeoutError", "Conflict", "MemoryLimitExceeded", "OutputLimitExceeded", "InternalError",
    "RuntimeUnavailable", "DaemonUnreachable",
    "AsyncHostedMCP", "HostedMCP", "MCPError", "MCPTool", "MCPToolResult",
]
