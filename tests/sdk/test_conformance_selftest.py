"""The judges of conformance.py judged: each refuses a wrong request or answer (an unknown key,
nested as deep as the vendor's types go; a wrong type; a missing required field; a value
outside the vendor's enum) and accepts a right one. No gateway: plain data."""

import base64
import copy
import json
import struct
import zlib

import pytest

import conformance as c

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def refused(judge, *args, match: str):
    with pytest.raises(c.Refusal) as e:
        judge(*args)
    assert match in str(e.value), str(e.value)
    return str(e.value)


def mutate(body: dict, path: str, value=None, delete: bool = False) -> dict:
    """A copy of `body` with the key at dotted `path` set (or deleted)."""
    out = copy.deepcopy(body)
    *parents, last = [int(p) if p.isdigit() else p for p in path.split(".")]
    node = out
    for p in parents:
        node = node[p]
    if delete:
        del node[last]
    else:
        node[last] = value
    return out


# ---------------------------------------------------------------------------------------------
# OpenAI requests
# ---------------------------------------------------------------------------------------------

OPENAI_CHAT = {
    "model": "gpt-4o-mini",
    "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [
            {"type": "text", "text": "What is this?"},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}", "detail": "low"}},
        ]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}},
        ]},
        {"role": "tool", "tool_call_id": "call_1", "content": "21 C"},
    ],
    "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": SCHEMA, "strict": True}}],
    "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
    "response_format": {"type": "json_schema", "json_schema": {"name": "w", "schema": SCHEMA}},
    "reasoning_effort": "low",
    "stop": ["END"],
    "user": "u-1",
    "temperature": 0.2,
    "max_tokens": 64,
}


def test_openai_chat_accepts_a_full_request():
    c.openai_chat_request(OPENAI_CHAT)
    c.openai_chat_request({**OPENAI_CHAT, "stream": True, "stream_options": {"include_usage": True}})


@pytest.mark.parametrize(
    "path,value,match",
    [
        # Unknown keys, at the top and nested inside unions of TypedDicts.
        ("zzz", 1, "zzz: Extra inputs are not permitted"),
        ("messages.1.content.1.image_url.zzz", 1, "messages.1.content.1.image_url.zzz: Extra inputs are not permitted"),
        ("tools.0.function.zzz", 1, "tools.0.function.zzz: Extra inputs are not permitted"),
        ("messages.2.tool_calls.0.function.zzz", 1, "messages.2.tool_calls.0.function.zzz: Extra inputs"),
        # Wrong types: no string taken for a number, no object for a JSON-string argument.
        ("temperature", "0.2", "temperature: Input should be a valid number"),
        ("messages.2.tool_calls.0.function.arguments", {}, "arguments: Input should be a valid string"),
        ("stop", [1], "stop"),
        # Outside the SDK's literals.
        ("reasoning_effort", "huge", "reasoning_effort: Input should be"),
        ("messages.1.content.1.image_url.detail", "ultra", "detail: Input should be"),
        ("messages.0.role", "wizard", "messages.0"),
    ],
)
def test_openai_chat_refuses(path, value, match):
    refused(c.openai_chat_request, mutate(OPENAI_CHAT, path, value), match=match)


@pytest.mark.parametrize(
    "path,match",
    [("model", "model: Field required"), ("messages.3.tool_call_id", "messages.3.tool_call_id: Field required"),
     ("tools.0.function.name", "tools.0.function.name: Field required")],
)
def test_openai_chat_refuses_a_missing_required_field(path, match):
    refused(c.openai_chat_request, mutate(OPENAI_CHAT, path, delete=True), match=match)


def test_string_content_is_judged_as_a_string_and_lists_are_judged_now():
    """pydantic validates `Iterable[...]` lazily, and in `Union[str, Iterable[X]]` the lazy
    member would take a string content: the rebuilt types use lists, judged at once."""
    c.openai_chat_request({"model": "m", "messages": [{"role": "user", "content": "plain text"}]})
    deep = {"model": "m", "messages": [{"role": "user", "content": [{"type": "text", "text": "x", "zzz": 1}]}]}
    refused(c.openai_chat_request, deep, match="messages.0.content.0.zzz: Extra inputs are not permitted")


def test_the_sdk_classes_themselves_are_left_alone():
    from openai.types.chat import ChatCompletionUserMessageParam

    assert "__pydantic_config__" not in ChatCompletionUserMessageParam.__dict__


