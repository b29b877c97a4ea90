"""Claude Code (npm `@anthropic-ai/claude-code`, latest) against sluice, its models routed to an
OpenAI-compatible deployment (`sluice mock`): every request is translated from Anthropic's
Messages API to Chat Completions and back, with whatever new fields the current release sends.

The prompt scripts the mock (`mock-tool: Bash {...}`, see crates/mock/src/tools.rs): it asks
for a Bash call whose output only a shell produces, then echoes the tool result it receives.
So the final answer proves the tool ran and its result went back through sluice.

Claude Code is installed from npm into a cache outside the repository
(${XDG_CACHE_HOME:-~/.cache}/sluice-claude-code); the test is skipped, with the reason, only
when npm cannot install it and no earlier install is there.
"""

import json
import os
import pathlib
import re
import subprocess
import time

import pytest

from conftest import MASTER_KEY, npm_install

PACKAGE = "@anthropic-ai/claude-code@latest"
MAIN_MODEL = "claude-sonnet-4-6"
FAST_MODEL = "claude-haiku-4-5"
# `$((6*7))` is expanded only by a shell: `sluice-42` in the answer means Bash ran.
MARKER = "sluice-42"
COMMAND = "echo sluice-$((6*7)) > marker.txt; cat marker.txt"
PROMPT = (
    "Write the marker file.\n"
    "mock-tool: Bash " + json.dumps({"command": COMMAND, "description": "Write a marker file"})
)
RUN_TIMEOUT = 180


def _cache_dir():
    base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return pathlib.Path(base) / "sluice-claude-code"


def _runs(binary):
    try:
        out = subprocess.run(
            [str(binary), "--version"], capture_output=True, text=True, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and "Claude Code" in out.stdout


def _binary(prefix):
    """The installed `claude`: npm's bin link, else the platform package's native binary (npm
    may not have run the package's postinstall step, which copies it over the link's target)."""
    modules = prefix / "node_modules"
    candidates = [modules / ".bin" / "claude"]
    candidates += sorted(modules.glob("@anthropic-ai/claude-code-*/claude"))
    return next((c for c in candidates if c.exists() and _runs(c)), None)


@pytest.fixture(scope="module")
def claude():
    prefix, why = npm_install(PACKAGE, _cache_dir().name)
    binary = _binary(prefix)
    if binary is None:
        reason = f"Claude Code could not be installed into {prefix}: {why or 'no runnable claude binary'}"
        print(reason)
        pytest.skip(reason)
    if why:
        print(f"{why}; using the Claude Code already in {prefix}")
    version = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=60)
    print(f"Claude Code {version.stdout.strip()} from {binary}")
    return binary


def _env(gateway, home):
    # Nothing of the machine's own Claude or Anthropic settings leaks in.
    env = {
        k: v for k, v in os.environ.items()
        if not k.startswith(("ANTHROPIC_", "CLAUDE_", "AWS_", "GOOGLE_", "VERTEX_"))
    }
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        ANTHROPIC_BASE_URL=gateway["root"],
        ANTHROPIC_API_KEY=MASTER_KEY,
        ANTHROPIC_MODEL=MAIN_MODEL,
        ANTHROPIC_SMALL_FAST_MODEL=FAST_MODEL,
        ANTHROPIC_DEFAULT_HAIKU_MODEL=FAST_MODEL,
        ANTHROPIC_DEFAULT_SONNET_MODEL=MAIN_MODEL,
        # No internet here: everything but the API is switched off.
        DISABLE_TELEMETRY="1",
        DISABLE_AUTOUPDATER="1",
        DISABLE_ERROR_REPORTING="1",
        DISABLE_BUG_COMMAND="1",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY="1",
    )
    return env


def test_claude_code_runs_a_bash_tool_through_a_translated_deployment(claude, gateway, tmp_path):
    home = tmp_path / "home"
    work = tmp_path / "work"
    home.mkdir()
    work.mkdir()
    log_start = os.path.getsize(gateway["log"])
    try:
        done = subprocess.run(
            [str(claude), "-p", PROMPT, "--allowedTools", "Bash", "--output-format", "json",
             "--no-session-persistence"],
            cwd=work, env=_env(gateway, home), capture_output=True, text=True,
            timeout=RUN_TIMEOUT, stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"Claude Code did not finish in {RUN_TIMEOUT} s: {e.stdout!r} {e.stderr!r}")
    assert done.returncode == 0, f"stdout: {done.stdout}\nstderr: {done.stderr}"
    out = json.loads(done.stdout)
    assert out["is_error"] is False, out
    assert out["subtype"] == "success", out
    # The Bash tool ran (only a shell writes 42) ...
    assert (work / "marker.txt").read_text().strip() == MARKER
    # ... and its result reached the mock in the next request, which echoed it back.
    assert f"mock tool result: {MARKER}" in out["result"], out["result"]
    assert out["num_turns"] >= 2, out
    assert MAIN_MODEL in out["modelUsage"], out["modelUsage"]
    # Both turns went through sluice to the OpenAI-compatible deployment, translated.
    lines = _request_lines(gateway["log"], log_start)
    assert len(lines) >= 2, lines
    assert all('provider="openai"' in l for l in lines), lines
    assert all("status=200" in l for l in lines), lines


