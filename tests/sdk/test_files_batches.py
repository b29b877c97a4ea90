"""The Files and Batches APIs through sluice with the official `openai` SDK, to `sluice mock`:
upload, list, retrieve, content and delete; a batch created, completed on retrieve and its
output read; cancel and list; sluice's ids opaque; another key's file not found, a key without
access refused."""

import json

import openai
import pytest

from conftest import MASTER_KEY
from test_endpoints import _call


@pytest.fixture(scope="module")
def keys(gateway):
    root = gateway["root"]
    status, _, body = _call(root, "/key/generate", {"key_alias": "files-all", "max_budget": 10}, MASTER_KEY)
    assert status == 200, body
    everything = json.loads(body)["key"]
    status, _, body = _call(root, "/key/generate", {"key_alias": "files-none", "models": ["claude-sonnet"]}, MASTER_KEY)
    assert status == 200, body
    return {"all": everything, "other": json.loads(body)["key"]}


@pytest.fixture()
def client(gateway, keys):
    return openai.OpenAI(base_url=gateway["base_url"], api_key=keys["all"], max_retries=0)


def _jsonl(n):
    lines = [
        {
            "custom_id": f"req-{i}",
            "method": "POST",
            "url": "/v1/chat/completions",
            "body": {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": f"question {i}"}]},
        }
        for i in range(n)
    ]
    return "".join(json.dumps(l) + "\n" for l in lines).encode()


def test_files_create_list_retrieve_content_delete(client):
    data = bytes(range(256)) * 40
    f = client.files.create(file=("data.bin", data), purpose="user_data",
                            extra_body={"target_model_names": "gpt-4o-mini"})
    assert f.id.startswith("file-sluice-") and f.bytes == len(data) and f.filename == "data.bin"
    listed = client.files.list(extra_query={"target_model_names": "gpt-4o-mini"})
    assert f.id in [x.id for x in listed.data]
    assert client.files.retrieve(f.id).id == f.id
    assert client.files.content(f.id).content == data
    deleted = client.files.delete(f.id)
    assert deleted.deleted and deleted.id == f.id
    with pytest.raises(openai.NotFoundError):
        client.files.retrieve(f.id)
    with pytest.raises(openai.NotFoundError):
        client.files.retrieve("file-not-from-sluice")


def test_batches_create_retrieve_cancel_list(client):
    # No model group named: the first deployment that has the Files API holds it.
    f = client.files.create(file=("batch.jsonl", _jsonl(2)), purpose="batch")
    b = client.batches.create(input_file_id=f.id, endpoint="/v1/chat/completions", completion_window="24h")
    assert b.id.startswith("batch_sluice-") and b.status == "validating" and b.input_file_id == f.id
    done = client.batches.retrieve(b.id)
    assert done.status == "completed" and done.request_counts.completed == 2
    assert done.usage is not None and done.usage.input_tokens > 0
    out = client.files.content(done.output_file_id).text.splitlines()
    answers = [json.loads(l) for l in out]
    assert [a["custom_id"] for a in answers] == ["req-0", "req-1"]
    assert answers[0]["response"]["body"]["choices"][0]["message"]["role"] == "assistant"
    # Retrieving again charges nothing more.
    raw = client.batches.with_raw_response.retrieve(b.id)
    spent = float(raw.headers["x-sluice-key-spend"])
    raw = client.batches.with_raw_response.retrieve(b.id)
    assert float(raw.headers["x-sluice-key-spend"]) == spent > 0
    assert client.batches.cancel(b.id).id == b.id
    listed = client.batches.list()
    assert all(x.id.startswith("batch_sluice-") for x in listed.data) and listed.data
    with pytest.raises(openai.NotFoundError):
        client.batches.retrieve("batch_not_from_sluice")


def test_a_key_without_access_is_refused(gateway, keys, client):
    f = client.files.create(file=("x.jsonl", _jsonl(1)), purpose="batch")
    other = openai.OpenAI(base_url=gateway["base_url"], api_key=keys["other"], max_retries=0)
    # Another key's file does not exist for it.
    with pytest.raises(openai.NotFoundError):
        other.files.retrieve(f.id)
    with pytest.raises(openai.NotFoundError):
        other.files.content(f.id)
    # A model group the key may not use: LiteLLM's 401.
    with pytest.raises(openai.AuthenticationError):
        other.files.create(file=("y.jsonl", b"{}\n"), purpose="batch",
                           extra_body={"target_model_names": "gpt-4o-mini"})
