"""Conformance: every request sluice sends upstream, and every answer it gives its clients,
judged by the vendors' own machine-readable types (`conformance.py`).

Each test drives one path, client dialect (OpenAI SDK chat; Anthropic SDK messages) x
provider wire (OpenAI, Azure OpenAI, Anthropic, Gemini, Vertex AI Gemini, Vertex AI Claude,
Bedrock Converse) x feature, through the real gateway to `sluice mock --record`, then:

1. reads what the mock was sent (`GET /mock/requests`) and judges each request with the
   validator its path calls for (the OpenAI/Anthropic SDK request TypedDicts with unknown keys
   refused, google-genai's types, botocore's ParamValidator on the bedrock-runtime model);
2. replays each recorded request to the mock and judges the mock's answer by the same
   vendor's response types (so that a wrong answer is the mock's fault, not sluice's);
3. judges sluice's answer to the client by the client SDK's response models
   (`ChatCompletion`/`ChatCompletionChunk`, `Message`/`RawMessageStreamEvent`).

Beside the matrix: embeddings and the Responses API (OpenAI, Azure), Anthropic's own
`AnthropicBedrock`/`AnthropicVertex` clients through the `/bedrock/*` and `/vertex_ai/*`
pass-through routes (InvokeModel and its event stream, rawPredict), the recorder's redaction,
and paths sluice declines itself (UNSUPPORTED: a 400 naming the parameter, nothing upstream).
`CONFORMANCE_DUMP=<dir>` writes each matrix test's upstream requests and client answers there.

A path whose requests or answers the vendor's types refuse is a bug in sluice's translation:
it is marked in KNOWN below, `xfail(strict=True)` with the exact refusal, so it turns into a
failure (an unexpected pass) once fixed; a different refusal fails it outright.
"""

import json
import os
import pathlib
import urllib.parse

import anthropic
import httpx
import openai
import pytest

import conformance as c
from conftest import CONFORMANCE_MODELS, MASTER_KEY

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
    "required": ["city", "days"],
    "additionalProperties": False,
}
OPENAI_TOOL = {
    "type": "function",
    "function": {"name": "get_weather", "description": "Weather in a city", "parameters": SCHEMA},
}
ANTHROPIC_TOOL = {"name": "get_weather", "description": "Weather in a city", "input_schema": SCHEMA}

PROVIDERS = list(CONFORMANCE_MODELS)
OPENAI_FEATURES = [
    "plain", "stream", "tools", "tools_stream", "image", "reasoning", "structured", "system",
    "stop", "user", "sampling", "tool_choice", "json_object", "history", "penalties",
    "no_parallel",
]
ANTHROPIC_FEATURES = [
    "plain", "stream", "tools", "tools_stream", "image", "reasoning", "structured", "system",
    "stop", "user", "tool_choice", "json_output", "history", "no_parallel",
]
# Which validator each provider's upstream requests must reach (the path decides).
WIRE = {
    "openai": {"openai_chat"},
    "azure": {"azure"},
    "anthropic": {"anthropic_messages"},
    "gemini": {"gemini"},
    "vertex_gemini": {"vertex_gemini"},
    "vertex_claude": {"vertex_anthropic"},
    "bedrock": {"bedrock_converse"},
}
# A Claude client's call to a Claude model keeps its own body where the platform takes it:
# Bedrock's InvokeModel (OpenAI clients go through Converse).
WIRE_FOR_CLAUDE_CLIENTS = {"bedrock": {"bedrock_anthropic_invoke"}}

# Paths sluice declines before any upstream call (a 400 `unsupported_parameter` naming the
# parameter, as LiteLLM does without drop_params): checked as such, not judged.
UNSUPPORTED = {
    "openai-anthropic-json_object": "response_format",
    "openai-vertex_claude-json_object": "response_format",
    "openai-bedrock-json_object": "response_format",
    "openai-gemini-no_parallel": "parallel_tool_calls",
    "openai-vertex_gemini-no_parallel": "parallel_tool_calls",
    "openai-bedrock-no_parallel": "parallel_tool_calls",
    "anthropic-gemini-no_parallel": "tool_choice.disable_parallel_tool_use",
    "anthropic-vertex_gemini-no_parallel": "tool_choice.disable_parallel_tool_use",
}

# Refusals observed, by test id: each is a bug in sluice's translation, marked until it is
# fixed there. The lines are the exact refusals. (Empty: the sampling parameters once copied
# into Anthropic Messages bodies are now dropped by the `anthropic-messages-api-sampling` rule,
# crates/config/data/model_rules.yaml.)
KNOWN: dict[str, list[str]] = {}


# ---------------------------------------------------------------------------------------------
# Clients' calls: each returns the raw answers (text) it got, and how many upstream calls it
# should have caused.
# ---------------------------------------------------------------------------------------------


