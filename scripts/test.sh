#!/usr/bin/env bash
# Runs every test sluice has: formatting, lints, Rust unit and end-to-end tests, and the
# official-SDK tests in Python against the real binary. CI runs exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."

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
}
trap step_times EXIT

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy (warnings are errors)"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "test services (PostgreSQL, Redis on loopback; stopped on exit)"
# shellcheck source=scripts/services.sh
source scripts/services.sh
services_start
# services_start's own EXIT trap replaced ours: run both.
trap 'services_stop; step_times' EXIT

step "cargo test (unit + end-to-end)"
cargo test --workspace --all-targets --locked

# The SDK tests drive the binary `cargo test` just built for the end-to-end tests (the same
# dev profile and workspace features; a separate `cargo build --bin sluice` would rebuild the
# dependencies with the binary's own features, for nothing).

step "Python SDK tests (official openai and anthropic clients; Claude Code from npm, cached outside the repo)"
venv=.venv
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r tests/sdk/requirements.txt
# The console's browser test drives Debian's chromium through chromium-driver (it skips, saying
# why, only when they cannot be installed).
if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
  sudo=(); [ "$(id -u)" -eq 0 ] || sudo=(sudo)
  { "${sudo[@]}" apt-get update -qq && DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq chromium chromium-driver >/dev/null; } \
    || echo "chromium: could not be installed; the console's browser test will skip"
fi
SLUICE_BIN="${CARGO_TARGET_DIR:-$PWD/target}/debug/sluice" "$venv/bin/python" -m pytest tests/sdk -q -rs -p no:cacheprovider

step "CPU instructions per proxied request (callgrind; printed, never fails the run)"
# The release build is the one that ships (fat LTO; 8m19s of a 26-minute run here, about what
# thin LTO over 16 codegen units took too, and thin LTO's binary made a 31.4 MB image against
# the 30 MB target), so the counts are comparable with docs/benchmarks.md's.
optimised="${CARGO_TARGET_DIR:-$PWD/target}/release/sluice"
cargo build --release --locked --bin sluice
if command -v valgrind >/dev/null; then
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
