"""The response cache with the official openai and anthropic SDKs: a gateway of its own with
`litellm_settings.cache: true` in front of the shared `sluice mock`. A repeated request is a
hit (same answer and usage, free, marked), streamed or not, and an answer stored in one shape
serves the other; chat, completions, Responses, Messages, embeddings, moderations and rerank
are cached; concurrent identical requests reach the upstream once."""

import concurrent.futures
import json
import pathlib
import urllib.request

import anthropic
import openai
import pytest

from conftest import MASTER_KEY, _start, _stop


@pytest.fixture(scope="module")
def cached_gateway(workdir, mock_upstream):
    d = pathlib.Path(workdir) / "cache-gw"
    d.mkdir(exist_ok=True)
    config = d / "config.yaml"
    root = mock_upstream.removesuffix("/v1")
    config.write_text(f"""
model_list:
  - model_name: gpt-4o-mini
    litellm_params: {{model: openai/gpt-4o-mini, api_base: "{mock_upstream}", input_cost_per_token: 0.000001, output_cost_per_token: 0.000002}}
  - model_name: claude
    litellm_params: {{model: anthropic/claude-sonnet-4-5, api_base: "{root}", api_key: sk-up}}
  - model_name: embed
    litellm_params: {{model: openai/text-embedding-3-small, api_base: "{mock_upstream}"}}
  - model_name: moderation
    litellm_params: {{model: openai/omni-moderation-latest, api_base: "{mock_upstream}"}}
  - model_name: rerank
    litellm_params: {{model: cohere/rerank-v3.5, api_base: "{mock_upstream}", api_key: co-up}}
litellm_settings:
  cache: true
general_settings:
  master_key: {MASTER_KEY}
""")
    proc, addr, _ = _start(["serve", "--config", str(config), "--port", "0"], str(d))
    yield f"http://{addr}"
    _stop(proc)


def _mock_requests(mock_upstream):
    with urllib.request.urlopen(mock_upstream.removesuffix("/v1") + "/mock/stats") as r:
        return json.loads(r.read())["requests"]


def test_chat_hits_plain_and_streamed(cached_gateway, mock_upstream):
    client = openai.OpenAI(base_url=cached_gateway + "/v1", api_key=MASTER_KEY, max_retries=0)
    msgs = [{"role": "user", "content": "cache me, SDK"}]
    before = _mock_requests(mock_upstream)
    first = client.chat.completions.with_raw_response.create(model="gpt-4o-mini", messages=msgs)
    second = client.chat.completions.with_raw_response.create(model="gpt-4o-mini", messages=msgs, user="someone-else")
    assert first.headers["x-sluice-cache-hit"] == "false"
    assert second.headers["x-sluice-cache-hit"] == "true"
    assert second.headers["x-sluice-response-cost"] == "0"
    a, b = first.parse(), second.parse()
    assert a.choices[0].message.content == b.choices[0].message.content
    assert a.usage == b.usage
    # Streamed, with usage: the hit is the same text and usage, as a stream.
    def streamed():
        text, usage = "", None
        for chunk in client.chat.completions.create(model="gpt-4o-mini", messages=msgs, stream=True, stream_options={"include_usage": True}):
            if chunk.choices:
                text += chunk.choices[0].delta.content or ""
            if chunk.usage:
                usage = chunk.usage
        return text, usage
    assert streamed() == streamed() == (a.choices[0].message.content, a.usage)
    assert _mock_requests(mock_upstream) - before == 1, "the stream is told from the stored answer"


