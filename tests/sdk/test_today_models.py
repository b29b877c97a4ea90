"""Today's models through sluice, with the official clients: the mock refuses what the real
APIs refuse for them (crates/mock/src/rules.rs: OpenAI's reasoning models refuse `max_tokens`
and sampling; Claude Opus 4.7 refuses a thinking budget and every sampling parameter; Vertex's
rawPredict refuses a `model` in the body; Gemini 3 refuses its own function call sent back
without its thought signature), so each test passes only if sluice sends what the provider
takes:

- Claude Code (npm, latest) on an OpenAI reasoning model and on Claude Opus 4.7 on Vertex AI;
- the OpenAI SDK's tool loop on Gemini 3, whole and streamed;
- reasoning on Claude Opus 4.7 from the OpenAI and the Anthropic SDK.
"""

import json
import pathlib
import subprocess

import anthropic
import httpx
import openai
import pytest

from conftest import MASTER_KEY, ROOT, _start, _stop
from test_claude_code import MARKER, PROMPT, RUN_TIMEOUT, _env, claude  # noqa: F401


@pytest.fixture(scope="module")
def today(workdir):
    """A recording mock and a gateway with today's models on it."""
    d = pathlib.Path(workdir) / "today"
    d.mkdir(exist_ok=True)
    proc_mock, mock_addr, _ = _start(
        ["mock", "--port", "0", "--chunks", "3", "--response-tokens", "12", "--record"], str(d)
    )
    mock = f"http://{mock_addr}"
    key = (ROOT / "tests" / "fixtures" / "vertex" / "service_account.json").read_text()
    key_file = d / "vertex-sa.json"
    key_file.write_text(key.replace("https://oauth2.googleapis.com/token", f"{mock}/token"))
    config = d / "config.yaml"
    config.write_text(f"""
model_list:
  - model_name: o3
    litellm_params: {{model: openai/o3, api_base: "{mock}/v1", api_key: sk-up}}
  - model_name: opus
    litellm_params: {{model: anthropic/claude-opus-4-7, api_base: "{mock}", api_key: sk-up}}
  - model_name: vertex-opus
    litellm_params:
      model: vertex_ai/claude-opus-4-7
      api_base: {mock}
      vertex_project: sluice-test
      vertex_location: global
      vertex_credentials: {key_file}
  - model_name: bedrock-opus
    litellm_params:
      model: bedrock/us.anthropic.claude-opus-4-7
      api_base: {mock}
      aws_access_key_id: AKIDTODAY
      aws_secret_access_key: today-secret
      aws_region_name: us-east-1
  - model_name: gemini-3
    litellm_params: {{model: gemini/gemini-3-pro-preview, api_base: "{mock}", api_key: g-up}}
  - model_name: haiku
    litellm_params: {{model: openai/gpt-4.1-mini, api_base: "{mock}/v1", api_key: sk-up}}
general_settings:
  master_key: {MASTER_KEY}
""")
    proc, addr, log = _start(["serve", "--config", str(config), "--port", "0"], str(d))
    yield {"root": f"http://{addr}", "base_url": f"http://{addr}/v1", "mock": mock, "log": log}
    assert _stop(proc) == 0
    _stop(proc_mock)


def _sent(today):
    """The upstream requests the mock recorded since the last call, and forget them."""
    with httpx.Client(base_url=today["mock"]) as h:
        seen = h.get("/mock/requests").json()
        h.delete("/mock/requests")
    return seen


