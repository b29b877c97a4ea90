"""The thin endpoints LiteLLM serves, through sluice to `sluice mock`: OpenAI's Videos API
and Vector Stores API with the official `openai` SDK (its types are the judge of every
answer), each object's id sluice's own, signed and owned by the key that made it (another key
gets a 404, as for files); video seconds and vector store searches charged at the
deployment's prices; and `/v1/search/{tool}` (LiteLLM's `search_tools`) to Perplexity,
Tavily and Exa, each sent in its own wire format (read back from `sluice mock --record`) and
answered in one shape, charged per query.
"""

import json
import pathlib
import urllib.request

import httpx
import openai
import pytest

from conftest import MASTER_KEY, _start, _stop

VIDEO_PRICE = 0.1  # USD per second of video
SEARCH_PRICE = 0.25  # USD per vector store search


@pytest.fixture(scope="module")
def thin_gateway(workdir, recording_mock):
    d = pathlib.Path(workdir) / "thin-endpoints"
    d.mkdir(exist_ok=True)
    (d / "config.yaml").write_text(f"""
model_list:
  - model_name: sora
    litellm_params:
      model: openai/sora-2
      api_base: "{recording_mock}/v1"
      api_key: sk-up-never-shown
      output_cost_per_second: {VIDEO_PRICE}
  - model_name: kb
    litellm_params:
      model: openai/gpt-4.1
      api_base: "{recording_mock}/v1"
      api_key: sk-up-never-shown
      input_cost_per_query: {SEARCH_PRICE}
search_tools:
  - search_tool_name: pplx
    litellm_params: {{search_provider: perplexity, api_key: pplx-up-never-shown, api_base: "{recording_mock}"}}
  - search_tool_name: tavily
    litellm_params: {{search_provider: tavily, api_key: tvly-up-never-shown, api_base: "{recording_mock}/tavily"}}
  - search_tool_name: exa
    litellm_params:
      search_provider: exa_ai
      api_key: exa-up-never-shown
      api_base: "{recording_mock}/exa"
      input_cost_per_query: 0.01
general_settings:
  master_key: {MASTER_KEY}
""")
    proc, addr, log = _start(["serve", "--config", str(d / "config.yaml"), "--port", "0"], str(d))
    root = f"http://{addr}"
    yield {"root": root, "mock": recording_mock, "log": log}
    assert _stop(proc) == 0
    text = pathlib.Path(log).read_text()
    for secret in ["sk-up-never-shown", "pplx-up-never-shown", "tvly-up-never-shown", "exa-up-never-shown"]:
        assert secret not in text


