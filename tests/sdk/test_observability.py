"""OpenTelemetry traces and logging callbacks, received by real servers on loopback.

- an OTLP/HTTP receiver and an OTLP/gRPC receiver (grpcio) decode with `opentelemetry-proto`;
- webhook, Langfuse and LangSmith receivers are plain HTTP servers that keep every body;
- an S3-compatible store is moto in server mode, checked with boto3;
- the upstream is a small OpenAI-shaped server that keeps the headers it was sent, so the
  `traceparent` sluice propagates can be checked; the in-process mock provides the faults.

Retries, fallbacks and hedges are forced with the mock's faults; a webhook that is down for
30 s while traffic flows must lose no record; nothing any receiver got (nor sluice's log, nor
`/metrics`) may contain a secret: the master key, the provider key or a virtual key, while the
virtual key's hash, alias and team do reach every receiver.
"""

import collections
import gzip
import json
import pathlib
import socket
import threading
import time
import urllib.error
import urllib.request
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import base64
import re
import urllib.parse

import boto3
import grpc
import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from moto.server import ThreadedMotoServer
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from prometheus_client.openmetrics.parser import text_string_to_metric_families

from conftest import MASTER_KEY, _start, _stop

UPSTREAM_KEY = "sk-upstream-obs-secret"
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
DOWN_FOR = 30.0
# Requests per second sent while the sink is down.
OUTAGE_RATE = 4


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


def _b64url(data):
    return base64.urlsafe_b64decode(data + "=" * (-len(data) % 4))


class Gcs:
    """Google's token endpoint and Cloud Storage's upload API on loopback. The token endpoint
    checks the JWT assertion's RS256 signature with the service account's public key (a key
    made for this test) and its claims; uploads need the token it handed out."""

    BUCKET = "obs-bucket"
    TOKEN = "ya29.obs-gcs-access-token"

    def __init__(self):
        self.private_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.token_requests = []
        self.uploads = []
        self.refused = []
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def answer(self, status, body):
                out = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                url = urllib.parse.urlsplit(self.path)
                query = urllib.parse.parse_qs(url.query)
                with outer.lock:
                    if url.path == "/token":
                        why = outer.check_assertion(self.headers, body)
                        outer.token_requests.append(why)
                        if why:
                            outer.refused.append(why)
                            return self.answer(400, {"error": "invalid_grant"})
                        return self.answer(200, {"access_token": outer.TOKEN, "expires_in": 3600,
                                                 "token_type": "Bearer"})
                    why = None
                    if url.path != f"/upload/storage/v1/b/{outer.BUCKET}/o":
                        why = f"path {url.path}"
                    elif query.get("uploadType") != ["media"] or len(query.get("name", [])) != 1:
                        why = f"query {url.query}"
                    elif self.headers.get("authorization") != f"Bearer {outer.TOKEN}":
                        why = "bearer token"
                    elif self.headers.get("content-type") != "application/json":
                        why = f"content type {self.headers.get('content-type')}"
                    if why:
                        outer.refused.append(why)
                        return self.answer(401 if why == "bearer token" else 400, {"error": why})
                    outer.uploads.append((query["name"][0], body))
                    return self.answer(200, {"bucket": outer.BUCKET, "name": query["name"][0]})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.host = f"127.0.0.1:{self.server.server_address[1]}"
        self.token_uri = f"http://{self.host}/token"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def key_file(self, path):
        pem = self.private_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption(),
        ).decode()
        path.write_text(json.dumps({
            "type": "service_account", "project_id": "obs", "private_key_id": "obs-key-1",
            "private_key": pem, "client_email": "obs@obs.iam.gserviceaccount.com",
            "token_uri": self.token_uri,
        }))
        self.pem = pem
        return path

    def check_assertion(self, headers, body):
        """None if the form carries a JWT bearer grant signed by the account's key, else why not."""
        if headers.get("content-type") != "application/x-www-form-urlencoded":
            return "token content type"
        form = urllib.parse.parse_qs(body.decode())
        if form.get("grant_type") != ["urn:ietf:params:oauth:grant-type:jwt-bearer"]:
            return "grant type"
        head, claims, sig = form["assertion"][0].split(".")
        try:
            self.private_key.public_key().verify(
                _b64url(sig), f"{head}.{claims}".encode(), padding.PKCS1v15(), hashes.SHA256())
        except Exception:  # noqa: BLE001 - cryptography's InvalidSignature
            return "signature"
        header, claims = json.loads(_b64url(head)), json.loads(_b64url(claims))
        if header.get("alg") != "RS256" or header.get("kid") != "obs-key-1":
            return f"header {header}"
        if claims.get("iss") != "obs@obs.iam.gserviceaccount.com" or claims.get("aud") != self.token_uri:
            return f"claims {claims}"
        if not claims["iat"] <= time.time() + 5 < claims["exp"]:
            return f"times {claims}"
        return None

    def records(self):
        with self.lock:
            return [(name, r) for name, b in self.uploads for r in json.loads(b)]


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
    gcs = Gcs()
    gcs_key = gcs.key_file(pathlib.Path(workdir) / "obs-gcs-service-account.json")

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
  - model_name: streamy
    litellm_params: {{model: mock/streamy}}
  - model_name: dead
    litellm_params: {{model: mock/dead, mock_status: 500}}