def test_openai_embeddings_and_responses():
    c.openai_embeddings_request({"model": "e", "input": ["a", "b"], "dimensions": 8, "encoding_format": "float"})
    refused(c.openai_embeddings_request, {"model": "e", "input": ["a"], "zzz": 1}, match="zzz: Extra inputs")
    refused(c.openai_embeddings_request, {"model": "e"}, match="input: Field required")
    refused(c.openai_embeddings_request, {"model": "e", "input": "a", "encoding_format": "hex"}, match="encoding_format")
    good = {"model": "gpt-4o", "input": [{"role": "user", "content": [{"type": "input_text", "text": "hi"}]}],
            "reasoning": {"effort": "low"}, "text": {"format": {"type": "json_schema", "name": "w", "schema": SCHEMA}}}
    c.openai_responses_request(good)
    refused(c.openai_responses_request, mutate(good, "input.0.content.0.zzz", 1), match="input.0.content.0.zzz")
    refused(c.openai_responses_request, mutate(good, "reasoning.effort", 3), match="reasoning.effort")


def test_azure_takes_openai_bodies_with_the_deployment_for_model():
    body = {k: v for k, v in OPENAI_CHAT.items() if k != "model"}
    c.azure_request("/openai/deployments/d1/chat/completions", "api-version=2024-10-21", body)
    refused(c.azure_request, "/openai/deployments/d1/chat/completions", None, body, match="api-version is required")
    refused(c.azure_request, "/openai/deployments/d1/chat/completions", "api-version=1",
            mutate(body, "messages.1.content.0.zzz", 1), match="messages.1.content.0.zzz")
    refused(c.azure_request, "/openai/deployments/d1/images/x", "api-version=1", body, match="no Azure OpenAI")
    responses = {"model": "d1", "input": "hi"}
    c.azure_request("/openai/responses", "api-version=2025-04-01-preview", responses)
    refused(c.azure_request, "/openai/responses", "api-version=1", {"input": "hi", "zzz": 1}, match="zzz: Extra inputs")
    refused(c.azure_request, "/openai/responses", None, responses, match="api-version is required")


# ---------------------------------------------------------------------------------------------
# Anthropic requests
# ---------------------------------------------------------------------------------------------

ANTHROPIC = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 2048,
    "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
    "messages": [
        {"role": "user", "content": [
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
            {"type": "text", "text": "Weather here?"},
        ]},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "call it", "signature": "c2ln"},
            {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "21 C"}]},
        ]},
    ],
    "tools": [{"name": "get_weather", "description": "Weather", "input_schema": SCHEMA}],
    "tool_choice": {"type": "tool", "name": "get_weather"},
    "thinking": {"type": "enabled", "budget_tokens": 1024},
    "metadata": {"user_id": "u-1"},
    "stop_sequences": ["END"],
}


def test_anthropic_accepts_a_full_request():
    c.anthropic_messages_request(ANTHROPIC)
    c.anthropic_messages_request({**ANTHROPIC, "stream": True})


@pytest.mark.parametrize(
    "path,value,match",
    [
        ("zzz", 1, "zzz: Extra inputs are not permitted"),
        ("messages.2.content.0.content.0.zzz", 1, "messages.2.content.0.content.0.zzz: Extra inputs"),
        # The SDK's content unions also take its response models (extra='allow'): not the judge.
        ("messages.0.content.1.zzz", 1, "messages.0.content.1.zzz: Extra inputs"),
        ("messages.1.content.0.zzz", 1, "messages.1.content.0.zzz: Extra inputs"),
        ("messages.0.content.0.source.zzz", 1, "messages.0.content.0.source.zzz: Extra inputs"),
        ("tools.0.zzz", 1, "tools.0.zzz"),
        ("metadata.user", "u", "metadata.user: Extra inputs"),
        ("max_tokens", "2048", "max_tokens: Input should be a valid integer"),
        ("messages.1.content.1.input", "{}", "input"),
        ("thinking.type", "sometimes", "thinking"),
        ("tool_choice.type", "maybe", "tool_choice"),
        ("messages.0.content.0.source.media_type", "image/bmp", "media_type"),
    ],
)
def test_anthropic_refuses(path, value, match):
    refused(c.anthropic_messages_request, mutate(ANTHROPIC, path, value), match=match)


@pytest.mark.parametrize("path", ["max_tokens", "model", "messages", "messages.1.content.1.id", "tools.0.input_schema"])
def test_anthropic_refuses_a_missing_required_field(path):
    refused(c.anthropic_messages_request, mutate(ANTHROPIC, path, delete=True), match="Field required")


