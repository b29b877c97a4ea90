"""Start the real sluice binary (and `sluice mock` as its upstream) on ephemeral loopback ports.

The binary comes from SLUICE_BIN (the test script builds it); nothing here is mocked but the
model provider, which is sluice's own mock speaking OpenAI's wire format.
"""

import json
import os
import pathlib
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = os.environ.get("SLUICE_BIN", str(ROOT / "target" / "debug" / "sluice"))
MASTER_KEY = "sk-sdk-test-master"
# The key pair the mock checks Bedrock's SigV4 signatures against (and the gateway signs with).
AWS_KEY = "AKIDSDKTEST"
AWS_SECRET = "sdk/test+secret"


# Figures a test measures (the million-row import's time and memory), printed in the run's
# summary so that the CI log carries them: pytest keeps a passing test's own output to itself.
MEASUREMENTS = []


def pytest_terminal_summary(terminalreporter):
    if MEASUREMENTS:
        terminalreporter.section("measured")
        for line in MEASUREMENTS:
            terminalreporter.write_line(line)


def _start(args, workdir, env=None):
    ready = pathlib.Path(workdir) / f"ready-{len(os.listdir(workdir))}"
    log = open(pathlib.Path(workdir) / f"{ready.name}.log", "w")
    proc = subprocess.Popen(
        [BIN, *args, "--ready-file", str(ready)],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "SLUICE_LOG": "info", **(env or {})},
        # The embedded store (sluice.db) and the spend spool land in the test's directory.
        cwd=workdir,
    )
    deadline = time.time() + 30
    while time.time() < deadline:
        if ready.exists() and ready.read_text().strip():
            return proc, ready.read_text().strip(), log.name
        if proc.poll() is not None:
            raise RuntimeError(f"{args[0]} exited early: {open(log.name).read()}")
        time.sleep(0.02)
    proc.kill()
    raise RuntimeError(f"{args[0]} did not start: {open(log.name).read()}")


def _free_port():
    """A loopback port nothing listens on now (for a server the test starts)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _json(method, url, body=None, headers=None):
    """One JSON call; the answer's JSON (an HTTP error raises)."""
    req = urllib.request.Request(url, method=method, data=None if body is None else json.dumps(body).encode())
    req.add_header("content-type", "application/json")
    for k, v in (headers or {}).items():
        req.add_header(k, v)
    with urllib.request.urlopen(req) as r:
        return json.loads(r.read() or b"null")


def _stop(proc):
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise


@pytest.fixture(scope="session")
def workdir():
    with tempfile.TemporaryDirectory(prefix="sluice-sdk-") as d:
        yield d


@pytest.fixture(scope="session")
def mock_upstream(workdir):
    proc, addr, _ = _start(
        [
            "mock", "--port", "0", "--chunks", "5", "--response-tokens", "20",
            "--aws-access-key-id", AWS_KEY, "--aws-secret-access-key", AWS_SECRET,
        ],
        workdir,
    )
    yield f"http://{addr}/v1"
    _stop(proc)


