#!/usr/bin/env python3
"""Writes fuzz/corpus/<target>/seed-* from tests/fixtures and hand-made real shapes (fuzz/README.md).
Re-run after a fixture changes; files the fuzzer added (hash names) are left alone."""
import json, os, struct, zlib, time
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIX = os.path.join(ROOT, "tests", "fixtures")
OUT = os.path.join(ROOT, "fuzz", "corpus")

def fx(*p):
    return open(os.path.join(FIX, *p), "rb").read()

def put(target, name, data):
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    open(os.path.join(d, "seed-" + name), "wb").write(data)

def es_encode(headers, payload):
    hb = b""
    for n, v in headers:
        nb, vb = n.encode(), v.encode()
        hb += bytes([len(nb)]) + nb + b"\x07" + struct.pack(">H", len(vb)) + vb
    total = 16 + len(hb) + len(payload)
    pre = struct.pack(">II", total, len(hb))
    out = pre + struct.pack(">I", zlib.crc32(pre)) + hb + payload
    return out + struct.pack(">I", zlib.crc32(out))

def es_event(kind, payload):
    return es_encode([(":event-type", kind), (":content-type", "application/json"), (":message-type", "event")], payload)

def records(events):
    out = b""
    for kind, payload in events:
        k = kind.encode()[:31]
        out += bytes([len(k)]) + k + struct.pack(">H", len(payload)) + payload
    return out

# config_load
for f in sorted(os.listdir(os.path.join(FIX, "configs"))):
    put("config_load", f, fx("configs", f))
put("config_load", "secrets.yaml", b"""model_list:
  - model_name: gpt-4o
    litellm_params:
      model: openai/gpt-4o
      api_key: sk-literal-provider-key-123
general_settings:
  master_key: sk-master-literal-4567
  database_url: postgresql://u:pw-literal-890@127.0.0.1:5432/db
""")

# envelope_splice
put("envelope_splice", "openai_request_full.json", fx("openai", "request_full.json"))
put("envelope_splice", "anthropic_request_full.json", fx("anthropic", "request_full.json"))
for i, b in enumerate([
    b'{"model":"m","stream":true,"stream_options":null}',
    b'{"model":"m","stream":true,"stream_options":{"include_usage":false,"x":1}}',
    b'{ "num_retries" : 1 , "model":"a\\/b" , "timeout":2.5 ,"fallbacks": ["a", {"model": "b"}], "cache": {"no-store": true}, "guardrails": ["pii"], "user": "u1", "messages": [{"role": "user", "content": "hi \\"model\\""}] }',
    b'{"cache":null,"model":"m","x":[1e999]}',
]):
    put("envelope_splice", f"shape{i}.json", b)

# multipart: seed byte, boundary line, body
form = (b"--XyZ\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nwhisper-1\r\n"
        b"--XyZ\r\nContent-Disposition: form-data; name=\"stream\"\r\n\r\ntrue\r\n"
        b"--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.wav\"\r\nContent-Type: audio/wav\r\n\r\nRIFF....WAVEfmt \r\n"
        b"--XyZ--\r\n")
put("multipart", "transcription", b"\x05XyZ\n" + form)
put("multipart", "quoted_boundary", b"\x00----b0undary\n" + form.replace(b"XyZ", b"----b0undary"))

# sse_tap: mode byte (bit 0: strip the usage chunk), stream
usage = b'data: {"id":"c","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4}}\n\n'
put("sse_tap", "openai_forward", b"\x06" + fx("openai", "stream_parallel_tools.sse"))
put("sse_tap", "openai_strip", b"\x07" + fx("openai", "stream_parallel_tools.sse").replace(b"data: [DONE]", usage.rstrip(b"\n") + b"\n\ndata: [DONE]"))
put("sse_tap", "anthropic", b"\x0a" + fx("anthropic", "stream_tool_use.sse"))
put("sse_tap", "responses", b"\x03event: response.completed\r\ndata: {\"type\":\"response.completed\",\"response\":{\"usage\":{\"input_tokens\":2,\"output_tokens\":1}}}\r\n\r\n")

# stream_translate: mode (bit 0 anthropic upstream, bit 1 anthropic client, rest framing)
for mode in (0x00, 0x16):
    put("stream_translate", f"openai_{mode:02x}", bytes([mode]) + fx("openai", "stream_parallel_tools.sse"))
for name in ("stream_tool_use.sse", "stream_thinking.sse", "stream_error.sse"):
    for mode in (0x01, 0x0f):
        put("stream_translate", f"anthropic_{name}_{mode:02x}", bytes([mode]) + fx("anthropic", name))

