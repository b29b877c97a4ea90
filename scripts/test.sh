#!/usr/bin/env bash
# Runs every test sluice has: formatting, lints, Rust unit and end-to-end tests, and the
# official-SDK tests in Python against the real binary. CI runs exactly this.
#
# `--fast`: the everyday tier. Formatting, lints, and every Rust unit and end-to-end test (on
# SQLite, PostgreSQL and Redis), on the debug build; not the release build, the SDK and browser
# tests, callgrind, cargo deny or the deployment tests. A few minutes on a warm build.
set -euo pipefail
cd "$(dirname "$0")/.."

fast=false
case "${1:-}" in
  --fast) fast=true ;;
  "") ;;
  *) echo "usage: bash scripts/test.sh [--fast]" >&2; exit 2 ;;
esac

# Each step's wall time, printed again at the end (also when a step fails) so that the tail of
# a CI log says where the time went.
step_names=() step_starts=()
step() {
  step_names+=("$*") step_starts+=("$SECONDS")
  printf '\n==> %s\n' "$*"
}
step_times() {
  local i end
  printf '\n==> time per step (total %d s)\n' "$SECONDS"
  for i in "${!step_names[@]}"; do
    end="${step_starts[$((i + 1))]:-$SECONDS}"
    printf '%6d s  %s\n' "$((end - step_starts[i]))" "${step_names[i]}"
  done
  skips_report
}

# A test that needs PostgreSQL or Redis skips when its service is missing: it says so on
# stderr and appends that line to $SLUICE_TEST_SKIPS (sluice_store::testing::skip). Under
# CI=true a missing service fails the test instead, so CI's count is 0. Printed last, also
# when a step failed; a test that skips for two services counts once.
skips_file="$(mktemp)"
export SLUICE_TEST_SKIPS="$skips_file"
skips_report() {
  local n
  n="$(sed -n 's/^skipped: \([^ ]*\): .*/\1/p' "$skips_file" | sort -u | wc -l)"
  printf '\n==> %d service-backed tests skipped\n' "$n"
  sort -u "$skips_file"
  rm -f "$skips_file"
}
trap step_times EXIT

# A clean clone builds once: incremental compilation's caches (1.7 GB for the test build)
# would only cost disk and time there. Everyday runs keep them.
if [ "${CI:-}" = true ]; then export CARGO_INCREMENTAL=0; fi

step "cargo fmt --check"
cargo fmt --all -- --check

