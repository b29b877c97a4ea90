"""The official MCP SDK over MCP's older HTTP+SSE transport (2024-11-05), on both sides of
sluice: the SDK's `sse_client` connects to sluice's `/mcp/sse` (and `/mcp/{server}/sse`) with a
virtual key, and the tool server behind sluice is the SDK's own server run with the SSE
transport (`mcp/sdk_sse_server.py`), which sluice reaches with `transport: sse`. Tools are
listed with their prefix and called through; a key without the server sees none of it, and a
wrong key is refused before any stream opens.
"""

import asyncio
import json
import pathlib
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest
from mcp import ClientSession
from mcp.client.sse import sse_client
from mcp.shared.exceptions import MCPError

from conftest import MASTER_KEY, _start, _stop

HERE = pathlib.Path(__file__).resolve().parent


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def sse_tools():
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "mcp" / "sdk_sse_server.py"), str(port)],
        cwd=str(HERE / "mcp"),
    )
    deadline = time.time() + 20
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            assert proc.poll() is None, "the SDK's SSE server exited"
            assert time.time() < deadline, "the SDK's SSE server did not start"
            time.sleep(0.1)
    yield port
    proc.kill()
    proc.wait()


@pytest.fixture(scope="module")
def sse_gateway(workdir, sse_tools):
    d = pathlib.Path(workdir) / "mcp-sse-gw"
    d.mkdir(exist_ok=True)
    config = d / "config.yaml"
    config.write_text(f"""
model_list: []
general_settings:
  master_key: {MASTER_KEY}
mcp_servers:
  sdk:
    url: http://127.0.0.1:{sse_tools}/sse
    transport: sse
    description: tools written with the MCP SDK, over SSE
""")
    proc, addr, _log = _start(["serve", "--config", str(config), "--port", "0"], str(d))
    yield f"http://{addr}"
    assert _stop(proc) == 0


def _key(root, spec):
    req = urllib.request.Request(
        root + "/key/generate",
        data=json.dumps(spec).encode(),
        headers={"Authorization": f"Bearer {MASTER_KEY}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req) as r:
        return json.loads(r.read())["key"]


def _session(root, key, path="/mcp/sse"):
    return sse_client(root + path, headers={"Authorization": f"Bearer {key}"})


def test_sse_client_lists_and_calls_tools_through_sluice(sse_gateway):
    key = _key(sse_gateway, {})

    async def run():
        async with _session(sse_gateway, key) as (read, write):
            async with ClientSession(read, write) as s:
                init = await s.initialize()
                assert init.server_info.name == "sluice"
                names = {t.name for t in (await s.list_tools()).tools}
                assert {"sdk-multiply", "sdk-shout", "sdk-secret_tool"} <= names, names
                r = await s.call_tool("sdk-multiply", {"a": 6, "b": 7})
                assert r.content[0].text == "42"
                # Requests side by side on one session, answered on its one stream.
                a, b = await asyncio.gather(
                    s.call_tool("sdk-shout", {"text": "one"}),
                    s.call_tool("sdk-shout", {"text": "two"}),
                )
                assert (a.content[0].text, b.content[0].text) == ("ONE", "TWO")

    asyncio.run(run())


def test_sse_client_on_one_server_alone(sse_gateway):
    async def run():
        async with _session(sse_gateway, MASTER_KEY, "/mcp/sdk/sse") as (read, write):
            async with ClientSession(read, write) as s:
                init = await s.initialize()
                assert init.instructions == "tools written with the MCP SDK, over SSE"
                names = {t.name for t in (await s.list_tools()).tools}
                assert {"multiply", "shout", "secret_tool"} <= names, names
                r = await s.read_resource("notes://today")
                assert r.contents[0].text == "ship the MCP gateway"

    asyncio.run(run())


def test_a_key_without_the_server_sees_none_and_a_wrong_key_is_refused(sse_gateway):
    key = _key(sse_gateway, {"metadata": {"object_permission": {"mcp_servers": []}}})

    async def run():
        async with _session(sse_gateway, key) as (read, write):
            async with ClientSession(read, write) as s:
                await s.initialize()
                assert (await s.list_tools()).tools == []
                with pytest.raises(MCPError) as e:
                    await s.call_tool("sdk-multiply", {"a": 1, "b": 2})
                assert "may not use" in str(e.value)

    asyncio.run(run())

    async def wrong():
        async with _session(sse_gateway, "sk-wrong") as (read, write):
            async with ClientSession(read, write) as s:
                await s.initialize()

    with pytest.raises(Exception):
        asyncio.run(wrong())
    req = urllib.request.Request(
        sse_gateway + "/mcp/sse", headers={"Authorization": "Bearer sk-wrong"}
    )
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req)
    assert e.value.code == 401
