#!/usr/bin/env bash
# Overload: drive sluice at about twice its saturation, with and without the in-flight limit,
# and report p50/p99 of the admitted requests and the shed rate (docs/reliability.md,
# "Hostile clients and overload"). Not CI: figures for the docs, about a minute.
#
#   bash bench/overload.sh                      # target/release/sluice, else target/debug/sluice
#   SLUICE=path/to/sluice LIMIT=32 DURATION=15 bash bench/overload.sh
#
# Saturation is measured first: one worker, closed loop at concurrency 64, chat 1k bodies, mock
# with no latency (the gateway's CPU is the bottleneck). Then a fixed rate of 2x that is offered
# to two gateways side by side: `unlimited` (defaults) and `limited`
# (general_settings.max_in_flight_requests: $LIMIT). Latency counts from each request's
# intended send time, so queueing shows.
set -euo pipefail
cd "$(dirname "$0")/.."

SLUICE=${SLUICE:-}
if [ -z "$SLUICE" ]; then
  if [ -x target/release/sluice ]; then SLUICE=target/release/sluice; else SLUICE=target/debug/sluice; fi
fi
LIMIT=${LIMIT:-32}
DURATION=${DURATION:-15}
FACTOR=${FACTOR:-2}
OUT=${OUT:-bench-results/overload}

work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
wait_file() { for _ in $(seq 1 300); do [ -s "$1" ] && return 0; sleep 0.1; done; echo "timed out waiting for $1" >&2; exit 1; }

"$SLUICE" mock --port 0 --ready-file "$work/mock.addr" --workers 1 >"$work/mock.log" 2>&1 &
pids+=($!)
wait_file "$work/mock.addr"
mock=$(cat "$work/mock.addr")
base="model_list:
  - model_name: bench
    litellm_params: {model: openai/bench, api_base: \"http://$mock/v1\", api_key: sk-mock}
  - model_name: bench-embed
    litellm_params: {model: openai/bench-embed, api_base: \"http://$mock/v1\", api_key: sk-mock}"
printf '%s\n' "$base" >"$work/unlimited.yaml"
printf '%s\ngeneral_settings:\n  max_in_flight_requests: %s\n' "$base" "$LIMIT" >"$work/limited.yaml"

for side in unlimited limited; do
  SLUICE_LOG=error "$SLUICE" serve --config "$work/$side.yaml" --port 0 --workers 1 \
    --ready-file "$work/$side.addr" --data-dir "$work/$side-data" >"$work/$side.log" 2>&1 &
  pids+=($!)
  echo "$!" >"$work/$side.pid"
  wait_file "$work/$side.addr"
done
target() { echo "--target $1=http://$(cat "$work/$1.addr") --target-pid $1=$(cat "$work/$1.pid")"; }

echo "== saturation (closed loop, c=64, ${DURATION}s)"
# shellcheck disable=SC2046
"$SLUICE" bench --no-sluice --no-direct --no-floor --mock-url "http://$mock" $(target unlimited) \
  --workloads chat --sizes 1k --concurrency 64 --duration-secs "$DURATION" --warmup 500 \
  --hold-streams 0 --out "$OUT/saturation" --quiet | tee "$work/sat.txt"
latest() { ls -td "$1"/*/ | head -1; }
sat=$(python3 -c "import json; r=json.load(open('$(latest "$OUT/saturation")report.json')); print(int(max(l['rps'] for l in r['rows'] if l['target']=='unlimited')))")
rate=$((sat * FACTOR))
echo "saturation: ${sat} req/s; offering ${rate} req/s (x${FACTOR}) for ${DURATION}s"

echo "== ${FACTOR}x saturation, fixed rate"
# shellcheck disable=SC2046
"$SLUICE" bench --no-sluice --no-direct --no-floor --mock-url "http://$mock" $(target unlimited) $(target limited) \
  --workloads chat --sizes 1k --concurrency 1024 --rate "$rate" --duration-secs "$DURATION" --warmup 200 \
  --hold-streams 0 --out "$OUT/overload" --quiet
python3 - "$(latest "$OUT/overload")report.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(f'{r["started"]} sluice {r["version"]}')
for l in r["rows"]:
    errors = sum(l["errors"].values())
    total = l["ok"] + errors
    lat = l.get("latency_us") or {}
    print(f'{l["target"]:>9}: admitted {l["ok"]}, p50 {lat.get("p50", 0)/1000:.1f} ms, '
          f'p99 {lat.get("p99", 0)/1000:.1f} ms, shed/failed {errors} ({100*errors/max(total,1):.1f}%) {dict(l["errors"])}')
PY