def test_vertex_anthropic_envelope():
    body = {k: v for k, v in ANTHROPIC.items() if k != "model"}
    c.vertex_anthropic_request({**body, "anthropic_version": "vertex-2023-10-16"}, streaming_path=False)
    c.vertex_anthropic_request({**body, "anthropic_version": "vertex-2023-10-16", "stream": True}, streaming_path=True)
    refused(c.vertex_anthropic_request, body, False, match="anthropic_version: 'vertex-2023-10-16' is required")
    refused(c.vertex_anthropic_request, {**ANTHROPIC, "anthropic_version": "vertex-2023-10-16"}, False,
            match="model: not part of the body")
    refused(c.vertex_anthropic_request, {**body, "anthropic_version": "vertex-2023-10-16"}, True, match="stream")
    refused(c.vertex_anthropic_request, {**mutate(body, "messages.0.content.1.zzz", 1),
                                         "anthropic_version": "vertex-2023-10-16"}, False, match="messages.0.content.1.zzz")


def test_bedrock_anthropic_invoke_envelope():
    body = {k: v for k, v in ANTHROPIC.items() if k != "model"}
    good = {**body, "anthropic_version": "bedrock-2023-05-31", "anthropic_beta": ["interleaved-thinking-2025-05-14"]}
    c.bedrock_anthropic_request(good)
    refused(c.bedrock_anthropic_request, {**good, "stream": True}, match="stream: not part of an InvokeModel body")
    refused(c.bedrock_anthropic_request, {**good, "anthropic_version": "vertex-2023-10-16"}, match="bedrock-2023-05-31")
    refused(c.bedrock_anthropic_request, {**good, "model": "claude"}, match="model: not part of the body")
    refused(c.bedrock_anthropic_request, {**good, "anthropic_beta": "x"}, match="anthropic_beta")
    refused(c.bedrock_anthropic_request, mutate(good, "max_tokens", delete=True), match="max_tokens: Field required")


# ---------------------------------------------------------------------------------------------
# Gemini requests
# ---------------------------------------------------------------------------------------------

GEMINI = {
    "contents": [
        {"role": "user", "parts": [{"text": "Weather here?"}, {"inlineData": {"mimeType": "image/png", "data": PNG}}]},
        {"role": "model", "parts": [{"functionCall": {"name": "get_weather", "args": {"city": "Paris"}},
                                     "thoughtSignature": "c2ln"}]},
        {"role": "user", "parts": [{"functionResponse": {"name": "get_weather", "response": {"t": 21}}}]},
    ],
    "systemInstruction": {"parts": [{"text": "Be brief."}]},
    "tools": [{"functionDeclarations": [{"name": "get_weather", "description": "Weather", "parametersJsonSchema": SCHEMA}]}],
    "toolConfig": {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["get_weather"]}},
    "safetySettings": [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE"}],
    "generationConfig": {"maxOutputTokens": 64, "temperature": 0.2, "stopSequences": ["END"],
                         "responseMimeType": "application/json", "responseJsonSchema": SCHEMA,
                         "thinkingConfig": {"includeThoughts": True, "thinkingBudget": 1024}},
}


def test_gemini_accepts_a_full_request():
    c.gemini_request(GEMINI, vertex=False)
    c.gemini_request({**GEMINI, "labels": {"team": "a"}}, vertex=True)


@pytest.mark.parametrize(
    "path,value,match",
    [
        ("zzz", 1, "zzz: Extra inputs are not permitted"),
        ("contents.0.parts.0.zzz", 1, "contents.0.parts.0.zzz: Extra inputs"),
        ("generationConfig.thinkingConfig.zzz", 1, "generationConfig.thinkingConfig.zzz: Extra inputs"),
        ("tools.0.functionDeclarations.0.zzz", 1, "tools.0.functionDeclarations.0.zzz"),
        ("generationConfig.maxOutputTokens", "64", "maxOutputTokens: Input should be a valid integer"),
        ("contents.0.parts.1.inlineData.data", "not base64!", "contents.0.parts.1.inlineData.data"),
        # google-genai's enums only warn about an unknown value; the judge refuses it.
        ("toolConfig.functionCallingConfig.mode", "SOMETIMES", "enum: SOMETIMES is not a valid FunctionCallingConfigMode"),
        ("safetySettings.0.category", "HARM_CATEGORY_BOREDOM", "enum: HARM_CATEGORY_BOREDOM is not a valid HarmCategory"),
        # OpenAPI-subset `parameters` (google's Schema) refuses JSON Schema's own keywords.
        ("tools.0.functionDeclarations.0.parameters", {"type": "OBJECT", "$comment": "x"}, "$comment"),
    ],
)
def test_gemini_refuses(path, value, match):
    refused(c.gemini_request, mutate(GEMINI, path, value), False, match=match)


