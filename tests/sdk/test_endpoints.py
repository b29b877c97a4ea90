"""Images, audio, moderations and rerank through sluice with the official `openai` SDK (and
Cohere's rerank shape over raw HTTP), to `sluice mock`: answers as the SDK parses them, a key
without access refused on every endpoint, and a spend row for each call."""

import base64
import io
import json
import time
import urllib.error
import urllib.request

import openai
import pytest

from conftest import MASTER_KEY


def _call(root, path, body, key, method="POST"):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(root + path, data=data, method=method)
    req.add_header("Authorization", f"Bearer {key}")
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def _fnv1a(data):
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


@pytest.fixture(scope="module")
def keys(gateway):
    """A key for every model here, and one that may only chat."""
    root = gateway["root"]
    status, _, body = _call(root, "/key/generate", {"key_alias": "media-all"}, MASTER_KEY)
    assert status == 200, body
    everything = json.loads(body)["key"]
    status, _, body = _call(root, "/key/generate", {"key_alias": "chat-only", "models": ["gpt-4o-mini"]}, MASTER_KEY)
    assert status == 200, body
    return {"all": everything, "chat_only": json.loads(body)["key"]}


@pytest.fixture()
def client(gateway, keys):
    return openai.OpenAI(base_url=gateway["base_url"], api_key=keys["all"], max_retries=0)


WAV = bytes(range(256)) * 250  # 64,000 bytes: two seconds as the mock counts audio


def test_images_generate_edit_and_vary(client):
    r = client.images.generate(model="dall-e-3", prompt="a red fox", n=2, size="1024x1024")
    assert len(r.data) == 2 and r.data[0].url.startswith("http://")
    r = client.images.generate(model="dall-e-3", prompt="a red fox", response_format="b64_json")
    assert len(r.data[0].b64_json) > 10
    r = client.images.generate(model="gpt-image-1", prompt="a red fox")
    assert r.data[0].b64_json and r.usage.output_tokens > 0
    png = io.BytesIO(b"\x89PNG\r\n\x1a\n" + bytes(1000))
    png.name = "in.png"
    r = client.images.edit(model="gpt-image-1", image=png, prompt="add a hat")
    assert r.data[0].b64_json
    png.seek(0)
    r = client.images.create_variation(model="dall-e-3", image=png, n=1)
    assert len(r.data) == 1


def test_transcriptions_and_translations(client):
    f = io.BytesIO(WAV)
    f.name = "speech.wav"
    t = client.audio.transcriptions.create(model="whisper-1", file=f)
    assert t.text.endswith(f"[{len(WAV)} bytes fnv1a {_fnv1a(WAV):016x}]")
    f.seek(0)
    v = client.audio.transcriptions.create(model="whisper-1", file=f, response_format="verbose_json")
    assert v.duration == 2.0 and v.segments
    f.seek(0)
    srt = client.audio.transcriptions.create(model="whisper-1", file=f, response_format="srt")
    assert "-->" in srt
    f.seek(0)
    tr = client.audio.translations.create(model="whisper-1", file=f)
    assert "fnv1a" in tr.text
    f.seek(0)
    events = list(client.audio.transcriptions.create(model="gpt-4o-transcribe", file=f, stream=True))
    assert events[-1].type == "transcript.text.done"
    assert "".join(e.delta for e in events[:-1] if e.type == "transcript.text.delta") == events[-1].text


def test_a_large_upload_is_relayed_byte_for_byte(client):
    """Past 256 KB sluice relays the file as it arrives instead of reading it whole; the SDK
    sends its fields first, so the model is known before the file."""
    audio = bytes((i * 2654435761 >> 13) & 0xFF for i in range(3_000_000))
    f = io.BytesIO(audio)
    f.name = "long.wav"
    t = client.audio.transcriptions.create(model="whisper-1", file=f, response_format="json")
    assert t.text.endswith(f"[{len(audio)} bytes fnv1a {_fnv1a(audio):016x}]")
    f.seek(0)
    events = list(client.audio.transcriptions.create(model="gpt-4o-transcribe", file=f, stream=True))
    assert events[-1].type == "transcript.text.done"
    assert f"[{len(audio)} bytes" in events[-1].text


def test_speech_streams_to_a_file(client, tmp_path):
    out = tmp_path / "speech.mp3"
    with client.audio.speech.with_streaming_response.create(
        model="tts-1", voice="alloy", input="Hello from sluice."
    ) as resp:
        assert resp.headers["content-type"] == "audio/mpeg"
        chunks = list(resp.iter_bytes())
        resp_cost = resp.headers.get("x-sluice-response-cost")
    out.write_bytes(b"".join(chunks))
    assert out.stat().st_size == len("Hello from sluice.") * 64
    assert resp_cost is None, "a stream's cost is known only at its end (in the spend log)"