class Calls:
    """The raw answers of one test's client calls, judged by the client SDK's models."""

    def __init__(self):
        self.answers: list[tuple[str, bool, str]] = []  # (dialect, streamed, text)

    def add(self, dialect: str, streamed: bool, text: str):
        self.answers.append((dialect, streamed, text))


def openai_call(oai, calls: Calls, stream: bool, **kw):
    if stream:
        with oai.chat.completions.with_streaming_response.create(
            stream=True, stream_options={"include_usage": True}, **kw
        ) as r:
            text = r.read().decode()
        calls.add("openai", True, text)
        chunks = c.openai_chat_stream(text, "client ChatCompletionChunk")
        return _assemble_openai(chunks)
    raw = oai.chat.completions.with_raw_response.create(**kw)
    text = raw.http_response.text
    calls.add("openai", False, text)
    message = c.openai_chat_answer(text, "client ChatCompletion").choices[0].message
    # The request param a client builds from the answer (ChatCompletionAssistantMessageParam):
    # a response-only field such as `annotations` is no part of it.
    param = {"role": "assistant", "content": message.content}
    if message.tool_calls:
        param["tool_calls"] = [tc.model_dump(include={"id", "type", "function"}) for tc in message.tool_calls]
    return param


def _assemble_openai(chunks) -> dict:
    """The assistant message a stream of chunks makes (content and tool calls)."""
    content, calls = "", {}
    for ch in chunks:
        for choice in ch.choices:
            d = choice.delta
            content += d.content or ""
            for tc in d.tool_calls or []:
                slot = calls.setdefault(tc.index, {"id": None, "type": "function", "function": {"name": "", "arguments": ""}})
                slot["id"] = tc.id or slot["id"]
                if tc.function:
                    slot["function"]["name"] += tc.function.name or ""
                    slot["function"]["arguments"] += tc.function.arguments or ""
    msg = {"role": "assistant", "content": content or None}
    if calls:
        msg["tool_calls"] = [calls[i] for i in sorted(calls)]
    return msg


def anthropic_call(claude, calls: Calls, stream: bool, **kw):
    if stream:
        with claude.messages.with_streaming_response.create(stream=True, **kw) as r:
            text = r.read().decode()
        calls.add("anthropic", True, text)
        events = c.anthropic_stream(text, "client RawMessageStreamEvent")
        return _assemble_anthropic(events)
    raw = claude.messages.with_raw_response.create(**kw)
    text = raw.http_response.text
    calls.add("anthropic", False, text)
    m = c.anthropic_message_answer(text, "client Message")
    return [b.model_dump(exclude_none=True) for b in m.content]


def _assemble_anthropic(events) -> list[dict]:
    blocks: dict[int, dict] = {}
    partial: dict[int, str] = {}
    for e in events:
        if e.type == "content_block_start":
            blocks[e.index] = e.content_block.model_dump(exclude_none=True)
        elif e.type == "content_block_delta":
            d = e.delta
            b = blocks[e.index]
            if d.type == "text_delta":
                b["text"] = b.get("text", "") + d.text
            elif d.type == "input_json_delta":
                partial[e.index] = partial.get(e.index, "") + d.partial_json
            elif d.type == "thinking_delta":
                b["thinking"] = b.get("thinking", "") + d.thinking
            elif d.type == "signature_delta":
                b["signature"] = d.signature
    for i, text in partial.items():
        blocks[i]["input"] = json.loads(text) if text else {}
    return [blocks[i] for i in sorted(blocks)]


