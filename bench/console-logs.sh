#!/usr/bin/env bash
# The console's logs page at a million spend-log rows, on SQLite and PostgreSQL (issue 41).
#
# 1. `cargo test -p sluice-store bench_log_pages -- --ignored` fills each store with ROWS rows
#    (batched writes: 10,000 rows a transaction, as `sluice import` writes them) and times the
#    page's store reads: the first page and one 90 % down the log (keyset), with and without
#    filters, the names of a page's keys and teams, and the same deep page by OFFSET.
# 2. sluice serves each store; the script signs in to the console and reads /ui/logs pages
#    (first, deep, filtered), each seven times after one to warm up, and reports the median and
#    slowest server time of each (`x-sluice-response-duration-ms`: the whole page, names and
#    HTML included, as the server spent it).
#
#   bash bench/console-logs.sh                 # 1,000,000 rows, debug build
#   ROWS=200000 PROFILE=release bash bench/console-logs.sh
#
# PostgreSQL comes from SLUICE_TEST_POSTGRES_URL (skipped when unset); its database is dropped
# at the end. Figures are in docs/console.md ("The logs at a million rows").
set -euo pipefail
cd "$(dirname "$0")/.."

ROWS=${ROWS:-1000000}
PROFILE=${PROFILE:-debug}
work=$(mktemp -d)
pids=()
pg_db=""
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [ -n "$pg_db" ] && [ -n "${SLUICE_TEST_POSTGRES_URL:-}" ]; then
    psql "$SLUICE_TEST_POSTGRES_URL" -qc "DROP DATABASE IF EXISTS $pg_db" >/dev/null 2>&1 || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

release=()
[ "$PROFILE" = release ] && release=(--release)
cargo build -q "${release[@]}" --locked --bin sluice
SLUICE=target/$PROFILE/sluice

echo "## Store reads ($ROWS rows, $PROFILE build)"
SLUICE_BENCH_ROWS=$ROWS SLUICE_BENCH_KEEP=$work \
  cargo test -q "${release[@]}" -p sluice-store bench_log_pages -- --ignored --nocapture \
  --test-threads=1 | tee "$work/store.txt" | grep -v '^\.*$' | grep -v '^running\|^test result'
pg_url=$(sed -n 's/^PostgreSQL database kept: //p' "$work/store.txt")
pg_db=${pg_url##*/}

wait_file() { for _ in $(seq 1 300); do [ -s "$1" ] && return 0; sleep 0.1; done; echo "timed out waiting for $1" >&2; exit 1; }

serve() { # name, data directory, extra general_settings line
  mkdir -p "$2"
  printf 'model_list:\n  - model_name: gpt-4o\n    litellm_params: {model: mock/gpt-4o}\ngeneral_settings:\n  master_key: sk-bench-master\n%s\n' "$3" >"$work/$1.yaml"
  SLUICE_LOG=warn "$SLUICE" serve --config "$work/$1.yaml" --port 0 --data-dir "$2" \
    --ready-file "$work/$1.addr" >"$work/$1.log" 2>&1 &
  pids+=($!)
  wait_file "$work/$1.addr"
}

pages() { # name, address
  python3 - "$1" "http://$(cat "$work/$2.addr")" "$ROWS" <<'EOF'
import http.cookiejar, re, statistics, sys, urllib.parse, urllib.request
name, root, rows = sys.argv[1], sys.argv[2], int(sys.argv[3])
jar = http.cookiejar.CookieJar()
web = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
form = web.open(root + "/ui/login").read().decode()
csrf = re.search(r'name="csrf" value="([^"]+)"', form).group(1)
web.open(root + "/ui/login", urllib.parse.urlencode(
    {"username": "admin", "password": "sk-bench-master", "csrf": csrf}).encode())
# The row 90 % down the log, as crates/store/src/bench_log_pages.rs wrote it.
i = rows - 1 - rows * 9 // 10
deep = f"{1767225600000 + (i - i // 7) * 800}.{i:08x}-bench"
cases = [
    ("first page, no filter", ""),
    ("deep page (90 %), no filter", f"before={deep}"),
    ("first page, team", "team=team-03"),
    ("deep page (90 %), team", f"team=team-03&before={deep}"),
    ("first page, failures", "status=failure"),
    ("deep page (90 %), failures", f"status=failure&before={deep}"),
    ("first page, key alias", "key=app-07"),
    ("first page, one day", "start=2026-01-05&end=2026-01-05"),
    ("no match: team and another model group", "team=team-03&model=embed"),
]
print(f"| {name} page | median ms | slowest ms |")
print("| --- | ---: | ---: |")
for label, q in cases:
    times = []
    for n in range(8):
        r = web.open(f"{root}/ui/logs?{q}")
        body = r.read()
        assert r.status == 200 and b'id="logs"' in body or b"No requests match" in body, body[:500]
        if n:
            times.append(float(r.headers["x-sluice-response-duration-ms"]))
    print(f"| {label} | {statistics.median(times):.1f} | {max(times):.1f} |")
EOF
}

echo
echo "## The page (/ui/logs, server time)"
serve sqlite "$work" ""
pages SQLite sqlite
if [ -n "$pg_url" ]; then
  serve postgres "$work/pg" "  database_url: $pg_url"
  pages PostgreSQL postgres
fi
