#!/usr/bin/env bash
# Benchmarks LiteLLM's proxy side by side with sluice, both in front of the same
# `sluice mock` upstream. `sluice bench` starts sluice itself; LiteLLM is the extra target.
# Usage: bench/compare-litellm.sh [extra `sluice bench` flags...]   Environment knobs:
#   SLUICE=path          sluice binary (default target/release/sluice, built if missing)
#   WORKERS=N            LiteLLM worker processes (default: nproc, as many as sluice's threads)
#   MOCK_WORKERS=N       threads of the mock upstream (default: the mock's own default)
#   LITELLM_VERSION=X    pip pin (default below); the venv lives in bench/.venv-litellm
#   LITELLM_EXTRA_ARGS   extra flags for `litellm`, e.g. "--run_gunicorn"
#   STARTUP_TIMEOUT=S    seconds to wait for LiteLLM to come up (default 180)
set -euo pipefail
cd "$(dirname "$0")/.."

# Newest release whose dependency pins resolve from the package index here.
LITELLM_VERSION=${LITELLM_VERSION:-1.103.7}
WORKERS=${WORKERS:-$(nproc)}
STARTUP_TIMEOUT=${STARTUP_TIMEOUT:-180}
VENV=bench/.venv-litellm
MOCK_TEXT="The mock provider answers"

