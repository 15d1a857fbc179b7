"""The hosted MCP servers from the SDK: the registry (GET /v1/mcp/servers) and tool calls over
MCP's streamable HTTP at /mcp/servers/NAME, against the scripted stub; and against a real daemon
hosting server-everything when the heavy tier and the node-mcp image are here."""

from __future__ import annotations

import json
import urllib.request
from typing import Any, Dict

import pytest

from agentbox import Client, MCPError, NotFound, Unauthorized
from agentbox.mcp import PROTOCOL_VERSION, _sse_messages


def rpc(req: Dict[str, Any], result: Any) -> Dict[str, Any]:
    return {"jsonrpc": "2.0", "id": req["body"]["id"], "result": result}


INIT = {"protocolVersion": PROTOCOL_VERSION, "capabilities": {"tools": {}}, "serverInfo": {"name": "stub", "version": "1"}}


def test_mcp_servers_are_listed(stub):
    stub.script((200, {"servers": [{"name": "memory", "image": "node-mcp", "command": ["mcp-server-memory"],
                                    "deny": ["delete_entities"], "added": "2026-11-26T10:00:00Z", "running": True}]}))
    got = Client(stub.url, "admin").mcp_servers()
    assert stub.requests[0]["method"] == "GET" and stub.requests[0]["path"] == "/v1/mcp/servers"
    assert stub.requests[0]["headers"]["Authorization"] == "Bearer admin"
    assert [s.name for s in got] == ["memory"]
    assert got[0].command == ["mcp-server-memory"] and got[0].deny == ["delete_entities"] and got[0].running
    assert got[0].added is not None and got[0].added.year == 2026


def test_mcp_call_initializes_then_calls_json(stub):
    stub.script(
        lambda r: (200, rpc(r, INIT)),
        (202, b""),
        lambda r: (200, rpc(r, {"content": [{"type": "text", "text": "Echo: hi"}], "structuredContent": {"n": 1}})),
    )
    res = Client(stub.url, "k").mcp_call("everything", "echo", {"message": "hi"})
    assert res.text == "Echo: hi" and res.structured == {"n": 1} and not res.is_error
    init, note, call = stub.requests
    assert [r["path"] for r in stub.requests] == ["/mcp/servers/everything"] * 3
    assert init["body"]["method"] == "initialize" and init["body"]["params"]["protocolVersion"] == PROTOCOL_VERSION
    assert "id" not in note["body"] and note["body"]["method"] == "notifications/initialized"
    assert call["body"]["method"] == "tools/call"
    assert call["body"]["params"] == {"name": "echo", "arguments": {"message": "hi"}}
    for r in stub.requests:
        assert r["headers"]["Authorization"] == "Bearer k"
        assert "text/event-stream" in r["headers"]["Accept"] and "application/json" in r["headers"]["Accept"]
    hdr = [{k.lower(): v for k, v in r["headers"].items()} for r in stub.requests]
    assert "mcp-protocol-version" not in hdr[0]
    assert hdr[2]["mcp-protocol-version"] == PROTOCOL_VERSION


def sse(*msgs: Any) -> bytes:
    return "".join("event: message\ndata: " + json.dumps(m) + "\n\n" for m in msgs).encode()


def test_mcp_list_tools_reads_sse_and_pages(stub):
    def page(r):
        cursor = (r["body"].get("params") or {}).get("cursor")
        if cursor is None:
            body = rpc(r, {"tools": [{"name": "echo", "description": "Echoes", "inputSchema": {"type": "object"}}],
                           "nextCursor": "p2"})
        else:
            body = rpc(r, {"tools": [{"name": "add", "inputSchema": {"type": "object"},
                                      "outputSchema": {"type": "object"}}]})
        # a server notification before the answer, as a stream may carry
        note = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "x"}}
        return (200, sse(note, body), "text/event-stream")

    stub.script(lambda r: (200, sse(rpc(r, INIT)), "text/event-stream"), (202, b""), page)
    tools = Client(stub.url, "k").list_tools("everything")
    assert [t.name for t in tools] == ["echo", "add"]
    assert tools[0].description == "Echoes" and tools[0].input_schema == {"type": "object"}
    assert tools[1].output_schema == {"type": "object"} and tools[0].output_schema is None
    assert stub.requests[3]["body"]["params"] == {"cursor": "p2"}


def test_mcp_tool_error_is_a_result(stub):
    stub.script(lambda r: (200, rpc(r, INIT)), (202, b""),
                lambda r: (200, rpc(r, {"content": [{"type": "text", "text": "mcp: tool delete_entities is denied"}],
                                        "isError": True})))
    res = Client(stub.url, "k").mcp_call("memory", "delete_entities")
    assert res.is_error and "denied" in res.text
    assert stub.requests[2]["body"]["params"]["arguments"] == {}


