#!/usr/bin/env bash
# p99 with a stalling deployment, with and without hedging, in one run.
#
# Two mock deployments serve one group: "steady" answers in LATENCY_MS; "stalling" answers in
# LATENCY_MS but holds STALL_RATE of its answers back for STALL_MS (a provider's bad replica).
# Three sluice instances serve the group: without hedging, hedging after a fixed delay, and
# hedging after the group's observed p95 time to first byte. `sluice bench` measures all three
# (and the steady mock directly) with the same load, and prints the table.
#
#   bash bench/hedging.sh                       # builds target/release/sluice if needed
#   REQUESTS=3000 CONCURRENCY=1,16 bash bench/hedging.sh
set -euo pipefail
cd "$(dirname "$0")/.."

REQUESTS=${REQUESTS:-2000}
CONCURRENCY=${CONCURRENCY:-1,8}
LATENCY_MS=${LATENCY_MS:-5}
STALL_MS=${STALL_MS:-300}
STALL_RATE=${STALL_RATE:-0.05}
HEDGE_MS=${HEDGE_MS:-25}
SLUICE=${SLUICE:-target/release/sluice}
OUT=${OUT:-bench-results/hedging}
[ -x "$SLUICE" ] || cargo build --release --locked --bin sluice >&2

work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
wait_file() { for _ in $(seq 1 600); do [ -s "$1" ] && return 0; sleep 0.1; done; echo "timed out waiting for $1" >&2; exit 1; }

"$SLUICE" mock --port 0 --ready-file "$work/steady.addr" --latency-ms "$LATENCY_MS" >"$work/steady.log" 2>&1 &
pids+=($!)
"$SLUICE" mock --port 0 --ready-file "$work/stalling.addr" --latency-ms "$LATENCY_MS" \
  --stall-ms "$STALL_MS" --failure-rate "$STALL_RATE" >"$work/stalling.log" 2>&1 &
pids+=($!)
wait_file "$work/steady.addr"
wait_file "$work/stalling.addr"
steady=$(cat "$work/steady.addr")
stalling=$(cat "$work/stalling.addr")

start_gateway() { # $1 = name, $2 = router_settings lines
  cat >"$work/$1.yaml" <<YAML
model_list:
  - model_name: bench
    litellm_params: {model: openai/bench, api_base: "http://$steady/v1", api_key: sk-mock}
    model_info: {id: steady}
  - model_name: bench
    litellm_params: {model: openai/bench, api_base: "http://$stalling/v1", api_key: sk-mock}
    model_info: {id: stalling}
  - model_name: bench-embed
    litellm_params: {model: openai/bench-embed, api_base: "http://$steady/v1", api_key: sk-mock}
router_settings:
$2
YAML
  SLUICE_LOG=warn "$SLUICE" serve --config "$work/$1.yaml" --port 0 --ready-file "$work/$1.addr" \
    >"$work/$1.log" 2>&1 &
  pids+=($!)
  wait_file "$work/$1.addr"
  echo "http://$(cat "$work/$1.addr")"
}
plain=$(start_gateway plain "  routing_strategy: simple-shuffle")
fixed=$(start_gateway fixed "  hedge_after_ms: {bench: $HEDGE_MS}")
p95=$(start_gateway p95 "  hedge_after_ms: {bench: \"p95\"}")

echo "steady ${LATENCY_MS} ms; stalling holds ${STALL_RATE} of answers for ${STALL_MS} ms" >&2
"$SLUICE" bench --no-sluice --mock-url "http://$steady" \
  --target no-hedging="$plain" --target "hedge-${HEDGE_MS}ms"="$fixed" --target hedge-p95="$p95" \
  --workloads chat --sizes 1k --concurrency "$CONCURRENCY" --requests "$REQUESTS" \
  --warmup 200 --hold-streams 0 --out "$OUT"
