#!/usr/bin/env bash
# Soak with faults (issue 20): a fixed request rate through sluice for a long run (default one
# hour) while faults are injected on a schedule — upstream connection resets, stalls past the
# deployment timeout, garbage bodies and 10 MB answers (the mock's faults, per request), and
# Redis killed with SIGKILL and started again. sluice's RSS and open file descriptors are
# sampled every few seconds. Not part of CI; the figures go into docs/reliability.md.
#
#   bash bench/soak-chaos.sh                          # 3600 s at 200 req/s
#   DURATION=180 SLUICE=target/debug/sluice bash bench/soak-chaos.sh
# Knobs: SLUICE (binary, default target/release/sluice), DURATION (s), RATE (req/s),
# CONCURRENCY, INTERVAL (s between samples), FAULT_EVERY (s between rounds of upstream
# faults), REDIS_EVERY (s between Redis kills), REDIS_DOWN (s Redis stays away), WORKLOADS,
# OUT (folder for samples.tsv, faults.tsv, bench.txt and summary.txt).
set -euo pipefail
cd "$(dirname "$0")/.."

SLUICE=${SLUICE:-target/release/sluice}
DURATION=${DURATION:-3600}
RATE=${RATE:-200}
CONCURRENCY=${CONCURRENCY:-8}
INTERVAL=${INTERVAL:-5}
FAULT_EVERY=${FAULT_EVERY:-10}
REDIS_EVERY=${REDIS_EVERY:-60}
REDIS_DOWN=${REDIS_DOWN:-3}
WORKLOADS=${WORKLOADS:-chat,chat-stream}
OUT=${OUT:-bench-results/soak-chaos}
[ -x "$SLUICE" ] || cargo build --release --locked --bin sluice >&2
command -v redis-server >/dev/null || { echo "soak-chaos: redis-server is needed (scripts/services.sh installs it)" >&2; exit 1; }
mkdir -p "$OUT"

