#!/usr/bin/env bash
# What a virtual key costs on the request path, side by side in one run: the same mock behind
# two sluice processes, one without keys (the core path) and one where every request carries a
# virtual key with rpm, tpm, parallel and budget limits (auth, limits, budget reservation, cost,
# spend log to the embedded SQLite store). Writes a `sluice bench` report whose "added" columns
# show both gateways over direct; the difference is the cost of keys.
#
#   bash bench/keys.sh                       # chat and chat-stream, 1 KB, c = 1 and 8
#   REQUESTS=5000 CONCURRENCY=1,8,64 bash bench/keys.sh
set -euo pipefail
cd "$(dirname "$0")/.."

REQUESTS=${REQUESTS:-3000}
CONCURRENCY=${CONCURRENCY:-1,8}
WORKERS=${WORKERS:-1}
SLUICE=${SLUICE:-target/release/sluice}
OUT=${OUT:-bench-results/keys}
[ -x "$SLUICE" ] || cargo build --release --locked --bin sluice >&2

work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
wait_file() { for _ in $(seq 1 300); do [ -s "$1" ] && return 0; sleep 0.1; done; echo "timed out waiting for $1" >&2; exit 1; }

"$SLUICE" mock --port 0 --ready-file "$work/mock.addr" --workers 1 >"$work/mock.log" 2>&1 &
pids+=($!)
wait_file "$work/mock.addr"
mock=$(cat "$work/mock.addr")
models="model_list:
  - model_name: bench
    litellm_params: {model: openai/bench, api_base: \"http://$mock/v1\", api_key: sk-mock}
    model_info: {base_model: gpt-4o-mini}
"
printf '%s' "$models" >"$work/core.yaml"
printf '%sgeneral_settings:\n  master_key: sk-bench-master\n' "$models" >"$work/keys.yaml"

for name in core keys; do
  SLUICE_LOG=warn "$SLUICE" serve --config "$work/$name.yaml" --port 0 --workers "$WORKERS" \
    --ready-file "$work/$name.addr" --data-dir "$work/$name-data" >"$work/$name.log" 2>&1 &
  pids+=($!)
  echo "$!" >"$work/$name.pid"
  wait_file "$work/$name.addr"
done
core="http://$(cat "$work/core.addr")"
keys="http://$(cat "$work/keys.addr")"
key=$(curl -sf "$keys/key/generate" -H 'Authorization: Bearer sk-bench-master' \
  -d '{"rpm_limit": 100000000, "tpm_limit": 100000000000, "max_parallel_requests": 10000, "max_budget": 1000000}' |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["key"])')

SLUICE_BENCH_API_KEY="$key" "$SLUICE" bench --no-sluice --mock-url "http://$mock" \
  --target core="$core" --target keys="$keys" \
  --target-pid core="$(cat "$work/core.pid")" --target-pid keys="$(cat "$work/keys.pid")" \
  --workloads chat,chat-stream --sizes 1k --concurrency "$CONCURRENCY" \
  --requests "$REQUESTS" --warmup 300 --hold-streams 0 --out "$OUT"
spent=$(curl -sf "$keys/key/info?key=$key" -H 'Authorization: Bearer sk-bench-master' |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["info"]["spend"])')
echo "the key's recorded spend after the run: $spent USD"