def test_gemini_refuses_missing_contents_and_vertex_only_fields():
    refused(c.gemini_request, mutate(GEMINI, "contents", delete=True), False, match="contents: Field required")
    refused(c.gemini_request, {**GEMINI, "labels": {"team": "a"}}, False, match="labels: Extra inputs")


# ---------------------------------------------------------------------------------------------
# Bedrock Converse requests
# ---------------------------------------------------------------------------------------------

CONVERSE = {
    "messages": [
        {"role": "user", "content": [{"text": "Weather here?"},
                                     {"image": {"format": "png", "source": {"bytes": PNG}}}]},
        {"role": "assistant", "content": [
            {"reasoningContent": {"reasoningText": {"text": "call it", "signature": "c2ln"}}},
            {"toolUse": {"toolUseId": "t1", "name": "get_weather", "input": {"city": "Paris"}}},
        ]},
        {"role": "user", "content": [{"toolResult": {"toolUseId": "t1", "content": [{"text": "21 C"}], "status": "success"}},
                                     {"cachePoint": {"type": "default"}}]},
    ],
    "system": [{"text": "Be brief."}, {"cachePoint": {"type": "default"}}],
    "inferenceConfig": {"maxTokens": 64, "temperature": 0.2, "stopSequences": ["END"]},
    "toolConfig": {"tools": [{"toolSpec": {"name": "get_weather", "inputSchema": {"json": SCHEMA}}}],
                   "toolChoice": {"tool": {"name": "get_weather"}}},
    "additionalModelRequestFields": {"thinking": {"type": "enabled", "budget_tokens": 1024}},
}
CONVERSE_PATH = "/model/anthropic.claude-sonnet-4-20250514-v1%3A0/converse"


def test_bedrock_accepts_a_full_request():
    c.bedrock_converse_request(CONVERSE_PATH, CONVERSE)
    c.bedrock_converse_request(CONVERSE_PATH.replace("/converse", "/converse-stream"), CONVERSE)


@pytest.mark.parametrize(
    "path,value,match",
    [
        ("zzz", 1, 'Unknown parameter in input: "zzz"'),
        ("messages.0.content.0.zzz", 1, 'Unknown parameter in messages[0].content[0]: "zzz"'),
        ("toolConfig.tools.0.toolSpec.zzz", 1, "Unknown parameter in toolConfig.tools[0].toolSpec"),
        ("inferenceConfig.maxTokens", "64", "Invalid type for parameter inferenceConfig.maxTokens"),
        ("messages.0.role", "wizard", "'wizard' is not one of"),
        ("messages.0.content.1.image.format", "bmp", "'bmp' is not one of"),
        ("messages.0.content.1.image.source.bytes", "not base64!", "not base64"),
        # A union must set exactly one member.
        ("messages.0.content.0", {"text": "a", "cachePoint": {"type": "default"}}, "messages[0].content[0]"),
    ],
)
def test_bedrock_refuses(path, value, match):
    refused(c.bedrock_converse_request, CONVERSE_PATH, mutate(CONVERSE, path, value), match=match)


def test_bedrock_refuses_missing_fields_and_body_model_ids():
    refused(c.bedrock_converse_request, CONVERSE_PATH, mutate(CONVERSE, "messages.0.role", delete=True),
            match='Missing required parameter in messages[0]: "role"')
    refused(c.bedrock_converse_request, CONVERSE_PATH, {**CONVERSE, "modelId": "x"}, match="modelId")
    refused(c.bedrock_converse_request, "/model/x/invoke", CONVERSE, match="no Converse operation")