@pytest.fixture(scope="session")
def gateway(workdir, mock_upstream):
    config = pathlib.Path(workdir) / "config.yaml"
    mock_root = mock_upstream.removesuffix("/v1")
    config.write_text(
        f"""
model_list:
  - model_name: gpt-4o-mini
    litellm_params:
      model: openai/gpt-4o-mini
      api_base: {mock_upstream}
      api_key: sk-upstream-never-shown
  - model_name: in-process
    litellm_params:
      model: mock/in-process
  - model_name: claude-sonnet
    litellm_params:
      model: anthropic/claude-sonnet-5-5
      api_base: {mock_upstream}
      api_key: sk-upstream-never-shown
      use_in_pass_through: true
  - model_name: text-embedding-3-small
    litellm_params:
      model: openai/text-embedding-3-small
      api_base: {mock_upstream}
  - model_name: gemini-flash
    litellm_params:
      model: gemini/gemini-2.0-flash
      api_base: {mock_root}
      api_key: g-upstream-never-shown
  - model_name: bedrock-claude
    litellm_params:
      model: bedrock/anthropic.claude-3-5-sonnet-20240620-v1:0
      api_base: {mock_root}
      aws_access_key_id: {AWS_KEY}
      aws_secret_access_key: {AWS_SECRET}
      aws_region_name: us-west-2
      use_in_pass_through: true
  - model_name: bedrock-titan-image
    litellm_params:
      model: bedrock/amazon.titan-image-generator-v2:0
      api_base: {mock_root}
      aws_access_key_id: {AWS_KEY}
      aws_secret_access_key: {AWS_SECRET}
      aws_region_name: us-west-2
  - model_name: gemini-embedding
    litellm_params:
      model: gemini/text-embedding-004
      api_base: {mock_root}
      api_key: g-upstream-never-shown
  - model_name: dall-e-3
    litellm_params:
      model: openai/dall-e-3
      api_base: {mock_upstream}
      api_key: sk-upstream-never-shown
  - model_name: gpt-image-1
    litellm_params:
      model: openai/gpt-image-1
      api_base: {mock_upstream}
  - model_name: whisper-1
    litellm_params:
      model: openai/whisper-1
      api_base: {mock_upstream}
  - model_name: gpt-4o-transcribe
    litellm_params:
      model: openai/gpt-4o-transcribe
      api_base: {mock_upstream}
  - model_name: tts-1
    litellm_params:
      model: openai/tts-1
      api_base: {mock_upstream}
  - model_name: omni-moderation-latest
    litellm_params:
      model: openai/omni-moderation-latest
      api_base: {mock_upstream}
  - model_name: rerank-v3.5
    litellm_params:
      model: cohere/rerank-v3.5
      api_base: {mock_upstream}
      api_key: co-upstream-never-shown
  - model_name: gpt-realtime
    litellm_params:
      model: openai/gpt-realtime
      api_base: {mock_upstream}
      api_key: sk-upstream-never-shown
      input_cost_per_token: 0.000004
      output_cost_per_token: 0.000016
  # Claude Code's main and small/fast models, on an OpenAI-compatible deployment (translated).
  - model_name: claude-sonnet-4-6
    litellm_params:
      model: openai/gpt-4.1
      api_base: {mock_upstream}
      api_key: sk-upstream-never-shown
  - model_name: claude-haiku-4-5
    litellm_params:
      model: openai/gpt-4.1-mini
      api_base: {mock_upstream}
      api_key: sk-upstream-never-shown
general_settings:
  master_key: {MASTER_KEY}
  store_model_in_db: true
"""
    )
    proc, addr, log = _start(["serve", "--config", str(config), "--port", "0"], workdir)
    yield {"base_url": f"http://{addr}/v1", "root": f"http://{addr}", "log": log, "proc": proc, "workdir": workdir}
    assert _stop(proc) == 0, "sluice must exit 0 on SIGTERM"
    text = open(log).read()
    assert "sk-upstream-never-shown" not in text, "an upstream key reached the logs"
    assert "g-upstream-never-shown" not in text, "an upstream key reached the logs"
    assert AWS_SECRET not in text, "the AWS secret reached the logs"
    assert MASTER_KEY not in text, "the master key reached the logs"


# The conformance tests' own pair (test_conformance.py): a mock that records what it is sent
# (`--record`, read at `GET /mock/requests`) and a gateway with one deployment per provider
# wire, so that each upstream request can be judged by the vendor's own types.
CONFORMANCE_MODELS = {
    "openai": "conf-openai",
    "azure": "conf-azure",
    "anthropic": "conf-anthropic",
    "gemini": "conf-gemini",
    "vertex_gemini": "conf-vertex-gemini",
    "vertex_claude": "conf-vertex-claude",
    "bedrock": "conf-bedrock",
}