work=$(mktemp -d)
pids=()
redis_pid=
cleanup() {
  for p in "${pids[@]}" $redis_pid; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
wait_file() { for _ in $(seq 1 600); do [ -s "$1" ] && return 0; sleep 0.1; done; echo "timed out waiting for $1" >&2; exit 1; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
rss_mb() { awk '/^VmRSS:/ {printf "%.1f", $2 / 1024}' "/proc/$1/status"; }
fds() { ls "/proc/$1/fd" 2>/dev/null | wc -l; }
redis_start() {
  redis-server --bind 127.0.0.1 --port "$redis_port" --save '' --appendonly no >/dev/null 2>&1 &
  redis_pid=$!
  for _ in $(seq 1 100); do (exec 3<>"/dev/tcp/127.0.0.1/$redis_port") 2>/dev/null && return 0; sleep 0.05; done
}

# Waits (up to 10 s) until readiness no longer says Redis is "$1"; prints when.
redis_state_change() {
  for _ in $(seq 1 100); do
    s=$(curl -s --max-time 1 "$gw_url/health/readiness" | python3 -c 'import json,sys; print(json.load(sys.stdin)["redis"].split(":")[0])' 2>/dev/null || echo "?")
    [ "$s" != "$1" ] && [ "$s" != "?" ] && break
    sleep 0.1
  done
  date +%s.%N
}

"$SLUICE" mock --port 0 --ready-file "$work/mock.addr" >"$work/mock.log" 2>&1 &
pids+=($!)
wait_file "$work/mock.addr"
mock=$(cat "$work/mock.addr")
redis_port=$(free_port)
redis_start
master=sk-soak-master-$RANDOM$RANDOM
cat >"$work/sluice.yaml" <<YAML
model_list:
  - model_name: bench
    litellm_params: {model: openai/bench, api_base: "http://$mock/v1", api_key: sk-mock, timeout: 2}
  - model_name: faulty
    litellm_params: {model: openai/faulty, api_base: "http://$mock/v1", api_key: sk-mock, timeout: 2}
  - model_name: bench-embed
    litellm_params: {model: openai/bench-embed, api_base: "http://$mock/v1", api_key: sk-mock}
router_settings:
  redis_url: redis://127.0.0.1:$redis_port
  num_retries: 0
  allowed_fails: 1000000
general_settings:
  master_key: $master
YAML
SLUICE_LOG=warn "$SLUICE" serve --config "$work/sluice.yaml" --port 0 --ready-file "$work/sluice.addr" \
  --data-dir "$work/data" >"$work/sluice.log" 2>&1 &
gw=$!
pids+=($gw)
wait_file "$work/sluice.addr"
gw_url="http://$(cat "$work/sluice.addr")"
key=$(curl -fsS "$gw_url/key/generate" -H "authorization: Bearer $master" \
  -H 'content-type: application/json' -d '{"rpm_limit": 10000000}' |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["key"])')

levels=$(tr ',' '\n' <<<"$WORKLOADS" | wc -l)
per_level=$((DURATION / levels))
echo "soak-chaos: $WORKLOADS at $RATE req/s for ${DURATION}s; upstream faults every ${FAULT_EVERY}s, Redis killed every ${REDIS_EVERY}s" >&2
"$SLUICE" bench --no-sluice --no-direct --no-floor --mock-url "http://$mock" \
  --target gateway="$gw_url" --target-pid gateway="$gw" --api-key "$key" \
  --workloads "$WORKLOADS" --sizes 1k --concurrency "$CONCURRENCY" --rate "$RATE" \
  --duration-secs "$per_level" --warmup 0 --hold-streams 0 --quiet --out "$OUT" \
  >"$OUT/bench.txt" 2>&1 &
load=$!
pids+=($load)

# One faulty request, to its own model group (so the load's deployment is not cooled down by
# the faults and the figures show whether the others are still served): "seconds fault status".
fault() {
  local name=$1 body=$2 code
  code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 30 "$gw_url/v1/chat/completions" \
    -H "authorization: Bearer $key" -H 'content-type: application/json' \
    -d "{\"model\":\"faulty\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"mock_fault\":$body}" || true)
  printf '%d\t%s\t%s\n' "$(($(date +%s) - start))" "$name" "$code"
}

start=$(date +%s)
printf 'seconds\trss_mb\tfds\tredis\n' >"$OUT/samples.tsv"
printf 'seconds\tfault\tstatus\n' >"$OUT/faults.tsv"
printf 'seconds\tdown_noticed_s\treconnected_s\n' >"$OUT/redis.tsv"
fault_pids=()
next_fault=$FAULT_EVERY
next_redis=$REDIS_EVERY
redis_kills=0
while kill -0 "$load" 2>/dev/null; do
  t=$(($(date +%s) - start))
  redis=$(curl -s --max-time 2 "$gw_url/health/readiness" | python3 -c 'import json,sys; print(json.load(sys.stdin)["redis"].split(":")[0])' 2>/dev/null || echo "?")
  printf '%d\t%s\t%s\t%s\n' "$t" "$(rss_mb "$gw")" "$(fds "$gw")" "$redis" | tee -a "$OUT/samples.tsv"
  if [ "$t" -ge "$next_fault" ]; then
    next_fault=$((t + FAULT_EVERY))
    {
      fault reset '{"reset":true}'
      fault stall '{"stall_ms":5000}'
      fault garbage '{"garbage":true}'
      fault huge-10MB '{"huge_bytes":10485760}'
    } >>"$OUT/faults.tsv" &
    fault_pids+=($!)
  fi
  if [ "$t" -ge "$next_redis" ]; then
    next_redis=$((t + REDIS_EVERY))
    kill -9 "$redis_pid" 2>/dev/null || true
    wait "$redis_pid" 2>/dev/null || true
    redis_kills=$((redis_kills + 1))
    killed=$(date +%s.%N)
    noticed=$(redis_state_change connected)
    sleep "$REDIS_DOWN"
    redis_start
    restarted=$(date +%s.%N)
    back=$(redis_state_change unreachable)
    printf '%d\t%.2f\t%.2f\n' "$t" "$(echo "$noticed - $killed" | bc)" "$(echo "$back - $restarted" | bc)" >>"$OUT/redis.tsv"
  fi
  sleep "$INTERVAL"
done
wait "$load" || { cat "$OUT/bench.txt" >&2; echo "soak-chaos: the load run failed" >&2; exit 1; }
[ ${#fault_pids[@]} -eq 0 ] || wait "${fault_pids[@]}" || true
sleep "$INTERVAL"
rest_rss=$(rss_mb "$gw")
rest_fds=$(fds "$gw")
ready=$(curl -s --max-time 2 "$gw_url/health/readiness")

samples=$(tail -n +2 "$OUT/samples.tsv")
n=$(wc -l <<<"$samples")
fifth=$((n / 5 > 0 ? n / 5 : 1))
first=$(head -n "$fifth" <<<"$samples" | awk '{ if ($2 > m) m = $2 } END {print m}')
last=$(tail -n "$fifth" <<<"$samples" | awk '{ if ($2 > m) m = $2 } END {print m}')
fd_max=$(awk '{ if ($3 > m) m = $3 } END {print m}' <<<"$samples")
faults=$(tail -n +2 "$OUT/faults.tsv" | awk '{c[$2" → "$3]++} END {for (k in c) printf "%s ×%d; ", k, c[k]}')
alive=$(kill -0 "$gw" 2>/dev/null && echo yes || echo NO)
{
  echo "soak-chaos $(date -u +%Y-%m-%dT%H:%MZ) build $(git rev-parse --short HEAD) binary $SLUICE"
  echo "load: $WORKLOADS at $RATE req/s, ${DURATION}s, $CONCURRENCY connections"
  grep -E 'gateway' "$OUT/bench.txt" | head -8 || true
  echo "RSS: peak ${first} MB in the first fifth, ${last} MB in the last fifth, ${rest_rss} MB at rest"
  echo "open fds: max ${fd_max} during the run, ${rest_fds} at rest"
  echo "faults: ${faults}Redis killed ${redis_kills} times (${REDIS_DOWN}s away each)"
  echo "Redis: kill → readiness says unreachable, restart → connected (s): $(tail -n +2 "$OUT/redis.tsv" | awk '{printf "%s/%s ", $2, $3}')"
  echo "spend records: $(python3 -c "import sqlite3,sys; c=sqlite3.connect('file:$work/data/sluice.db?mode=ro', uri=True); print('%d stored, %d distinct request ids' % c.execute('select count(*), count(distinct request_id) from spend_logs').fetchone())" 2>/dev/null || echo '?')"
  echo "readiness at the end: $ready"
  echo "sluice alive at the end: $alive"
} | tee "$OUT/summary.txt"
