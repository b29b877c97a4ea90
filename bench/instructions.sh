#!/usr/bin/env bash
# Deterministic cost figure: CPU instructions sluice executes per proxied request, counted by
# valgrind's callgrind (instructions, not seconds, so other load on the machine does not move
# it). Startup and warm-up are excluded: collection is switched on only around the measured
# requests. Prints one line, e.g. "instructions per request (chat, 1 KB, non-stream): 123456".
#
#   bash bench/instructions.sh            # builds target/release/sluice if needed
#   REQUESTS=2000 bash bench/instructions.sh
#   VIRTUAL_KEY=1 bash bench/instructions.sh   # requests carry a virtual key with rpm, tpm,
#                                              # parallel and budget limits (auth + limits +
#                                              # cost + spend log on the path)
#   NO_LITELLM_HEADERS=1 bash bench/instructions.sh  # `general_settings.litellm_headers: false`
#                                                    # (without LiteLLM's x-litellm-* headers)
#   WORKLOAD=chat-stream bash bench/instructions.sh   # any `sluice bench --workloads` name
#                                                     # (chat-pii, chat-stream-pii: the PII
#                                                     # guardrail on)
#   KEEP=1 bash bench/instructions.sh                 # keep callgrind.out for callgrind_annotate
#   H2C=1 bash bench/instructions.sh                  # sluice speaks h2c to the mock
#                                                     # (http2_prior_knowledge: true)
#   TRANSLATED=1 bash bench/instructions.sh           # `bench` is an anthropic/ deployment on
#                                                     # the mock: OpenAI requests are translated
#                                                     # to Messages and the answers back
#   FLOOR=1 bash bench/instructions.sh                # the same count for the floor: nginx as a
#                                                     # keep-alive reverse proxy to the mock (one
#                                                     # process, no master; the config `sluice
#                                                     # bench` writes, crates/bench/src/floor.rs)
#   CALLBACKS=1 bash bench/instructions.sh            # every logging callback and OTLP export on,
#                                                     # pointed at a loopback receiver (the count
#                                                     # includes the callbacks' own thread)
set -euo pipefail
cd "$(dirname "$0")/.."

REQUESTS=${REQUESTS:-1000}
WORKLOAD=${WORKLOAD:-chat}
WARMUP=${WARMUP:-200}
SLUICE=${SLUICE:-target/release/sluice}
# The load generator (`sluice bench`); only the gateway's instructions are counted, so any
# build with the `bench` and `mock` features will do (the container image's release build has
# neither).
LOADGEN=${LOADGEN:-$SLUICE}
command -v valgrind >/dev/null || { echo "instructions: valgrind is not installed" >&2; exit 1; }
[ -x "$SLUICE" ] || cargo build --release --locked --bin sluice >&2

work=$(mktemp -d)
[ -n "${KEEP:-}" ] && echo "work dir: $work" >&2
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; [ -n "${KEEP:-}" ] || rm -rf "$work"; }
trap cleanup EXIT

wait_file() { for _ in $(seq 1 600); do [ -s "$1" ] && return 0; sleep 0.1; done; echo "timed out waiting for $1" >&2; exit 1; }

# The mock from the load generator's build: the gateway's may have none (the image's build).
"$LOADGEN" mock --port 0 --ready-file "$work/mock.addr" --workers 1 >"$work/mock.log" 2>&1 &
pids+=($!)
wait_file "$work/mock.addr"
mock=$(cat "$work/mock.addr")
cat >"$work/sluice.yaml" <<YAML
model_list:
  - model_name: bench
    litellm_params: {model: openai/bench, api_base: "http://$mock/v1", api_key: sk-mock}
  - model_name: bench-embed
    litellm_params: {model: openai/bench-embed, api_base: "http://$mock/v1", api_key: sk-mock}
YAML
mode="1 worker"
if [ -n "${TRANSLATED:-}" ]; then
  sed -i "s|model: openai/bench, api_base: \"http://$mock/v1\"|model: anthropic/bench, api_base: \"http://$mock\"|" "$work/sluice.yaml"
  mode="$mode, translated to Anthropic's Messages"
