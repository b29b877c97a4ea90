"""Google's Gemini CLI and OpenAI's Codex CLI (npm `@google/gemini-cli`, `@openai/codex`,
latest) pointed at sluice, on groups served by other providers (`sluice mock`): the Gemini CLI's
`generateContent` stream translated to an OpenAI or Anthropic deployment (and passed through to
a Gemini one), Codex's Responses API translated to an Anthropic or Gemini deployment.

Each prompt scripts the mock (`mock-tool: <tool> {...}`, crates/mock/src/tools.rs): it asks for
the CLI's own shell tool with a command only a shell runs (`n=42; echo sluice-$n`), then echoes
the tool result it receives. So the marker file proves the tool ran, and the final answer that
its result went back through sluice.

The CLIs are installed from npm into caches outside the repository
(${XDG_CACHE_HOME:-~/.cache}/sluice-<name>); a test is skipped, with the reason, only when npm
cannot install its CLI and no earlier install is there.
"""

import json
import os
import pathlib
import re
import subprocess
import time

import pytest

from conftest import MASTER_KEY, _start, _stop, npm_install

MARKER = "sluice-42"
COMMAND = "n=42; echo sluice-$n > marker.txt; cat marker.txt"
RUN_TIMEOUT = 180


def _install(package: str, cache: str, binary: str, version_word: str):
    """The CLI's binary, installed (or updated) with npm into a cache; skips the test when it
    cannot be had."""
    prefix, why = npm_install(package, cache)
    path = prefix / "node_modules" / ".bin" / binary
    try:
        version = subprocess.run([str(path), "--version"], capture_output=True, text=True, timeout=60)
        runs = version.returncode == 0 and version_word in (version.stdout + version.stderr)
    except (OSError, subprocess.TimeoutExpired):
        runs = False
    if not runs:
        reason = f"{package} could not be installed into {prefix}: {why or 'no runnable binary'}"
        print(reason)
        pytest.skip(reason)
    if why:
        print(f"{why}; using the one already in {prefix}")
    print(f"{package}: {version.stdout.strip()} from {path}")
    return path


@pytest.fixture(scope="module")
def gemini_cli():
    return _install("@google/gemini-cli@latest", "sluice-gemini-cli", "gemini", ".")


@pytest.fixture(scope="module")
def codex_cli():
    return _install("@openai/codex@latest", "sluice-codex", "codex", "codex-cli")