# ---------------------------------------------------------------------------------------------
# Dispatch
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path,query,body,validator",
    [
        ("/v1/chat/completions", None, OPENAI_CHAT, "openai_chat"),
        ("/openai/deployments/d/chat/completions", "api-version=1", OPENAI_CHAT, "azure"),
        ("/v1/messages", None, ANTHROPIC, "anthropic_messages"),
        ("/v1beta/models/gemini-2.5-flash:streamGenerateContent", "alt=sse", GEMINI, "gemini"),
        ("/v1/projects/p/locations/l/publishers/google/models/g:generateContent", None, GEMINI, "vertex_gemini"),
        ("/v1/projects/p/locations/l/publishers/anthropic/models/c:rawPredict", None,
         {**{k: v for k, v in ANTHROPIC.items() if k != "model"}, "anthropic_version": "vertex-2023-10-16"}, "vertex_anthropic"),
        (CONVERSE_PATH, None, CONVERSE, "bedrock_converse"),
        ("/model/anthropic.claude-x/invoke", None,
         {**{k: v for k, v in ANTHROPIC.items() if k != "model"}, "anthropic_version": "bedrock-2023-05-31"},
         "bedrock_anthropic_invoke"),
    ],
)
def test_judge_upstream_dispatches_by_path(path, query, body, validator):
    record = {"method": "POST", "path": path, "query": query, "body": body, "body_bytes": 1}
    assert c.judge_upstream(record) == validator


def test_judge_upstream_refuses_unknown_paths_and_non_json():
    refused(c.judge_upstream, {"method": "POST", "path": "/v1/nope", "body": {}}, match="no validator")
    refused(c.judge_upstream, {"method": "POST", "path": "/v1/messages", "body_bytes": 3}, match="no JSON object")


# ---------------------------------------------------------------------------------------------
# Answers
# ---------------------------------------------------------------------------------------------

CHAT_ANSWER = {
    "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m",
    "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                 "message": {"role": "assistant", "content": "hi"}}],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
}


def test_openai_answers():
    c.openai_chat_answer(json.dumps(CHAT_ANSWER))
    refused(c.openai_chat_answer, json.dumps(mutate(CHAT_ANSWER, "choices.0.finish_reason", "done")),
            match="choices.0.finish_reason: Input should be")
    refused(c.openai_chat_answer, json.dumps(mutate(CHAT_ANSWER, "created", delete=True)), match="created: Field required")
    refused(c.openai_chat_answer, json.dumps(mutate(CHAT_ANSWER, "created", "1")), match="created: Input should be a valid integer")
    chunk = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
             "choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": None}]}
    last = mutate(chunk, "choices.0.finish_reason", "stop")
    stream = "".join(f"data: {json.dumps(x)}\n\n" for x in (chunk, last)) + "data: [DONE]\n\n"
    assert len(c.openai_chat_stream(stream)) == 2
    refused(c.openai_chat_stream, f"data: {json.dumps(chunk)}\n\n", match="no chunk carried a finish_reason")
    bad = mutate(last, "choices.0.finish_reason", "done")
    refused(c.openai_chat_stream, f"data: {json.dumps(bad)}\n\n", match="finish_reason: Input should be")


MESSAGE = {
    "id": "msg_1", "type": "message", "role": "assistant", "model": "claude",
    "content": [{"type": "text", "text": "hi"}], "stop_reason": "end_turn", "stop_sequence": None,
    "usage": {"input_tokens": 1, "output_tokens": 1},
}


def test_anthropic_answers():
    c.anthropic_message_answer(json.dumps(MESSAGE))
    refused(c.anthropic_message_answer, json.dumps(mutate(MESSAGE, "stop_reason", "done")), match="stop_reason: Input should be")
    refused(c.anthropic_message_answer, json.dumps(mutate(MESSAGE, "usage", delete=True)), match="usage: Field required")
    refused(c.anthropic_message_answer, json.dumps(mutate(MESSAGE, "content.0.type", "words")), match="content.0")

    def sse(*events):
        return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)

    start = {"type": "message_start", "message": {**MESSAGE, "content": [], "stop_reason": None}}
    block = {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}
    delta = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "hi"}}
    stop = {"type": "content_block_stop", "index": 0}
    mdelta = {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
              "usage": {"output_tokens": 1}}
    end = {"type": "message_stop"}
    assert len(c.anthropic_stream(sse(start, {"type": "ping"}, block, delta, stop, mdelta, end))) == 6
    refused(c.anthropic_stream, sse(start, block, delta, stop, mutate(mdelta, "delta.stop_reason", "done"), end),
            match="stop_reason: Input should be")
    refused(c.anthropic_stream, sse(start, block, stop, mdelta), match="not framed")
    renamed = f"event: message_stop\ndata: {json.dumps(start)}\n\n"
    refused(c.anthropic_stream, renamed, match="event name 'message_stop' but data type 'message_start'")


