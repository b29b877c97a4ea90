"""The official MCP SDK as the client of sluice's /mcp, and as the tool server behind it.

sluice starts `mcp/sdk_server.py` (the SDK's MCPServer over stdio) and
`tests/fixtures/mcp/tool_server.py http` sits behind it over streamable HTTP with its own
bearer token. The SDK's client connects with a virtual key: the SDK's default `auto` mode
(a `server/discover` probe, then `initialize`) and the plain handshake both work; tools are
listed with their server's prefix and called through; a key's object_permission narrows what it
sees and the refusal reaches the SDK as an MCP error; calls are counted in sluice_mcp_*.
"""

import asyncio
import json
import pathlib
import shutil
import subprocess
import sys
import time
import urllib.request

import pytest
from mcp import Client, ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from conftest import MASTER_KEY, ROOT, _start, _stop

HERE = pathlib.Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def http_tools(workdir):
    portfile = pathlib.Path(workdir) / "mcp-http-port"
    # Another module that takes these fixtures (test_mcp_modern.py) left its server's port.
    portfile.unlink(missing_ok=True)
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "tests/fixtures/mcp/tool_server.py"), "http", str(portfile)]
    )
    deadline = time.time() + 15
    while not portfile.exists():
        assert time.time() < deadline, "the HTTP tool server did not start"
        time.sleep(0.05)
    yield int(portfile.read_text())
    proc.kill()
    proc.wait()


@pytest.fixture(scope="module")
def mcp_gateway(workdir, http_tools):
    d = pathlib.Path(workdir) / "mcp-gw"
    d.mkdir(exist_ok=True)
    config = d / "config.yaml"
    config.write_text(f"""
model_list:
  - model_name: tool-model
    litellm_params:
      model: mock/tool-model
general_settings:
  master_key: {MASTER_KEY}
mcp_servers:
  sdk:
    command: {sys.executable}
    args: ["{HERE / 'mcp' / 'sdk_server.py'}"]
    description: tools written with the MCP SDK
  remote:
    url: http://127.0.0.1:{http_tools}/mcp
    auth_type: bearer_token
    auth_value: upstream-secret
""")
    proc, addr, log = _start(["serve", "--config", str(config), "--port", "0"], str(d))
    yield f"http://{addr}"
    assert _stop(proc) == 0
    if shutil.which("pgrep"):
        # The stdio server sluice started ends with it.
        deadline = time.time() + 5
        while subprocess.run(["pgrep", "-f", str(HERE / "mcp" / "sdk_server.py")]).returncode == 0:
            assert time.time() < deadline, "the stdio tool server outlived sluice"
            time.sleep(0.05)
    text = open(log).read()
    assert "upstream-secret" not in text, "the tool server's credential reached the logs"


def _admin(root, path, body):
    req = urllib.request.Request(
        root + path,
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {MASTER_KEY}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req) as r:
        return json.loads(r.read())


def _transport(root, key, path="/mcp"):
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {key}"})
    return streamable_http_client(root + path, http_client=http)


def test_sdk_client_lists_and_calls_tools_of_both_servers(mcp_gateway):
    async def run():
        async with Client(_transport(mcp_gateway, MASTER_KEY)) as c:
            names = {t.name for t in (await c.list_tools()).tools}
            assert {"sdk-multiply", "sdk-shout", "remote-add", "remote-echo"} <= names, names
            r = await c.call_tool("sdk-multiply", {"a": 6, "b": 7})
            assert r.content[0].text == "42"
            r = await c.call_tool("remote-add", {"a": 1, "b": 2})
            assert r.content[0].text == "3"
            p = await c.get_prompt("sdk-review", {"code": "x = 1"})
            assert "x = 1" in p.messages[0].content.text

    asyncio.run(run())


def test_sdk_handshake_on_one_server_alone(mcp_gateway):
    async def run():
        async with _transport(mcp_gateway, MASTER_KEY, "/mcp/sdk") as (read, write, *_):
            async with ClientSession(read, write) as s:
                init = await s.initialize()
                assert init.instructions == "tools written with the MCP SDK"
                names = {t.name for t in (await s.list_tools()).tools}
                assert names == {"multiply", "shout", "secret_tool", "count"}
                r = await s.read_resource("notes://today")
                assert r.contents[0].text == "ship the MCP gateway"
                r = await s.call_tool("shout", {"text": "quiet"})
                assert r.content[0].text == "QUIET"

    asyncio.run(run())