# Two jobs that no test step depends on until later start now, beside the lints and the test
# build: the release build (its last crate and its fat-LTO link run on one core, leaving the
# other idle) and the SDK tests' virtualenv (mostly downloads). Both are waited for before the
# first test runs, so that no test shares the CPU with a compiler.
bg_logs="$(mktemp -d)"
optimised_dir="${CARGO_TARGET_DIR:-$PWD/target}/optimised"
# The shipped binary is static: glibc's C runtime linked in (`crt-static`), so the image holds
# the binary alone, no shared libraries beside it. `--target` keeps the flag off build scripts
# and proc macros, which must stay dynamic. It is the image's build: no load generator and no
# mock provider (the callgrind run and the deployment tests take their mock from the test
# build, which has both).
release_features=(--no-default-features)
host="$(rustc -vV | sed -n 's/^host: //p')"
optimised="$optimised_dir/$host/release/sluice"
release_pid="" venv_pid=""
if ! $fast; then
  step "started in the background: the release build, the SDK tests' virtualenv"
  CARGO_TARGET_DIR="$optimised_dir" RUSTFLAGS="-C target-feature=+crt-static" \
    cargo build --release --locked --target "$host" --bin sluice "${release_features[@]}" >"$bg_logs/release.log" 2>&1 &
  release_pid=$!
  venv=.venv
  (
    set -e
    [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r tests/sdk/requirements.txt
    # The console's browser test drives Debian's chromium through chromium-driver (it skips,
    # saying why, only when they cannot be installed).
    if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
      sudo=(); [ "$(id -u)" -eq 0 ] || sudo=(sudo)
      { "${sudo[@]}" apt-get update -qq && DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq chromium chromium-driver >/dev/null; } \
        || echo "chromium: could not be installed; the console's browser test will skip"
    fi
  ) >"$bg_logs/venv.log" 2>&1 &
  venv_pid=$!
fi
bg_stop() { [ -z "$release_pid" ] || kill "$release_pid" "$venv_pid" 2>/dev/null || true; }
trap 'bg_stop; step_times' EXIT
# Waits for a background job; its log is printed in full when it failed, else its last lines.
bg_wait() {
  local name=$1 pid=$2 log=$3
  if wait "$pid"; then
    tail -n 3 "$log"
  else
    cat "$log"
    echo "$name failed"
    exit 1
  fi
}

# One compilation lints and builds: clippy-driver, through cargo's public
# RUSTC_WORKSPACE_WRAPPER (scripts/lint-rustc.sh), compiles sluice's own crates (never the
# dependencies) with clippy's lints, as `cargo clippy` runs it, but to real code, so the
# dependency tree is built once instead of checked by clippy and built again for the tests
# (measured on a clean clone: clippy 817 s + test build 674 s beside the release build).
# Warnings are errors in this build only (the wrapper adds rustc's `-D warnings`); no
# CLIPPY_ARGS, whose encoding is cargo-clippy's private business (unset, so that an exported
# one cannot change the lints). The same settings stay exported for the test run below,
# which therefore rebuilds nothing.
step "cargo test: build, with clippy's lints (warnings are errors; unit + end-to-end)"
SLUICE_CLIPPY_DRIVER="$(rustup which clippy-driver 2>/dev/null || command -v clippy-driver)"
export SLUICE_CLIPPY_DRIVER
export RUSTC_WORKSPACE_WRAPPER="$PWD/scripts/lint-rustc.sh"
unset CLIPPY_ARGS
cargo test --workspace --all-targets --locked --no-run

if ! $fast; then
  step "waiting for the background jobs (release build, virtualenv)"
  bg_wait "release build" "$release_pid" "$bg_logs/release.log"
  bg_wait "virtualenv" "$venv_pid" "$bg_logs/venv.log"
fi

step "test services (PostgreSQL, Redis, Redis Stack on loopback; stopped on exit)"
# shellcheck source=scripts/services.sh
source scripts/services.sh
services_start
# services_start's own EXIT trap replaced ours: run both.
trap 'bg_stop; services_stop; step_times' EXIT

step "cargo test: run (unit + end-to-end)"
cargo test --workspace --all-targets --locked
if $fast; then
  step "fast tier done (the full run adds the SDK and browser tests, callgrind, cargo deny and the deployment tests)"
  exit 0
fi
# Nothing after this builds sluice; a tool cargo might install (cargo-deny) must not be
# compiled by clippy.
unset RUSTC_WORKSPACE_WRAPPER

# The SDK tests drive the binary `cargo test` just built for the end-to-end tests (the same
# dev profile and workspace features; a separate `cargo build --bin sluice` would rebuild the
# dependencies with the binary's own features, for nothing).

step "Python SDK tests (official openai, anthropic, google-genai and boto3 clients; Claude Code, Gemini CLI and Codex CLI from npm, cached outside the repo)"
# The million-row import test runs the release build (SLUICE_RELEASE_BIN): the shipped binary's
# figure, in a fraction of the debug build's minutes.
SLUICE_BIN="${CARGO_TARGET_DIR:-$PWD/target}/debug/sluice" SLUICE_RELEASE_BIN="$optimised" "$venv/bin/python" -m pytest tests/sdk -q -rs -p no:cacheprovider

step "CPU instructions per proxied request (callgrind; printed, never fails the run)"
# The release build is the one that ships (fat LTO: 10m03s alone in a 26-minute run here; thin
# LTO over 16 codegen units took 8m19s and its binary made a 31.4 MB image against the 30 MB
# target), so the counts are comparable with docs/benchmarks.md's.
if command -v valgrind >/dev/null; then
  # The release build has no `sluice bench`: the test build's drives the load (its own speed
  # is not counted).
  export LOADGEN="${CARGO_TARGET_DIR:-$PWD/target}/debug/sluice"
  SLUICE="$optimised" bash bench/instructions.sh || echo "instructions: measurement failed (not a test failure)"
  VIRTUAL_KEY=1 SLUICE="$optimised" bash bench/instructions.sh || echo "instructions (virtual key): measurement failed (not a test failure)"
  FLOOR=1 SLUICE="$optimised" bash bench/instructions.sh || echo "instructions (nginx, the floor): measurement failed (not a test failure)"
else
  echo "instructions: valgrind not installed; skipped"
fi

step "cargo deny: advisories, licences, duplicate versions, sources (deny.toml)"
bash scripts/deny.sh

# Fuzzing is not a step here: its instrumented nightly build of the dependency tree took 21 min
# from empty (docs/reliability.md), more than CI's budget allows. `cargo test` above replays
# every fuzz target's corpus on stable; `bash scripts/fuzz.sh` runs the fuzzers themselves.

step "deployment: container image, Compose fleet, Helm chart, systemd unit (tests/deploy)"
# The image is built from the release binary above; helm and the Docker engine are set up by
# the script.
bash tests/deploy/test_deploy.sh "$optimised"