def test_mcp_rpc_error_raises(stub):
    stub.script(lambda r: (200, rpc(r, INIT)), (202, b""),
                lambda r: (200, {"jsonrpc": "2.0", "id": r["body"]["id"],
                                 "error": {"code": -32602, "message": "unknown tool", "data": {"tool": "x"}}}))
    with pytest.raises(MCPError) as e:
        Client(stub.url, "k").mcp_call("memory", "x")
    assert e.value.rpc_code == -32602 and e.value.data == {"tool": "x"} and "unknown tool" in str(e.value)
    assert e.value.code == "mcp"


def test_mcp_http_errors_are_typed(stub):
    stub.script((401, {"error": {"code": "unauthorized", "message": "no key", "hint": "h"}}))
    with pytest.raises(Unauthorized):
        Client(stub.url, "").mcp_call("memory", "read_graph")
    stub.script((404, {"error": {"code": "not_found", "message": "no hosted MCP server nope", "hint": ""}}))
    with pytest.raises(NotFound):
        Client(stub.url, "k").mcp_list_tools("nope")
    stub.script((404, b"404 page not found\n", "text/plain"))
    with pytest.raises(MCPError) as e:
        Client(stub.url, "k").mcp_list_tools("nope")
    assert e.value.status == 404 and "mcp_servers" in e.value.hint


def test_mcp_session_reuses_one_initialize(stub):
    stub.script(lambda r: (200, rpc(r, INIT)), (202, b""),
                lambda r: (200, rpc(r, {"content": [{"type": "text", "text": r["body"]["params"]["arguments"]["message"]}]})))
    s = Client(stub.url, "k").mcp_session("everything")
    assert s.server_info == {"name": "stub", "version": "1"}
    assert [s.call("echo", {"message": m}).text for m in ("a", "b")] == ["a", "b"]
    assert [r["body"]["method"] for r in stub.requests] == ["initialize", "notifications/initialized", "tools/call", "tools/call"]
    assert [r["body"]["id"] for r in stub.requests[2:]] == [2, 3]


def test_sse_parsing():
    body = 'event: message\nid: 1\ndata: {"a":\ndata: 1}\n\n: a comment\n\ndata: not json\n\ndata:{"b":2}'
    assert list(_sse_messages(body)) == [{"a": 1}, {"b": 2}]


# --- against a real daemon -------------------------------------------------------------------


def test_mcp_hosted_everything(heavy):
    """server-everything hosted in gVisor: registered over the API, listed, its echo called
    through the SDK (and the call is in the audit log). Skips without the node-mcp image."""
    from conftest import KEY, missing

    c = Client(heavy.url, KEY)
    if not any(i.name == "node-mcp" for i in c.images()):
        missing("no node-mcp image here: `agentbox image build node-mcp` builds it")
    body = json.dumps({"name": "everything", "image": "node-mcp", "command": ["mcp-server-everything"]}).encode()
    req = urllib.request.Request(heavy.url + "/v1/mcp/servers", data=body, method="POST",
                                 headers={"Authorization": "Bearer " + KEY, "Content-Type": "application/json"})
    try:
        urllib.request.urlopen(req, timeout=30).close()
    except urllib.error.HTTPError as e:
        if e.code != 409:
            raise
    assert "everything" in [s.name for s in c.mcp_servers()]
    tools = c.mcp_list_tools("everything")
    assert "echo" in [t.name for t in tools]
    res = c.mcp_call("everything", "echo", {"message": "hello from python"}, timeout=120)
    assert not res.is_error and "hello from python" in res.text
    assert any(r.mcp and r.mcp.tool == "echo" for r in c.audit(kind="mcp.call"))
    # the same server as an object, its resources and prompts carried through the gateway
    ev = c.mcp("everything")
    assert "echo" in [t.name for t in ev.list_tools()]
    assert ev.call("echo", message="as an object").text.endswith("as an object")
    resources = ev.list_resources()
    assert resources and ev.read_resource(resources[0]["uri"])
    plain = [p for p in ev.list_prompts() if not any(a.get("required") for a in p.get("arguments") or [])]
    assert plain and ev.get_prompt(plain[0]["name"])["messages"]


