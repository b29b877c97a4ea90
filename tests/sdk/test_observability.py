"""OpenTelemetry traces and logging callbacks, received by real servers on loopback.

- an OTLP/HTTP receiver and an OTLP/gRPC receiver (grpcio) decode with `opentelemetry-proto`;
- webhook, Langfuse and LangSmith receivers are plain HTTP servers that keep every body;
- an S3-compatible store is moto in server mode, checked with boto3;
- the upstream is a small OpenAI-shaped server that keeps the headers it was sent, so the
  `traceparent` sluice propagates can be checked; the in-process mock provides the faults.

Retries, fallbacks and hedges are forced with the mock's faults; a webhook that is down for a
few seconds must lose no record; nothing any receiver got may contain a secret.
"""

import gzip
import json
import pathlib
import socket
import threading
import time
import urllib.request
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import boto3
import grpc
import pytest
from moto.server import ThreadedMotoServer
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

from conftest import MASTER_KEY, _start, _stop

UPSTREAM_KEY = "sk-upstream-obs-secret"
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
DOWN_FOR = 3.0


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Receiver:
    """An HTTP server that keeps every request (path, headers, body) and answers 200, or 503
    while `down_until` is in the future for paths under /down."""

    def __init__(self):
        self.requests = []
        self.down_until = 0.0
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                if self.headers.get("content-encoding") == "gzip":
                    body = gzip.decompress(body)
                if self.path.startswith("/down") and time.time() < outer.down_until:
                    self.send_response(503)
                    self.end_headers()
                    return
                with outer.lock:
                    outer.requests.append((self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                if self.path.startswith("/v1/chat/completions"):
                    out = json.dumps(
                        {
                            "id": "chatcmpl-1",
                            "object": "chat.completion",
                            "created": 1,
                            "model": "upstream-model",
                            "choices": [
                                {"index": 0, "message": {"role": "assistant", "content": "hello there"},
                                 "finish_reason": "stop"}
                            ],
                            "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10},
                        }
                    ).encode()
                else:
                    out = b"{}"
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            do_PUT = do_POST

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def bodies(self, prefix):
        with self.lock:
            return [b for p, _, b in self.requests if p.startswith(prefix)]


class GrpcTraces(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self):
        self.requests = []

    def Export(self, request, context):
        self.requests.append(request)
        return trace_service_pb2.ExportTraceServiceResponse()


@pytest.fixture(scope="module")
def world(workdir):
    upstream = Receiver()
    sinks = Receiver()
    grpc_traces = GrpcTraces()
    grpc_server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(grpc_traces, grpc_server)
    grpc_port = grpc_server.add_insecure_port("127.0.0.1:0")
    grpc_server.start()
    s3_port = _free_port()
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=s3_port, verbose=False)
    moto.start()
    s3 = boto3.client(
        "s3", endpoint_url=f"http://127.0.0.1:{s3_port}", region_name="us-east-1",
        aws_access_key_id="AKIDOBS", aws_secret_access_key="obs-s3-secret",
    )
    s3.create_bucket(Bucket="sluice-logs")

    def config(name, otel):
        path = pathlib.Path(workdir) / f"obs-{name}.yaml"
        path.write_text(
            f"""
model_list:
  - model_name: flaky
    litellm_params: {{model: mock/flaky, weight: 1000000}}
  - model_name: flaky
    litellm_params: {{model: openai/good, api_base: {upstream.url}/v1, api_key: {UPSTREAM_KEY}, weight: 1}}
  - model_name: broken
    litellm_params: {{model: mock/broken, mock_status: 500}}
  - model_name: backup
    litellm_params: {{model: openai/backup, api_base: {upstream.url}/v1, api_key: {UPSTREAM_KEY}}}
  - model_name: hedged
    litellm_params: {{model: mock/slow, mock_latency_ms: 2000, weight: 1000000}}
  - model_name: hedged
    litellm_params: {{model: openai/fast, api_base: {upstream.url}/v1, api_key: {UPSTREAM_KEY}, weight: 1}}
router_settings:
  allowed_fails: 100000
  fallbacks: [{{broken: [backup]}}]
  hedge_after_ms: {{hedged: 100}}
general_settings:
  master_key: {MASTER_KEY}
litellm_settings:
  callbacks: [otel, webhook, langfuse, langsmith, s3, down_hook]
callback_settings:
  otel: {otel}
  webhook: {{url: {sinks.url}/hook, batch_size: 5, flush_interval: 0.2, headers: {{x-sink-token: hook-token}}}}
  down_hook: {{callback_type: generic_api, endpoint: {sinks.url}/down, batch_size: 5, flush_interval: 0.2}}
  langfuse: {{host: {sinks.url}/langfuse, public_key: pk-lf-obs, secret_key: sk-lf-obs, batch_size: 5, flush_interval: 0.2}}
  langsmith: {{endpoint: {sinks.url}/langsmith, api_key: ls-obs, project: obs, batch_size: 5, flush_interval: 0.2}}
  s3: {{s3_bucket_name: sluice-logs, s3_endpoint_url: 'http://127.0.0.1:{s3_port}', s3_aws_access_key_id: AKIDOBS, s3_aws_secret_access_key: obs-s3-secret, s3_path: logs, batch_size: 5, flush_interval: 0.2}}
"""
        )
        return path

    http_otel = f"{{endpoint: '{sinks.url}/v1/traces', batch_size: 5, flush_interval: 0.2, message_logging: true}}"
    grpc_otel = f"{{endpoint: 'http://127.0.0.1:{grpc_port}', protocol: grpc, batch_size: 5, flush_interval: 0.2}}"
    gateways = {}
    for name, otel in [("http", http_otel), ("grpc", grpc_otel)]:
        proc, addr, log = _start(["serve", "--config", str(config(name, otel)), "--port", "0"], workdir)
        gateways[name] = {"root": f"http://{addr}", "proc": proc, "log": log}
    yield {
        "gateways": gateways, "upstream": upstream, "sinks": sinks, "grpc": grpc_traces, "s3": s3,
    }
    for g in gateways.values():
        assert _stop(g["proc"]) == 0
    grpc_server.stop(0)
    moto.stop()


def _chat(root, model, headers=None, fault=None):
    body = {"model": model, "messages": [{"role": "user", "content": "tell me a secret-free story"}]}
    if fault:
        body["mock_fault"] = fault
    req = urllib.request.Request(
        f"{root}/v1/chat/completions", data=json.dumps(body).encode(), method="POST",
        headers={"authorization": f"Bearer {MASTER_KEY}", "content-type": "application/json", **(headers or {})},
    )
    with urllib.request.urlopen(req, timeout=30) as resp:
        return resp.headers["x-request-id"], dict(resp.headers), json.loads(resp.read())


def _wait(pred, timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        got = pred()
        if got:
            return got
        time.sleep(0.1)
    return pred()


def _spans_http(sinks):
    out = []
    for b in sinks.bodies("/v1/traces"):
        req = trace_service_pb2.ExportTraceServiceRequest.FromString(b)
        for rs in req.resource_spans:
            for ss in rs.scope_spans:
                out.extend((rs.resource, s) for s in ss.spans)
    return out


def _attrs(span):
    out = {}
    for kv in span.attributes:
        v = kv.value
        out[kv.key] = getattr(v, v.WhichOneof("value"))
    return out


def test_traces_show_retries_fallbacks_and_hedges_over_otlp_http(world):
    root = world["gateways"]["http"]["root"]
    sinks, upstream = world["sinks"], world["upstream"]
    traceparent = f"00-{TRACE_ID}-{PARENT_ID}-01"
    # The mock deployment of `flaky` is picked first (weight) and fails: a retry on `good`.
    retried, h, _ = _chat(root, "flaky", {"traceparent": traceparent, "tracestate": "vendor=abc",
                                          "x-mock-status": "500"})
    assert h["x-sluice-attempted-retries"] == "1"
    fell_back, h, _ = _chat(root, "broken")
    assert h["x-sluice-attempted-fallbacks"] == "1"
    hedged, h, _ = _chat(root, "hedged")
    assert h.get("x-sluice-hedged-requests") == "1"

    def spans_of(request_id):
        spans = _spans_http(sinks)
        server = [s for _, s in spans if _attrs(s).get("sluice.request_id") == request_id]
        if not server:
            return None
        children = [s for _, s in spans if s.parent_span_id == server[0].span_id]
        return server[0], children

    got = _wait(lambda: (r := spans_of(retried)) and len(r[1]) == 2 and r)
    assert got, "no spans for the retried request"
    server, attempts = got
    a = _attrs(server)
    assert server.kind == 2  # SERVER
    assert server.trace_id.hex() == TRACE_ID
    assert server.parent_span_id.hex() == PARENT_ID
    assert server.trace_state == "vendor=abc"
    assert a["gen_ai.operation.name"] == "chat"
    assert a["gen_ai.request.model"] == "flaky"
    assert a["gen_ai.provider.name"] == "openai"
    assert a["gen_ai.response.model"] == "good"
    assert a["gen_ai.usage.input_tokens"] == 7
    assert a["gen_ai.usage.output_tokens"] == 3
    assert a["sluice.retries"] == 1
    # Content only with message_logging: the HTTP exporter opted in.
    assert "secret-free story" in a["gen_ai.input.messages"]
    assert "hello there" in a["gen_ai.output.messages"]
    attempts.sort(key=lambda s: s.start_time_unix_nano)
    first, second = (_attrs(s) for s in attempts)
    assert all(s.kind == 3 for s in attempts)  # CLIENT
    assert first["sluice.deployment"] != second["sluice.deployment"]
    assert first["sluice.outcome"] == "server" and first["error.type"] == "server"
    assert attempts[0].status.code == 2 and attempts[1].status.code == 1
    assert second["sluice.outcome"] == "ok" and second["sluice.attempt"] == 2
    assert attempts[0].end_time_unix_nano <= attempts[1].start_time_unix_nano + 1_000_000
    # The upstream saw the second attempt's span as its parent, in the client's trace.
    sent = [h for p, h, _ in upstream.requests if h.get("traceparent", "").startswith(f"00-{TRACE_ID}-")]
    assert sent, "traceparent was not propagated upstream"
    assert sent[-1]["traceparent"] == f"00-{TRACE_ID}-{attempts[1].span_id.hex()}-01"
    assert sent[-1]["tracestate"] == "vendor=abc"

    got = _wait(lambda: (r := spans_of(fell_back)) and len(r[1]) == 2 and r)
    assert got, "no spans for the fallback"
    server, attempts = got
    groups = sorted((_attrs(s)["sluice.model_group"], _attrs(s)["sluice.fallback"]) for s in attempts)
    assert groups == [("backup", True), ("broken", False)]
    assert _attrs(server)["sluice.fallbacks"] == 1
    assert server.trace_id.hex() != TRACE_ID  # no traceparent: a new trace

    got = _wait(lambda: (r := spans_of(hedged)) and len(r[1]) == 2 and r)
    assert got, "no spans for the hedge"
    _, attempts = got
    outcome = {_attrs(s)["sluice.hedge"]: _attrs(s)["sluice.outcome"] for s in attempts}
    assert outcome == {False: "cancelled", True: "ok"}


def test_traces_over_otlp_grpc(world):
    root = world["gateways"]["grpc"]["root"]
    rid, _, _ = _chat(root, "backup")
    def found():
        for req in world["grpc"].requests:
            for rs in req.resource_spans:
                for ss in rs.scope_spans:
                    for s in ss.spans:
                        if _attrs(s).get("sluice.request_id") == rid:
                            return rs, s
    got = _wait(found)
    assert got, "no span over gRPC"
    resource, span = got
    assert {kv.key: kv.value.string_value for kv in resource.resource.attributes}["service.name"] == "sluice"
    a = _attrs(span)
    assert a["gen_ai.request.model"] == "backup" and a["gen_ai.usage.output_tokens"] == 3
    # No message_logging on this exporter: no content.
    assert "gen_ai.input.messages" not in a


def test_callbacks_deliver_every_record_in_their_shapes_and_survive_an_outage(world):
    root = world["gateways"]["http"]["root"]
    sinks, s3 = world["sinks"], world["s3"]
    sinks.down_until = time.time() + DOWN_FOR
    ids = [_chat(root, "backup")[0] for _ in range(12)]
    assert time.time() < sinks.down_until, "the requests should be sent while the sink is down"

    def hook_ids(prefix):
        got = set()
        for b in sinks.bodies(prefix):
            got |= {r["request_id"] for r in json.loads(b)}
        return got

    assert _wait(lambda: set(ids) <= hook_ids("/hook")), "webhook lost records"
    # The down sink: nothing lost once it is back.
    assert _wait(lambda: set(ids) <= hook_ids("/down"), timeout=DOWN_FOR + 30), "records lost while down"
    rec = next(r for b in sinks.bodies("/hook") for r in json.loads(b) if r["request_id"] == ids[0])
    assert rec["model_group"] == "backup" and rec["provider"] == "openai" and rec["status"] == 200
    assert rec["usage"]["prompt_tokens"] == 7 and rec["usage"]["total_tokens"] == 10
    for field in ["key_alias", "key_hash", "team_id", "user_id", "end_user", "cost", "cache_hit",
                  "latency_ms", "overhead_ms", "ttfb_ms", "start_time", "deployment"]:
        assert field in rec, field
    assert "messages" not in rec  # no message_logging on the webhook

    def langfuse_events():
        return [e for b in sinks.bodies("/langfuse/api/public/ingestion") for e in json.loads(b)["batch"]]
    assert _wait(lambda: {e["body"]["id"] for e in langfuse_events() if e["type"] == "generation-create"} >= set(ids))
    gen = next(e["body"] for e in langfuse_events() if e["body"].get("id") == ids[0] and e["type"] == "generation-create")
    assert gen["usage"] == {"input": 7, "output": 3, "total": 10, "unit": "TOKENS"} and gen["model"] == "backup"
    auth = next(h for p, h, _ in sinks.requests if p.startswith("/langfuse"))
    assert auth["authorization"].startswith("Basic ")

    def runs():
        return [r for b in sinks.bodies("/langsmith/runs/batch") for r in json.loads(b)["post"]]
    assert _wait(lambda: len({r["extra"]["metadata"]["request_id"] for r in runs()} & set(ids)) == len(ids))
    run = next(r for r in runs() if r["extra"]["metadata"]["request_id"] == ids[0])
    assert run["run_type"] == "llm" and run["session_name"] == "obs" and run["trace_id"] == run["id"]

    def s3_ids():
        got = set()
        for o in s3.list_objects_v2(Bucket="sluice-logs", Prefix="logs/").get("Contents", []):
            body = s3.get_object(Bucket="sluice-logs", Key=o["Key"])["Body"].read()
            got |= {r["request_id"] for r in json.loads(body)}
        return got
    assert _wait(lambda: set(ids) <= s3_ids()), "S3 objects missing records"

    # The sinks report themselves.
    with urllib.request.urlopen(f"{root}/health/readiness", timeout=10) as resp:
        ready = json.loads(resp.read())
    names = {c["name"]: c for c in ready["callbacks"]}
    assert set(names) == {"otel", "webhook", "langfuse", "langsmith", "s3", "down_hook"}
    assert names["down_hook"]["up"] and names["down_hook"]["spilled"] >= 1
    with urllib.request.urlopen(f"{root}/metrics", timeout=10) as resp:
        metrics = resp.read().decode()
    assert 'sluice_callback_spilled_records_total{sink="down_hook"}' in metrics
    assert 'sluice_callback_up{sink="webhook"} 1' in metrics


def test_no_secret_leaves_sluice(world):
    # Runs last in this module: everything every receiver got, checked for keys.
    blobs = [b for _, _, b in world["sinks"].requests]
    blobs += [json.dumps(h).encode() for _, h, _ in world["sinks"].requests]
    blobs += [r.SerializeToString() for r in world["grpc"].requests]
    s3 = world["s3"]
    for o in s3.list_objects_v2(Bucket="sluice-logs").get("Contents", []):
        blobs.append(s3.get_object(Bucket="sluice-logs", Key=o["Key"])["Body"].read())
    assert len(blobs) > 10
    for b in blobs:
        assert MASTER_KEY.encode() not in b
        assert UPSTREAM_KEY.encode() not in b