# stream_providers: bit 0 bedrock, bit 1 anthropic client, bit 2 built frames
put("stream_providers", "gemini_openai", b"\x08" + fx("gemini", "stream_function_call.sse"))
put("stream_providers", "gemini_anthropic", b"\x2a" + fx("gemini", "stream_function_call.sse"))
bedrock = [(k, json.dumps(v).encode()) for k, v in json.loads(fx("bedrock", "stream_tool_use.json"))]
raw = b"".join(es_event(k, p) for k, p in bedrock)
put("stream_providers", "bedrock_raw_openai", b"\x09" + raw)
put("stream_providers", "bedrock_built_anthropic", b"\x1f" + records(bedrock))
exc = es_encode([(":exception-type", "throttlingException"), (":content-type", "application/json"), (":message-type", "exception")], fx("bedrock", "error_throttling.json"))
put("stream_providers", "bedrock_exception", b"\x11" + raw[:200] + exc)

# eventstream: bit 0 built from records
put("eventstream", "converse_raw", b"\x06" + raw)
put("eventstream", "exception_raw", b"\x00" + exc)
put("eventstream", "records", b"\x03" + records(bedrock[:4]))
put("eventstream", "bad_crc", b"\x02" + raw[:40] + b"\xff" + raw[41:120])

# sigv4: path, query, content type, secret, body
put("sigv4", "converse", b"model/anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse\n\napplication/json\nwJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY\n{\"messages\":[]}")
put("sigv4", "query", b"a b/%2e%2e/c\nParam2=value2&Param1=value1&x\ntext/plain;  charset=utf-8\ns\n")
put("sigv4", "escapes", b"%+1%2B%zz%4\n%41=%42\n\n\n\xff\xfe")

# cache_wire: an SLC1 entry; and a content type line + body
def slc1(head, body):
    h = json.dumps(head).encode()
    return b"SLC1" + struct.pack(">I", len(h)) + h + body
now = 1_750_000_000_000
put("cache_wire", "entry", slc1({"status": 200, "content_type": "text/event-stream", "stream": True,
    "usage": {"prompt_tokens": 7, "completion_tokens": 3, "cached_tokens": 0, "cache_creation_tokens": 0, "reasoning_tokens": 0},
    "cost": 1234, "stored_ms": now - 5000, "expires_ms": now + 60000}, b"data: {\"x\":1}\n\ndata: [DONE]\n\n"))
put("cache_wire", "escaped_type", slc1({"status": 200, "content_type": "text/plain; charset=\"utf-8\"", "stream": False,
    "usage": None, "cost": None, "stored_ms": now, "expires_ms": now + 10000}, b"{}"))
put("cache_wire", "built", b"application/json; charset=\"utf-8\"\n" + fx("openai", "response_tool_calls.json"))
put("cache_wire", "key", b"0123456789abcdefABCDEF0123456789")

# admin_body: route byte (index into sluice::fuzz's ADMIN_ROUTES), body or query
ROUTES = ["/key/generate", "/key/update", "/key/delete", "/key/regenerate", "/key/block", "/key/unblock",
          "/team/new", "/team/update", "/team/delete", "/user/new", "/user/update", "/user/delete",
          "/customer/new", "/customer/update", "/customer/delete", "/customer/block", "/customer/unblock",
          "/key/info", "/key/list", "/team/info", "/team/list", "/user/info", "/user/list",
          "/customer/info", "/customer/list", "/spend/logs", "/spend/daily"]
def admin(name, route, body):
    put("admin_body", name, bytes([ROUTES.index(route)]) + (body if isinstance(body, bytes) else json.dumps(body).encode()))
admin("team_new", "/team/new", {"team_id": "t1", "max_budget": 50, "models": ["gpt-4o"]})
admin("key_generate", "/key/generate", {"key_alias": "app", "duration": "30d", "models": ["gpt-4o"], "max_budget": 10.5,
      "budget_duration": "1d", "rpm_limit": 60, "tpm_limit": 1000, "max_parallel_requests": 2, "metadata": {"owner": "ops"}, "user_id": "u1"})
admin("key_update_null", "/key/update", {"key": "sk-nope", "max_budget": None, "rpm_limit": 10})
admin("key_huge", "/key/generate", b'{"rpm_limit": 18446744073709551615, "max_budget": 1e308}')
admin("user_new", "/user/new", {"user_id": "u1", "user_email": "a@b.c", "user_role": "internal_user", "auto_create_key": False})
admin("customer_block", "/customer/block", {"user_ids": ["c1", "c2"]})
admin("team_delete", "/team/delete", {"team_ids": ["t1"]})
admin("typo", "/key/generate", {"max_budjet": 1})
admin("key_list", "/key/list", b"page=2&size=10&team_id=t1")
admin("spend_logs", "/spend/logs", b"start_date=2025-01-01&end_date=2025-02-01&api_key=sk-x")
admin("user_list", "/user/list", b"page=0&page_size=99999999999999999999")

# fleet_messages
put("fleet_messages", "key_change", b"ab" * 32)
put("fleet_messages", "cooldown", b"3|deployment-1|5000")
put("fleet_messages", "own_cooldown", b"7|d|1")
put("fleet_messages", "long_cooldown", b"12|a|b|99999999999")
