#!/usr/bin/env bash
# Runs every test sluice has: formatting, lints, Rust unit and end-to-end tests, and the
# official-SDK tests in Python against the real binary. CI runs exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy (warnings are errors)"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "test services (PostgreSQL, Redis on loopback; stopped on exit)"
# shellcheck source=scripts/services.sh
source scripts/services.sh
services_start

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
# The `ci` profile: release with thin LTO (Cargo.toml). Its counts are not the fat-LTO release
# build's that docs/benchmarks.md gives (the difference is not measured yet): compare CI's
# figures with CI's.
optimised="${CARGO_TARGET_DIR:-$PWD/target}/ci/sluice"
if command -v valgrind >/dev/null; then
  cargo build --profile ci --locked --bin sluice
  SLUICE="$optimised" bash bench/instructions.sh || echo "instructions: measurement failed (not a test failure)"
  VIRTUAL_KEY=1 SLUICE="$optimised" bash bench/instructions.sh || echo "instructions (virtual key): measurement failed (not a test failure)"
  FLOOR=1 SLUICE="$optimised" bash bench/instructions.sh || echo "instructions (nginx, the floor): measurement failed (not a test failure)"
else
  echo "instructions: valgrind not installed; skipped"
fi

step "cargo deny: advisories, licences, duplicate versions, sources (deny.toml)"
bash scripts/deny.sh

step "fuzz targets, briefly (scripts/fuzz.sh; the corpus itself is replayed by cargo test)"
# 10 s per target after one instrumented build of the dependencies (measured in
# docs/reliability.md); skipped, saying why, without nightly or cargo-fuzz.
fuzz_rc=0
# The instrumented nightly build of the dependencies (minutes on two cores) is cached outside
# the repository, like the deployment test's helm; sluice's own crates are rebuilt each run.
FUZZ_TARGET_DIR="${XDG_CACHE_HOME:-$HOME/.cache}/sluice-fuzz-target" bash scripts/fuzz.sh 10 || fuzz_rc=$?
if [ "$fuzz_rc" -eq 2 ]; then
  echo "fuzz: skipped (see above)"
elif [ "$fuzz_rc" -ne 0 ]; then
  exit "$fuzz_rc"
fi

step "deployment: container image, Compose fleet, Helm chart, systemd unit (tests/deploy)"
# The image is built from the optimised binary (no further compile: the step above built it, or
# this does when valgrind is missing); helm and the Docker engine are set up by the script.
cargo build --profile ci --locked --bin sluice
bash tests/deploy/test_deploy.sh "$optimised"