def test_progress_and_logs_reach_the_sdk_client_through_sluice(mcp_gateway):
    """A call with a progress callback: sluice answers it as an event stream carrying the tool
    server's progress (under the client's own token) and log messages, from the SDK's stdio
    server (ctx.report_progress) and from the streamable HTTP server."""

    async def run():
        seen, logs = [], []

        async def on_progress(progress, total, message):
            seen.append((progress, total))

        async def on_log(params):
            logs.append(params.data)

        async with Client(_transport(mcp_gateway, MASTER_KEY), logging_callback=on_log) as c:
            r = await c.call_tool("sdk-count", {"n": 3}, progress_callback=on_progress)
            assert r.content[0].text == "counted 3"
            assert seen == [(1, 3), (2, 3), (3, 3)], seen
            seen.clear()
            r = await c.call_tool("remote-steps", {"n": 2}, progress_callback=on_progress)
            assert r.content[0].text == "stepped"
            assert seen == [(1, 2), (2, 2)], seen
            assert "stepping 2" in logs, logs
            # Without a callback the answer is the plain JSON one, and still right.
            r = await c.call_tool("sdk-count", {"n": 2})
            assert r.content[0].text == "counted 2"

    asyncio.run(run())


def test_resources_of_every_server_on_the_aggregate(mcp_gateway):
    """resources/list and resources/templates/list on /mcp gather every server's (names
    prefixed, URIs unchanged), and resources/read reaches the server that listed the URI; a
    key limited to one server neither sees nor reads the other's."""

    async def run(key):
        async with Client(_transport(mcp_gateway, key)) as c:
            listed = {r.name: str(r.uri) for r in (await c.list_resources()).resources}
            templates = {t.name: t.uri_template for t in (await c.list_resource_templates()).resource_templates}
            reads = {}
            for uri in listed.values():
                reads[uri] = (await c.read_resource(uri)).contents[0].text
            refused = None
            try:
                await c.read_resource("mem://remote-note")
            except MCPError as e:
                refused = str(e)
            return listed, templates, reads, refused

    listed, templates, reads, refused = asyncio.run(run(MASTER_KEY))
    assert listed == {"sdk-today": "notes://today", "remote-note": "mem://remote-note"}, listed
    assert templates == {"remote-remote": "mem://remote/{id}"}, templates
    assert reads == {"notes://today": "ship the MCP gateway", "mem://remote-note": "a note"}, reads
    assert refused is None

    key = _admin(mcp_gateway, "/key/generate", {"object_permission": {"mcp_servers": ["sdk"]}})["key"]
    listed, templates, reads, refused = asyncio.run(run(key))
    assert listed == {"sdk-today": "notes://today"}, listed
    assert templates == {}, templates
    assert refused and "may not read" in refused, refused


def test_key_permissions_narrow_and_refuse(mcp_gateway):
    key = _admin(mcp_gateway, "/key/generate", {
        "metadata": {"object_permission": {
            "mcp_servers": ["sdk"],
            "mcp_tool_permissions": {"sdk": ["multiply", "shout"]},
        }}
    })["key"]

    async def run():
        async with Client(_transport(mcp_gateway, key)) as c:
            names = sorted(t.name for t in (await c.list_tools()).tools)
            assert names == ["sdk-multiply", "sdk-shout"]
            assert (await c.call_tool("sdk-shout", {"text": "ok"})).content[0].text == "OK"
            for name in ("sdk-secret_tool", "remote-add"):
                with pytest.raises(MCPError, match="may not use"):
                    await c.call_tool(name, {})

    asyncio.run(run())
    # LiteLLM's own form: object_permission at the top level of /key/generate.
    litellm_key = _admin(mcp_gateway, "/key/generate", {
        "object_permission": {"mcp_servers": ["remote"]},
    })["key"]

    async def only_remote():
        async with Client(_transport(mcp_gateway, litellm_key)) as c:
            names = {t.name for t in (await c.list_tools()).tools}
            assert names and all(n.startswith("remote-") for n in names), names

    asyncio.run(only_remote())
    with urllib.request.urlopen(urllib.request.Request(
        mcp_gateway + "/metrics", headers={"Authorization": f"Bearer {MASTER_KEY}"}
    )) as r:
        metrics = r.read().decode()
    assert 'sluice_mcp_calls_total{server="sdk",method="tools/call",tool="shout",status="ok"}' in metrics
    assert 'sluice_mcp_calls_total{server="sdk",method="tools/call",tool="",status="refused"} 1' in metrics