def test_client_mcp_object_lists_calls_reads_and_prompts(stub):
    """client.mcp(server) (and box.mcp) is one server as an object: nothing is sent until it is
    used, one initialize serves every request after it, and call takes a dict or keywords."""
    from agentbox import HostedMCP, Sandbox

    c = Client(stub.url, "k")
    mem = c.mcp("memory")
    assert isinstance(mem, HostedMCP) and stub.requests == []
    assert isinstance(Sandbox(client=c).mcp("memory"), HostedMCP) and stub.requests == []

    def answer(r):
        m, p = r["body"]["method"], r["body"].get("params") or {}
        if m == "tools/list":
            return (200, rpc(r, {"tools": [{"name": "read_graph", "inputSchema": {"type": "object"}}]}))
        if m == "tools/call":
            return (200, rpc(r, {"content": [{"type": "text", "text": json.dumps(p["arguments"], sort_keys=True)}]}))
        if m == "resources/list":
            return (200, rpc(r, {"resources": [{"uri": "file:///a", "name": "a"}]}))
        if m == "resources/templates/list":
            return (200, rpc(r, {"resourceTemplates": [{"uriTemplate": "file:///{x}", "name": "x"}]}))
        if m == "resources/read":
            return (200, rpc(r, {"contents": [{"uri": p["uri"], "text": "key = [REDACTED:secret]"}]}))
        if m == "prompts/list":
            return (200, rpc(r, {"prompts": [{"name": "greet"}]}))
        if m == "prompts/get":
            return (200, rpc(r, {"messages": [{"role": "user", "content": {"type": "text", "text": "hi " + p["arguments"]["who"]}}]}))
        raise AssertionError(m)

    stub.script(lambda r: (200, rpc(r, INIT)), (202, b""), *([answer] * 8))
    assert [t.name for t in mem.list_tools()] == ["read_graph"]
    assert mem.call("search_nodes", {"query": "a"}, limit=2).text == '{"limit": 2, "query": "a"}'
    assert mem.list_resources() == [{"uri": "file:///a", "name": "a"}]
    assert mem.list_resource_templates()[0]["uriTemplate"] == "file:///{x}"
    assert mem.read_resource("file:///a")[0]["text"] == "key = [REDACTED:secret]"
    assert mem.list_prompts() == [{"name": "greet"}]
    assert mem.get_prompt("greet", {"who": "Ada"})["messages"][0]["content"]["text"] == "hi Ada"
    methods = [r["body"]["method"] for r in stub.requests]
    assert methods == ["initialize", "notifications/initialized", "tools/list", "tools/call", "resources/list",
                       "resources/templates/list", "resources/read", "prompts/list", "prompts/get"]
    assert all(r["path"] == "/mcp/servers/memory" for r in stub.requests)


def test_client_mcp_object_refusal_of_a_resource_raises(stub):
    """A resource the gateway refuses (DLP on its URI, a server it may not reach) is an MCPError
    carrying the API's error body as data."""
    stub.script(lambda r: (200, rpc(r, INIT)), (202, b""),
                lambda r: (200, {"jsonrpc": "2.0", "id": r["body"]["id"], "error": {
                    "code": -32603, "message": "blocked before reaching the server: a payment card number",
                    "data": {"error": {"code": "policy_violation", "message": "blocked", "hint": ""}}}}))
    with pytest.raises(MCPError) as e:
        Client(stub.url, "k").mcp("files").read_resource("file:///4111111111111111")
    assert e.value.data["error"]["code"] == "policy_violation"


# --- AsyncClient / AsyncSandbox ----------------------------------------------------------------


