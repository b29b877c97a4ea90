"""The official openai and anthropic SDKs against gemini/ and bedrock/ deployments, answered by
`sluice mock` on Google's and AWS's real paths (Bedrock requests SigV4-signed and checked).
Tool calls streamed in pieces must assemble to the same arguments as everywhere else."""

import json

import anthropic
import openai
import pytest

from conftest import MASTER_KEY

MODELS = ["gemini-flash", "bedrock-claude"]
SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
    "required": ["city"],
}
EXPECTED = {"city": "mock city", "days": 1}
PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)


@pytest.fixture()
def oai(gateway):
    return openai.OpenAI(base_url=gateway["base_url"], api_key=MASTER_KEY, max_retries=0)


@pytest.fixture()
def claude(gateway):
    return anthropic.Anthropic(base_url=gateway["root"], api_key=MASTER_KEY, max_retries=0)


@pytest.mark.parametrize("model", MODELS)
def test_openai_chat_and_stream(oai, model):
    r = oai.chat.completions.create(
        model=model,
        messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello"}],
    )
    assert r.choices[0].message.content.startswith("The mock provider")
    assert r.choices[0].finish_reason == "stop"
    assert r.usage.prompt_tokens > 0 and r.usage.completion_tokens == 20
    chunks = list(
        oai.chat.completions.create(
            model=model,
            messages=[{"role": "user", "content": "Hello"}],
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == r.choices[0].message.content
    assert chunks[-1].usage.completion_tokens == 20


@pytest.mark.parametrize("model", MODELS)
def test_openai_streamed_tool_calls_assemble_to_the_same_arguments(oai, model):
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": SCHEMA}}]
    messages = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Weather where this was taken?"},
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
            ],
        }
    ]
    with oai.chat.completions.stream(model=model, messages=messages, tools=tools) as s:
        for _ in s:
            pass
        final = s.get_final_completion()
    call = final.choices[0].message.tool_calls[0]
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == EXPECTED
    assert final.choices[0].finish_reason == "tool_calls"
    messages += [
        final.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": '{"temp": 21}'},
    ]
    r = oai.chat.completions.create(model=model, messages=messages, tools=tools)
    assert r.choices[0].finish_reason == "stop"


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("stream", [False, True])
def test_anthropic_sdk_tool_use_round(claude, model, stream):
    tool = {"name": "get_weather", "description": "Weather in a city", "input_schema": SCHEMA}
    messages = [{"role": "user", "content": "Weather in Paris?"}]
    if stream:
        with claude.messages.stream(model=model, max_tokens=256, tools=[tool], messages=messages) as s:
            m = s.get_final_message()
    else:
        m = claude.messages.create(model=model, max_tokens=256, tools=[tool], messages=messages)
    assert m.stop_reason == "tool_use"
    calls = [b for b in m.content if b.type == "tool_use"]
    assert calls[0].name == "get_weather"
    assert calls[0].input == EXPECTED
    messages += [
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in m.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": calls[0].id, "content": "18C"}]},
    ]
    m2 = claude.messages.create(model=model, max_tokens=256, tools=[tool], messages=messages)
    assert m2.stop_reason == "end_turn"
    assert m2.content[0].text.startswith("The mock provider")


def test_gemini_embeddings(oai):
    r = oai.embeddings.create(model="gemini-embedding", input=["a cat", "a dog"])
    assert len(r.data) == 2
    assert len(r.data[0].embedding) == 16
    assert r.data[0].embedding != r.data[1].embedding