def test_images_on_bedrock_titan(gateway, client):
    # Signed with the deployment's AWS keys, translated to Titan's body and back; the images
    # are the mock's drawings of the prompt (a 1x1 PNG coloured by its FNV-1a hash).
    raw = client.images.with_raw_response.generate(
        model="bedrock-titan-image", prompt="a red fox", n=2, size="1024x1024", quality="hd"
    )
    r = raw.parse()
    assert len(r.data) == 2 and r.data[0].url is None
    pngs = [base64.b64decode(d.b64_json) for d in r.data]
    for i, png in enumerate(pngs):
        assert png.startswith(b"\x89PNG\r\n\x1a\n")
        colour = _fnv1a(f"a red fox#{i}".encode()).to_bytes(8, "big")[:3]
        assert b"\x00" + colour in png, i
    # LiteLLM's $0.008 an image for Titan Image Generator v2.
    assert float(raw.headers["x-sluice-response-cost"]) == pytest.approx(0.016)
    with pytest.raises(openai.BadRequestError) as e:
        client.images.generate(model="bedrock-titan-image", prompt="p", size="huge")
    assert "size" in str(e.value)


def test_moderations(client):
    r = client.moderations.create(model="omni-moderation-latest", input=["hello", "a violent threat"])
    assert [x.flagged for x in r.results] == [False, True]
    assert r.results[1].categories.violence


def test_rerank_in_cohere_shape(gateway, keys):
    for path in ("/v1/rerank", "/v2/rerank"):
        status, headers, body = _call(
            gateway["root"], path,
            {"model": "rerank-v3.5", "query": "red fox", "documents": ["blue sky", "a red fox jumps"], "top_n": 1},
            keys["all"],
        )
        assert status == 200, body
        r = json.loads(body)
        assert r["results"][0]["index"] == 1 and r["meta"]["billed_units"]["search_units"] == 1
        assert float(headers["x-sluice-response-cost"]) == pytest.approx(0.002)


def test_a_key_without_access_is_refused_on_every_endpoint(gateway, keys):
    c = openai.OpenAI(base_url=gateway["base_url"], api_key=keys["chat_only"], max_retries=0)
    f = io.BytesIO(WAV)
    f.name = "speech.wav"
    calls = [
        lambda: c.images.generate(model="dall-e-3", prompt="p"),
        lambda: c.images.edit(model="gpt-image-1", image=f, prompt="p"),
        lambda: c.audio.transcriptions.create(model="whisper-1", file=f),
        lambda: c.audio.translations.create(model="whisper-1", file=f),
        lambda: c.audio.speech.create(model="tts-1", voice="alloy", input="hi"),
        lambda: c.moderations.create(model="omni-moderation-latest", input="hi"),
    ]
    for call in calls:
        f.seek(0)
        # LiteLLM's status for a model the key may not use: 401 (an AuthenticationError).
        with pytest.raises(openai.AuthenticationError):
            call()
    status, _, body = _call(gateway["root"], "/v1/rerank", {"model": "rerank-v3.5", "query": "q", "documents": ["d"]}, keys["chat_only"])
    assert status == 401, body


def test_every_call_leaves_a_spend_row(gateway):
    # A key of its own, so that the rows below are this test's calls alone.
    status, _, body = _call(gateway["root"], "/key/generate", {"key_alias": "media-spend"}, MASTER_KEY)
    assert status == 200, body
    key = json.loads(body)["key"]
    keys = {"all": key}
    client = openai.OpenAI(base_url=gateway["base_url"], api_key=key, max_retries=0)
    f = io.BytesIO(WAV)
    f.name = "speech.wav"
    client.audio.transcriptions.create(model="whisper-1", file=f)
    client.images.generate(model="dall-e-3", prompt="p", size="1024x1024")
    with client.audio.speech.with_streaming_response.create(model="tts-1", voice="alloy", input="twelve chars") as r:
        r.read()
    client.moderations.create(model="omni-moderation-latest", input="hello")
    _call(gateway["root"], "/v1/rerank", {"model": "rerank-v3.5", "query": "q", "documents": ["d"]}, keys["all"])
    want = {"whisper-1": 0.0002, "dall-e-3": 0.04, "tts-1": 12 * 1.5e-5, "omni-moderation-latest": 0.0, "rerank-v3.5": 0.002}
    seen = {}
    deadline = time.time() + 15
    while time.time() < deadline and set(seen) != set(want):
        status, _, body = _call(gateway["root"], "/spend/logs?api_key=" + keys["all"], None, MASTER_KEY, method="GET")
        assert status == 200, body
        for row in json.loads(body):
            if row.get("model_group") in want:
                seen.setdefault(row["model_group"], row["spend"])
        time.sleep(0.2)
    assert set(seen) == set(want), seen
    for model, spend in want.items():
        # LiteLLM prices DALL·E 3 at 3.81469e-08 a pixel: $0.0399999 an image.
        assert seen[model] == pytest.approx(spend, abs=1e-6), (model, seen[model])
