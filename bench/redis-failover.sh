#!/usr/bin/env bash
# Redis Sentinel failover under load, measured end to end: two sluice instances share a
# primary that three sentinels watch (down-after-milliseconds DOWN_AFTER_MS, a replica beside
# it); a steady load of chat requests runs through both; the primary is SIGKILLed mid-load.
# Printed: how many requests failed (any answer but 200, or none), the failover window (from
# the kill until both instances' readiness says Redis is connected again, i.e. admissions are
# counted in Redis again; until then each instance admits on its own counters), the slowest
# answer in the window, and the key's request count in Redis against the requests answered.
# Not part of CI; the figures go into docs/deploy.md ("Redis Sentinel and Cluster").
#
#   bash bench/redis-failover.sh
#   SLUICE=target/release/sluice CONCURRENCY=16 bash bench/redis-failover.sh
# Knobs: SLUICE (binary; default target/release/sluice, else target/debug/sluice),
# CONCURRENCY (client threads), BEFORE (s of load before the kill), AFTER (s of load after
# both instances are back), DOWN_AFTER_MS (the sentinels' down-after-milliseconds),
# PORT_BASE (first of the loopback ports used, default: any free ports), OUT (folder).
set -euo pipefail
cd "$(dirname "$0")/.."

SLUICE=${SLUICE:-}
if [ -z "$SLUICE" ]; then
  SLUICE=target/release/sluice
  [ -x "$SLUICE" ] || SLUICE=target/debug/sluice
fi
[ -x "$SLUICE" ] || cargo build --locked --bin sluice >&2
CONCURRENCY=${CONCURRENCY:-8}
BEFORE=${BEFORE:-3}
AFTER=${AFTER:-3}
DOWN_AFTER_MS=${DOWN_AFTER_MS:-1000}
OUT=${OUT:-bench-results/redis-failover}
mkdir -p "$OUT"

# shellcheck source=scripts/services.sh
source scripts/services.sh
SERVICES_DIR=$(mktemp -d "${TMPDIR:-/tmp}/sluice-failover.XXXXXX")
[ -n "${PORT_BASE:-}" ] && SERVICES_PORT_BASE=$PORT_BASE
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  services_stop
}
trap cleanup EXIT
wait_file() { for _ in $(seq 1 600); do [ -s "$1" ] && return 0; sleep 0.1; done; echo "timed out waiting for $1" >&2; exit 1; }

SENTINEL_DOWN_AFTER_MS=$DOWN_AFTER_MS services_redis_sentinel >&2
work=$SERVICES_DIR
sentinels=$(tr ',' '\n' <<<"$SLUICE_TEST_REDIS_SENTINELS" | sed 's/^\(.*\):\([0-9]*\)$/["\1", \2]/' | paste -sd, -)

"$SLUICE" mock --port 0 --ready-file "$work/mock.addr" >"$work/mock.log" 2>&1 &
pids+=($!)
wait_file "$work/mock.addr"
mock=$(cat "$work/mock.addr")
master=sk-failover-master-$RANDOM$RANDOM
cat >"$work/sluice.yaml" <<YAML
model_list:
  - model_name: bench
    litellm_params: {model: openai/bench, api_base: "http://$mock/v1", api_key: sk-mock, input_cost_per_token: 0.000001}
router_settings:
  service_name: $SLUICE_TEST_REDIS_SENTINEL_SERVICE
  sentinel_nodes: [$sentinels]
general_settings:
  master_key: $master
YAML
urls=()
for i in 1 2; do
  SLUICE_LOG=warn "$SLUICE" serve --config "$work/sluice.yaml" --port 0 \
    --ready-file "$work/sluice-$i.addr" --data-dir "$work/data-$i" >"$work/sluice-$i.log" 2>&1 &
  pids+=($!)
  wait_file "$work/sluice-$i.addr"
  urls+=("http://$(cat "$work/sluice-$i.addr")")
done
# One key on both instances: each has its own SQLite store, so the key is put in each with the
# same value (`key`), which is what makes their Redis counters the same.
key=sk-failover-$RANDOM$RANDOM
for u in "${urls[@]}"; do
  curl -fsS "$u/key/generate" -H "authorization: Bearer $master" \
    -H 'content-type: application/json' -d "{\"key\": \"$key\", \"rpm_limit\": 100000000}" >/dev/null
done
for u in "${urls[@]}"; do
  for _ in $(seq 1 100); do
    curl -s "$u/health/readiness" | grep -q '"redis":"connected"' && break
    sleep 0.1
  done
done

