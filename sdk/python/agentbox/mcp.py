"""A minimal MCP client for the hosted MCP servers: their tools, resources and prompts over
streamable HTTP.

A hosted server is reached, unchanged, at ``/mcp/servers/NAME`` on the daemon with the same
bearer key as the API. The gateway keeps sessions: an :class:`MCPSession` sends the
``Mcp-Session-Id`` its ``initialize`` was given with every later request, and :meth:`MCPSession.close`
ends it (``DELETE``); the one-call helpers of the client end theirs after the call. Answers are read as
JSON or as a Server-Sent Events stream, whichever the server chose.

These are MCP's own shapes, not the agentbox API's: they are not in api/openapi.yaml, and
:class:`MCPTool` and :class:`MCPToolResult` keep the protocol's members as it names them
(``inputSchema``, ``structuredContent``, ``isError``) in ``raw``.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import socket
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from http.client import HTTPException
from typing import Any, Dict, Iterator, List, Optional

from ._version import __version__
from .errors import AgentboxError, DaemonUnreachable, from_response

#: The protocol revision the client asks for; the daemon's gateway negotiates it (and older ones).
PROTOCOL_VERSION = "2025-06-18"


class MCPError(AgentboxError):
    """A JSON-RPC error answered by the gateway or the hosted server (an unknown method, bad
    parameters, a server the gateway refused to start...). ``code`` is "mcp", ``rpc_code`` the
    JSON-RPC error code, ``data`` its data member. A tool that fails is not an MCPError: its
    result has ``is_error`` set (the gateway's refusals — a denied tool, a blocked argument, a
    refused change of definitions — are tool errors too, whose text says why)."""

    def __init__(self, message: str, *, rpc_code: int = 0, data: Any = None, hint: str = "",
                 status: Optional[int] = None) -> None:
        super().__init__("mcp", message, hint=hint, status=status)
        self.rpc_code = rpc_code
        self.data = data


@dataclass
class MCPTool:
    """A tool as a hosted server lists it (``tools/list``)."""

    name: str = ""
    description: str = ""
    input_schema: Dict[str, Any] = field(default_factory=dict)
    output_schema: Optional[Dict[str, Any]] = None
    #: The whole definition as the server sent it.
    raw: Dict[str, Any] = field(default_factory=dict)

    @classmethod
    def _from(cls, d: Dict[str, Any]) -> "MCPTool":
        return cls(name=d.get("name", ""), description=d.get("description") or "",
                   input_schema=d.get("inputSchema") or {}, output_schema=d.get("outputSchema"), raw=d)


@dataclass
class MCPToolResult:
    """What a tool call returned (``tools/call``): its content blocks, its structured content, and
    whether it is a tool error."""

    content: List[Dict[str, Any]] = field(default_factory=list)
    structured: Any = None
    is_error: bool = False
    raw: Dict[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        """The text content blocks, joined by newlines."""
        return "\n".join(c.get("text", "") for c in self.content if c.get("type") == "text")

    @classmethod
    def _from(cls, d: Dict[str, Any]) -> "MCPToolResult":
        return cls(content=list(d.get("content") or []), structured=d.get("structuredContent"),
                   is_error=bool(d.get("isError")), raw=d)


def _sse_messages(body: str) -> Iterator[Any]:
    """The JSON messages of an SSE stream: each event's data lines joined."""
    data: List[str] = []
    for line in body.splitlines() + [""]:
        if line == "":
            if data:
                try:
                    yield json.loads("\n".join(data))
                except ValueError:
                    pass
                data = []
        elif line.startswith("data:"):
            v = line[5:]
            data.append(v[1:] if v.startswith(" ") else v)