def test_gemini_answers():
    good = {"candidates": [{"content": {"role": "model", "parts": [{"text": "hi"}]}, "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1, "totalTokenCount": 2},
            "modelVersion": "gemini-2.5-flash"}
    c.gemini_answer(json.dumps(good))
    refused(c.gemini_answer, json.dumps(mutate(good, "candidates.0.finishReason", "DONE")), match="enum: DONE is not a valid FinishReason")
    refused(c.gemini_answer, json.dumps(mutate(good, "candidates.0.zzz", 1)), match="candidates.0.zzz: Extra inputs")


def _event_frame(event_type: str, payload: dict) -> bytes:
    """One AWS event-stream frame (the layout botocore decodes)."""
    headers = b""
    for name, value in ((":event-type", event_type), (":content-type", "application/json"), (":message-type", "event")):
        headers += bytes([len(name)]) + name.encode() + b"\x07" + struct.pack(">H", len(value)) + value.encode()
    body = json.dumps(payload).encode()
    total = 12 + len(headers) + len(body) + 4
    prelude = struct.pack(">II", total, len(headers))
    prelude += struct.pack(">I", zlib.crc32(prelude))
    message = prelude + headers + body
    return message + struct.pack(">I", zlib.crc32(message))


def test_bedrock_answers():
    good = {"output": {"message": {"role": "assistant", "content": [{"text": "hi"}]}}, "stopReason": "end_turn",
            "usage": {"inputTokens": 1, "outputTokens": 1, "totalTokens": 2}, "metrics": {"latencyMs": 1}}
    c.bedrock_converse_answer(json.dumps(good))
    refused(c.bedrock_converse_answer, json.dumps(mutate(good, "stopReason", "done")), match="'done' is not one of")
    refused(c.bedrock_converse_answer, json.dumps(mutate(good, "usage.outputTokens", "1")), match="usage.outputTokens")
    refused(c.bedrock_converse_answer, json.dumps(mutate(good, "usage", delete=True)), match='Missing required parameter in input: "usage"')
    # An answer may carry members the model does not declare, as botocore's parser allows.
    c.bedrock_converse_answer(json.dumps(mutate(good, "usage.p", "abcd")))
    frames = (_event_frame("messageStart", {"role": "assistant"})
              + _event_frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "hi"}})
              + _event_frame("messageStop", {"stopReason": "end_turn"}))
    assert c.bedrock_converse_stream(frames) == ["messageStart", "contentBlockDelta", "messageStop"]
    bad = _event_frame("messageStart", {"role": "assistant"}) + _event_frame("messageStop", {"stopReason": "finished"})
    refused(c.bedrock_converse_stream, bad, match="'finished' is not one of")
    refused(c.bedrock_converse_stream, _event_frame("weird", {}), match="unknown event type 'weird'")


def test_base64_of_the_fixture_png_is_valid():
    assert base64.b64decode(PNG, validate=True).startswith(b"\x89PNG")


def test_openai_responses_and_embeddings_answers():
    response = {
        "id": "resp_1", "object": "response", "created_at": 1, "model": "m", "status": "completed",
        "output": [{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                    "content": [{"type": "output_text", "text": "hi", "annotations": []}]}],
        "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
        "usage": {"input_tokens": 1, "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
                  "output_tokens": 1, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 2},
    }
    c.openai_responses_answer(json.dumps(response))
    refused(c.openai_responses_answer, json.dumps(mutate(response, "usage.input_tokens_details.cache_write_tokens", delete=True)),
            match="usage.input_tokens_details.cache_write_tokens: Field required")

    def sse(*events):
        return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)

    created = {"type": "response.created", "sequence_number": 0, "response": {**response, "status": "in_progress"}}
    done = {"type": "response.function_call_arguments.done", "sequence_number": 1, "item_id": "fc_1",
            "output_index": 0, "name": "get_weather", "arguments": "{}"}
    completed = {"type": "response.completed", "sequence_number": 2, "response": response}
    assert c.openai_responses_stream(sse(created, done, completed)).id == "resp_1"
    nameless = {k: v for k, v in done.items() if k != "name"}
    refused(c.openai_responses_stream, sse(created, nameless, completed), match="name: Field required")
    refused(c.openai_responses_stream, sse(created, done), match="0 response.completed events")

    embeddings = {"object": "list", "model": "e", "data": [{"object": "embedding", "index": 0, "embedding": [0.1, 0.2]}],
                  "usage": {"prompt_tokens": 1, "total_tokens": 1}}
    c.openai_embeddings_answer(json.dumps(embeddings))
    refused(c.openai_embeddings_answer, json.dumps(mutate(embeddings, "data.0.embedding", "AAAA")), match="data.0.embedding")
