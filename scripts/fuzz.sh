#!/usr/bin/env bash
# Runs every fuzz target (fuzz/README.md) for SECONDS_PER_TARGET seconds (default 60), each
# starting from its checked-in corpus (fuzz/corpus/<target>, read only: new inputs go to a
# scratch folder, so the checked-in corpus stays small). A crash stops the run; its input is
# in fuzz/artifacts/<target>/. Needs the nightly toolchain and cargo-fuzz.
#   FUZZ_TARGETS="sigv4 multipart"  only these targets
#   FUZZ_APP=1                      also the admin_body and fleet_messages targets, which build
#                                   all of sluice with instrumentation (much longer build)
# Prints, per target, the executions per second and coverage libFuzzer reports.
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-60}"
if ! cargo +nightly --version >/dev/null 2>&1; then
  echo "fuzz: no nightly toolchain (rustup toolchain install nightly); skipped"; exit 2
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
  echo "fuzz: cargo-fuzz is not installed (cargo install --locked cargo-fuzz); skipped"; exit 2
fi
lib_targets="config_load envelope_splice multipart sse_tap stream_translate stream_providers eventstream sigv4 h1_answer h1_request cache_wire"
features=()
targets="${FUZZ_TARGETS:-$lib_targets}"
if [ "${FUZZ_APP:-0}" = 1 ]; then
  features=(--features app)
  [ -n "${FUZZ_TARGETS:-}" ] || targets="$lib_targets admin_body fleet_messages"
fi
# Rust code needs no AddressSanitizer to catch out-of-bounds reads (they panic; the crates deny
# unsafe code); without it the instrumented build of the dependencies is the only extra cost.
build=(--fuzz-dir fuzz --sanitizer none "${features[@]}")
# FUZZ_TARGET_DIR: where the instrumented build goes (default fuzz/target). scripts/test.sh keeps
# it outside the repository, so that a clean clone rebuilds only sluice's own crates.
[ -n "${FUZZ_TARGET_DIR:-}" ] && build+=(--target-dir "$FUZZ_TARGET_DIR")
start=$(date +%s)
cargo +nightly fuzz build "${build[@]}"
echo "fuzz: build took $(( $(date +%s) - start )) s"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"; rm -rf /dev/shm/sluice-fuzz-admin-* 2>/dev/null || true' EXIT
for t in $targets; do
  mkdir -p "$scratch/$t"
  log="$scratch/$t.log"
  if ! cargo +nightly fuzz run "${build[@]}" "$t" "$scratch/$t" "fuzz/corpus/$t" -- \
      -max_total_time="$secs" -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 >"$log" 2>&1; then
    tail -40 "$log"; echo "fuzz: $t FAILED"; exit 1
  fi
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')
  rate=$(grep -o 'exec/s: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*$' || echo '?')
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*$' || echo '?')
  echo "fuzz: $t ok: ${secs}s, $runs runs, $rate exec/s, coverage $cov"
done