def test_a_bad_key_never_reaches_a_tool(mcp_gateway):
    async def run():
        async with Client(_transport(mcp_gateway, "sk-not-a-key")) as c:
            await c.list_tools()

    with pytest.raises(Exception):
        asyncio.run(run())


def test_openai_sdk_responses_run_an_mcp_tool_inside_the_model_call(mcp_gateway):
    """The official openai SDK's Responses API with an `mcp` tool naming sluice's own server:
    sluice lists its tools to the model, runs the call the model makes (the mock model calls
    the tool a `mock-tool:` line names) and answers with the result, whole and streamed."""
    import openai

    client = openai.OpenAI(base_url=f"{mcp_gateway}/v1", api_key=MASTER_KEY)
    tools = [{"type": "mcp", "server_label": "sdk", "require_approval": "never"}]
    ask = 'Multiply, please.\nmock-tool: sdk-multiply {"a": 6, "b": 7}'
    r = client.responses.create(model="tool-model", input=ask, tools=tools)
    kinds = [item.type for item in r.output]
    assert kinds[0] == "mcp_list_tools" and "mcp_call" in kinds and kinds[-1] == "message", kinds
    listed = {t.name for t in r.output[0].tools}
    assert "multiply" in listed, listed
    call = next(item for item in r.output if item.type == "mcp_call")
    assert call.server_label == "sdk" and call.name == "multiply" and call.output == "42", call
    assert "42" in r.output_text
    assert r.usage.input_tokens > 0

    events = list(client.responses.create(model="tool-model", input=ask, tools=tools, stream=True))
    done = events[-1]
    assert done.type == "response.completed", done.type
    streamed = [item.type for item in done.response.output]
    assert streamed == kinds, streamed
    assert "42" in done.response.output_text
    # Every event is one the SDK knows: parsed into the class whose `type` is the event's own
    # (an unknown type would land in some other class of the union), numbered in order, and
    # each MCP item is told with OpenAI's own MCP events.
    from typing import get_args

    for e in events:
        assert get_args(type(e).model_fields["type"].annotation) == (e.type,), (e.type, type(e))
    assert [e.sequence_number for e in events] == list(range(len(events)))
    types = [e.type for e in events]
    assert types[0] == "response.created", types
    mcp = [t for t in types if t.startswith("response.mcp")]
    assert mcp == [
        "response.mcp_list_tools.in_progress",
        "response.mcp_list_tools.completed",
        "response.mcp_call_arguments.delta",
        "response.mcp_call_arguments.done",
        "response.mcp_call.in_progress",
        "response.mcp_call.completed",
    ], types
    # The list before the call, the call before the model's message.
    assert types.index("response.mcp_list_tools.completed") < types.index("response.mcp_call.in_progress")
    assert types.index("response.mcp_call.completed") < types.index("response.output_text.delta")
    args = next(e for e in events if e.type == "response.mcp_call_arguments.done")
    assert '"a": 6' in args.arguments or '"a":6' in args.arguments, args

    # Approval asked for: the call does not run until the client approves it.
    asked = client.responses.create(
        model="tool-model", input=ask, tools=[{"type": "mcp", "server_label": "sdk"}]
    )
    request = next(item for item in asked.output if item.type == "mcp_approval_request")
    assert request.name == "multiply"
    assert not any(item.type == "mcp_call" for item in asked.output)
