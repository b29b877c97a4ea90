#!/usr/bin/env bash
# How a fleet scales (issue 44): 1, 2 and 4 sluice instances behind nginx (round robin over
# keep-alive connections, the floor's proxy settings) on one PostgreSQL and one Redis, every
# request carrying a virtual key with rpm, tpm and budget limits (authentication, fleet
# admission, spend in PostgreSQL). Each instance count runs in two admission modes: `script`
# (`fleet_lease: 0`, one Redis script call to admit and one to settle every request) and
# `lease` (the default `fleet_lease`, 2 %: requests admitted on slices leased in the
# background, no Redis round trip on the request path). Everything runs on loopback inside a private
# network namespace (`unshare --net`), so its ports clash with nothing and nothing reaches out.
#
# Prints, per instance count: requests per second, p50 and p99 as the client saw them, and the
# CPU seconds per 1,000 requests of the instances together, of PostgreSQL and of Redis (from
# /proc, over the measured run and its warm-up). On a machine with fewer cores than instances
# the figure that matters is CPU per request staying flat as instances are added (the
# instances then share cores, so req/s cannot grow); with the cores, the scaling factor from 1
# to 4 instances.
#
#   bash bench/fleet.sh                                      # 1, 2, 4 instances, c=64
#   INSTANCES="1 2" REQUESTS=20000 CONCURRENCY=64 bash bench/fleet.sh
#   MODES=lease LIMITS='{"rpm_limit": 100000000, "max_parallel_requests": 10000}' bash bench/fleet.sh
# (a key with max_parallel_requests is admitted by the script in either mode)
#   SLUICE=/path/to/sluice LOADGEN=/path/to/sluice bash bench/fleet.sh
# SLUICE is the measured gateway (any build); LOADGEN serves `sluice mock` and `sluice bench`
# (a build with the default `mock` and `bench` features; default: SLUICE). Needs root (the
# namespace), Debian's postgresql, redis-server and nginx (nginx-light).
set -euo pipefail
cd "$(dirname "$0")/.."

INSTANCES=${INSTANCES:-1 2 4}
REQUESTS=${REQUESTS:-20000}
WARMUP=${WARMUP:-2000}
CONCURRENCY=${CONCURRENCY:-64}
WORKERS=${WORKERS:-1}
MODES=${MODES:-script lease}
LIMITS=${LIMITS:-'{"rpm_limit": 100000000, "tpm_limit": 100000000000, "max_budget": 1000000}'}
SLUICE=$(realpath "${SLUICE:-target/release/sluice}")
LOADGEN=$(realpath "${LOADGEN:-$SLUICE}")
OUT=$(realpath -m "${OUT:-bench-results/fleet/$(date -u +%Y%m%d-%H%M%S)}")

# Into a private network namespace first: a fresh loopback that only this run uses.
if [ -z "${FLEET_IN_NAMESPACE:-}" ]; then
  [ "$(id -u)" = 0 ] || { echo "bench/fleet.sh: needs root for its network namespace" >&2; exit 2; }
  export FLEET_IN_NAMESPACE=1 SLUICE LOADGEN OUT INSTANCES REQUESTS WARMUP CONCURRENCY WORKERS MODES LIMITS
  exec unshare --net bash "$0" "$@"
fi
ip link set lo up

pg_bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
for need in "$pg_bin/initdb" redis-server nginx; do
  command -v "$need" >/dev/null || { echo "bench/fleet.sh: $need is missing (apt-get install postgresql redis-server nginx-light)" >&2; exit 2; }
done

work=$(mktemp -d)
chmod 755 "$work"
mkdir -p "$OUT"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  [ -f "$work/nginx.pid" ] && kill "$(cat "$work/nginx.pid")" 2>/dev/null || true
  [ -d "$work/pg" ] && runuser -u postgres -- "$pg_bin/pg_ctl" -D "$work/pg" -m immediate stop >/dev/null 2>&1 || true
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
wait_file() { for _ in $(seq 1 300); do [ -s "$1" ] && return 0; sleep 0.1; done; echo "timed out waiting for $1" >&2; exit 1; }

