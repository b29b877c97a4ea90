"""The Realtime API through sluice with the official `openai` SDK (`client.realtime.connect`,
over the `websockets` package) to `sluice mock`: the session opens, updates, answers two
responses as streamed events, closes; the session is one spend row with both responses' usage;
a key without access is refused before the WebSocket opens."""

import json
import time
import urllib.request

import openai
import pytest
import websockets

from conftest import MASTER_KEY

# What the mock reports per response (crates/mock/src/realtime.rs) and per answer (conftest).
INPUT_TOKENS = 12
OUTPUT_TOKENS = 20
# The cached input tokens of each response (crates/mock/src/realtime.rs: CACHED_TOKENS).
CACHED_TOKENS = 4


def _call(root, path, body, key, method="POST"):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(root + path, data=data, method=method)
    req.add_header("Authorization", f"Bearer {key}")
    if data is not None:
        req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def _key(gateway, alias, models=None):
    spec = {"key_alias": alias, **({"models": models} if models else {})}
    return _call(gateway["root"], "/key/generate", spec, MASTER_KEY)["key"]


def test_a_session_through_the_sdk_is_one_spend_row(gateway):
    key = _key(gateway, "realtime-user", ["gpt-realtime"])
    client = openai.OpenAI(base_url=gateway["base_url"], api_key=key, max_retries=0)
    text = []
    with client.realtime.connect(model="gpt-realtime") as conn:
        created = conn.recv()
        assert created.type == "session.created"
        conn.session.update(session={"type": "realtime", "output_modalities": ["text"]})
        for _ in range(2):
            conn.response.create()
            while True:
                event = conn.recv()
                if event.type == "response.output_text.delta":
                    text.append(event.delta)
                elif event.type == "response.done":
                    assert event.response.usage.output_tokens == OUTPUT_TOKENS
                    break
    assert "".join(text).startswith("mock0 ")
    # The session ended when the SDK closed it: one row, both responses, priced.
    want_tokens = 2 * (INPUT_TOKENS + OUTPUT_TOKENS)
    deadline = time.time() + 15
    rows = []
    while time.time() < deadline:
        rows = _call(gateway["root"], f"/spend/logs?api_key={key}", None, MASTER_KEY, method="GET")
        if rows:
            break
        time.sleep(0.2)
    assert len(rows) == 1, rows
    row = rows[0]
    assert row["model_group"] == "gpt-realtime"
    assert row["total_tokens"] == want_tokens
    # gpt-realtime in the registry: $4/M input, $0.40/M cached input, $16/M output; the mock
    # reports CACHED_TOKENS of each response's input as read from the cache.
    want_cost = 2 * (
        (INPUT_TOKENS - CACHED_TOKENS) * 0.000004 + CACHED_TOKENS * 0.0000004 + OUTPUT_TOKENS * 0.000016
    )
    assert row["spend"] == pytest.approx(want_cost, rel=1e-6)


def test_a_key_without_access_is_refused_before_the_upgrade(gateway):
    key = _key(gateway, "realtime-chat-only", ["gpt-4o-mini"])
    client = openai.OpenAI(base_url=gateway["base_url"], api_key=key, max_retries=0)
    with pytest.raises(websockets.exceptions.InvalidStatus) as refused:
        with client.realtime.connect(model="gpt-realtime") as conn:
            conn.recv()
    assert refused.value.response.status_code == 401
    body = json.loads(refused.value.response.body)
    assert body["error"]["type"] in ("permission_error", "key_model_access_denied"), body