@pytest.fixture(scope="module")
def cli_gateway(workdir, mock_upstream):
    """Groups of three providers at the mock, and a virtual key the CLIs use."""
    d = pathlib.Path(workdir) / "agent-clis"
    d.mkdir(exist_ok=True)
    root = mock_upstream.removesuffix("/v1")
    (d / "config.yaml").write_text(f"""
model_list:
  - model_name: cli-openai
    litellm_params: {{model: openai/gpt-4.1, api_base: "{mock_upstream}", api_key: sk-up-never-shown}}
  - model_name: cli-anthropic
    litellm_params: {{model: anthropic/claude-sonnet-4-5, api_base: "{mock_upstream}", api_key: sk-up-never-shown}}
  - model_name: cli-gemini
    litellm_params: {{model: gemini/gemini-2.5-flash, api_base: "{root}", api_key: g-up-never-shown}}
general_settings:
  master_key: {MASTER_KEY}
""")
    proc, addr, log = _start(["serve", "--config", str(d / "config.yaml"), "--port", "0"], str(d))
    gw_root = f"http://{addr}"
    import urllib.request

    req = urllib.request.Request(
        gw_root + "/key/generate",
        data=json.dumps({"key_alias": "agent-clis", "models": ["cli-openai", "cli-anthropic", "cli-gemini"]}).encode(),
        headers={"Authorization": f"Bearer {MASTER_KEY}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req) as r:
        key = json.loads(r.read())["key"]
    yield {"root": gw_root, "log": log, "key": key}
    assert _stop(proc) == 0


def _clean_env(home: pathlib.Path) -> dict:
    # Nothing of the machine's own provider settings leaks in.
    env = {
        k: v for k, v in os.environ.items()
        if not k.startswith(("ANTHROPIC_", "CLAUDE_", "AWS_", "GOOGLE_", "GEMINI_", "VERTEX_", "OPENAI_", "CODEX_"))
    }
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"))
    return env


def _run(cmd, work, env):
    try:
        return subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True,
                              timeout=RUN_TIMEOUT, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"{cmd[0]} did not finish in {RUN_TIMEOUT} s: {e.stdout!r} {e.stderr!r}")


def _request_lines(log, start, route, model, want=2, wait=5.0):
    """The gateway's request log lines for a route and group since `start`."""
    deadline = time.time() + wait
    while True:
        with open(log, errors="replace") as f:
            f.seek(start)
            text = re.sub(r"\x1b\[[0-9;]*m", "", f.read())
        lines = [l for l in text.splitlines() if f'route="{route}' in l and f'model="{model}"' in l]
        if len(lines) >= want or time.time() > deadline:
            return lines
        time.sleep(0.1)


@pytest.mark.parametrize("group,provider", [
    ("cli-openai", "openai"), ("cli-anthropic", "anthropic"), ("cli-gemini", "gemini"),
])
def test_gemini_cli_runs_its_shell_tool_through_sluice(gemini_cli, cli_gateway, tmp_path, group, provider):
    home, work = tmp_path / "home", tmp_path / "work"
    (home / ".gemini").mkdir(parents=True)
    work.mkdir()
    (home / ".gemini" / "settings.json").write_text(json.dumps({
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
        "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
    }))
    env = _clean_env(home)
    env.update(GEMINI_API_KEY=cli_gateway["key"], GOOGLE_GEMINI_BASE_URL=cli_gateway["root"])
    prompt = "Write the marker file.\nmock-tool: run_shell_command " + json.dumps({"command": COMMAND})
    log_start = os.path.getsize(cli_gateway["log"])
    done = _run([str(gemini_cli), "-p", prompt, "-m", group, "--yolo", "--skip-trust", "-o", "json"], work, env)
    assert done.returncode == 0, f"stdout: {done.stdout}\nstderr: {done.stderr}"
    out = json.loads(done.stdout)
    assert not out.get("error"), out
    # The shell tool ran (only a shell expands $n) ...
    assert (work / "marker.txt").read_text().strip() == MARKER
    # ... and its result reached the model in the next turn, which echoed it back.
    assert "mock tool result:" in out["response"] and MARKER in out["response"], out["response"]
    lines = _request_lines(cli_gateway["log"], log_start, "/v1beta/models/{model}:streamGenerateContent", group)
    assert len(lines) >= 2, lines
    assert all(f'provider="{provider}"' in l and "status=200" in l for l in lines), lines
    assert all("completion_tokens=0" not in l for l in lines), lines


@pytest.mark.parametrize("group,provider", [("cli-anthropic", "anthropic"), ("cli-gemini", "gemini")])
def test_codex_cli_runs_its_shell_tool_through_sluice(codex_cli, cli_gateway, tmp_path, group, provider):
    home, work = tmp_path / "home", tmp_path / "work"
    (home / ".codex").mkdir(parents=True)
    work.mkdir()
    (home / ".codex" / "config.toml").write_text(f"""
model = "{group}"
model_provider = "sluice"

[model_providers.sluice]
name = "sluice"
base_url = "{cli_gateway['root']}/v1"
env_key = "SLUICE_TEST_KEY"
wire_api = "responses"
""")
    env = _clean_env(home)
    env.update(CODEX_HOME=str(home / ".codex"), SLUICE_TEST_KEY=cli_gateway["key"])
    prompt = "Write the marker file.\nmock-tool: exec_command " + json.dumps({"cmd": COMMAND})
    log_start = os.path.getsize(cli_gateway["log"])
    done = _run([str(codex_cli), "exec", "--skip-git-repo-check",
                 "--dangerously-bypass-approvals-and-sandbox", prompt], work, env)
    assert done.returncode == 0, f"stdout: {done.stdout}\nstderr: {done.stderr}"
    assert (work / "marker.txt").read_text().strip() == MARKER
    assert "mock tool result:" in done.stdout and MARKER in done.stdout, done.stdout
    lines = _request_lines(cli_gateway["log"], log_start, "/v1/responses", group)
    assert len(lines) >= 2, lines
    assert all(f'provider="{provider}"' in l and "status=200" in l for l in lines), lines