@pytest.fixture(scope="session")
def recording_mock(workdir):
    proc, addr, _ = _start(
        ["mock", "--port", "0", "--chunks", "3", "--response-tokens", "12", "--record"],
        workdir,
    )
    yield f"http://{addr}"
    _stop(proc)


@pytest.fixture(scope="session")
def conformance_gateway(workdir, recording_mock):
    sub = pathlib.Path(workdir) / "conformance"
    sub.mkdir(exist_ok=True)
    key = (ROOT / "tests" / "fixtures" / "vertex" / "service_account.json").read_text()
    key_file = sub / "vertex-sa.json"
    key_file.write_text(key.replace("https://oauth2.googleapis.com/token", f"{recording_mock}/token"))
    vertex = f"""api_base: {recording_mock}
      vertex_project: sluice-test
      vertex_location: us-east5
      vertex_credentials: {key_file}"""
    config = sub / "config.yaml"
    config.write_text(
        f"""
model_list:
  - model_name: conf-openai
    litellm_params:
      model: openai/gpt-4o-mini
      api_base: {recording_mock}/v1
      api_key: sk-upstream-never-shown
  - model_name: conf-azure
    litellm_params:
      model: azure/conf-deployment
      api_base: {recording_mock}
      api_version: "2024-10-21"
      api_key: az-upstream-never-shown
  - model_name: conf-anthropic
    litellm_params:
      model: anthropic/claude-sonnet-5-5
      api_base: {recording_mock}/v1
      api_key: sk-upstream-never-shown
  - model_name: conf-gemini
    litellm_params:
      model: gemini/gemini-2.5-flash
      api_base: {recording_mock}
      api_key: g-upstream-never-shown
  - model_name: conf-vertex-gemini
    litellm_params:
      model: vertex_ai/gemini-2.5-flash
      {vertex}
  - model_name: conf-vertex-claude
    litellm_params:
      model: vertex_ai/claude-sonnet-4@20250514
      {vertex}
      use_in_pass_through: true
  - model_name: conf-bedrock
    litellm_params:
      model: bedrock/anthropic.claude-sonnet-4-20250514-v1:0
      api_base: {recording_mock}
      aws_access_key_id: {AWS_KEY}
      aws_secret_access_key: {AWS_SECRET}
      aws_region_name: us-west-2
      use_in_pass_through: true
  - model_name: conf-gemini-cooldown
    litellm_params:
      model: gemini/gemini-2.5-flash
      api_base: {recording_mock}
      api_key: g-upstream-never-shown
  - model_name: conf-embedding
    litellm_params:
      model: openai/text-embedding-3-small
      api_base: {recording_mock}/v1
      api_key: sk-upstream-never-shown
general_settings:
  master_key: {MASTER_KEY}
"""
    )
    proc, addr, log = _start(["serve", "--config", str(config), "--port", "0"], str(sub))
    yield {"base_url": f"http://{addr}/v1", "root": f"http://{addr}", "mock": recording_mock, "log": log}
    assert _stop(proc) == 0, "sluice must exit 0 on SIGTERM"


NPM_INSTALL_TIMEOUT = 600


def npm_install(package: str, cache: str):
    """Install (or update) an npm package into a cache outside the repository
    (${XDG_CACHE_HOME:-~/.cache}/<cache>): the prefix, and why the install failed (None when it
    did not; a test may still use what an earlier install left there)."""
    import shutil

    base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    prefix = pathlib.Path(base) / cache
    prefix.mkdir(parents=True, exist_ok=True)
    npm = shutil.which("npm")
    if npm is None:
        return prefix, "npm is not installed"
    try:
        done = subprocess.run(
            [npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund",
             "--loglevel=error", package],
            capture_output=True, text=True, timeout=NPM_INSTALL_TIMEOUT,
        )
    except subprocess.TimeoutExpired:
        return prefix, f"npm install {package} took over {NPM_INSTALL_TIMEOUT} s"
    if done.returncode != 0:
        first = " / ".join(done.stderr.strip().splitlines()[:3])
        return prefix, f"npm install {package} failed: {first[:500]}"
    return prefix, None