def test_async_mcp_object(stub):
    """AsyncClient.mcp(server) and AsyncSandbox.mcp(server): the same object, its methods awaited;
    nothing is sent until one is used, and concurrent first uses share one initialize."""
    import asyncio

    from agentbox import AsyncClient, AsyncHostedMCP, AsyncSandbox

    def answer(r):
        m, p = r["body"]["method"], r["body"].get("params") or {}
        if m == "initialize":
            return (200, sse(rpc(r, INIT)), "text/event-stream")
        if m == "notifications/initialized":
            return (202, b"")
        if m == "tools/list":
            return (200, rpc(r, {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}))
        if m == "tools/call":
            if p["name"] == "delete_entities":
                return (200, rpc(r, {"content": [{"type": "text", "text": "denied by the profile"}], "isError": True}))
            return (200, sse(rpc(r, {"content": [{"type": "text", "text": json.dumps(p["arguments"], sort_keys=True)}]})),
                    "text/event-stream")
        if m == "resources/read":
            return (200, {"jsonrpc": "2.0", "id": r["body"]["id"], "error": {"code": -32603, "message": "blocked",
                                                                              "data": {"error": {"code": "policy_violation"}}}})
        if m == "prompts/get":
            return (200, rpc(r, {"messages": [{"role": "user", "content": {"type": "text", "text": "hi " + p["arguments"]["who"]}}]}))
        raise AssertionError(m)

    async def main():
        async with AsyncClient(stub.url, "k") as c:
            ev = c.mcp("everything")
            assert isinstance(ev, AsyncHostedMCP) and stub.requests == []
            assert isinstance(AsyncSandbox(client=c).mcp("everything"), AsyncHostedMCP) and stub.requests == []
            results = await asyncio.gather(*(ev.call("echo", message=str(i)) for i in range(5)))
            assert [r.text for r in results] == [json.dumps({"message": str(i)}) for i in range(5)]
            assert [t.name for t in await ev.list_tools()] == ["echo"]
            refused = await ev.call("delete_entities")
            assert refused.is_error and "denied" in refused.text
            with pytest.raises(MCPError) as e:
                await ev.read_resource("file:///4111111111111111")
            assert e.value.data["error"]["code"] == "policy_violation"
            assert (await ev.get_prompt("greet", {"who": "Ada"}))["messages"][0]["content"]["text"] == "hi Ada"
            await ev.aclose()
            one = await c.mcp_call("everything", "echo", {"message": "once"})
            assert one.text == '{"message": "once"}'

    stub.script(answer)
    asyncio.run(main())
    methods = [r["body"]["method"] for r in stub.requests]
    assert methods[:2] == ["initialize", "notifications/initialized"] and methods.count("initialize") == 2
    assert methods.count("tools/call") == 7
    for r in stub.requests:
        assert r["path"] == "/mcp/servers/everything" and r["headers"]["Authorization"] == "Bearer k"
        assert "asyncio" in r["headers"]["User-Agent"]
    hdr = [{k.lower(): v for k, v in r["headers"].items()} for r in stub.requests]
    assert "mcp-protocol-version" not in hdr[0] and hdr[2]["mcp-protocol-version"] == PROTOCOL_VERSION


def test_async_mcp_http_errors_are_typed(stub):
    import asyncio

    from agentbox import AsyncClient

    async def main():
        async with AsyncClient(stub.url, "") as c:
            with pytest.raises(Unauthorized):
                await c.mcp("memory").list_tools()
            stub.script((404, b"404 page not found\n", "text/plain"))
            with pytest.raises(MCPError) as e:
                await c.mcp_list_tools("nope")
            assert e.value.status == 404 and "mcp_servers" in e.value.hint

    stub.script((401, {"error": {"code": "unauthorized", "message": "no key", "hint": "h"}}))
    asyncio.run(main())


def test_async_mcp_hosted_everything(heavy):
    """server-everything hosted in gVisor, through AsyncClient.mcp and AsyncSandbox.mcp: listed,
    called concurrently on one session (which the gateway keeps, and aclose ends), governed and
    audited. Skips without the node-mcp image."""
    import asyncio

    from conftest import KEY, missing

    from agentbox import AsyncClient, AsyncSandbox

    c = Client(heavy.url, KEY)
    if not any(i.name == "node-mcp" for i in c.images()):
        missing("no node-mcp image here: `agentbox image build node-mcp` builds it")
    body = json.dumps({"name": "everything", "image": "node-mcp", "command": ["mcp-server-everything"]}).encode()
    req = urllib.request.Request(heavy.url + "/v1/mcp/servers", data=body, method="POST",
                                 headers={"Authorization": "Bearer " + KEY, "Content-Type": "application/json"})
    try:
        urllib.request.urlopen(req, timeout=30).close()
    except urllib.error.HTTPError as e:
        if e.code != 409:
            raise

    async def main():
        async with AsyncClient(heavy.url, KEY, timeout=120) as ac:
            assert "everything" in [s.name for s in await ac.mcp_servers()]
            ev = AsyncSandbox(client=ac).mcp("everything")
            assert "echo" in [t.name for t in await ev.list_tools()]
            session = await ev.session()
            assert session.session_id, "the gateway gave no Mcp-Session-Id"
            results = await asyncio.gather(*(ev.call("echo", message=f"async {i}") for i in range(4)))
            assert all(not r.is_error and r.text.endswith(f"async {i}") for i, r in enumerate(results))
            assert (await ev.list_resources())
            await ev.aclose()
            assert session.session_id == ""
            res = await ac.mcp_call("everything", "echo", {"message": "one call"})
            assert not res.is_error and res.text.endswith("one call")

    asyncio.run(main())
    assert sum(1 for r in c.audit(kind="mcp.call") if r.mcp and r.mcp.tool == "echo") >= 5
