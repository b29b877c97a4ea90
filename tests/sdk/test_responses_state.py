"""The Responses API's state kept by sluice (crate::responses): `store` (OpenAI's default)
keeps an answer, sealed, whatever provider served it; `previous_response_id` gives the next
request the whole conversation, on any provider and across a fallback (here from an OpenAI
deployment that is down to an Anthropic one); `responses.retrieve`, `input_items.list` and
`delete`; the Conversations API and `conversation=` on a request; and another key sees none of
it. The upstream requests are read back from `sluice mock --record`.
"""

import json
import pathlib
import time
import urllib.request

import openai
import pytest

from conftest import MASTER_KEY, _start, _stop


@pytest.fixture(scope="module")
def state_gateway(workdir, recording_mock):
    d = pathlib.Path(workdir) / "responses-state"
    d.mkdir(exist_ok=True)
    (d / "config.yaml").write_text(f"""
model_list:
  - model_name: state-openai
    litellm_params: {{model: openai/gpt-4.1, api_base: "{recording_mock}/v1", api_key: sk-up-never-shown}}
  - model_name: state-anthropic
    litellm_params: {{model: anthropic/claude-sonnet-4-5, api_base: "{recording_mock}/v1", api_key: sk-up-never-shown}}
  - model_name: state-openai-down
    litellm_params: {{model: openai/gpt-4.1, api_base: "http://127.0.0.1:9/v1", api_key: sk-up-never-shown}}
  - model_name: state-down
    litellm_params: {{model: openai/gpt-4.1, api_base: "http://127.0.0.1:9/v1", api_key: sk-up-never-shown}}
  - model_name: state-slow
    litellm_params: {{model: mock/slow}}
router_settings:
  fallbacks: [{{"state-openai-down": ["state-anthropic"]}}]
  num_retries: 0
general_settings:
  master_key: {MASTER_KEY}
""")
    proc, addr, log = _start(["serve", "--config", str(d / "config.yaml"), "--port", "0"], str(d))
    root = f"http://{addr}"
    yield {"root": root, "mock": recording_mock, "log": log}
    assert _stop(proc) == 0