WEATHER = [{
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather of a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_an_openai_sdk_tool_loop_on_gemini_3_sends_the_thought_signature_back(today, stream):
    oai = openai.OpenAI(base_url=today["base_url"], api_key=MASTER_KEY, max_retries=0)
    messages = [{"role": "user", "content": "Weather in Paris?"}]
    _sent(today)
    if stream:
        calls = {}
        for chunk in oai.chat.completions.create(model="gemini-3", messages=messages, tools=WEATHER, stream=True):
            for d in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
                c = calls.setdefault(d.index, {"id": "", "name": "", "arguments": ""})
                c["id"] += d.id or ""
                c["name"] += (d.function.name or "") if d.function else ""
                c["arguments"] += (d.function.arguments or "") if d.function else ""
        tool_calls = [
            {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
            for c in calls.values()
        ]
    else:
        first = oai.chat.completions.create(model="gemini-3", messages=messages, tools=WEATHER)
        tool_calls = [tc.model_dump() for tc in first.choices[0].message.tool_calls]
    assert tool_calls and tool_calls[0]["function"]["name"] == "get_weather"
    first_up = _sent(today)[-1]
    assert "thoughtSignature" not in json.dumps(first_up["body"]), "nothing to send back yet"
    messages.append({"role": "assistant", "content": None, "tool_calls": tool_calls})
    messages.append({"role": "tool", "tool_call_id": tool_calls[0]["id"], "content": "sunny"})
    # Gemini 3 (and the mock) refuse this turn if the call comes back unsigned.
    second = oai.chat.completions.create(model="gemini-3", messages=messages, tools=WEATHER)
    assert second.choices[0].message is not None
    up = _sent(today)[-1]["body"]
    model_turn = next(c for c in up["contents"] if c["role"] == "model")
    call = next(p for p in model_turn["parts"] if "functionCall" in p)
    assert call["thoughtSignature"].startswith("bW9jay10aG91Z2h0"), call


def test_reasoning_on_claude_opus_4_7_from_both_sdks(today):
    oai = openai.OpenAI(base_url=today["base_url"], api_key=MASTER_KEY, max_retries=0)
    _sent(today)
    answer = oai.chat.completions.create(
        model="opus", reasoning_effort="high", temperature=0.2,
        messages=[{"role": "user", "content": "Think, then answer."}],
    )
    assert answer.choices[0].message.content
    body = _sent(today)[-1]["body"]
    assert body["thinking"] == {"type": "adaptive"}, body
    assert body["output_config"] == {"effort": "high"}, body
    assert "temperature" not in body, body

    claude_client = anthropic.Anthropic(base_url=today["root"], api_key=MASTER_KEY, max_retries=0)
    raw = claude_client.messages.with_raw_response.create(
        model="opus", max_tokens=8000,
        thinking={"type": "enabled", "budget_tokens": 2048},
        messages=[{"role": "user", "content": "Think, then answer."}],
    )
    message = raw.parse()
    assert message.content and message.stop_reason in ("end_turn", "tool_use")
    body = _sent(today)[-1]["body"]
    assert body["thinking"] == {"type": "adaptive"}, body
    assert body["output_config"] == {"effort": "medium"}, body
    assert raw.headers["x-sluice-dropped-params"] == "thinking"


def test_an_anthropic_request_to_claude_on_vertex_passes_through_whole(today):
    """Blocks the internal representation does not model (a PDF document) and beta headers reach
    Vertex AI: only `model` leaves the body and Vertex's `anthropic_version` joins it."""
    claude_client = anthropic.Anthropic(base_url=today["root"], api_key=MASTER_KEY, max_retries=0)
    _sent(today)
    pdf = "JVBERi0xLjQKJcOkw7zDtsOfCjEgMCBvYmoKPDwvVHlwZS9DYXRhbG9nPj4KZW5kb2JqCnRyYWlsZXIKPDwvUm9vdCAxIDAgUj4+CiUlRU9G"
    message = claude_client.messages.create(
        model="vertex-opus", max_tokens=512,
        messages=[{"role": "user", "content": [
            {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": pdf}},
            {"type": "text", "text": "Summarise the document."},
        ]}],
        extra_headers={"anthropic-beta": "context-management-2025-06-27"},
    )
    assert message.content
    up = _sent(today)[-1]
    assert up["path"].endswith("/publishers/anthropic/models/claude-opus-4-7:rawPredict"), up["path"]
    assert "model" not in up["body"]
    assert up["body"]["anthropic_version"] == "vertex-2023-10-16"
    assert up["body"]["messages"][0]["content"][0]["type"] == "document"
    assert up["headers"]["anthropic-beta"] == "context-management-2025-06-27"


@pytest.mark.parametrize("deployment", ["o3", "vertex-opus"])
def test_claude_code_runs_a_tool_on_todays_models(claude, today, tmp_path, deployment):  # noqa: F811
    """Claude Code sends `max_tokens`, adaptive thinking and its effort whatever the model: to an
    OpenAI reasoning model they become `max_completion_tokens` and `reasoning_effort`; to Claude
    on Vertex AI its own body goes through with Vertex's changes only."""
    home = tmp_path / "home"
    work = tmp_path / "work"
    home.mkdir()
    work.mkdir()
    env = _env(today, home)
    env.update(
        ANTHROPIC_MODEL=deployment,
        ANTHROPIC_DEFAULT_SONNET_MODEL=deployment,
        ANTHROPIC_DEFAULT_OPUS_MODEL=deployment,
        ANTHROPIC_SMALL_FAST_MODEL="haiku",
        ANTHROPIC_DEFAULT_HAIKU_MODEL="haiku",
    )
    _sent(today)
    done = subprocess.run(
        [str(claude), "-p", PROMPT, "--allowedTools", "Bash", "--output-format", "json",
         "--no-session-persistence"],
        cwd=work, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, f"stdout: {done.stdout}\nstderr: {done.stderr}"
    out = json.loads(done.stdout)
    assert out["is_error"] is False, out
    assert (work / "marker.txt").read_text().strip() == MARKER
    assert f"mock tool result: {MARKER}" in out["result"], out["result"]
    sent = [r for r in _sent(today) if "claude-opus-4-7" in r["path"] or (r.get("body") or {}).get("model") == "o3"]
    assert len(sent) >= 2, [r["path"] for r in _sent(today)]
    for r in sent:
        body = r["body"]
        if deployment == "o3":
            assert "max_tokens" not in body and "max_completion_tokens" in body, body.keys()
        else:
            assert "model" not in body and body["anthropic_version"] == "vertex-2023-10-16"


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_an_anthropic_request_to_claude_on_bedrock_goes_through_invoke_model_whole(today, stream):
    """A Claude client's body reaches Claude on Bedrock through InvokeModel with only Bedrock's
    changes (no `model`, no `stream`, its `anthropic_version`, beta features as
    `anthropic_beta`); a stream comes back as Anthropic's own events."""
    claude_client = anthropic.Anthropic(base_url=today["root"], api_key=MASTER_KEY, max_retries=0)
    _sent(today)
    pdf = "JVBERi0xLjQKJcOkw7zDtsOfCjEgMCBvYmoKPDwvVHlwZS9DYXRhbG9nPj4KZW5kb2JqCnRyYWlsZXIKPDwvUm9vdCAxIDAgUj4+CiUlRU9G"
    request = dict(
        model="bedrock-opus", max_tokens=512,
        thinking={"type": "adaptive"}, output_config={"effort": "low"},
        messages=[{"role": "user", "content": [
            {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": pdf}},
            {"type": "text", "text": "Summarise the document."},
        ]}],
        extra_headers={"anthropic-beta": "context-management-2025-06-27, files-api-2025-04-14"},
    )
    if stream:
        with claude_client.messages.stream(**request) as s:
            message = s.get_final_message()
    else:
        message = claude_client.messages.create(**request)
    assert message.content and message.stop_reason == "end_turn", message
    assert message.usage.output_tokens > 0
    up = _sent(today)[-1]
    op = "invoke-with-response-stream" if stream else "invoke"
    assert up["path"] == f"/model/us.anthropic.claude-opus-4-7/{op}", up["path"]
    body = up["body"]
    assert "model" not in body and "stream" not in body, body.keys()
    assert body["anthropic_version"] == "bedrock-2023-05-31"
    assert body["anthropic_beta"] == ["context-management-2025-06-27", "files-api-2025-04-14"]
    assert body["messages"][0]["content"][0]["type"] == "document"
    assert body["thinking"] == {"type": "adaptive"} and body["output_config"] == {"effort": "low"}
