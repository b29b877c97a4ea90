"""LiteLLM's clients, unchanged (issue 36): what a front-end or script written for LiteLLM's
proxy does first, through the official openai SDK against sluice → sluice mock. A virtual key
lists and retrieves its models, an Azure client reaches a model group by its deployment path,
and LiteLLM's response headers are there for a client that reads them."""

import json
import urllib.error
import urllib.request

import openai
import pytest

from conftest import MASTER_KEY


def _admin(root, path, body):
    req = urllib.request.Request(root + path, data=json.dumps(body).encode(), method="POST")
    req.add_header("Authorization", f"Bearer {MASTER_KEY}")
    req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


@pytest.fixture(scope="module")
def chat_key(gateway):
    # LiteLLM's clients send these fields; sluice takes them.
    status, body = _admin(
        gateway["root"],
        "/key/generate",
        {"models": ["gpt-4o-mini"], "aliases": {"my-model": "gpt-4o-mini"}, "duration": None,
         "tags": ["sdk"], "key_type": "llm_api"},
    )
    assert status == 200, body
    return body["key"]


def test_a_virtual_key_lists_and_retrieves_its_models(gateway, chat_key):
    client = openai.OpenAI(base_url=gateway["base_url"], api_key=chat_key, max_retries=0)
    ids = [m.id for m in client.models.list()]
    assert ids == ["gpt-4o-mini"]
    assert client.models.retrieve("gpt-4o-mini").id == "gpt-4o-mini"
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("claude-sonnet")


def test_a_key_alias_reaches_its_group_and_a_refusal_is_litellms(gateway, chat_key):
    client = openai.OpenAI(base_url=gateway["base_url"], api_key=chat_key, max_retries=0)
    raw = client.chat.completions.with_raw_response.create(
        model="my-model", messages=[{"role": "user", "content": "hi"}]
    )
    assert raw.headers["x-litellm-model-group"] == "gpt-4o-mini"
    # A model the key may not use: LiteLLM's 401 and words.
    with pytest.raises(openai.AuthenticationError) as refused:
        client.chat.completions.create(model="claude-sonnet", messages=[{"role": "user", "content": "hi"}])
    assert "not allowed to access model" in str(refused.value)


def test_litellm_headers_come_back(gateway):
    client = openai.OpenAI(base_url=gateway["base_url"], api_key=MASTER_KEY, max_retries=0)
    raw = client.chat.completions.with_raw_response.create(
        model="gpt-4o-mini",
        messages=[{"role": "user", "content": "hi"}],
        extra_headers={"x-litellm-timeout": "30", "x-litellm-num-retries": "1"},
    )
    h = raw.headers
    assert h["x-litellm-call-id"] == h["x-request-id"]
    assert h["x-litellm-model-id"] == h["x-sluice-model-id"]
    assert h["x-litellm-model-group"] == "gpt-4o-mini"
    assert h["x-litellm-attempted-retries"] == "0"
    assert h["x-litellm-max-retries"] == "1"
    assert h["x-litellm-timeout"] == "30"
    assert float(h["x-litellm-overhead-duration-ms"]) >= 0
    assert float(h["x-litellm-response-cost"]) >= 0


def test_an_azure_client_reaches_a_model_group(gateway):
    azure = openai.AzureOpenAI(
        azure_endpoint=gateway["root"],
        api_key=MASTER_KEY,
        api_version="2024-10-21",
        max_retries=0,
    )
    r = azure.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
    assert r.choices[0].message.content
    e = azure.embeddings.create(model="text-embedding-3-small", input="hello")
    assert len(e.data[0].embedding) > 0


def test_several_models_in_one_request(gateway):
    status, body = _admin(
        gateway["root"],
        "/v1/chat/completions",
        {"model": "gpt-4o-mini,in-process", "messages": [{"role": "user", "content": "hi"}]},
    )
    assert status == 200, body
    assert [len(r["choices"]) for r in body] == [1, 1]