def _key(root: str, alias: str) -> str:
    req = urllib.request.Request(
        root + "/key/generate", data=json.dumps({"key_alias": alias}).encode(),
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


def test_previous_response_id_holds_across_a_fallback_to_another_provider(state_gateway):
    gw = state_gateway
    oai = _client(gw, _key(gw["root"], "state-a"))
    first = oai.responses.create(model="state-openai", input="My name is Ada.", instructions="Be brief.")
    assert first.id.startswith("resp_") and first.store is True
    _forget_upstream(gw)
    raw = oai.responses.with_raw_response.create(
        model="state-openai-down", previous_response_id=first.id, input="What is my name?")
    second = raw.parse()
    assert second.output_text
    assert second.previous_response_id == first.id, "the answer names what it continued"
    # The OpenAI deployment was down: the Anthropic group answered, given the whole history.
    assert raw.headers.get("x-litellm-attempted-fallbacks") == "1", dict(raw.headers)
    sent = _upstream(gw)
    assert [r["path"] for r in sent] == ["/v1/messages"], sent
    texts = json.dumps(sent[0]["body"]["messages"])
    assert "My name is Ada." in texts and "What is my name?" in texts
    assert first.output_text in texts, "the first answer is part of the history"
    # A third turn continues the second (itself kept): the whole chain goes along.
    _forget_upstream(gw)
    oai.responses.create(model="state-anthropic", previous_response_id=second.id, input="And again?")
    texts = json.dumps(_upstream(gw)[0]["body"]["messages"])
    for said in ("My name is Ada.", "What is my name?", "And again?"):
        assert said in texts


def test_kept_answers_are_retrieved_listed_and_deleted_by_their_owner_only(state_gateway):
    gw = state_gateway
    key = _key(gw["root"], "state-b")
    oai = _client(gw, key)
    made = oai.responses.create(model="state-anthropic", input="Keep me.")
    got = oai.responses.retrieve(made.id)
    assert got.id == made.id and got.output_text == made.output_text
    items = oai.responses.input_items.list(made.id)
    assert [i.type for i in items.data] == ["message"]
    assert items.data[0].content[0].text == "Keep me."
    # A streamed answer is kept too, from its final event.
    with oai.responses.stream(model="state-openai", input="Streamed.") as s:
        done = s.get_final_response()
    assert oai.responses.retrieve(done.id).output_text == done.output_text
    # A streamed answer that continues one names it in its response objects, on a translated
    # provider and a passed-through one alike.
    for group in ["state-anthropic", "state-openai"]:
        with oai.responses.stream(model=group, input="Go on.", previous_response_id=done.id) as s:
            events = list(s)
            final = s.get_final_response()
        created = next(e for e in events if e.type == "response.created")
        assert created.response.previous_response_id == done.id, group
        assert final.previous_response_id == done.id, group
        assert oai.responses.retrieve(final.id).previous_response_id == done.id
    # Another key finds nothing; the master key reads everything.
    other = _client(gw, _key(gw["root"], "state-c"))
    with pytest.raises(openai.NotFoundError):
        other.responses.retrieve(made.id)
    with pytest.raises(openai.NotFoundError):
        other.responses.create(model="state-anthropic", previous_response_id=made.id, input="x")
    assert _client(gw, MASTER_KEY).responses.retrieve(made.id).id == made.id
    # `store: false` keeps nothing.
    unkept = oai.responses.create(model="state-anthropic", input="Forget me.", store=False)
    assert unkept.store is False
    with pytest.raises(openai.NotFoundError):
        oai.responses.retrieve(unkept.id)
    oai.responses.delete(made.id)
    with pytest.raises(openai.NotFoundError):
        oai.responses.retrieve(made.id)
    with pytest.raises(openai.BadRequestError):
        oai.responses.cancel(done.id)


def test_conversations_hold_their_items_across_requests(state_gateway):
    gw = state_gateway
    oai = _client(gw, _key(gw["root"], "state-d"))
    conv = oai.conversations.create(
        items=[{"type": "message", "role": "user", "content": "Remember: the colour is blue."}],
        metadata={"topic": "colours"},
    )
    assert conv.id.startswith("conv_") and conv.metadata == {"topic": "colours"}
    _forget_upstream(gw)
    answer = oai.responses.create(model="state-anthropic", conversation=conv.id, input="What colour?")
    assert answer.conversation is not None and answer.conversation.id == conv.id
    texts = json.dumps(_upstream(gw)[0]["body"]["messages"])
    assert "the colour is blue" in texts and "What colour?" in texts
    # The request's input and the answer joined the conversation (a task keeps them).
    import time

    deadline = time.time() + 5
    while True:
        items = oai.conversations.items.list(conv.id, order="asc")
        if len(items.data) >= 3 or time.time() > deadline:
            break
        time.sleep(0.05)
    kinds = [(i.type, getattr(i, "role", None)) for i in items.data]
    assert kinds[:3] == [("message", "user"), ("message", "user"), ("message", "assistant")], kinds
    assert items.data[2].content[0].text == answer.output_text
    # The next request in the conversation sees all of it.
    _forget_upstream(gw)
    oai.responses.create(model="state-openai", conversation=conv.id, input="Sure?")
    body = _upstream(gw)[0]["body"]
    assert "the colour is blue" in json.dumps(body["input"])
    assert answer.output_text in json.dumps(body["input"])
    added = oai.conversations.items.create(conv.id, items=[{"type": "message", "role": "user", "content": "Note."}])
    one = oai.conversations.items.retrieve(added.data[0].id, conversation_id=conv.id)
    assert one.content[0].text == "Note."
    assert oai.conversations.update(conv.id, metadata={"topic": "paint"}).metadata == {"topic": "paint"}
    assert oai.conversations.retrieve(conv.id).metadata == {"topic": "paint"}
    oai.conversations.items.delete(added.data[0].id, conversation_id=conv.id)
    other = _client(gw, _key(gw["root"], "state-e"))
    with pytest.raises(openai.NotFoundError):
        other.conversations.retrieve(conv.id)
    with pytest.raises(openai.NotFoundError):
        other.responses.create(model="state-anthropic", conversation=conv.id, input="x")
    assert oai.conversations.delete(conv.id).deleted is True
    with pytest.raises(openai.NotFoundError):
        oai.conversations.retrieve(conv.id)


def _settled(oai, rid: str, timeout: float = 10):
    deadline = time.time() + timeout
    while True:
        r = oai.responses.retrieve(rid)
        if r.status not in ("queued", "in_progress") or time.time() > deadline:
            return r
        time.sleep(0.05)


def test_background_responses_run_on_and_cancel(state_gateway):
    """`background: true`: answered at once, queued; the run goes on as a request of its own
    (its spend, its routing) and its answer replaces the queued one under the same id; a run
    that fails keeps its error; `cancel` stops a run and the mark stays when it would have
    ended; another key sees none of it."""
    gw = state_gateway
    oai = _client(gw, _key(gw["root"], "state-bg"))
    queued = oai.responses.create(model="state-openai", input="Say hi.", background=True)
    assert queued.id.startswith("resp_") and queued.status == "queued" and queued.background
    done = _settled(oai, queued.id)
    assert done.status == "completed" and done.id == queued.id and done.background
    assert done.output_text
    with pytest.raises(openai.BadRequestError):
        oai.responses.cancel(queued.id)
    # The next turn continues it like any kept answer.
    follow = oai.responses.create(model="state-anthropic", input="Again.", previous_response_id=queued.id)
    assert follow.previous_response_id == queued.id

    slow = oai.responses.create(model="state-slow", input="Take your time.", background=True,
                                extra_headers={"x-mock-latency-ms": "2000"})
    assert slow.status == "queued"
    cancelled = oai.responses.cancel(slow.id)
    assert cancelled.status == "cancelled" and cancelled.id == slow.id
    assert oai.responses.cancel(slow.id).status == "cancelled"
    time.sleep(2.5)
    assert oai.responses.retrieve(slow.id).status == "cancelled"

    failing = oai.responses.create(model="state-down", input="x", background=True)
    failed = _settled(oai, failing.id)
    assert failed.status == "failed" and failed.error is not None and failed.error.message

    other = _client(gw, _key(gw["root"], "state-bg-other"))
    with pytest.raises(openai.NotFoundError):
        other.responses.retrieve(queued.id)
    with pytest.raises(openai.NotFoundError):
        other.responses.cancel(slow.id)
    with pytest.raises(openai.BadRequestError) as refused:
        oai.responses.create(model="state-openai", input="x", background=True, store=False)
    assert "store" in str(refused.value)
    with pytest.raises(openai.BadRequestError):
        oai.responses.create(model="state-openai", input="x", background=True, stream=True)
