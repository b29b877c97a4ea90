"""The official SDKs against sluice's provider pass-through routes, each pointed at
`<sluice>/<provider>` with a sluice key: the anthropic SDK at `/anthropic` (non-stream and
stream, answered by `sluice mock` in Anthropic's format with sluice's upstream key), and boto3's
bedrock-runtime at `/bedrock` (Converse, ConverseStream, InvokeModel and
InvokeModelWithResponseStream; sluice re-signs every request with its own AWS credentials,
which the mock checks; the sluice key travels in `x-litellm-api-key`)."""

import json

import anthropic
import boto3
from botocore.config import Config

from conftest import MASTER_KEY


def anthropic_message(gateway, model):
    client = anthropic.Anthropic(
        base_url=f"{gateway['root']}/anthropic", api_key=MASTER_KEY, max_retries=0
    )
    message = client.messages.create(
        model=model, max_tokens=50, messages=[{"role": "user", "content": "Hello"}]
    )
    return client, message


def test_anthropic_sdk_through_the_anthropic_route(gateway):
    client, m = anthropic_message(gateway, "claude-sonnet-5-5")
    assert m.model == "claude-sonnet-5-5"
    assert m.content[0].text.startswith("The mock provider")
    assert m.usage.output_tokens > 0
    with client.messages.stream(
        model="claude-sonnet-5-5",
        max_tokens=50,
        messages=[{"role": "user", "content": "Hello"}],
    ) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == m.content[0].text
    assert final.stop_reason == "end_turn"
    assert final.usage.output_tokens == m.usage.output_tokens


def bedrock_client(gateway):
    client = boto3.client(
        "bedrock-runtime",
        region_name="us-west-2",
        endpoint_url=f"{gateway['root']}/bedrock",
        # The SDK's own signature is the caller's business; sluice signs anew with its keys.
        aws_access_key_id="AKIDCALLER",
        aws_secret_access_key="caller-secret",
        config=Config(retries={"max_attempts": 1}),
    )

    def add_key(request, **_):
        request.headers["x-litellm-api-key"] = MASTER_KEY

    client.meta.events.register("before-send.bedrock-runtime.*", add_key)
    return client


def test_boto3_bedrock_runtime_through_the_bedrock_route(gateway):
    client = bedrock_client(gateway)
    model = "anthropic.claude-3-5-sonnet-20240620-v1:0"
    messages = [{"role": "user", "content": [{"text": "Hello"}]}]
    r = client.converse(modelId=model, messages=messages)
    text = r["output"]["message"]["content"][0]["text"]
    assert text.startswith("The mock provider")
    assert r["usage"]["outputTokens"] > 0
    streamed = client.converse_stream(modelId=model, messages=messages)
    pieces, usage = [], None
    for event in streamed["stream"]:
        if "contentBlockDelta" in event:
            pieces.append(event["contentBlockDelta"]["delta"]["text"])
        if "metadata" in event:
            usage = event["metadata"]["usage"]
    assert "".join(pieces) == text
    assert usage["outputTokens"] == r["usage"]["outputTokens"]


def test_boto3_invoke_model_and_its_response_stream(gateway):
    """InvokeModel with Claude's Messages body; streamed, boto3 decodes each event-stream
    `chunk` and its base64 `bytes` into Anthropic's events, the last with Bedrock's count."""
    client = bedrock_client(gateway)
    model = "anthropic.claude-3-5-sonnet-20240620-v1:0"
    body = json.dumps({
        "anthropic_version": "bedrock-2023-05-31",
        "max_tokens": 50,
        "messages": [{"role": "user", "content": "Hello"}],
    })
    whole = json.loads(client.invoke_model(modelId=model, body=body)["body"].read())
    assert whole["type"] == "message"
    assert whole["content"][0]["text"].startswith("The mock provider")
    streamed = client.invoke_model_with_response_stream(modelId=model, body=body)
    events = [json.loads(e["chunk"]["bytes"]) for e in streamed["body"]]
    assert events[0]["type"] == "message_start"
    text = "".join(
        e["delta"]["text"] for e in events if e["type"] == "content_block_delta"
    )
    assert text == whole["content"][0]["text"]
    metrics = events[-1]["amazon-bedrock-invocationMetrics"]
    assert metrics["outputTokenCount"] == whole["usage"]["output_tokens"]
    assert metrics["inputTokenCount"] == whole["usage"]["input_tokens"]


def test_model_group_names_through_the_sdks(gateway):
    """LiteLLM's model-group names on the pass-through routes: boto3 with `modelId` a group
    (`bedrock-claude`) and the anthropic SDK with `model` a group (`claude-sonnet`) reach that
    group's deployment, under its own model id."""
    client = bedrock_client(gateway)
    messages = [{"role": "user", "content": [{"text": "Hello"}]}]
    r = client.converse(modelId="bedrock-claude", messages=messages)
    assert r["output"]["message"]["content"][0]["text"].startswith("The mock provider")
    body = json.dumps({
        "anthropic_version": "bedrock-2023-05-31",
        "max_tokens": 50,
        "messages": [{"role": "user", "content": "Hello"}],
    })
    streamed = client.invoke_model_with_response_stream(modelId="bedrock-claude", body=body)
    events = [json.loads(e["chunk"]["bytes"]) for e in streamed["body"]]
    assert events[0]["message"]["model"] == "anthropic.claude-3-5-sonnet-20240620-v1:0"
    _, m = anthropic_message(gateway, "claude-sonnet")
    assert m.model == "claude-sonnet-5-5"