def _request_lines(log, start, want=2, wait=5.0):
    """The gateway's request log lines for the main model since `start` (colours stripped),
    waiting a moment for the log writer to catch up."""
    deadline = time.time() + wait
    while True:
        with open(log, errors="replace") as f:
            f.seek(start)
            text = re.sub(r"\x1b\[[0-9;]*m", "", f.read())
        lines = [
            l for l in text.splitlines()
            if 'route="/v1/messages"' in l and f'model="{MAIN_MODEL}"' in l
        ]
        if len(lines) >= want or time.time() > deadline:
            return lines
        time.sleep(0.1)


@pytest.fixture(scope="module")
def mcp_claude_gateway(workdir, mock_upstream):
    """A gateway with Claude Code's models (translated to the mock) and one MCP server, the MCP
    SDK's stdio server (tests/sdk/mcp/sdk_server.py)."""
    import sys

    from conftest import _start, _stop

    d = pathlib.Path(workdir) / "claude-mcp"
    d.mkdir(exist_ok=True)
    config = d / "config.yaml"
    models = "".join(
        f"""
  - model_name: {name}
    litellm_params:
      model: openai/{upstream}
      api_base: {mock_upstream}
      api_key: sk-upstream-never-shown"""
        for name, upstream in ((MAIN_MODEL, "gpt-4.1"), (FAST_MODEL, "gpt-4.1-mini"))
    )
    server = pathlib.Path(__file__).resolve().parent / "mcp" / "sdk_server.py"
    config.write_text(f"""
model_list:{models}
general_settings:
  master_key: {MASTER_KEY}
mcp_servers:
  sdk:
    command: {sys.executable}
    args: ["{server}"]
""")
    proc, addr, log = _start(["serve", "--config", str(config), "--port", "0"], str(d))
    yield {"root": f"http://{addr}", "log": log}
    assert _stop(proc) == 0


def test_claude_code_calls_a_tool_through_sluices_mcp_endpoint(claude, mcp_claude_gateway, tmp_path):
    """Claude Code with `--mcp-config` pointing at sluice's /mcp and a virtual key: it lists the
    tools sluice aggregates, the (mock) model calls `sdk-multiply`, Claude Code calls it through
    sluice, and the result comes back into the answer."""
    import urllib.request

    gw = mcp_claude_gateway
    req = urllib.request.Request(
        gw["root"] + "/key/generate",
        data=json.dumps({"key_alias": "claude-code-mcp"}).encode(),
        headers={"Authorization": f"Bearer {MASTER_KEY}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req) as r:
        key = json.loads(r.read())["key"]
    home = tmp_path / "home"
    work = tmp_path / "work"
    home.mkdir()
    work.mkdir()
    tool = "mcp__sluice__sdk-multiply"
    mcp_config = json.dumps({"mcpServers": {"sluice": {
        "type": "http", "url": gw["root"] + "/mcp", "headers": {"Authorization": f"Bearer {key}"},
    }}})
    prompt = "Multiply.\nmock-tool: " + tool + " " + json.dumps({"a": 6, "b": 7})
    env = _env({"root": gw["root"]}, home)
    env["ANTHROPIC_API_KEY"] = key
    # MCP tools in the request itself (not deferred behind Claude Code's tool search), so the
    # mock model sees the one the prompt names.
    env["ENABLE_TOOL_SEARCH"] = "false"
    try:
        done = subprocess.run(
            [str(claude), "-p", prompt, "--mcp-config", mcp_config, "--strict-mcp-config",
             "--allowedTools", tool, "--output-format", "json", "--no-session-persistence"],
            cwd=work, env=env, capture_output=True, text=True,
            timeout=RUN_TIMEOUT, stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"Claude Code did not finish in {RUN_TIMEOUT} s: {e.stdout!r} {e.stderr!r}")
    assert done.returncode == 0, f"stdout: {done.stdout}\nstderr: {done.stderr}"
    out = json.loads(done.stdout)
    assert out["is_error"] is False, out
    # The tool's result (6 × 7, as the SDK server computes it; Claude Code passes on its
    # structured content) reached the model in the next turn, which echoed it back.
    assert re.search(r"mock tool result: .*\b42\b", out["result"]), out["result"]
    # The call went through sluice's MCP gateway, recorded as the key's.
    deadline = time.time() + 5
    while True:
        text = re.sub(r"\x1b\[[0-9;]*m", "", open(gw["log"], errors="replace").read())
        calls = [
            l for l in text.splitlines()
            if "mcp call" in l and 'tool="multiply"' in l and 'status="ok"' in l
            and 'key_alias="claude-code-mcp"' in l
        ]
        if calls or time.time() > deadline:
            break
        time.sleep(0.1)
    assert calls, text[-2000:]
    assert "upstream-never-shown" not in text and key not in text