def test_a_stored_answer_serves_the_other_shape(cached_gateway, mock_upstream):
    before = _mock_requests(mock_upstream)
    # Messages: stored whole, then read through the SDK's stream helper.
    claude = anthropic.Anthropic(base_url=cached_gateway, api_key=MASTER_KEY, max_retries=0)
    ask = dict(model="claude", max_tokens=50, messages=[{"role": "user", "content": "one shape, then the other"}])
    whole = claude.messages.create(**ask)
    with claude.messages.stream(**ask) as s:
        final = s.get_final_message()
    assert final.content[0].text == whole.content[0].text
    assert final.stop_reason == whole.stop_reason
    assert final.usage.output_tokens == whole.usage.output_tokens
    # Responses: stored as a stream, then asked whole.
    client = openai.OpenAI(base_url=cached_gateway + "/v1", api_key=MASTER_KEY, max_retries=0)
    with client.responses.stream(model="gpt-4o-mini", input="streamed first") as s:
        streamed = s.get_final_response()
    again = client.responses.with_raw_response.create(model="gpt-4o-mini", input="streamed first")
    assert again.headers["x-sluice-cache-hit"] == "true"
    assert again.parse().output_text == streamed.output_text
    assert again.parse().usage == streamed.usage
    # Streamed again: the stored stream as it was.
    with client.responses.stream(model="gpt-4o-mini", input="streamed first") as s:
        assert s.get_final_response().output_text == streamed.output_text
    assert _mock_requests(mock_upstream) - before == 2, "one call per question"


def test_messages_and_embeddings_hit(cached_gateway, mock_upstream):
    before = _mock_requests(mock_upstream)
    claude = anthropic.Anthropic(base_url=cached_gateway, api_key=MASTER_KEY, max_retries=0)
    m1 = claude.messages.create(model="claude", max_tokens=50, messages=[{"role": "user", "content": "cached?"}])
    m2 = claude.messages.create(model="claude", max_tokens=50, messages=[{"role": "user", "content": "cached?"}])
    assert m1.content[0].text == m2.content[0].text and m1.usage == m2.usage
    client = openai.OpenAI(base_url=cached_gateway + "/v1", api_key=MASTER_KEY, max_retries=0)
    e1 = client.embeddings.create(model="embed", input=["x", "y"])
    e2 = client.embeddings.with_raw_response.create(model="embed", input=["x", "y"])
    assert e2.headers["x-sluice-cache-hit"] == "true"
    assert e1.data[0].embedding == e2.parse().data[0].embedding
    assert _mock_requests(mock_upstream) - before == 2


def test_concurrent_identical_requests_reach_the_upstream_once(cached_gateway, mock_upstream):
    client = openai.OpenAI(base_url=cached_gateway + "/v1", api_key=MASTER_KEY, max_retries=0)
    msgs = [{"role": "user", "content": "all at once"}]
    before = _mock_requests(mock_upstream)
    with concurrent.futures.ThreadPoolExecutor(32) as pool:
        answers = list(pool.map(lambda _: client.chat.completions.create(model="gpt-4o-mini", messages=msgs), range(32)))
    assert len({a.choices[0].message.content for a in answers}) == 1
    # Requests that arrived after the first answer was stored are plain hits: still one call.
    assert _mock_requests(mock_upstream) - before == 1


def test_completions_moderations_and_rerank_hit(cached_gateway, mock_upstream):
    client = openai.OpenAI(base_url=cached_gateway + "/v1", api_key=MASTER_KEY, max_retries=0)
    before = _mock_requests(mock_upstream)
    # Legacy completions: whole, then the same prompt streamed from the stored answer.
    c1 = client.completions.create(model="gpt-4o-mini", prompt="complete me, cached")
    text = "".join(
        ch.choices[0].text
        for ch in client.completions.create(model="gpt-4o-mini", prompt="complete me, cached", stream=True)
        if ch.choices
    )
    assert text == c1.choices[0].text
    # Moderations.
    m1 = client.moderations.create(model="moderation", input="is this fine?")
    m2 = client.moderations.with_raw_response.create(model="moderation", input="is this fine?")
    assert m2.headers["x-sluice-cache-hit"] == "true"
    assert m2.parse().results[0].flagged == m1.results[0].flagged
    # Rerank (no official SDK speaks it: Cohere's shape over HTTP).
    body = json.dumps({"model": "rerank", "query": "red fox", "documents": ["blue sky", "a red fox"]}).encode()
    def rerank():
        req = urllib.request.Request(cached_gateway + "/v1/rerank", data=body, method="POST")
        req.add_header("authorization", f"Bearer {MASTER_KEY}")
        req.add_header("content-type", "application/json")
        with urllib.request.urlopen(req) as r:
            return r.headers["x-sluice-cache-hit"], json.loads(r.read())
    (h1, r1), (h2, r2) = rerank(), rerank()
    assert (h1, h2) == ("false", "true") and r1 == r2
    assert _mock_requests(mock_upstream) - before == 3, "one call each"
