"""The official anthropic SDK against sluice's /v1/messages, routed to an Anthropic deployment
(sluice mock speaking Anthropic's wire format, passed through), to an OpenAI-compatible one
(translated both ways) and to the in-process mock; and the openai SDK against the Anthropic
deployment. Tool calls streamed in pieces must assemble to the same arguments everywhere."""

import json

import anthropic
import openai
import pytest

from conftest import MASTER_KEY

MODELS = ["claude-sonnet", "gpt-4o-mini", "in-process"]
WEATHER = {
    "name": "get_weather",
    "description": "Weather in a city",
    "input_schema": {
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["city"],
    },
}
EXPECTED_INPUT = {"city": "mock city", "days": 1}


@pytest.fixture()
def client(gateway):
    return anthropic.Anthropic(base_url=gateway["root"], api_key=MASTER_KEY, max_retries=0)


@pytest.fixture()
def oai(gateway):
    return openai.OpenAI(base_url=gateway["base_url"], api_key=MASTER_KEY, max_retries=0)


@pytest.mark.parametrize("model", MODELS)
def test_messages_create(client, model):
    m = client.messages.create(
        model=model,
        max_tokens=256,
        system="Be brief.",
        messages=[{"role": "user", "content": "Hello there"}],
    )
    assert m.type == "message"
    assert m.role == "assistant"
    assert m.content[0].type == "text"
    assert m.content[0].text.startswith("The mock provider")
    assert m.stop_reason == "end_turn"
    assert m.usage.input_tokens > 0
    assert m.usage.output_tokens > 0


@pytest.mark.parametrize("model", MODELS)
def test_messages_stream(client, model):
    with client.messages.stream(
        model=model, max_tokens=256, messages=[{"role": "user", "content": "Hello"}]
    ) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text.startswith("The mock provider")
    assert final.content[0].text == text
    assert final.stop_reason == "end_turn"
    assert final.usage.output_tokens > 0


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("stream", [False, True])
def test_tool_use_round(client, model, stream):
    messages = [{"role": "user", "content": "Weather in Paris?"}]
    if stream:
        with client.messages.stream(model=model, max_tokens=256, tools=[WEATHER], messages=messages) as s:
            m = s.get_final_message()
    else:
        m = client.messages.create(model=model, max_tokens=256, tools=[WEATHER], messages=messages)
    assert m.stop_reason == "tool_use"
    calls = [b for b in m.content if b.type == "tool_use"]
    assert len(calls) == 1
    assert calls[0].name == "get_weather"
    assert calls[0].input == EXPECTED_INPUT
    # Send the result back: the model answers in text.
    messages += [
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in m.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": calls[0].id, "content": "18C"}]},
    ]
    m2 = client.messages.create(model=model, max_tokens=256, tools=[WEATHER], messages=messages)
    assert m2.stop_reason == "end_turn"
    assert m2.content[0].type == "text"


@pytest.mark.parametrize("model", MODELS)
def test_count_tokens(client, model):
    r = client.messages.count_tokens(model=model, messages=[{"role": "user", "content": "word " * 100}])
    assert 100 <= r.input_tokens <= 200


def test_errors_are_anthropic_errors(client):
    with pytest.raises(anthropic.NotFoundError) as e:
        client.messages.create(model="no-such-model", max_tokens=5, messages=[{"role": "user", "content": "x"}])
    assert "no-such-model" in str(e.value)
    bad = anthropic.Anthropic(base_url=client.base_url, api_key="wrong", max_retries=0)
    with pytest.raises(anthropic.AuthenticationError):
        bad.messages.create(model="claude-sonnet", max_tokens=5, messages=[{"role": "user", "content": "x"}])


def test_openai_sdk_on_anthropic_deployment(oai):
    r = oai.chat.completions.create(model="claude-sonnet", messages=[{"role": "user", "content": "Hi"}])
    assert r.choices[0].message.content.startswith("The mock provider")
    assert r.choices[0].finish_reason == "stop"
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens


@pytest.mark.parametrize("model", ["claude-sonnet", "gpt-4o-mini"])
def test_openai_sdk_streams_tool_calls_to_the_same_arguments(oai, model):
    tools = [{"type": "function", "function": {"name": WEATHER["name"], "parameters": WEATHER["input_schema"]}}]
    with oai.chat.completions.stream(
        model=model, messages=[{"role": "user", "content": "Weather?"}], tools=tools
    ) as stream:
        for _ in stream:
            pass
        final = stream.get_final_completion()
    call = final.choices[0].message.tool_calls[0]
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == EXPECTED_INPUT
    assert final.choices[0].finish_reason == "tool_calls"