fi
if [ -n "${H2C:-}" ]; then
  sed -i 's|api_key: sk-mock}|api_key: sk-mock, http2_prior_knowledge: true}|' "$work/sluice.yaml"
  mode="$mode, h2c upstream"
fi
if [ -n "${CALLBACKS:-}" ]; then
  # A loopback receiver that answers 200 to every delivery (its own process: not counted).
  python3 - "$work/sink.addr" >"$work/sink.log" 2>&1 <<'PY' &
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def _any(self):
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self.send_response(200); self.send_header("content-length", "2"); self.end_headers()
        self.wfile.write(b"{}")
    do_POST = do_PUT = _any
    def log_message(self, *a): pass
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
open(sys.argv[1], "w").write("127.0.0.1:%d" % s.server_address[1])
s.serve_forever()
PY
  pids+=($!)
  wait_file "$work/sink.addr"
  sink=$(cat "$work/sink.addr")
  cat >>"$work/sluice.yaml" <<YAML
litellm_settings:
  callbacks: [otel, webhook, langfuse, langsmith, s3]
callback_settings:
  otel: {endpoint: 'http://$sink/v1/traces'}
  webhook: {url: 'http://$sink/hook'}
  langfuse: {host: 'http://$sink', public_key: pk-bench, secret_key: sk-bench}
  langsmith: {endpoint: 'http://$sink', api_key: ls-bench}
  s3: {s3_bucket_name: bench, s3_endpoint_url: 'http://$sink', s3_aws_access_key_id: AKIDBENCH, s3_aws_secret_access_key: bench-secret}
YAML
  mode="$mode, five callbacks on"
fi
case "$WORKLOAD" in
  *-cached)
    # The cache on for requests that ask (as `sluice bench` runs it): after the warm-up's first
    # request, every measured one is a hit.
    if grep -q '^litellm_settings:' "$work/sluice.yaml"; then
      sed -i 's|^litellm_settings:|litellm_settings:\n  cache: true\n  cache_params: {mode: default_off}|' "$work/sluice.yaml"
    else
      printf 'litellm_settings:\n  cache: true\n  cache_params: {mode: default_off}\n' >>"$work/sluice.yaml"
    fi
    mode="$mode, cache hits"
    ;;
  *-pii)
    # The PII guardrail the request names (as `sluice bench` runs it: crates/bench/src/spawn.rs).
    cat >>"$work/sluice.yaml" <<'YAML'
guardrails:
  - guardrail_name: pii
    litellm_params:
      guardrail: litellm_content_filter
      mode: [pre_call, post_call]
      output_parse_pii: true
      pii_entities_config: {EMAIL_ADDRESS: MASK, PHONE_NUMBER: MASK, CREDIT_CARD: MASK, IBAN_CODE: MASK, US_SSN: MASK, IP_ADDRESS: MASK}
YAML
    mode="$mode, PII guardrail masking three values"
    ;;
esac
general=""
if [ -n "${NO_LITELLM_HEADERS:-}" ]; then
  general="$general  litellm_headers: false\n"
  mode="$mode, no x-litellm-* headers"
fi
if [ -n "${VIRTUAL_KEY:-}" ]; then
  general="$general  master_key: sk-bench-master\n"
fi
if [ -n "$general" ]; then
  printf "general_settings:\n$general" >>"$work/sluice.yaml"
fi
if [ -n "${VIRTUAL_KEY:-}" ]; then
  mode="$mode, virtual key with limits and budget"
fi