def drive_openai(oai, model: str, feature: str, calls: Calls) -> int:
    """One feature from an OpenAI SDK client; returns the number of client calls made."""
    user = {"role": "user", "content": "Weather in Paris?"}
    kw = {"model": model, "messages": [user]}
    if feature == "plain":
        openai_call(oai, calls, False, **kw)
    elif feature == "stream":
        openai_call(oai, calls, True, **kw)
    elif feature in ("tools", "tools_stream"):
        msg = openai_call(oai, calls, feature == "tools_stream", tools=[OPENAI_TOOL], **kw)
        call = msg["tool_calls"][0]
        messages = [user, msg, {"role": "tool", "tool_call_id": call["id"], "content": '{"temp_c": 21}'}]
        openai_call(oai, calls, False, model=model, messages=messages, tools=[OPENAI_TOOL])
        return 2
    elif feature == "image":
        content = [
            {"type": "text", "text": "What is in this picture?"},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
        ]
        openai_call(oai, calls, False, model=model, messages=[{"role": "user", "content": content}])
    elif feature == "reasoning":
        openai_call(oai, calls, False, reasoning_effort="low", **kw)
    elif feature == "structured":
        fmt = {"type": "json_schema", "json_schema": {"name": "weather", "schema": SCHEMA, "strict": True}}
        openai_call(oai, calls, False, response_format=fmt, **kw)
    elif feature == "system":
        messages = [{"role": "system", "content": "Be brief."}, user]
        openai_call(oai, calls, False, model=model, messages=messages)
    elif feature == "stop":
        openai_call(oai, calls, False, stop=["END", "STOP"], **kw)
    elif feature == "user":
        openai_call(oai, calls, False, user="user-1234", **kw)
    elif feature == "sampling":
        openai_call(oai, calls, False, temperature=0.2, top_p=0.9, max_tokens=64, **kw)
    elif feature == "tool_choice":
        choice = {"type": "function", "function": {"name": "get_weather"}}
        openai_call(oai, calls, False, tools=[OPENAI_TOOL], tool_choice=choice, **kw)
    elif feature == "no_parallel":
        openai_call(oai, calls, False, tools=[OPENAI_TOOL], parallel_tool_calls=False, **kw)
    elif feature == "json_object":
        messages = [{"role": "system", "content": "Answer in JSON."}, user]
        openai_call(oai, calls, False, model=model, messages=messages, response_format={"type": "json_object"})
    elif feature == "history":
        # A conversation as a client keeps it: developer prompt, content parts, an assistant
        # turn with text and a tool call, the tool's answer as parts, then the next question.
        messages = [
            {"role": "developer", "content": "Be brief."},
            {"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]},
            {
                "role": "assistant",
                "content": "Let me look.",
                "tool_calls": [{"id": "call_1", "type": "function",
                                "function": {"name": "get_weather", "arguments": '{"city":"Paris","days":1}'}}],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": [{"type": "text", "text": '{"temp_c": 21}'}]},
            {"role": "assistant", "content": [{"type": "text", "text": "It is 21 C."}]},
            {"role": "user", "content": "And tomorrow?"},
        ]
        openai_call(oai, calls, False, model=model, messages=messages, tools=[OPENAI_TOOL], tool_choice="auto")
    elif feature == "penalties":
        openai_call(oai, calls, False, seed=7, presence_penalty=0.1, frequency_penalty=0.1,
                    max_completion_tokens=64, n=1, **kw)
    else:
        raise ValueError(feature)
    return 1


def drive_anthropic(claude, model: str, feature: str, calls: Calls) -> int:
    user = {"role": "user", "content": "Weather in Paris?"}
    kw = {"model": model, "max_tokens": 256, "messages": [user]}
    if feature == "plain":
        anthropic_call(claude, calls, False, **kw)
    elif feature == "stream":
        anthropic_call(claude, calls, True, **kw)
    elif feature in ("tools", "tools_stream"):
        blocks = anthropic_call(claude, calls, feature == "tools_stream", tools=[ANTHROPIC_TOOL], system="Be brief.", **kw)
        use = next(b for b in blocks if b["type"] == "tool_use")
        messages = [
            user,
            {"role": "assistant", "content": blocks},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use["id"], "content": '{"temp_c": 21}'}]},
        ]
        anthropic_call(claude, calls, False, model=model, max_tokens=256, messages=messages, tools=[ANTHROPIC_TOOL])
        return 2
    elif feature == "image":
        content = [
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
            {"type": "text", "text": "What is in this picture?"},
        ]
        anthropic_call(claude, calls, False, model=model, max_tokens=256, messages=[{"role": "user", "content": content}])
    elif feature == "reasoning":
        anthropic_call(claude, calls, False, model=model, max_tokens=2048, messages=[user],
                       thinking={"type": "enabled", "budget_tokens": 1024})
    elif feature == "structured":
        anthropic_call(claude, calls, False, tools=[ANTHROPIC_TOOL],
                       tool_choice={"type": "tool", "name": "get_weather"}, **kw)
    elif feature == "system":
        anthropic_call(claude, calls, False, system=[{"type": "text", "text": "Be brief."}], **kw)
    elif feature == "stop":
        anthropic_call(claude, calls, False, stop_sequences=["END", "STOP"], **kw)
    elif feature == "user":
        anthropic_call(claude, calls, False, metadata={"user_id": "user-1234"}, **kw)
    elif feature == "tool_choice":
        anthropic_call(claude, calls, False, tools=[ANTHROPIC_TOOL], tool_choice={"type": "any"}, **kw)
    elif feature == "no_parallel":
        anthropic_call(claude, calls, False, tools=[ANTHROPIC_TOOL],
                       tool_choice={"type": "auto", "disable_parallel_tool_use": True}, **kw)
    elif feature == "json_output":
        anthropic_call(claude, calls, False, output_config={"format": {"type": "json_schema", "schema": SCHEMA}}, **kw)
    elif feature == "history":
        # A conversation as Claude Code keeps it: cached system blocks, a thinking block with its
        # signature before a tool call, the tool's answer as blocks (one an error), then more.
        messages = [
            {"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "I should call the tool.", "signature": "c2lnbmF0dXJl"},
                    {"type": "text", "text": "Let me look."},
                    {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris", "days": 1}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "is_error": False,
                     "content": [{"type": "text", "text": '{"temp_c": 21}'}]},
                    {"type": "text", "text": "And tomorrow?", "cache_control": {"type": "ephemeral"}},
                ],
            },
        ]
        system = [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}]
        anthropic_call(claude, calls, False, model=model, max_tokens=2048, system=system, messages=messages,
                       tools=[ANTHROPIC_TOOL], thinking={"type": "enabled", "budget_tokens": 1024})
    else:
        raise ValueError(feature)
    return 1


