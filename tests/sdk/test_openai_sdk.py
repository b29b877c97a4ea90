"""The official openai SDK against sluice → sluice mock: everything works as with OpenAI."""

import asyncio

import numpy as np
import openai
import pytest

from conftest import MASTER_KEY


@pytest.fixture()
def client(gateway):
    return openai.OpenAI(base_url=gateway["base_url"], api_key=MASTER_KEY, max_retries=0)


@pytest.fixture()
def aclient(gateway):
    return openai.AsyncOpenAI(base_url=gateway["base_url"], api_key=MASTER_KEY, max_retries=0)


@pytest.mark.parametrize("model", ["gpt-4o-mini", "in-process"])
def test_chat_completion(client, model):
    r = client.chat.completions.create(model=model, messages=[{"role": "user", "content": "Hello there"}])
    assert r.object == "chat.completion"
    assert r.choices[0].message.role == "assistant"
    assert r.choices[0].message.content
    assert r.choices[0].finish_reason == "stop"
    assert r.usage.completion_tokens > 0
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens


def test_chat_headers(client):
    raw = client.chat.completions.with_raw_response.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}]
    )
    assert float(raw.headers["x-sluice-overhead-duration-ms"]) >= 0
    assert float(raw.headers["x-sluice-response-duration-ms"]) >= 0
    assert raw.headers["x-sluice-model-id"]
    assert raw.headers["x-request-id"]
    assert raw.parse().choices


@pytest.mark.parametrize("model", ["gpt-4o-mini", "in-process"])
def test_chat_stream(client, model):
    stream = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": "stream please"}], stream=True
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text.strip()
    assert all(c.choices for c in chunks), "sluice must strip the usage chunk it asked for"
    assert chunks[-1].choices[0].finish_reason == "stop"
    full = client.chat.completions.create(model=model, messages=[{"role": "user", "content": "stream please"}])
    assert text == full.choices[0].message.content, "stream and non-stream carry the same text"


def test_chat_stream_with_usage(client):
    stream = client.chat.completions.create(
        model="gpt-4o-mini",
        messages=[{"role": "user", "content": "count me"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    assert chunks[-1].choices == []
    assert chunks[-1].usage.completion_tokens > 0


def test_async_chat_and_stream(aclient):
    async def run():
        r = await aclient.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "a"}])
        assert r.choices[0].message.content
        parts = []
        stream = await aclient.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "b"}], stream=True
        )
        async for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                parts.append(chunk.choices[0].delta.content)
        assert "".join(parts)
        results = await asyncio.gather(
            *[aclient.chat.completions.create(model="gpt-4o-mini", messages=[]) for _ in range(20)]
        )
        assert len(results) == 20

    asyncio.run(run())


def test_legacy_completions(client):
    r = client.completions.create(model="gpt-4o-mini", prompt="Say this is a test")
    assert r.object == "text_completion"
    assert r.choices[0].text
    chunks = list(client.completions.create(model="gpt-4o-mini", prompt="x", stream=True))
    assert "".join(c.choices[0].text for c in chunks if c.choices)


def test_responses_api(client):
    r = client.responses.create(model="gpt-4o-mini", input="Tell me something")
    assert r.status == "completed"
    assert r.output_text
    assert r.usage.output_tokens > 0


def test_responses_stream(client):
    events = list(client.responses.create(model="gpt-4o-mini", input="Tell me", stream=True))
    types = [e.type for e in events]
    assert types[0] == "response.created"
    assert types[-1] == "response.completed"
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert deltas == events[-1].response.output_text


def test_embeddings_float_and_base64(client):
    # The SDK asks for base64 by default and decodes it.
    r = client.embeddings.create(model="text-embedding-3-small", input=["hello world", "second"])
    assert len(r.data) == 2
    v = np.array(r.data[0].embedding)
    assert v.shape[0] > 0
    f = client.embeddings.create(model="text-embedding-3-small", input=["hello world"], encoding_format="float")
    assert np.allclose(v, np.array(f.data[0].embedding), atol=1e-6)
    assert r.usage.prompt_tokens > 0


def test_models(client):
    ids = [m.id for m in client.models.list()]
    assert ids == [
        "gpt-4o-mini", "in-process", "claude-sonnet", "text-embedding-3-small",
        "gemini-flash", "bedrock-claude", "bedrock-titan-image", "gemini-embedding", "dall-e-3", "gpt-image-1",
        "whisper-1", "gpt-4o-transcribe", "tts-1", "omni-moderation-latest", "rerank-v3.5", "gpt-realtime",
        "claude-sonnet-4-6", "claude-haiku-4-5",
    ]
    assert client.models.retrieve("gpt-4o-mini").id == "gpt-4o-mini"
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("no-such-model")


def test_errors_map_to_sdk_exceptions(gateway, client):
    with pytest.raises(openai.NotFoundError) as e:
        client.chat.completions.create(model="no-such-model", messages=[])
    assert e.value.code == "model_not_found"
    bad = openai.OpenAI(base_url=gateway["base_url"], api_key="sk-wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        bad.chat.completions.create(model="gpt-4o-mini", messages=[])
    with pytest.raises(openai.BadRequestError):
        client.embeddings.create(model="text-embedding-3-small", input="x", extra_body={"stream": True})