if [ -n "${FLOOR:-}" ]; then
  nginx=${NGINX:-$(command -v nginx || echo /usr/sbin/nginx)}
  [ -x "$nginx" ] || { echo "instructions: nginx is not installed (apt-get install nginx-light)" >&2; exit 1; }
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  mkdir -p "$work/nginx-tmp"
  # The floor's config as `sluice bench` writes it, in one process (no master) so that one pid
  # holds every instruction, as sluice's one worker does.
  { [ "$(id -u)" -eq 0 ] && echo "user root;"
    cat <<NGINX
daemon off;
master_process off;
worker_processes 1;
pid $work/nginx.pid;
error_log $work/nginx-error.log warn;
events { worker_connections 8192; }
http {
  access_log off;
  client_body_temp_path $work/nginx-tmp/body;
  proxy_temp_path $work/nginx-tmp/proxy;
  fastcgi_temp_path $work/nginx-tmp/fastcgi;
  uwsgi_temp_path $work/nginx-tmp/uwsgi;
  scgi_temp_path $work/nginx-tmp/scgi;
  client_max_body_size 64m;
  client_body_buffer_size 1m;
  keepalive_requests 10000000;
  keepalive_timeout 75s;
  upstream mock { server $mock; keepalive 512; keepalive_requests 10000000; }
  server {
    listen 127.0.0.1:$port;
    location / {
      proxy_pass http://mock;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
      proxy_request_buffering off;
    }
  }
}
NGINX
  } >"$work/nginx.conf"
  valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$work/callgrind.out" \
    "$nginx" -p "$work" -e "$work/nginx-error.log" -c "$work/nginx.conf" >"$work/nginx.log" 2>&1 &
  gw=$!
  pids+=($gw)
  for _ in $(seq 1 600); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
  echo "127.0.0.1:$port" >"$work/sluice.addr"
  mode="nginx $("$nginx" -v 2>&1 | sed 's|.*/||'), 1 process"
  unset VIRTUAL_KEY
else
# One worker thread: the count then does not depend on how work spreads over threads.
SLUICE_LOG=warn valgrind --tool=callgrind --instr-atstart=no \
  --callgrind-out-file="$work/callgrind.out" \
  "$SLUICE" serve --config "$work/sluice.yaml" --port 0 --ready-file "$work/sluice.addr" --workers 1 \
  --data-dir "$work/data" \
  >"$work/sluice.log" 2>&1 &
gw=$!
pids+=($gw)
fi
wait_file "$work/sluice.addr"
target="http://$(cat "$work/sluice.addr")"
if [ -n "${VIRTUAL_KEY:-}" ]; then
  SLUICE_BENCH_API_KEY=$(curl -sf "$target/key/generate" -H 'Authorization: Bearer sk-bench-master' \
    -d '{"rpm_limit": 100000000, "tpm_limit": 100000000000, "max_parallel_requests": 10000, "max_budget": 1000000}' |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["key"])')
  export SLUICE_BENCH_API_KEY
fi

drive() { # $1 = requests
  "$LOADGEN" bench --no-sluice --mock-url "http://$mock" --target gw="$target" --workloads "$WORKLOAD" \
    --sizes 1k --concurrency 1 --requests "$1" --warmup 0 --hold-streams 0 --quiet \
    --out "$work/bench" >>"$work/drive.log"
}
drive "$WARMUP"
callgrind_control -i on "$gw" >/dev/null 2>&1
drive "$REQUESTS"
# With callbacks on, let the sinks deliver the last batches (flush interval) inside the count.
[ -n "${CALLBACKS:-}" ] && sleep "${CALLBACK_SETTLE:-6}"
callgrind_control -i off "$gw" >/dev/null 2>&1
callgrind_control -d "$gw" >/dev/null 2>&1
total=$(grep -h '^totals:' "$work"/callgrind.out* | awk '{s += $2} END {print s}')
[ -n "$total" ] && [ "$total" -gt 0 ] || { echo "instructions: no callgrind totals" >&2; exit 1; }
echo "instructions per request ($WORKLOAD, 1 KB, non-stream unless a stream workload, $mode): $((total / REQUESTS))"
# The part that answers the request (the pipeline, inclusive), apart from what runs beside it:
# the spend writer's SQLite batches, whose size follows the clock (under callgrind a run may
# write the same records in more, smaller batches), so the total above moves by several
# percent from run to run with the virtual key; this figure does not.
if [ -z "${FLOOR:-}" ] && command -v callgrind_annotate >/dev/null; then
  path=$(for f in "$work"/callgrind.out*; do callgrind_annotate --inclusive=yes "$f" 2>/dev/null; done |
    grep -F 'sluice::server::pipeline::handle::{{closure}} [' | awk '{gsub(",", "", $1); s += $1} END {print s + 0}')
  [ "${path:-0}" -gt 0 ] && echo "  of which answering the request (server::pipeline::handle, inclusive): $((path / REQUESTS))"
fi