def _key(root: str, alias: str, **extra) -> str:
    req = urllib.request.Request(
        root + "/key/generate", data=json.dumps({"key_alias": alias, **extra}).encode(),
        headers={"Authorization": f"Bearer {MASTER_KEY}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req) as r:
        return json.loads(r.read())["key"]


def _client(gw, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=gw["root"] + "/v1", api_key=key, max_retries=0)


def _upstream(gw) -> list:
    with urllib.request.urlopen(gw["mock"] + "/mock/requests") as r:
        return json.loads(r.read())


def _forget_upstream(gw):
    urllib.request.urlopen(urllib.request.Request(gw["mock"] + "/mock/requests", method="DELETE"))


def test_videos_made_read_remixed_and_deleted_by_their_owner_only(thin_gateway):
    gw = thin_gateway
    mine, theirs = _client(gw, _key(gw["root"], "video-a")), _client(gw, _key(gw["root"], "video-b"))
    raw = mine.videos.with_raw_response.create(model="sora", prompt="A cat on a skateboard", seconds="8")
    video = raw.parse()
    assert video.id.startswith("video_sluice-") and video.status == "queued" and video.seconds == "8"
    # Charged for its seconds at the deployment's price.
    assert float(raw.headers["x-sluice-response-cost"]) == pytest.approx(8 * VIDEO_PRICE)
    # The SDK sends a form; the upstream got the deployment's model in it (the mock echoes it).
    assert video.model == "sora-2"
    # A JSON body too.
    key = _key(gw["root"], "video-json")
    r = httpx.post(f"{gw['root']}/v1/videos", headers={"authorization": f"Bearer {key}"},
                   json={"model": "sora", "prompt": "A dog", "seconds": "4"}, timeout=30)
    assert r.status_code == 200, r.text
    sent = [x for x in _upstream(gw) if x["path"].endswith("/videos") and x.get("body")][-1]
    assert sent["body"]["model"] == "sora-2" and sent["body"]["prompt"] == "A dog"
    done = mine.videos.retrieve(video.id)
    assert done.id == video.id and done.status == "completed"
    content = mine.videos.download_content(video.id)
    assert content.content[4:8] == b"ftyp"
    assert video.id in [v.id for v in mine.videos.list().data]
    remix = mine.videos.remix(video.id, prompt="Now at night")
    assert remix.id.startswith("video_sluice-") and remix.remixed_from_video_id == video.id
    # Another key: none of it exists.
    with pytest.raises(openai.NotFoundError):
        theirs.videos.retrieve(video.id)
    with pytest.raises(openai.NotFoundError):
        theirs.videos.download_content(video.id)
    assert video.id not in [v.id for v in theirs.videos.list().data]
    with pytest.raises(openai.NotFoundError):
        mine.videos.retrieve("video_not_from_sluice")
    deleted = mine.videos.delete(video.id)
    assert deleted.deleted and deleted.id == video.id
    with pytest.raises(openai.BadRequestError):
        mine.videos.create(model="sora", prompt="x", extra_body={"model": None})


def test_vector_stores_with_files_search_and_owners(thin_gateway):
    gw = thin_gateway
    mine, theirs = _client(gw, _key(gw["root"], "vs-a")), _client(gw, _key(gw["root"], "vs-b"))
    doc = b"The gateway is named sluice.\n\nIt routes requests to every provider.\n"
    f = mine.files.create(file=("notes.txt", doc), purpose="assistants", extra_body={"target_model_names": "kb"})
    other = theirs.files.create(file=("x.txt", b"other"), purpose="assistants", extra_body={"target_model_names": "kb"})
    # A vector store made from the caller's file goes where the file is.
    store = mine.vector_stores.create(name="notes", file_ids=[f.id])
    assert store.id.startswith("vs_sluice-") and store.file_counts.total == 1
    # The upstream got its own file id, never sluice's.
    sent = [r for r in _upstream(gw) if r["path"].endswith("/vector_stores")][-1]
    assert sent["body"]["file_ids"][0].startswith("file-") and "sluice" not in json.dumps(sent["body"])
    files = mine.vector_stores.files.list(store.id)
    assert [x.id for x in files.data] == [f.id] and files.data[0].vector_store_id == store.id
    assert mine.vector_stores.files.retrieve(f.id, vector_store_id=store.id).id == f.id
    raw = mine.vector_stores.with_raw_response.search(store.id, query="sluice gateway")
    page = raw.parse()
    hits = list(page)
    assert hits and hits[0].file_id == f.id and "sluice" in hits[0].content[0].text
    assert float(raw.headers["x-sluice-response-cost"]) == pytest.approx(SEARCH_PRICE)
    # Another key's file cannot be added; another key cannot see the store.
    with pytest.raises(openai.NotFoundError):
        mine.vector_stores.files.create(vector_store_id=store.id, file_id=other.id)
    with pytest.raises(openai.NotFoundError):
        theirs.vector_stores.retrieve(store.id)
    with pytest.raises(openai.NotFoundError):
        theirs.vector_stores.search(store.id, query="sluice")
    assert store.id not in [s.id for s in theirs.vector_stores.list(extra_query={"target_model_names": "kb"}).data]
    assert store.id in [s.id for s in mine.vector_stores.list(extra_query={"target_model_names": "kb"}).data]
    batch = mine.vector_stores.file_batches.create(vector_store_id=store.id, file_ids=[f.id])
    assert batch.vector_store_id == store.id
    assert mine.vector_stores.file_batches.retrieve(batch.id, vector_store_id=store.id).id == batch.id
    renamed = mine.vector_stores.update(store.id, name="renamed")
    assert renamed.name == "renamed" and renamed.id == store.id
    gone = mine.vector_stores.files.delete(f.id, vector_store_id=store.id)
    assert gone.deleted and gone.id == f.id
    assert mine.vector_stores.delete(store.id).deleted
    with pytest.raises(openai.NotFoundError):
        mine.vector_stores.retrieve(store.id)


@pytest.mark.parametrize("tool,path,auth", [
    ("pplx", "/search", "authorization"),
    ("tavily", "/tavily/search", "authorization"),
    ("exa", "/exa/search", "x-api-key"),
])
def test_search_tools_speak_each_providers_wire(thin_gateway, tool, path, auth):
    gw = thin_gateway
    key = _key(gw["root"], f"search-{tool}")
    _forget_upstream(gw)
    r = httpx.post(f"{gw['root']}/v1/search/{tool}", headers={"authorization": f"Bearer {key}"},
                   json={"query": "latest AI news", "max_results": 3, "search_domain_filter": ["arxiv.org"]},
                   timeout=30)
    assert r.status_code == 200, r.text
    answer = r.json()
    assert answer["object"] == "search" and len(answer["results"]) == 3
    for hit in answer["results"]:
        assert set(hit) == {"title", "url", "snippet", "date", "last_updated"}
        assert hit["url"].startswith("https://") and hit["snippet"]
    assert float(r.headers["x-sluice-response-cost"]) > 0
    [sent] = [x for x in _upstream(gw) if x["path"] == path]
    # The key where the provider reads it (the recording redacts its value), and no other.
    assert sent["headers"].get(auth) == "<redacted>"
    assert {"authorization", "x-api-key"} - {auth} & set(sent["headers"]) == set()
    body = sent["body"]
    count, domains = {"pplx": ("max_results", "search_domain_filter"), "tavily": ("max_results", "include_domains"),
                      "exa": ("numResults", "includeDomains")}[tool]
    assert body[count] == 3 and body[domains] == ["arxiv.org"]


def test_search_errors(thin_gateway):
    gw = thin_gateway
    root = gw["root"]
    no = httpx.post(f"{root}/v1/search/nope", headers={"authorization": f"Bearer {MASTER_KEY}"},
                    json={"query": "x"}, timeout=10)
    assert no.status_code == 404 and no.json()["error"]["message"]
    bad = httpx.post(f"{root}/v1/search/pplx", headers={"authorization": f"Bearer {MASTER_KEY}"},
                     json={"max_results": 3}, timeout=10)
    assert bad.status_code == 400 and "query" in bad.json()["error"]["message"]
    anon = httpx.post(f"{root}/v1/search/pplx", json={"query": "x"}, timeout=10)
    assert anon.status_code == 401
    # A key limited to other models may not use the tool.
    limited = _key(root, "search-limited", models=["kb"])
    refused = httpx.post(f"{root}/v1/search/pplx", headers={"authorization": f"Bearer {limited}"},
                         json={"query": "x"}, timeout=10)
    assert refused.status_code in (401, 403), refused.text
    wrong = httpx.get(f"{root}/v1/search/pplx", headers={"authorization": f"Bearer {MASTER_KEY}"}, timeout=10)
    assert wrong.status_code == 405