# CPU seconds (user + system) a set of processes has used so far.
cpu_of() {
  local ticks=0 p f
  for p in "$@"; do
    f=$(cut -d' ' -f14,15 "/proc/$p/stat" 2>/dev/null) || continue
    ticks=$((ticks + ${f% *} + ${f#* }))
  done
  echo "$ticks"
}
hz=$(getconf CLK_TCK)
# This run's PostgreSQL: its postmaster and the backends it forked (not any other server).
pg_pids() {
  local pm
  pm=$(head -1 "$work/pg/postmaster.pid")
  echo "$pm" $(pgrep -P "$pm" || true)
}

# One PostgreSQL and one Redis for every instance count.
mkdir -p "$work/pg" "$work/pgsock"
chown postgres "$work/pg" "$work/pgsock"
runuser -u postgres -- "$pg_bin/initdb" -D "$work/pg" -A trust -U postgres >/dev/null
runuser -u postgres -- "$pg_bin/pg_ctl" -D "$work/pg" -l "$work/pgsock/pg.log" -w \
  -o "-p 5432 -k $work/pgsock -c listen_addresses=127.0.0.1 -c max_connections=400" start >/dev/null
redis-server --port 6379 --bind 127.0.0.1 --save "" --appendonly no >"$work/redis.log" 2>&1 &
pids+=($!)
redis_pid=$!
"$LOADGEN" mock --port 0 --ready-file "$work/mock.addr" --workers 1 >"$work/mock.log" 2>&1 &
pids+=($!)
wait_file "$work/mock.addr"
mock=$(cat "$work/mock.addr")
for _ in $(seq 1 50); do redis-cli -p 6379 ping >/dev/null 2>&1 && break; sleep 0.1; done

printf '# sluice fleet scaling (%s; %s cores; %s requests at c=%s after %s of warm-up)\n\n' \
  "$(date -u +%FT%TZ)" "$(nproc)" "$REQUESTS" "$CONCURRENCY" "$WARMUP" | tee "$OUT/fleet.md"
printf 'Key limits: %s\n\n' "$LIMITS" | tee -a "$OUT/fleet.md"
printf '| admission | instances | req/s | p50 µs | p99 µs | errors | CPU s / 1k requests: the instances | PostgreSQL | Redis | nginx |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n' | tee -a "$OUT/fleet.md"

for mode in $MODES; do
case $mode in
  script) lease_line="  fleet_lease: 0" ;;
  lease) lease_line="" ;;
  *) echo "bench/fleet.sh: MODES are script and lease, not $mode" >&2; exit 2 ;;
esac
base_rps=""
for n in $INSTANCES; do
  db="sluice_fleet_${mode}_$n"
  runuser -u postgres -- psql -h 127.0.0.1 -p 5432 -qc "CREATE DATABASE $db" >/dev/null
  redis-cli -p 6379 flushall >/dev/null
  cat >"$work/fleet-$n.yaml" <<EOF
model_list:
  - model_name: bench
    litellm_params: {model: openai/bench, api_base: "http://$mock/v1", api_key: sk-mock}
    model_info: {base_model: gpt-4o-mini}
general_settings:
  master_key: sk-bench-master
  database_url: postgres://postgres@127.0.0.1:5432/$db
router_settings:
  redis_host: 127.0.0.1
  redis_port: 6379
$lease_line
EOF
  inst=() servers=""
  for i in $(seq 1 "$n"); do
    SLUICE_LOG=warn "$SLUICE" serve --config "$work/fleet-$n.yaml" --port 0 --workers "$WORKERS" \
      --ready-file "$work/$mode-i$n-$i.addr" --data-dir "$work/$mode-i$n-$i" >"$work/$mode-i$n-$i.log" 2>&1 &
    inst+=($!)
    pids+=($!)
  done
  for i in $(seq 1 "$n"); do
    wait_file "$work/$mode-i$n-$i.addr"
    servers+="    server $(cat "$work/$mode-i$n-$i.addr");"$'\n'
  done
  mkdir -p "$work/nginx-tmp"
  cat >"$work/nginx.conf" <<EOF