# ---------------------------------------------------------------------------------------------
# The mock's side
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mock_http(conformance_gateway):
    with httpx.Client(base_url=conformance_gateway["mock"], timeout=30) as h:
        yield h


@pytest.fixture(scope="module")
def vertex_token(mock_http):
    r = mock_http.post(
        "/token",
        content="grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=a.b.c",
        headers={"content-type": "application/x-www-form-urlencoded"},
    )
    r.raise_for_status()
    return r.json()["access_token"]


def _streamed(validator: str, record: dict) -> bool:
    if validator in ("gemini", "vertex_gemini"):
        return record["path"].endswith(":streamGenerateContent")
    if validator == "bedrock_converse":
        return record["path"].endswith("/converse-stream")
    if validator == "bedrock_anthropic_invoke":
        return record["path"].endswith("/invoke-with-response-stream")
    return bool(record["body"].get("stream"))


def replay(mock_http, vertex_token, validator: str, record: dict) -> list[str]:
    """The mock's answer to a recorded request, judged by the upstream vendor's types."""
    url = record["path"] + (f"?{record['query']}" if record.get("query") else "")
    headers = {"content-type": "application/json"}
    if validator in ("vertex_gemini", "vertex_anthropic"):
        headers["authorization"] = f"Bearer {vertex_token}"
    r = mock_http.post(url, content=json.dumps(record["body"]), headers=headers)
    try:
        c.judge_mock_answer(validator, _streamed(validator, record), r.status_code, r.content)
    except c.Refusal as e:
        return str(e).splitlines()
    return []


# ---------------------------------------------------------------------------------------------
# The tests
# ---------------------------------------------------------------------------------------------


def _cases():
    for dialect, features in (("openai", OPENAI_FEATURES), ("anthropic", ANTHROPIC_FEATURES)):
        for provider in PROVIDERS:
            for feature in features:
                test_id = f"{dialect}-{provider}-{feature}"
                marks = []
                if test_id in KNOWN:
                    marks.append(pytest.mark.xfail(strict=True, raises=c.Refusal, reason="\n".join(KNOWN[test_id])))
                yield pytest.param(dialect, provider, feature, id=test_id, marks=marks)


def judge(expected_wire: set, records: list, mock_http, vertex_token, client_calls: int, calls: Calls) -> list[str]:
    """Every refusal of one test: upstream requests, the mock's answers, the client's answers."""
    problems: list[str] = []
    assert len(records) >= client_calls, f"{client_calls} client calls but {len(records)} upstream requests"
    for rec in records:
        try:
            validator = c.judge_upstream(rec)
        except c.Refusal as e:
            problems += str(e).splitlines()
            continue
        assert validator in expected_wire, f"{rec['path']} judged as {validator}, expected {expected_wire}"
        mock_problems = replay(mock_http, vertex_token, validator, rec)
        assert not mock_problems, "the mock's own answer is refused (a mock bug):\n" + "\n".join(mock_problems)
    return problems