log() { printf '==> %s\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# 1. sluice itself.
SLUICE=${SLUICE:-target/release/sluice}
[ -x "$SLUICE" ] || { log "building sluice (cargo build --release)"; cargo build --release; }

# 2. A private virtualenv with LiteLLM's proxy, reused when the pinned version is in it.
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
have=$("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("litellm"))' 2>/dev/null || true)
if [ "$have" != "$LITELLM_VERSION" ]; then
  log "installing litellm[proxy]==$LITELLM_VERSION into $VENV (takes a minute)"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "litellm[proxy]==$LITELLM_VERSION"
fi

# 7. Cleanup of everything started below. LiteLLM runs in its own process group (setsid),
#    so one signal to the group also reaches its uvicorn workers and multiprocessing helpers.
TMP=$(mktemp -d)
MOCK_PID="" LITELLM_PID=""
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [ -n "$LITELLM_PID" ]; then
    kill -TERM -- "-$LITELLM_PID" 2>/dev/null || kill -TERM "$LITELLM_PID" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 -- "-$LITELLM_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL -- "-$LITELLM_PID" 2>/dev/null || true
  fi
  [ -n "$MOCK_PID" ] && kill "$MOCK_PID" 2>/dev/null && wait "$MOCK_PID" 2>/dev/null
  rm -rf "$TMP"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Only loopback traffic: never let an inherited HTTP(S)_PROXY route the mock calls.
export NO_PROXY=127.0.0.1,localhost no_proxy=127.0.0.1,localhost

# 3. The shared mock upstream.
"$SLUICE" mock --port 0 ${MOCK_WORKERS:+--workers "$MOCK_WORKERS"} \
  --ready-file "$TMP/mock.addr" >"$TMP/mock.log" 2>&1 &
MOCK_PID=$!
for _ in $(seq 1 100); do [ -s "$TMP/mock.addr" ] && break; sleep 0.1; done
[ -s "$TMP/mock.addr" ] || { cat "$TMP/mock.log" >&2; die "sluice mock did not start"; }
MOCK_URL="http://$(cat "$TMP/mock.addr")"
log "mock upstream at $MOCK_URL"

# 4. LiteLLM config: two models on the mock, and everything a fair benchmark turns off
#    (their production checklist and benchmark pages): no DB, no master key, no callbacks,
#    no retries, no verbose logging, no spend/error logs.
cat >"$TMP/litellm.yaml" <<EOF
model_list:
  - model_name: bench
    litellm_params: {model: openai/bench, api_base: "$MOCK_URL/v1", api_key: sk-mock}
  - model_name: bench-embed
    litellm_params: {model: openai/bench-embed, api_base: "$MOCK_URL/v1", api_key: sk-mock}
litellm_settings:
  set_verbose: false
  json_logs: true
  callbacks: []
  success_callback: []
  failure_callback: []
  num_retries: 0
  request_timeout: 60
general_settings:
  disable_spend_logs: true
  disable_error_logs: true
EOF

# 5. Start LiteLLM the way their benchmark page does (uvicorn, --num_workers = cores).
#    LITELLM_LOCAL_MODEL_COST_MAP keeps it from fetching the price map from the internet;
#    LITELLM_MODE=PRODUCTION skips .env loading; the health-check timeout is raised so
#    uvicorn does not kill a worker that is merely slow to answer on a saturated 2-core box.
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
LITELLM_URL="http://127.0.0.1:$PORT"
CMD=("$VENV/bin/litellm" --config "$TMP/litellm.yaml" --host 127.0.0.1 --port "$PORT"
  --num_workers "$WORKERS" --telemetry False --timeout_worker_healthcheck 60)
# shellcheck disable=SC2206 # word splitting of the extra flags is intended
CMD+=(${LITELLM_EXTRA_ARGS:-})
log "starting: ${CMD[*]}"
env -u DATABASE_URL -u LITELLM_MASTER_KEY -u REDIS_HOST -u REDIS_URL \
  LITELLM_LOG=ERROR LITELLM_MODE=PRODUCTION LITELLM_LOCAL_MODEL_COST_MAP=True \
  setsid "${CMD[@]}" >"$TMP/litellm.log" 2>&1 &
LITELLM_PID=$!

# Ready = /health/readiness answers; then give every worker time to load the config
# (each prints the banner line below; a missing line after the timeout only warns).
deadline=$((SECONDS + STARTUP_TIMEOUT))
until curl -sf --noproxy '*' -m 2 "$LITELLM_URL/health/readiness" >/dev/null; do
  kill -0 "$LITELLM_PID" 2>/dev/null || { tail -40 "$TMP/litellm.log" >&2; die "LiteLLM exited during startup"; }
  [ "$SECONDS" -lt "$deadline" ] || { tail -40 "$TMP/litellm.log" >&2; die "LiteLLM not ready after ${STARTUP_TIMEOUT}s"; }
  sleep 0.5
done
until [ "$(grep -c 'Proxy initialized with Config' "$TMP/litellm.log")" -ge "$WORKERS" ]; do
  [ "$SECONDS" -lt "$deadline" ] || { log "warning: not every LiteLLM worker reported ready"; break; }
  sleep 0.5
done
log "LiteLLM ready at $LITELLM_URL (pid $LITELLM_PID, $WORKERS workers)"

# Smoke tests: each call must reach the mock through LiteLLM, and come back whole.
post() { # path, body -> response body on stdout
  curl -sS --noproxy '*' -m 30 "$LITELLM_URL$1" -H 'content-type: application/json' -d "$2"
}
check() { # name, path, body, expected substrings...
  local name=$1 path=$2 body=$3 out want
  shift 3
  out=$(post "$path" "$body" 2>&1) || true
  for want in "$@"; do
    if [[ "$out" != *"$want"* ]]; then
      printf 'LiteLLM response for %s (wanted %s):\n%s\n' "$name" "$want" "${out:0:2000}" >&2
      tail -20 "$TMP/litellm.log" >&2
      die "LiteLLM does not serve $name from the mock ($LITELLM_URL$path)"
    fi
  done
  log "ok: $name"
}
msg='"messages":[{"role":"user","content":"hi"}]'
check "chat completion" /v1/chat/completions "{\"model\":\"bench\",$msg}" "$MOCK_TEXT"
check "streaming chat" /v1/chat/completions "{\"model\":\"bench\",\"stream\":true,$msg}" \
  '"content":"The mock"' 'data: [DONE]'
check "responses" /v1/responses '{"model":"bench","input":"hi"}' "$MOCK_TEXT"
check "streaming responses" /v1/responses '{"model":"bench","input":"hi","stream":true}' \
  '"delta":"The mock"' 'response.completed'
check "embeddings" /v1/embeddings '{"model":"bench-embed","input":"hi"}' '"embedding"'

rss=$(ps -o rss= -s "$LITELLM_PID" | awk '{s += $1} END {printf "%d", s / 1024}')
log "LiteLLM resident memory after start: ${rss} MiB over $(ps -o pid= -s "$LITELLM_PID" | wc -l) processes"

# 6. The benchmark itself (sluice bench starts sluice on the same mock).
"$SLUICE" bench --mock-url "$MOCK_URL" --target litellm="$LITELLM_URL" \
  --target-pid litellm="$LITELLM_PID" "$@"
