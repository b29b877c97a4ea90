#!/usr/bin/env bash
# A/B of two sluice builds in one run: one mock, the old and the new gateway started side by
# side with the same config, measured level by level in the same `sluice bench` run, so both
# see the same moment of the machine. For the before/after figures a request-path change
# needs in its commit message.
#
#   BEFORE=/path/to/old/sluice AFTER=target/release/sluice bash bench/ab.sh
#   REQUESTS=10000 CONCURRENCY=1,8,64 WORKLOADS=chat,chat-stream,embeddings bash bench/ab.sh
#   BEFORE=$B AFTER=$B BEFORE_ENV=SLUICE_HTTP1=hyper bash bench/ab.sh   # one build, two settings
#   (BEFORE_ENV / AFTER_ENV: VAR=value words set for that side's gateway only)
set -euo pipefail
cd "$(dirname "$0")/.."

BEFORE=${BEFORE:?set BEFORE to the old sluice binary}
AFTER=${AFTER:-target/release/sluice}
# The mock and the load generator (`sluice bench`, `sluice mock`): any build with both features
# (the container image's build has no `bench`); default the new build.
LOADGEN=${LOADGEN:-$AFTER}
REQUESTS=${REQUESTS:-5000}
CONCURRENCY=${CONCURRENCY:-1,8,64}
WORKLOADS=${WORKLOADS:-chat,chat-stream,embeddings}
WORKERS=${WORKERS:-1}
OUT=${OUT:-bench-results/ab}
[ -x "$AFTER" ] || cargo build --release --locked --bin sluice >&2

work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
wait_file() { for _ in $(seq 1 300); do [ -s "$1" ] && return 0; sleep 0.1; done; echo "timed out waiting for $1" >&2; exit 1; }

"$LOADGEN" mock --port 0 --ready-file "$work/mock.addr" --workers "$WORKERS" >"$work/mock.log" 2>&1 &
pids+=($!)
wait_file "$work/mock.addr"
mock=$(cat "$work/mock.addr")
cat >"$work/config.yaml" <<YAML
model_list:
  - model_name: bench
    litellm_params: {model: openai/bench, api_base: "http://$mock/v1", api_key: sk-mock}
  - model_name: bench-embed
    litellm_params: {model: openai/bench-embed, api_base: "http://$mock/v1", api_key: sk-mock}
YAML

for side in before after; do
  bin=$BEFORE vars=${BEFORE_ENV:-}
  [ "$side" = after ] && bin=$AFTER vars=${AFTER_ENV:-}
  # shellcheck disable=SC2086 # VAR=value words, split on purpose
  env SLUICE_LOG=warn $vars "$bin" serve --config "$work/config.yaml" --port 0 --workers "$WORKERS" \
    --ready-file "$work/$side.addr" --data-dir "$work/$side-data" >"$work/$side.log" 2>&1 &
  pids+=($!)
  echo "$!" >"$work/$side.pid"
  wait_file "$work/$side.addr"
done

"$LOADGEN" bench --no-sluice --mock-url "http://$mock" \
  --target before="http://$(cat "$work/before.addr")" --target after="http://$(cat "$work/after.addr")" \
  --target-pid before="$(cat "$work/before.pid")" --target-pid after="$(cat "$work/after.pid")" \
  --workloads "$WORKLOADS" --sizes 1k --concurrency "$CONCURRENCY" \
  --requests "$REQUESTS" --warmup 500 --hold-streams 0 --out "$OUT"