router_settings:
  allowed_fails: 100000
  fallbacks: [{{broken: [backup]}}]
  hedge_after_ms: {{hedged: 100}}
general_settings:
  master_key: {MASTER_KEY}
environment_variables:
  STORAGE_EMULATOR_HOST: {gcs.host}
litellm_settings:
  callbacks: [otel, webhook, langfuse, langsmith, s3, gcs_bucket, down_hook, content_hook]
  gcs_bucket_name: {Gcs.BUCKET}/sluice/{name}
callback_settings:
  otel: {otel}
  webhook: {{url: {sinks.url}/hook, batch_size: 5, flush_interval: 0.2, headers: {{x-sink-token: hook-token}}}}
  content_hook: {{callback_type: generic_api, endpoint: {sinks.url}/content, batch_size: 5, flush_interval: 0.2, message_logging: true}}
  down_hook: {{callback_type: generic_api, endpoint: {sinks.url}/down, batch_size: 5, flush_interval: 0.2}}
  langfuse: {{host: {sinks.url}/langfuse, public_key: pk-lf-obs, secret_key: sk-lf-obs, batch_size: 5, flush_interval: 0.2}}
  langsmith: {{endpoint: {sinks.url}/langsmith, api_key: ls-obs, project: obs, batch_size: 5, flush_interval: 0.2}}
  gcs_bucket: {{gcs_path_service_account: {gcs_key}, batch_size: 5, flush_interval: 0.2}}
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
        "gcs": gcs,
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


def _get(url):
    with urllib.request.urlopen(url, timeout=10) as resp:
        return resp.read()