@pytest.mark.parametrize("dialect,provider,feature", list(_cases()))
def test_path(conformance_gateway, mock_http, vertex_token, dialect, provider, feature):
    model = CONFORMANCE_MODELS[provider]
    mock_http.delete("/mock/requests").raise_for_status()
    calls = Calls()
    test_id = f"{dialect}-{provider}-{feature}"
    if test_id in UNSUPPORTED:
        param = UNSUPPORTED[test_id]
        if dialect == "openai":
            oai = openai.OpenAI(base_url=conformance_gateway["base_url"], api_key=MASTER_KEY, max_retries=0)
            with pytest.raises(openai.BadRequestError) as refused:
                drive_openai(oai, model, feature, calls)
            assert refused.value.body["code"] == "unsupported_parameter"
            assert refused.value.body["param"] == param
        else:
            claude = anthropic.Anthropic(base_url=conformance_gateway["root"], api_key=MASTER_KEY, max_retries=0)
            with pytest.raises(anthropic.BadRequestError) as refused:
                drive_anthropic(claude, model, feature, calls)
            assert refused.value.body["error"]["type"] == "invalid_request_error"
            assert f"`{param}`" in refused.value.body["error"]["message"]
        assert mock_http.get("/mock/requests").json() == [], "declined before any upstream call"
        return
    client_problems: list[str] = []
    try:
        if dialect == "openai":
            oai = openai.OpenAI(base_url=conformance_gateway["base_url"], api_key=MASTER_KEY, max_retries=0)
            n = drive_openai(oai, model, feature, calls)
        else:
            claude = anthropic.Anthropic(base_url=conformance_gateway["root"], api_key=MASTER_KEY, max_retries=0)
            n = drive_anthropic(claude, model, feature, calls)
    except c.Refusal as e:
        # The client's answer was refused; still judge what went upstream before it.
        client_problems = str(e).splitlines()
        n = len(calls.answers)
    records = mock_http.get("/mock/requests").json()
    if os.environ.get("CONFORMANCE_DUMP"):
        # What went upstream and what the client got, for reading by hand.
        out = pathlib.Path(os.environ["CONFORMANCE_DUMP"]) / f"{dialect}-{provider}-{feature}.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"upstream": records, "client": calls.answers}, indent=1))
    wire = WIRE_FOR_CLAUDE_CLIENTS.get(provider, WIRE[provider]) if dialect == "anthropic" else WIRE[provider]
    problems = judge(wire, records, mock_http, vertex_token, n, calls) + client_problems
    if problems:
        expected = KNOWN.get(f"{dialect}-{provider}-{feature}")
        if expected is not None and sorted(problems) != sorted(expected):
            raise AssertionError("refused, but not as KNOWN says:\n" + "\n".join(problems))
        raise c.Refusal("conformance", problems)


def test_openai_embeddings(conformance_gateway, mock_http, vertex_token):
    oai = openai.OpenAI(base_url=conformance_gateway["base_url"], api_key=MASTER_KEY, max_retries=0)
    mock_http.delete("/mock/requests").raise_for_status()
    raw = oai.embeddings.with_raw_response.create(
        model="conf-embedding", input=["a cat", "a dog"], dimensions=8, encoding_format="float"
    )
    c.openai_embeddings_answer(raw.http_response.text)
    records = mock_http.get("/mock/requests").json()
    assert judge({"openai_embeddings"}, records, mock_http, vertex_token, 1, Calls()) == []


def test_recording_redacts_credentials(conformance_gateway, mock_http):
    """The recorder keeps what was sent, credentials excepted."""
    oai = openai.OpenAI(base_url=conformance_gateway["base_url"], api_key=MASTER_KEY, max_retries=0)
    mock_http.delete("/mock/requests").raise_for_status()
    for model in ("conf-openai", "conf-azure", "conf-anthropic", "conf-gemini"):
        oai.chat.completions.create(model=model, messages=[{"role": "user", "content": "hi"}])
    records = mock_http.get("/mock/requests").json()
    assert len(records) == 4
    seen = json.dumps(records)
    assert "never-shown" not in seen
    keys = {name for r in records for name in r["headers"] if name in ("authorization", "x-api-key", "api-key", "x-goog-api-key")}
    assert keys == {"authorization", "api-key", "x-api-key", "x-goog-api-key"}
    assert all(r["headers"][k] == "<redacted>" for r in records for k in keys if k in r["headers"])
    azure = next(r for r in records if r["path"].startswith("/openai/deployments/"))
    assert urllib.parse.parse_qs(azure["query"])["api-version"] == ["2024-10-21"]


# Anthropic's own platform clients through sluice's pass-through routes (`/bedrock/*`,
# `/vertex_ai/*`): sluice relays the body, so what arrives must still be what the platform
# takes, InvokeModel's and rawPredict's Anthropic envelope included.
@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("platform", ["bedrock", "vertex"])
def test_anthropic_platform_clients_through_pass_through(conformance_gateway, mock_http, vertex_token, platform, stream):
    root, headers = conformance_gateway["root"], {"x-litellm-api-key": MASTER_KEY}
    if platform == "bedrock":
        client = anthropic.AnthropicBedrock(
            aws_access_key="AKIDCLIENT", aws_secret_key="client-secret", aws_region="us-west-2",
            base_url=f"{root}/bedrock", default_headers=headers, max_retries=0,
        )
        model, version, wire = "anthropic.claude-sonnet-4-20250514-v1:0", c.BEDROCK_ANTHROPIC_VERSION, "bedrock_anthropic_invoke"
    else:
        client = anthropic.AnthropicVertex(
            region="us-east5", project_id="sluice-test", access_token="client-token",
            base_url=f"{root}/vertex_ai/v1", default_headers=headers, max_retries=0,
        )
        model, version, wire = "claude-sonnet-4@20250514", c.VERTEX_ANTHROPIC_VERSION, "vertex_anthropic"
    mock_http.delete("/mock/requests").raise_for_status()
    # The platforms document one `anthropic_version` each; the SDK's clients default to its
    # API version constant, so the documented value is set here.
    kw = dict(model=model, max_tokens=256, system="Be brief.", messages=[{"role": "user", "content": "Weather in Paris?"}],
              tools=[ANTHROPIC_TOOL], extra_body={"anthropic_version": version})
    if stream:
        with client.messages.with_streaming_response.create(stream=True, **kw) as r:
            answer = r.read()
        if platform == "vertex":
            c.anthropic_stream(answer.decode(), "client RawMessageStreamEvent")
        else:
            # Bedrock streams Anthropic's events inside AWS event-stream frames.
            c.bedrock_invoke_stream(answer, "client InvokeModelWithResponseStream")
    else:
        raw = client.messages.with_raw_response.create(**kw)
        c.anthropic_message_answer(raw.http_response.text, "client Message")
    records = mock_http.get("/mock/requests").json()
    assert judge({wire}, records, mock_http, vertex_token, 1, Calls()) == []