class _Exchange:
    """What the blocking and the asyncio sessions share: the endpoint, the session's id and
    protocol revision, the request ids, the headers, and reading an answer."""

    def __init__(self, client: Any, server: str, timeout: Optional[float]) -> None:
        if not server:
            raise ValueError("agentbox: an MCP server's name is needed")
        self.client = client
        self.server = server
        self.url = client.url + "/mcp/servers/" + urllib.parse.quote(server, safe="")
        self.timeout = timeout or client.timeout
        self.protocol_version = ""
        self.server_info: Dict[str, Any] = {}
        self.session_id = ""
        self._ids = itertools.count(1)

    def _headers(self, agent: str = "") -> Dict[str, str]:
        headers = {"User-Agent": f"agentbox-python/{__version__}{agent}", "Content-Type": "application/json",
                   "Accept": "application/json, text/event-stream"}
        if self.protocol_version:
            headers["MCP-Protocol-Version"] = self.protocol_version
        if self.session_id:
            headers["Mcp-Session-Id"] = self.session_id
        if self.client.api_key:
            headers["Authorization"] = "Bearer " + self.client.api_key
        return headers

    def _message(self, method: str, params: Optional[Dict[str, Any]], call: bool) -> Dict[str, Any]:
        msg: Dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if call:
            msg["id"] = next(self._ids)
        if params is not None:
            msg["params"] = params
        return msg

    @staticmethod
    def _initialize_params() -> Dict[str, Any]:
        return {"protocolVersion": PROTOCOL_VERSION, "capabilities": {},
                "clientInfo": {"name": "agentbox-python", "version": __version__}}

    def _initialized(self, res: Dict[str, Any]) -> None:
        self.protocol_version = res.get("protocolVersion") or PROTOCOL_VERSION
        self.server_info = res.get("serverInfo") or {}

    def _refused(self, status: int, payload: bytes, rid: str, bind: Any = None) -> AgentboxError:
        """The error of an HTTP answer that is not a success."""
        try:
            doc = json.loads(payload.decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            doc = None
        if isinstance(doc, dict) and isinstance(doc.get("error"), dict) and "jsonrpc" in doc:
            err = doc["error"]
            return MCPError(str(err.get("message", "")), rpc_code=int(err.get("code") or 0),
                            data=err.get("data"), status=status)
        if status == 404 and not (isinstance(doc, dict) and "error" in doc):
            return MCPError(f"HTTP 404 at {self.url}", status=status,
                            hint="no hosted MCP server of that name (Client.mcp_servers() lists them), "
                                 "or a daemon without hosted MCP servers")
        return from_response(status, payload, rid, bind)

    def _unreachable(self, method: str, reason: Any) -> DaemonUnreachable:
        return DaemonUnreachable(None, f"{method} {self.url}: {reason}",
                                 hint="is `agentbox serve` running there? AGENTBOX_URL sets the address")

    @staticmethod
    def _answer(msg: Dict[str, Any], status: int, payload: bytes, ctype: str) -> Optional[Dict[str, Any]]:
        """The result of msg in a successful HTTP answer (JSON or an SSE stream)."""
        if "id" not in msg:
            return None  # a notification: 202 and no body
        text = payload.decode("utf-8", "replace")
        if ctype.split(";")[0].strip() == "text/event-stream":
            msgs: List[Any] = list(_sse_messages(text))
        else:
            try:
                doc = json.loads(text) if text.strip() else None
            except ValueError:
                raise MCPError(f"HTTP {status}: an answer that is not JSON ({ctype or 'no type'})", status=status) from None
            msgs = doc if isinstance(doc, list) else [doc]
        for m in msgs:
            if isinstance(m, dict) and m.get("id") == msg["id"] and ("result" in m or "error" in m):
                if "error" in m:
                    err = m["error"] or {}
                    raise MCPError(str(err.get("message", "")), rpc_code=int(err.get("code") or 0),
                                   data=err.get("data"), status=status)
                return m["result"] or {}
        raise MCPError(f"no answer to {msg['method']} in the server's response", status=status)


class MCPSession(_Exchange):
    """One exchange with a hosted server's endpoint: initialize, then requests. Made by
    :meth:`agentbox.Client.mcp_list_tools` and :meth:`agentbox.Client.mcp_call`; use it directly to
    make several requests after one initialize."""

    def __init__(self, client: Any, server: str, *, timeout: Optional[float] = None) -> None:
        super().__init__(client, server, timeout)

    def _post(self, msg: Dict[str, Any]) -> Optional[Dict[str, Any]]:
        req = urllib.request.Request(self.url, data=json.dumps(msg).encode("utf-8"), headers=self._headers(), method="POST")
        try:
            with self.client._opener.open(req, timeout=self.timeout) as resp:
                status, payload, ctype = resp.status, resp.read(), resp.headers.get("Content-Type", "")
                if msg.get("method") == "initialize":
                    self.session_id = resp.headers.get("Mcp-Session-Id", "") or ""
        except urllib.error.HTTPError as e:
            status, payload, rid = e.code, e.read(), e.headers.get("X-Request-Id", "")
            e.close()
            raise self._refused(status, payload, rid, self.client) from None
        except (urllib.error.URLError, HTTPException, OSError, socket.timeout) as e:
            raise self._unreachable("POST", getattr(e, "reason", e)) from e
        return self._answer(msg, status, payload, ctype)

    def request(self, method: str, params: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        """Send a JSON-RPC request and return its result."""
        out = self._post(self._message(method, params, True))
        return out or {}

    def notify(self, method: str, params: Optional[Dict[str, Any]] = None) -> None:
        self._post(self._message(method, params, False))

    def close(self) -> None:
        """End the session on the gateway (``DELETE`` with its ``Mcp-Session-Id``); nothing to do
        when the gateway gave none. Errors are ignored: an idle session ends by itself."""
        if not self.session_id:
            return
        headers = self._headers()
        del headers["Content-Type"], headers["Accept"]
        self.session_id = ""
        req = urllib.request.Request(self.url, headers=headers, method="DELETE")
        try:
            with self.client._opener.open(req, timeout=self.timeout) as resp:
                resp.read()
        except (urllib.error.URLError, HTTPException, OSError, socket.timeout):
            pass

    def initialize(self) -> "MCPSession":
        self._initialized(self.request("initialize", self._initialize_params()))
        self.notify("notifications/initialized")
        return self

    def list_tools(self) -> List[MCPTool]:
        """Every tool, following ``nextCursor`` pages."""
        return [MCPTool._from(t) for t in self._pages("tools/list", "tools")]

    def call(self, tool: str, arguments: Optional[Dict[str, Any]] = None) -> MCPToolResult:
        return MCPToolResult._from(self.request("tools/call", {"name": tool, "arguments": arguments or {}}))

    def _pages(self, method: str, member: str) -> List[Dict[str, Any]]:
        out: List[Dict[str, Any]] = []
        cursor: Optional[str] = None
        while True:
            res = self.request(method, {"cursor": cursor} if cursor else {})
            out.extend(res.get(member) or [])
            cursor = res.get("nextCursor")
            if not cursor:
                return out

    def list_resources(self) -> List[Dict[str, Any]]:
        """Every resource (``resources/list``), as the server describes them (``uri``, ``name``,
        ``mimeType``...)."""
        return self._pages("resources/list", "resources")

    def list_resource_templates(self) -> List[Dict[str, Any]]:
        """Every resource template (``resources/templates/list``)."""
        return self._pages("resources/templates/list", "resourceTemplates")

    def read_resource(self, uri: str) -> List[Dict[str, Any]]:
        """A resource's contents (``resources/read``): a list of ``{"uri", "mimeType", "text"}`` or
        ``{"uri", "mimeType", "blob"}`` (base64), DLP-redacted by the gateway."""
        return list(self.request("resources/read", {"uri": uri}).get("contents") or [])

    def list_prompts(self) -> List[Dict[str, Any]]:
        """Every prompt (``prompts/list``)."""
        return self._pages("prompts/list", "prompts")

    def get_prompt(self, name: str, arguments: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
        """A prompt filled with ``arguments`` (``prompts/get``): ``{"description", "messages"}``."""
        return self.request("prompts/get", {"name": name, "arguments": arguments or {}})


class HostedMCP:
    """One hosted (or remote) MCP server, through the daemon's governed gateway at
    ``/mcp/servers/NAME``: ``client.mcp("memory")`` or ``box.mcp("memory")``.

    Every call is governed by the gateway as any MCP client's is (pinned definitions, allow and
    deny lists, DLP both ways, prompt scanning, an audit record). The gateway keeps no session, so
    this object holds nothing on the daemon: it initializes once, on first use, and reuses that
    exchange for every request.

    Example::

        mem = client.mcp("memory")
        print([t.name for t in mem.list_tools()])
        mem.call("create_entities", entities=[{"name": "Ada", "entityType": "person", "observations": []}])
    """

    def __init__(self, client: Any, server: str, *, timeout: Optional[float] = None) -> None:
        self.client = client
        self.server = server
        self._timeout = timeout
        self._session: Optional[MCPSession] = None

    def __repr__(self) -> str:
        return f"<HostedMCP {self.server} at {self.client.url}/mcp/servers/{self.server}>"

    @property
    def session(self) -> MCPSession:
        """The initialized exchange the requests go through."""
        if self._session is None:
            self._session = MCPSession(self.client, self.server, timeout=self._timeout).initialize()
        return self._session

    def list_tools(self) -> List[MCPTool]:
        """The server's tools (``tools/list``)."""
        return self.session.list_tools()

    def call(self, tool: str, arguments: Optional[Dict[str, Any]] = None, **kwargs: Any) -> MCPToolResult:
        """Call ``tool`` with ``arguments`` (a dict, or keyword arguments). A tool error, and a
        call the gateway refused, is a result with ``is_error`` set and the reason in ``text``."""
        args = dict(arguments or {})
        args.update(kwargs)
        return self.session.call(tool, args)

    def list_resources(self) -> List[Dict[str, Any]]:
        return self.session.list_resources()

    def list_resource_templates(self) -> List[Dict[str, Any]]:
        return self.session.list_resource_templates()

    def read_resource(self, uri: str) -> List[Dict[str, Any]]:
        """A resource's contents; a URI the gateway blocks (DLP) raises MCPError."""
        return self.session.read_resource(uri)

    def list_prompts(self) -> List[Dict[str, Any]]:
        return self.session.list_prompts()

    def get_prompt(self, name: str, arguments: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
        return self.session.get_prompt(name, arguments)


class AsyncMCPSession(_Exchange):
    """:class:`MCPSession` on asyncio, over an :class:`agentbox.AsyncClient`'s connection pool:
    the same requests, awaited. Made by :meth:`agentbox.AsyncClient.mcp_session`."""

    def __init__(self, client: Any, server: str, *, timeout: Optional[float] = None) -> None:
        super().__init__(client, server, timeout)
        self._target = client._prefix + "/mcp/servers/" + urllib.parse.quote(server, safe="")

    async def _post(self, msg: Dict[str, Any]) -> Optional[Dict[str, Any]]:
        resp = await self._send("POST", self._headers(" (asyncio)"), json.dumps(msg).encode("utf-8"))
        if resp.status >= 300:
            raise self._refused(resp.status, resp.body, resp.headers.get("x-request-id", ""))
        if msg.get("method") == "initialize":
            self.session_id = resp.headers.get("mcp-session-id", "") or ""
        return self._answer(msg, resp.status, resp.body, resp.headers.get("content-type", ""))

    async def _send(self, method: str, headers: Dict[str, str], body: Optional[bytes]) -> Any:
        try:
            return await asyncio.wait_for(self.client._pool.request(method, self._target, headers, body), self.timeout)
        except asyncio.TimeoutError:
            raise self._unreachable(method, f"no answer within {self.timeout:g}s") from None
        except (OSError, asyncio.IncompleteReadError, ValueError) as e:
            raise self._unreachable(method, e or type(e).__name__) from e

    async def request(self, method: str, params: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        """Send a JSON-RPC request and return its result."""
        out = await self._post(self._message(method, params, True))
        return out or {}

    async def notify(self, method: str, params: Optional[Dict[str, Any]] = None) -> None:
        await self._post(self._message(method, params, False))

    async def close(self) -> None:
        """End the session on the gateway (``DELETE``); errors are ignored."""
        if not self.session_id:
            return
        headers = self._headers(" (asyncio)")
        del headers["Content-Type"], headers["Accept"]
        self.session_id = ""
        try:
            await self._send("DELETE", headers, None)
        except AgentboxError:
            pass

    async def initialize(self) -> "AsyncMCPSession":
        self._initialized(await self.request("initialize", self._initialize_params()))
        await self.notify("notifications/initialized")
        return self

    async def _pages(self, method: str, member: str) -> List[Dict[str, Any]]:
        out: List[Dict[str, Any]] = []
        cursor: Optional[str] = None
        while True:
            res = await self.request(method, {"cursor": cursor} if cursor else {})
            out.extend(res.get(member) or [])
            cursor = res.get("nextCursor")
            if not cursor:
                return out

    async def list_tools(self) -> List[MCPTool]:
        return [MCPTool._from(t) for t in await self._pages("tools/list", "tools")]

    async def call(self, tool: str, arguments: Optional[Dict[str, Any]] = None) -> MCPToolResult:
        return MCPToolResult._from(await self.request("tools/call", {"name": tool, "arguments": arguments or {}}))

    async def list_resources(self) -> List[Dict[str, Any]]:
        return await self._pages("resources/list", "resources")

    async def list_resource_templates(self) -> List[Dict[str, Any]]:
        return await self._pages("resources/templates/list", "resourceTemplates")

    async def read_resource(self, uri: str) -> List[Dict[str, Any]]:
        return list((await self.request("resources/read", {"uri": uri})).get("contents") or [])

    async def list_prompts(self) -> List[Dict[str, Any]]:
        return await self._pages("prompts/list", "prompts")

    async def get_prompt(self, name: str, arguments: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
        return await self.request("prompts/get", {"name": name, "arguments": arguments or {}})


class AsyncHostedMCP:
    """:class:`HostedMCP` on asyncio: ``client.mcp("memory")`` of an :class:`agentbox.AsyncClient`,
    or ``box.mcp("memory")`` of an :class:`agentbox.AsyncSandbox`. The same methods, awaited;
    every call governed by the daemon's gateway. It initializes once, on first use (concurrent
    first uses share that one initialize), and ``aclose()`` ends the gateway's session.

    Example::

        mem = client.mcp("memory")
        tools = await mem.list_tools()
        res = await mem.call("read_graph")
    """

    def __init__(self, client: Any, server: str, *, timeout: Optional[float] = None) -> None:
        if not server:
            raise ValueError("agentbox: an MCP server's name is needed")
        self.client = client
        self.server = server
        self._timeout = timeout
        self._session: Optional[AsyncMCPSession] = None
        self._starting: Optional["asyncio.Future[AsyncMCPSession]"] = None

    def __repr__(self) -> str:
        return f"<AsyncHostedMCP {self.server} at {self.client.url}/mcp/servers/{self.server}>"

    async def session(self) -> AsyncMCPSession:
        """The initialized exchange the requests go through."""
        if self._session is not None:
            return self._session
        if self._starting is None:
            self._starting = asyncio.ensure_future(
                AsyncMCPSession(self.client, self.server, timeout=self._timeout).initialize())
        try:
            self._session = await asyncio.shield(self._starting)
        except BaseException:
            if self._starting.done():
                self._starting = None  # a failed initialize is tried again on the next use
            raise
        return self._session

    async def aclose(self) -> None:
        """End the gateway's session, if one was opened."""
        s, self._session, self._starting = self._session, None, None
        if s is not None:
            await s.close()

    async def __aenter__(self) -> "AsyncHostedMCP":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    async def list_tools(self) -> List[MCPTool]:
        """The server's tools (``tools/list``)."""
        return await (await self.session()).list_tools()

    async def call(self, tool: str, arguments: Optional[Dict[str, Any]] = None, **kwargs: Any) -> MCPToolResult:
        """Call ``tool`` with ``arguments`` (a dict, or keyword arguments). A tool error, and a
        call the gateway refused, is a result with ``is_error`` set and the reason in ``text``."""
        args = dict(arguments or {})
        args.update(kwargs)
        return await (await self.session()).call(tool, args)

    async def list_resources(self) -> List[Dict[str, Any]]:
        return await (await self.session()).list_resources()

    async def list_resource_templates(self) -> List[Dict[str, Any]]:
        return await (await self.session()).list_resource_templates()

    async def read_resource(self, uri: str) -> List[Dict[str, Any]]:
        """A resource's contents; a URI the gateway blocks (DLP) raises MCPError."""
        return await (await self.session()).read_resource(uri)

    async def list_prompts(self) -> List[Dict[str, Any]]:
        return await (await self.session()).list_prompts()

    async def get_prompt(self, name: str, arguments: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
        return await (await self.session()).get_prompt(name, arguments)