python3 - "$key" "$CONCURRENCY" "$BEFORE" "$AFTER" "$SLUICE_TEST_REDIS_SENTINEL_CTL" \
  "$SLUICE_TEST_REDIS_SENTINELS" "$SLUICE_TEST_REDIS_SENTINEL_SERVICE" "${urls[@]}" \
  <<'PY' | tee "$OUT/summary.txt"
import http.client, json, subprocess, sys, threading, time, urllib.parse

key, conc, before, after, ctl, sentinels, service = sys.argv[1:8]
urls = sys.argv[8:]
conc, before, after = int(conc), float(before), float(after)
body = json.dumps({"model": "bench", "messages": [{"role": "user", "content": "hi"}]})
stop = threading.Event()
results = []  # (start, seconds taken, status, instance)
lock = threading.Lock()

def worker(n):
    conns = {}
    i = n
    while not stop.is_set():
        u = urls[i % len(urls)]
        i += 1
        p = urllib.parse.urlparse(u)
        t0 = time.monotonic()
        try:
            c = conns.get(u) or http.client.HTTPConnection(p.hostname, p.port, timeout=10)
            conns[u] = c
            c.request("POST", "/v1/chat/completions", body,
                      {"authorization": "Bearer " + key, "content-type": "application/json"})
            r = c.getresponse()
            r.read()
            status = r.status
        except Exception:
            conns.pop(u, None)
            status = 0
        with lock:
            results.append((t0, time.monotonic() - t0, status, u))

def redis_states():
    out = []
    for u in urls:
        p = urllib.parse.urlparse(u)
        try:
            c = http.client.HTTPConnection(p.hostname, p.port, timeout=2)
            c.request("GET", "/health/readiness")
            out.append(json.loads(c.getresponse().read()).get("redis"))
        except Exception:
            out.append("?")
    return out

threads = [threading.Thread(target=worker, args=(n,)) for n in range(conc)]
for t in threads:
    t.start()
time.sleep(before)
killed = time.monotonic()
old = subprocess.run([ctl, "kill-primary"], capture_output=True, text=True, check=True).stdout.strip()
# The failover window: until both instances say Redis is connected again, having been seen
# away (readiness polled every 20 ms).
seen_down = False
back = None
while time.monotonic() - killed < 60:
    s = redis_states()
    if any(x != "connected" for x in s):
        seen_down = True
    elif seen_down:
        back = time.monotonic()
        break
    time.sleep(0.02)
time.sleep(after)
stop.set()
for t in threads:
    t.join()
host, port = sentinels.split(",")[0].rsplit(":", 1)
new = subprocess.run(["redis-cli", "-h", host, "-p", port, "SENTINEL", "get-master-addr-by-name",
                      service], capture_output=True, text=True).stdout.split()
results.sort()
failed = [r for r in results if r[2] != 200]
answered = sum(1 for r in results if r[2] == 200)
window = (back - killed) if back else None
in_window = [r for r in results if r[0] >= killed and (back is None or r[0] < back)]
slowest = max((r[1] for r in in_window), default=0)
before_n = sum(1 for r in results if r[0] < killed)
# The key's requests counted in Redis (the fleet's minute windows), on the new primary.
counted = 0
if len(new) == 2:
    keys = subprocess.run(["redis-cli", "-h", new[0], "-p", new[1], "--scan", "--pattern",
                           "sluice:{sluice-counters}:k:*:r:*"], capture_output=True, text=True).stdout.split()
    for k in keys:
        v = subprocess.run(["redis-cli", "-h", new[0], "-p", new[1], "GET", k],
                           capture_output=True, text=True).stdout.strip()
        counted += int(v or 0)
print(f"redis-failover {time.strftime('%Y-%m-%dT%H:%MZ', time.gmtime())}: 2 instances, {conc} client threads")
print(f"primary on port {old} SIGKILLed after {before_n} requests; sentinels now name {':'.join(new) or '?'}")
print(f"failover window (kill -> both instances counting in Redis again): "
      f"{window:.2f} s" if window else "failover window: not over in 60 s")
print(f"requests: {len(results)} sent, {answered} answered 200, {len(failed)} failed "
      f"({', '.join(sorted(set(str(r[2]) for r in failed))) or 'none'})")
print(f"requests sent in the window: {len(in_window)}, slowest answer {slowest * 1000:.0f} ms "
      f"(admitted on each instance's own counters)")
print(f"requests counted in Redis after the failover: {counted} "
      f"(answered {answered}; those in the window were counted on the instances alone)")
sys.exit(1 if failed or window is None else 0)
PY