@pytest.mark.parametrize("turns", ["first", "history"])
@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("provider", PROVIDERS)
def test_openai_responses_api(conformance_gateway, mock_http, vertex_token, provider, stream, turns):
    """The Responses API from the openai SDK to every provider: passed through to OpenAI's and
    Azure's `/responses`, translated for the others (`sluice_translate::responses`). The
    upstream request judged as above (by the provider's own types), the answer by the SDK's
    `Response` (streams: every event by `ResponseStreamEvent`, and the `response.completed`
    event's response). `history` sends a finished tool round back: the call and its output."""
    oai = openai.OpenAI(base_url=conformance_gateway["base_url"], api_key=MASTER_KEY, max_retries=0)
    mock_http.delete("/mock/requests").raise_for_status()
    tool = {"type": "function", "name": "get_weather", "description": "Weather in a city",
            "parameters": SCHEMA, "strict": True}
    if turns == "history":
        given = [
            {"role": "user", "content": "Weather in Paris?"},
            {"type": "function_call", "call_id": "call_1", "name": "get_weather",
             "arguments": json.dumps({"city": "Paris", "days": 1})},
            {"type": "function_call_output", "call_id": "call_1", "output": "Sunny, 21 C"},
        ]
    else:
        given = "Weather in Paris?"
    kw = dict(model=CONFORMANCE_MODELS[provider], input=given, instructions="Be brief.", tools=[tool],
              max_output_tokens=200)
    if stream:
        with oai.responses.with_streaming_response.create(stream=True, **kw) as r:
            c.openai_responses_stream(r.read().decode(), "client ResponseStreamEvent")
    else:
        raw = oai.responses.with_raw_response.create(**kw)
        c.openai_responses_answer(raw.http_response.text)
    records = mock_http.get("/mock/requests").json()
    wire = {"openai": {"openai_responses"}, "azure": {"azure_responses"}}.get(provider, WIRE[provider])
    problems = judge(wire, records, mock_http, vertex_token, 1, Calls())
    if problems:
        raise c.Refusal("conformance", problems)


def test_an_endpoint_sluice_does_not_translate_does_not_cool_the_deployment_down(conformance_gateway):
    """Not a vendor-type refusal, found while driving the Responses API at each provider (which
    sluice declined then): a request sluice declines itself says nothing of the deployment's
    health. Moderations are one Gemini does not serve."""
    oai = openai.OpenAI(base_url=conformance_gateway["base_url"], api_key=MASTER_KEY, max_retries=0)
    model = "conf-gemini-cooldown"  # its own group, so no other test meets the cooldown
    with pytest.raises(openai.InternalServerError) as declined:
        oai.moderations.create(model=model, input="hi")
    assert declined.value.status_code == 501
    assert declined.value.body["code"] == "endpoint_not_supported"
    oai.chat.completions.create(model=model, messages=[{"role": "user", "content": "hi"}])


# ---------------------------------------------------------------------------------------------
# Google's and AWS's clients (the google-genai SDK, boto3's bedrock-runtime) with their base
# URL at sluice: `generateContent` and Converse as client dialects, to a group of every
# provider. Each test makes the SDK's own call (its parsing is the client's view) and the same
# call raw, whose answer is judged strictly by the vendor's types (google-genai's pydantic
# models with unknown fields refused; botocore's service model, each event-stream frame
# CRC-checked), and every upstream request as in the matrix above.
# ---------------------------------------------------------------------------------------------

GEMINI_TOOL = {
    "functionDeclarations": [{
        "name": "get_weather",
        "description": "Weather in a city",
        # The SDK's OpenAPI subset, upper-case types and all.
        "parameters": {"type": "OBJECT", "properties": {"city": {"type": "STRING"}, "days": {"type": "INTEGER"}},
                       "required": ["city", "days"]},
    }]
}
CONVERSE_TOOL = {"toolSpec": {"name": "get_weather", "description": "Weather in a city", "inputSchema": {"json": SCHEMA}}}