user root;
daemon off;
master_process on;
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
  keepalive_requests 10000000;
  upstream fleet {
$servers    keepalive 512;
    keepalive_requests 10000000;
  }
  server {
    listen 127.0.0.1:8080;
    location / {
      proxy_pass http://fleet;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
      proxy_request_buffering off;
    }
  }
}
EOF
  nginx -c "$work/nginx.conf" -p "$work" >"$work/nginx.log" 2>&1 &
  nginx_bg=$!
  pids+=($!)
  for _ in $(seq 1 50); do curl -sf -o /dev/null http://127.0.0.1:8080/health/liveliness && break; sleep 0.1; done
  made=$(curl -s http://127.0.0.1:8080/key/generate -H 'Authorization: Bearer sk-bench-master' -d "$LIMITS" || true)
  key=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["key"])' "$made" 2>/dev/null) || {
    echo "bench/fleet.sh: no key made ($made)" >&2
    tail -n 5 "$work/nginx-error.log" "$work/$mode-i$n-1.log" >&2 || true
    exit 1
  }
  # Every instance knows the key before the load starts (a new key reaches the others by the
  # store's change feed).
  for i in $(seq 1 "$n"); do
    for _ in $(seq 1 100); do
      code=$(curl -s -o /dev/null -w '%{http_code}' "http://$(cat "$work/$mode-i$n-$i.addr")/v1/models" -H "Authorization: Bearer $key")
      [ "$code" = 200 ] && break
      sleep 0.1
    done
  done
  nginx_master=$(cat "$work/nginx.pid")
  nginx_pids="$nginx_master $(pgrep -P "$nginx_master" | tr '\n' ' ')"
  before_i=$(cpu_of "${inst[@]}") before_pg=$(cpu_of $(pg_pids)) before_r=$(cpu_of "$redis_pid") before_n=$(cpu_of $nginx_pids)
  SLUICE_BENCH_API_KEY="$key" "$LOADGEN" bench --no-sluice --no-direct --no-floor --mock-url "http://$mock" \
    --target "$mode$n=http://127.0.0.1:8080" --workloads chat --sizes 1k --concurrency "$CONCURRENCY" \
    --requests "$REQUESTS" --warmup "$WARMUP" --hold-streams 0 --quiet --out "$OUT/$mode-n$n" >"$work/bench-$mode-$n.log" 2>&1 ||
    { cat "$work/bench-$mode-$n.log"; exit 1; }
  after_i=$(cpu_of "${inst[@]}") after_pg=$(cpu_of $(pg_pids)) after_r=$(cpu_of "$redis_pid") after_n=$(cpu_of $nginx_pids)
  report=$(ls -t "$OUT/$mode-n$n"/*/report.json 2>/dev/null | head -1 || true)
  [ -n "$report" ] || report="$OUT/$mode-n$n/report.json"
  python3 - "$report" "$mode" "$n" "$((REQUESTS + WARMUP))" "$hz" \
    "$((after_i - before_i))" "$((after_pg - before_pg))" "$((after_r - before_r))" "$((after_n - before_n))" "${base_rps:-0}" <<'PY' | tee -a "$OUT/fleet.md"
import json, sys
path, mode, n, reqs, hz, ci, cpg, cr, cn, base = sys.argv[1:]
n, reqs, hz, base = int(n), int(reqs), int(hz), float(base)
row = [r for r in json.load(open(path))["rows"]][0]
per_k = lambda ticks: int(ticks) / hz / (reqs / 1000)
lat = row["latency_us"] or {}
errors = sum(row["errors"].values())
scale = f" ({row['rps'] / base:.2f}×)" if base else ""
print(f"| {mode} | {n} | {row['rps']:,.0f}{scale} | {lat.get('p50', 0):,.0f} | {lat.get('p99', 0):,.0f} | {errors} "
      f"| {per_k(ci):.3f} | {per_k(cpg):.3f} | {per_k(cr):.3f} | {per_k(cn):.3f} |")
PY
  [ -n "$base_rps" ] || base_rps=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["rows"][0]["rps"])' "$report")
  kill "${inst[@]}" "$(cat "$work/nginx.pid")" 2>/dev/null || true
  # The next nginx listens on the same port: wait until this one has let go of it.
  wait "${inst[@]}" "$nginx_bg" 2>/dev/null || true
  rm -f "$work/nginx.pid"
done
done
echo
echo "written: $OUT/fleet.md"
