"""The official MCP SDK's client in the current, stateless revision (2026-07-28) against
sluice's /mcp: `auto` mode probes `server/discover` and stays modern (no session, no
`initialize`), lists and calls tools of a stdio and an HTTP server behind sluice, reads a
resource of one server alone, and is refused what its key may not use; a version pin works
without the probe; the handshake mode still works beside it. Raw requests check the
revision's envelope: mismatched headers are HeaderMismatch (-32020), an unknown version
UnsupportedProtocolVersion (-32022) with sluice's versions.
"""

import asyncio
import json
import urllib.error
import urllib.request

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from conftest import MASTER_KEY
from test_mcp import _admin, _transport, http_tools, mcp_gateway  # noqa: F401  (fixtures)

MODERN = "2026-07-28"


def test_auto_mode_is_modern_and_sessionless(mcp_gateway):
    async def run():
        async with Client(_transport(mcp_gateway, MASTER_KEY)) as c:
            assert c.protocol_version == MODERN, c.protocol_version
            assert c.session.discover_result is not None, "negotiated by server/discover"
            assert c.server_info is not None and c.server_info.name == "sluice"
            names = {t.name for t in (await c.list_tools()).tools}
            assert {"sdk-multiply", "remote-add"} <= names, names
            assert (await c.call_tool("sdk-multiply", {"a": 3, "b": 5})).content[0].text == "15"
            assert (await c.call_tool("remote-add", {"a": 1, "b": 2})).content[0].text == "3"
            p = await c.get_prompt("sdk-review", {"code": "y = 2"})
            assert "y = 2" in p.messages[0].content.text

    asyncio.run(run())


def test_one_server_alone_pinned_to_the_revision(mcp_gateway):
    async def run():
        async with Client(_transport(mcp_gateway, MASTER_KEY, "/mcp/sdk"), mode=MODERN) as c:
            names = {t.name for t in (await c.list_tools()).tools}
            assert {"multiply", "shout", "secret_tool"} <= names, names
            r = await c.read_resource("notes://today")
            assert r.contents[0].text == "ship the MCP gateway"

    asyncio.run(run())


def test_legacy_mode_still_works(mcp_gateway):
    async def run():
        async with Client(_transport(mcp_gateway, MASTER_KEY), mode="legacy") as c:
            assert c.protocol_version != MODERN
            assert (await c.call_tool("sdk-shout", {"text": "hi"})).content[0].text == "HI"

    asyncio.run(run())


def test_permissions_hold_in_the_revision(mcp_gateway):
    key = _admin(mcp_gateway, "/key/generate", {
        "object_permission": {"mcp_servers": ["sdk"], "mcp_tool_permissions": {"sdk": ["shout"]}},
    })["key"]

    async def run():
        async with Client(_transport(mcp_gateway, key)) as c:
            assert c.protocol_version == MODERN
            names = sorted(t.name for t in (await c.list_tools()).tools)
            assert names == ["sdk-shout"], names
            with pytest.raises(MCPError, match="may not use"):
                await c.call_tool("sdk-multiply", {"a": 1, "b": 1})

    asyncio.run(run())


def _post(root, body, headers):
    req = urllib.request.Request(
        root + "/mcp",
        data=json.dumps(body).encode(),
        headers={
            "Authorization": f"Bearer {MASTER_KEY}",
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            **headers,
        },
    )
    try:
        with urllib.request.urlopen(req) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def _meta(version=MODERN):
    return {"io.modelcontextprotocol/protocolVersion": version,
            "io.modelcontextprotocol/clientCapabilities": {}}


def test_the_envelope_is_checked(mcp_gateway):
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "sdk-shout", "arguments": {"text": "x"}, "_meta": _meta()}}
    good = {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": "sdk-shout"}
    status, body = _post(mcp_gateway, call, good)
    assert status == 200, body
    assert body["result"]["resultType"] == "complete"
    assert body["result"]["content"][0]["text"] == "X"

    status, body = _post(mcp_gateway, call, {**good, "Mcp-Name": "sdk-multiply"})
    assert (status, body["error"]["code"]) == (400, -32020), body

    future = {**call, "params": {**call["params"], "_meta": _meta("2031-01-01")}}
    status, body = _post(mcp_gateway, future, {**good, "MCP-Protocol-Version": "2031-01-01"})
    assert (status, body["error"]["code"]) == (400, -32022), body
    assert MODERN in body["error"]["data"]["supported"]

    listed = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": _meta()}}
    status, body = _post(mcp_gateway, listed, {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/list"})
    assert status == 200, body
    assert body["result"]["cacheScope"] == "private" and body["result"]["ttlMs"] >= 0

    ping = {"jsonrpc": "2.0", "id": 3, "method": "ping", "params": {"_meta": _meta()}}
    status, body = _post(mcp_gateway, ping, {"MCP-Protocol-Version": MODERN, "Mcp-Method": "ping"})
    assert (status, body["error"]["code"]) == (404, -32601), body