def _gemini_contents(turns: str) -> list:
    first = [{"role": "user", "parts": [{"text": "Weather in Paris?"}]}]
    if turns == "first":
        return first
    return first + [
        {"role": "model", "parts": [{"functionCall": {"name": "get_weather", "args": {"city": "Paris", "days": 1}}}]},
        {"role": "user", "parts": [{"functionResponse": {"name": "get_weather", "response": {"result": "Sunny, 21 C"}}}]},
    ]


def bedrock_runtime(root: str, key: str):
    """Unmodified boto3 at sluice: the virtual key is the access key id (botocore sends a
    Bedrock API key, `AWS_BEARER_TOKEN_BEDROCK`, only over HTTPS)."""
    import boto3
    import botocore.config

    return boto3.client(
        "bedrock-runtime", endpoint_url=root, region_name="us-west-2",
        aws_access_key_id=key, aws_secret_access_key="not-checked",
        config=botocore.config.Config(retries={"max_attempts": 1}),
    )


def _converse_messages(turns: str) -> list:
    first = [{"role": "user", "content": [{"text": "Weather in Paris?"}]}]
    if turns == "first":
        return first
    return first + [
        {"role": "assistant", "content": [{"toolUse": {"toolUseId": "tu_1", "name": "get_weather", "input": {"city": "Paris", "days": 1}}}]},
        {"role": "user", "content": [{"toolResult": {"toolUseId": "tu_1", "content": [{"text": "Sunny, 21 C"}], "status": "success"}}]},
    ]


@pytest.mark.parametrize("turns", ["first", "history"])
@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("provider", PROVIDERS)
def test_google_genai_client(conformance_gateway, mock_http, vertex_token, provider, stream, turns):
    """google-genai's `generate_content` / `generate_content_stream` at sluice's
    `/v1beta/models/{group}:...`: translated through the internal representation to every
    provider but Gemini's (passed to Gemini and Vertex AI's Gemini untouched)."""
    from google import genai
    from google.genai import types as g

    model = CONFORMANCE_MODELS[provider]
    mock_http.delete("/mock/requests").raise_for_status()
    client = genai.Client(api_key=MASTER_KEY, http_options=g.HttpOptions(base_url=conformance_gateway["root"]))
    body = {
        "contents": _gemini_contents(turns),
        "systemInstruction": {"parts": [{"text": "Be brief."}]},
        "tools": [GEMINI_TOOL],
        "generationConfig": {"maxOutputTokens": 200},
    }
    config = g.GenerateContentConfig(
        system_instruction="Be brief.", tools=[g.Tool.model_validate(GEMINI_TOOL)], max_output_tokens=200,
        automatic_function_calling=g.AutomaticFunctionCallingConfig(disable=True),
    )
    contents = [g.Content.model_validate(x) for x in body["contents"]]
    if stream:
        chunks = list(client.models.generate_content_stream(model=model, contents=contents, config=config))
        assert chunks and chunks[-1].candidates[0].finish_reason is not None
        assert chunks[-1].usage_metadata.prompt_token_count > 0
    else:
        answer = client.models.generate_content(model=model, contents=contents, config=config)
        parts = answer.candidates[0].content.parts
        assert answer.text or any(p.function_call for p in parts)
        assert answer.usage_metadata.candidates_token_count > 0
    # The same call raw, its answer judged strictly.
    op = "streamGenerateContent?alt=sse" if stream else "generateContent"
    r = httpx.post(f"{conformance_gateway['root']}/v1beta/models/{model}:{op}", json=body,
                   headers={"x-goog-api-key": MASTER_KEY}, timeout=30)
    assert r.status_code == 200, r.text
    if stream:
        assert r.headers["content-type"].startswith("text/event-stream")
        c.gemini_stream(r.text)
        # Without `alt=sse`, Google's other stream: one JSON array, element by element.
        r = httpx.post(f"{conformance_gateway['root']}/v1beta/models/{model}:streamGenerateContent", json=body,
                       headers={"x-goog-api-key": MASTER_KEY}, timeout=30)
        assert r.status_code == 200, r.text
        assert r.headers["content-type"].startswith("application/json")
        elements = c.gemini_array_stream(r.text)
        assert elements[-1].candidates[0].finish_reason is not None
    else:
        c.gemini_answer(r.text, "client GenerateContentResponse")
    records = mock_http.get("/mock/requests").json()
    problems = judge(WIRE[provider], records, mock_http, vertex_token, 3 if stream else 2, Calls())
    if problems:
        raise c.Refusal("conformance", problems)


