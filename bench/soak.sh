#!/usr/bin/env bash
# Soak: a fixed moderate request rate through sluice for a long run (default 10 minutes), with
# sluice's RSS sampled every few seconds, to show whether memory grows. Not part of CI.
# Prints the RSS timeline ("seconds  MB") and a summary; the bench reports land in $OUT.
#
#   bash bench/soak.sh                       # 600 s at 1,000 req/s, 16 connections
#   DURATION=120 RATE=2000 bash bench/soak.sh
# Knobs: SLUICE (binary, default target/release/sluice), DURATION (s), RATE (req/s),
# CONCURRENCY, INTERVAL (s between samples), WORKLOADS (split the duration between them),
# MODELS (model groups in the config, default 50), OUT (report folder).
set -euo pipefail
cd "$(dirname "$0")/.."

SLUICE=${SLUICE:-target/release/sluice}
DURATION=${DURATION:-600}
RATE=${RATE:-1000}
CONCURRENCY=${CONCURRENCY:-16}
INTERVAL=${INTERVAL:-5}
WORKLOADS=${WORKLOADS:-chat,chat-stream,embeddings}
MODELS=${MODELS:-50}
OUT=${OUT:-bench-results/soak}
[ -x "$SLUICE" ] || cargo build --release --locked --bin sluice >&2

work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
wait_file() { for _ in $(seq 1 600); do [ -s "$1" ] && return 0; sleep 0.1; done; echo "timed out waiting for $1" >&2; exit 1; }
rss_mb() { awk '/^VmRSS:/ {printf "%.1f", $2 / 1024}' "/proc/$1/status"; }

"$SLUICE" mock --port 0 --ready-file "$work/mock.addr" >"$work/mock.log" 2>&1 &
pids+=($!)
wait_file "$work/mock.addr"
mock=$(cat "$work/mock.addr")
{
  echo "model_list:"
  echo "  - model_name: bench"
  echo "    litellm_params: {model: openai/bench, api_base: \"http://$mock/v1\", api_key: sk-mock}"
  echo "  - model_name: bench-embed"
  echo "    litellm_params: {model: openai/bench-embed, api_base: \"http://$mock/v1\", api_key: sk-mock}"
  for i in $(seq 3 "$MODELS"); do
    echo "  - model_name: model-$i"
    echo "    litellm_params: {model: openai/model-$i, api_base: \"http://$mock/v1\", api_key: sk-mock}"
  done
} >"$work/sluice.yaml"
SLUICE_LOG=warn "$SLUICE" serve --config "$work/sluice.yaml" --port 0 --ready-file "$work/sluice.addr" \
  >"$work/sluice.log" 2>&1 &
gw=$!
pids+=($gw)
wait_file "$work/sluice.addr"
sleep 1

levels=$(tr ',' '\n' <<<"$WORKLOADS" | wc -l)
per_level=$((DURATION / levels))
echo "soak: $WORKLOADS at $RATE req/s, $CONCURRENCY connections, ${per_level}s each; RSS every ${INTERVAL}s" >&2
"$SLUICE" bench --no-sluice --no-direct --mock-url "http://$mock" \
  --target gateway="http://$(cat "$work/sluice.addr")" --target-pid gateway="$gw" \
  --workloads "$WORKLOADS" --sizes 1k --concurrency "$CONCURRENCY" --rate "$RATE" \
  --duration-secs "$per_level" --warmup 0 --hold-streams 0 --quiet --out "$OUT" \
  >"$work/bench.txt" 2>&1 &
load=$!
pids+=($load)

echo "seconds  rss_mb"
start=$(date +%s)
samples=()
while kill -0 "$load" 2>/dev/null; do
  t=$(($(date +%s) - start))
  r=$(rss_mb "$gw")
  samples+=("$t $r")
  printf '%7d  %s\n' "$t" "$r"
  sleep "$INTERVAL"
done
wait "$load" || { cat "$work/bench.txt" >&2; echo "soak: the load run failed" >&2; exit 1; }
sleep "$INTERVAL"
rest=$(rss_mb "$gw")
printf '%7s  %s\n' "rest" "$rest"
cat "$work/bench.txt"

# Growth: the highest sample of the first and of the last fifth of the run.
n=${#samples[@]}
fifth=$(( n / 5 > 0 ? n / 5 : 1 ))
first=$(printf '%s\n' "${samples[@]:0:fifth}" | awk '{ if ($2 > m) m = $2 } END {print m}')
last=$(printf '%s\n' "${samples[@]:n-fifth}" | awk '{ if ($2 > m) m = $2 } END {print m}')
echo "soak summary: peak RSS ${first} MB in the first fifth, ${last} MB in the last fifth, ${rest} MB at rest after the load"