def _call(root, path, body, key):
    """POST JSON with a bearer key; (status, request id, body) whatever the status."""
    req = urllib.request.Request(
        f"{root}{path}", data=json.dumps(body).encode(), method="POST",
        headers={"authorization": f"Bearer {key}", "content-type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, resp.headers.get("x-request-id"), resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("x-request-id"), e.read()


def _sink_status(root, name):
    ready = json.loads(_get(f"{root}/health/readiness"))
    return next(c for c in ready["callbacks"] if c["name"] == name)


def _gauge(root, family, **labels):
    families = {f.name: f for f in text_string_to_metric_families(_get(f"{root}/metrics").decode())}
    return [s.value for s in families[family].samples
            if all(s.labels.get(k) == v for k, v in labels.items())]


def _record_ids(sinks, prefix):
    """How often each request id reached a JSON-array sink."""
    return collections.Counter(r["request_id"] for b in sinks.bodies(prefix) for r in json.loads(b))


def test_callbacks_deliver_every_record_in_their_shapes_and_survive_an_outage(world):
    root = world["gateways"]["http"]["root"]
    sinks, s3 = world["sinks"], world["s3"]
    sinks.down_until = time.time() + DOWN_FOR
    ids, errors = [], []

    def traffic():
        # A steady OUTAGE_RATE requests per second for as long as the sink is down.
        started, n = time.time(), 0
        while time.time() < sinks.down_until:
            try:
                ids.append(_chat(root, "backup")[0])
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)
            n += 1
            time.sleep(max(0.0, started + n / OUTAGE_RATE - time.time()))

    sender = threading.Thread(target=traffic)
    sender.start()
    try:
        # While it is down, the sink says so: readiness and the metrics.
        down = _wait(lambda: (s := _sink_status(root, "down_hook")) and not s["up"] and s["spill_depth"] > 0 and s,
                     timeout=10)
        assert down, "readiness never showed the sink down"
        assert time.time() < sinks.down_until
        assert _gauge(root, "sluice_callback_up", sink="down_hook") == [0]
        assert _gauge(root, "sluice_callback_spill_depth", sink="down_hook")[0] > 0
        assert _gauge(root, "sluice_callback_up", sink="webhook") == [1]
        assert _wait(lambda: len(ids) >= 12)
        first = list(ids[:12])

        # Meanwhile the other sinks got every record, in their shapes.
        assert _wait(lambda: set(first) <= set(_record_ids(sinks, "/hook"))), "webhook lost records"
        rec = next(r for b in sinks.bodies("/hook") for r in json.loads(b) if r["request_id"] == first[0])
        assert rec["model_group"] == "backup" and rec["provider"] == "openai" and rec["status"] == 200
        assert rec["usage"]["prompt_tokens"] == 7 and rec["usage"]["total_tokens"] == 10
        for field in ["key_alias", "key_hash", "team_id", "user_id", "end_user", "cost", "cache_hit",
                      "latency_ms", "overhead_ms", "ttfb_ms", "start_time", "deployment"]:
            assert field in rec, field
        assert "messages" not in rec  # no message_logging on the webhook

        def langfuse_events():
            return [e for b in sinks.bodies("/langfuse/api/public/ingestion") for e in json.loads(b)["batch"]]
        assert _wait(lambda: {e["body"]["id"] for e in langfuse_events() if e["type"] == "generation-create"}
                     >= set(first))
        gen = next(e["body"] for e in langfuse_events()
                   if e["body"].get("id") == first[0] and e["type"] == "generation-create")
        assert gen["usage"] == {"input": 7, "output": 3, "total": 10, "unit": "TOKENS"} and gen["model"] == "backup"
        auth = next(h for p, h, _ in sinks.requests if p.startswith("/langfuse"))
        assert auth["authorization"].startswith("Basic ")

        def runs():
            return [r for b in sinks.bodies("/langsmith/runs/batch") for r in json.loads(b)["post"]]
        assert _wait(lambda: len({r["extra"]["metadata"]["request_id"] for r in runs()} & set(first)) == len(first))
        run = next(r for r in runs() if r["extra"]["metadata"]["request_id"] == first[0])
        assert run["run_type"] == "llm" and run["session_name"] == "obs" and run["trace_id"] == run["id"]

        def s3_ids():
            got = set()
            for o in s3.list_objects_v2(Bucket="sluice-logs", Prefix="logs/").get("Contents", []):
                body = s3.get_object(Bucket="sluice-logs", Key=o["Key"])["Body"].read()
                got |= {r["request_id"] for r in json.loads(body)}
            return got
        assert _wait(lambda: set(first) <= s3_ids()), "S3 objects missing records"
        assert not set(first) & set(_record_ids(sinks, "/down")), "the down sink took records while down"
    finally:
        sender.join()
    assert not errors, errors[:3]
    assert len(ids) >= DOWN_FOR * OUTAGE_RATE * 0.8, f"only {len(ids)} requests during the outage"

    # Back up: every record sent during the outage arrives, exactly once, at every sink.
    assert _wait(lambda: set(ids) <= set(_record_ids(sinks, "/down")), timeout=60), "records lost while down"
    for prefix in ["/down", "/hook"]:
        counts = _record_ids(sinks, prefix)
        assert {i: counts[i] for i in ids if counts[i] != 1} == {}, f"{prefix}: records not delivered once"
    status = _sink_status(root, "down_hook")
    assert status["up"] and status["spill_depth"] == 0 and status["spilled"] >= len(ids) // 2
    metrics = _get(f"{root}/metrics").decode()
    assert 'sluice_callback_spilled_records_total{sink="down_hook"}' in metrics
    assert _gauge(root, "sluice_callback_up", sink="down_hook") == [1]


def test_gcs_bucket_gets_every_record_with_a_service_account_token(world):
    root = world["gateways"]["http"]["root"]
    gcs = world["gcs"]
    ids = [_chat(root, "backup")[0] for _ in range(12)]
    assert _wait(lambda: set(ids) <= {r["request_id"] for _, r in gcs.records()}), "GCS objects missing records"
    assert gcs.refused == [], gcs.refused
    got = collections.Counter(r["request_id"] for _, r in gcs.records())
    assert {i: got[i] for i in ids if got[i] != 1} == {}, "records uploaded more than once"
    with gcs.lock:
        uploads = list(gcs.uploads)
    # One object per batch, dated under the bucket name's folder, named by its size.
    for name, body in uploads:
        m = re.fullmatch(r"sluice/(http|grpc)/(\d{4}-\d{2}-\d{2})/(\d+)-[A-Za-z0-9-]+-(\d+)\.json", name)
        assert m, name
        assert int(m[4]) == len(json.loads(body))
        assert m[2] == time.strftime("%Y-%m-%d", time.gmtime(int(m[3]) / 1000))
    rec = next(r for _, r in gcs.records() if r["request_id"] == ids[0])
    assert rec["model_group"] == "backup" and rec["usage"]["total_tokens"] == 10
    # The token is cached: one exchange per gateway, however many uploads.
    assert len(uploads) > 2 and 1 <= len(gcs.token_requests) <= 2, (len(uploads), gcs.token_requests)
    status = _sink_status(root, "gcs_bucket")
    assert status["up"] and status["delivered"] >= len(ids)


def _sse_datas(body):
    return [json.loads(line[6:]) for line in body.decode().splitlines()
            if line.startswith("data: ") and line != "data: [DONE]"]


def test_streamed_answers_are_logged_whole_with_message_logging(world):
    root = world["gateways"]["http"]["root"]
    sinks = world["sinks"]
    msgs = [{"role": "user", "content": "stream me a story"}]
    status, rid, body = _call(root, "/v1/chat/completions",
                              {"model": "streamy", "messages": msgs, "stream": True}, MASTER_KEY)
    assert status == 200
    chunks = _sse_datas(body)
    received = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert len(received) > 20
    finish = next(c["choices"][0]["finish_reason"] for c in chunks if c["choices"] and c["choices"][0]["finish_reason"])
    # A whole answer for comparison: logged as its body's choices.
    status, whole_id, _ = _call(root, "/v1/chat/completions", {"model": "streamy", "messages": msgs}, MASTER_KEY)
    assert status == 200

    def record(request_id):
        return next((r for b in sinks.bodies("/content") for r in json.loads(b) if r["request_id"] == request_id), None)
    assert _wait(lambda: record(rid) and record(whole_id)), "content_hook lost records"
    rec = record(rid)
    assert rec["stream"] and rec["messages"] == msgs
    choice = rec["response"][0]
    assert choice["message"]["content"] == received
    assert choice["message"]["role"] == "assistant" and choice["finish_reason"] == finish
    assert "response_truncated" not in rec
    # Streamed and whole answers are logged in the same shape.
    whole = record(whole_id)["response"][0]
    assert set(whole) >= set(choice) and set(whole["message"]) >= {"role", "content"}
    # The plain webhook (no message_logging) carries no content for the stream.
    plain = _wait(lambda: next((r for b in sinks.bodies("/hook") for r in json.loads(b) if r["request_id"] == rid), None))
    assert plain and "response" not in plain and "messages" not in plain
    # The OTLP exporter with message_logging has the assembled answer too.
    span = _wait(lambda: next((s for _, s in _spans_http(sinks) if _attrs(s).get("sluice.request_id") == rid), None))
    assert span and received in json.loads(_attrs(span)["gen_ai.output.messages"])[0]["message"]["content"]


def test_virtual_key_records_carry_its_hash_alias_and_team(world):
    root = world["gateways"]["http"]["root"]
    sinks, s3 = world["sinks"], world["s3"]
    status, _, body = _call(root, "/team/new", {"team_alias": "obs-team"}, MASTER_KEY)
    assert status == 200, body
    team = json.loads(body)["team_id"]
    status, _, body = _call(root, "/key/generate", {"key_alias": "obs-app", "team_id": team}, MASTER_KEY)
    assert status == 200, body
    made = json.loads(body)
    key, key_hash = made["key"], made["token"]
    assert key.startswith("sk-") and key_hash and key_hash != key
    world["virtual_key"] = key
    world["virtual_key_hash"] = key_hash
    msgs = [{"role": "user", "content": "say hello"}]
    ok = _call(root, "/v1/chat/completions", {"model": "backup", "messages": msgs}, key)
    assert ok[0] == 200, ok
    failed = _call(root, "/v1/chat/completions", {"model": "dead", "messages": msgs}, key)
    assert failed[0] == 500, failed
    streamed = _call(root, "/v1/chat/completions", {"model": "streamy", "messages": msgs, "stream": True}, key)
    assert streamed[0] == 200 and b"data: [DONE]" in streamed[2], streamed
    ids = {ok[1], failed[1], streamed[1]}

    def hook_records():
        return {r["request_id"]: r for b in sinks.bodies("/hook") for r in json.loads(b) if r["request_id"] in ids}
    assert _wait(lambda: len(hook_records()) == 3), "webhook lost the virtual key's records"
    records = hook_records()
    for r in records.values():
        assert (r["key_hash"], r["key_alias"], r["team_id"]) == (key_hash, "obs-app", team), r
    assert records[failed[1]]["status_text"] == "failure" and records[streamed[1]]["stream"]

    # Every other receiver carries the hash (and so the grep below looks where it must).
    def carriers():
        h = key_hash.encode()
        got = {
            "langfuse": any(h in b for b in sinks.bodies("/langfuse")),
            "langsmith": any(h in b for b in sinks.bodies("/langsmith")),
            "otlp": any(_attrs(s).get("sluice.key_hash") == key_hash
                        and _attrs(s).get("sluice.team_id") == team for _, s in _spans_http(sinks)),
            "s3": any(h in s3.get_object(Bucket="sluice-logs", Key=o["Key"])["Body"].read()
                      for o in s3.list_objects_v2(Bucket="sluice-logs").get("Contents", [])),
            "gcs": any(r["key_hash"] == key_hash for _, r in world["gcs"].records()),
        }
        return all(got.values()) or print(got)
    assert _wait(carriers), "a receiver never got the key's hash"


def test_no_secret_leaves_sluice(world):
    # Runs last in this module: everything every receiver got, sluice's log and /metrics,
    # checked for keys.
    blobs = [b for _, _, b in world["sinks"].requests]
    blobs += [json.dumps(h).encode() for _, h, _ in world["sinks"].requests]
    blobs += [r.SerializeToString() for r in world["grpc"].requests]
    s3 = world["s3"]
    for o in s3.list_objects_v2(Bucket="sluice-logs").get("Contents", []):
        blobs.append(s3.get_object(Bucket="sluice-logs", Key=o["Key"])["Body"].read())
    blobs += [b for _, b in world["gcs"].uploads]
    for g in world["gateways"].values():
        blobs.append(_get(f"{g['root']}/metrics"))
        blobs.append(pathlib.Path(g["log"]).read_bytes())
    assert len(blobs) > 10
    virtual = world["virtual_key"].encode()
    # The virtual key's hash is there (the grep sees the records) ...
    assert sum(world["virtual_key_hash"].encode() in b for b in blobs) >= 4
    # ... the keys themselves never.
    gcs = world["gcs"]
    pem_body = "".join(gcs.pem.splitlines()[1:-1])[:64].encode()  # a run of the private key
    for secret in [MASTER_KEY.encode(), UPSTREAM_KEY.encode(), virtual, gcs.TOKEN.encode(), pem_body]:
        leaks = [b[:200] for b in blobs if secret in b]
        assert not leaks, f"{secret[:6]!r}... left sluice: {leaks[:2]}"