@pytest.mark.parametrize("turns", ["first", "history"])
@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("provider", PROVIDERS)
def test_boto3_converse_client(conformance_gateway, mock_http, vertex_token, provider, stream, turns):
    """boto3's `converse` / `converse_stream` with `endpoint_url` at sluice, signing with a
    virtual key as its access key id: translated to every provider but Bedrock's (passed to
    Converse untouched)."""
    model = CONFORMANCE_MODELS[provider]
    mock_http.delete("/mock/requests").raise_for_status()
    client = bedrock_runtime(conformance_gateway["root"], MASTER_KEY)
    kw = dict(
        modelId=model, messages=_converse_messages(turns), system=[{"text": "Be brief."}],
        toolConfig={"tools": [CONVERSE_TOOL]}, inferenceConfig={"maxTokens": 200},
    )
    if stream:
        events = list(client.converse_stream(**kw)["stream"])
        kinds = [next(iter(e)) for e in events]
        assert kinds[0] == "messageStart" and "messageStop" in kinds and kinds[-1] == "metadata", kinds
        assert events[-1]["metadata"]["usage"]["outputTokens"] > 0
    else:
        answer = client.converse(**kw)
        assert answer["stopReason"] in ("end_turn", "tool_use", "max_tokens")
        assert answer["output"]["message"]["content"]
        assert answer["usage"]["outputTokens"] > 0
    op = "converse-stream" if stream else "converse"
    body = {k: v for k, v in kw.items() if k != "modelId"}
    r = httpx.post(f"{conformance_gateway['root']}/model/{model}/{op}", json=body,
                   headers={"authorization": f"Bearer {MASTER_KEY}"}, timeout=30)
    assert r.status_code == 200, r.text
    if stream:
        assert r.headers["content-type"] == "application/vnd.amazon.eventstream"
        c.bedrock_converse_stream(r.content)
    else:
        c.bedrock_converse_answer(r.text)
    records = mock_http.get("/mock/requests").json()
    problems = judge(WIRE[provider], records, mock_http, vertex_token, 2, Calls())
    if problems:
        raise c.Refusal("conformance", problems)


def test_vendor_clients_errors_models_and_counting(conformance_gateway):
    """Google's and AWS's clients get sluice's own errors in their vendor's shape (the SDKs
    raise their own exception types with the status), the model list in Google's shape, and
    `countTokens` counted by sluice."""
    from google import genai
    from google.genai import errors as gerrors
    from google.genai import types as g

    root = conformance_gateway["root"]
    client = genai.Client(api_key=MASTER_KEY, http_options=g.HttpOptions(base_url=root))
    with pytest.raises(gerrors.ClientError) as missing:
        client.models.generate_content(model="no-such-group", contents="hi")
    assert missing.value.code == 404 and missing.value.status == "NOT_FOUND"
    bad = genai.Client(api_key="sk-wrong", http_options=g.HttpOptions(base_url=root))
    with pytest.raises(gerrors.ClientError) as refused:
        bad.models.generate_content(model="conf-openai", contents="hi")
    assert refused.value.code == 401
    names = [m.name for m in client.models.list()]
    assert "models/conf-openai" in names and "models/conf-bedrock" in names
    assert client.models.get(model="conf-anthropic").name == "models/conf-anthropic"
    counted = client.models.count_tokens(model="conf-anthropic", contents="Weather in Paris, please?")
    assert counted.total_tokens > 0
    # Embeddings through /v1/embeddings, answered in Google's shape.
    emb = client.models.embed_content(
        model="conf-embedding", contents=["a cat", "a dog"],
        config=g.EmbedContentConfig(output_dimensionality=8),
    )
    assert [len(e.values) for e in emb.embeddings] == [8, 8]
    # The key in the query string, as Google's REST API also takes it.
    r = httpx.post(f"{root}/v1beta/models/conf-openai:generateContent?key={MASTER_KEY}",
                   json={"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}, timeout=30)
    assert r.status_code == 200, r.text
    wrong = bedrock_runtime(root, "sk-wrong")
    with pytest.raises(wrong.exceptions.AccessDeniedException):
        wrong.converse(modelId="conf-openai", messages=[{"role": "user", "content": [{"text": "hi"}]}])
    brt = bedrock_runtime(root, MASTER_KEY)
    with pytest.raises(brt.exceptions.ResourceNotFoundException):
        brt.converse(modelId="no-such-group", messages=[{"role": "user", "content": [{"text": "hi"}]}])
    with pytest.raises(brt.exceptions.ValidationException):
        brt.converse(modelId="conf-openai", messages=[{"role": "user", "content": [{"text": "hi"}]}],
                     guardrailConfig={"guardrailIdentifier": "g", "guardrailVersion": "1"})
    # A Bedrock API key as a bearer token (what boto3 sends over HTTPS) is a virtual key too.
    r = httpx.post(f"{root}/model/conf-openai/converse", headers={"authorization": f"Bearer {MASTER_KEY}"},
                   json={"messages": [{"role": "user", "content": [{"text": "hi"}]}]}, timeout=30)
    assert r.status_code == 200, r.text
    assert r.json()["output"]["message"]["role"] == "assistant"
