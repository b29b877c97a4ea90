#!/usr/bin/env bash
# cargo deny over the workspace (deny.toml; docs/reliability.md "Supply chain"): licences,
# bans and sources, then advisories against the RustSec database, taken in this order:
#   1. fetched from GitHub, when it is reachable;
#   2. a snapshot named by ADVISORY_DB_SNAPSHOT: a git repository (a clone of
#      github.com/rustsec/advisory-db) or a git bundle file of one;
#   3. ../shared/advisory-db.bundle beside the repository, when present.
# The source used and its newest commit's date are printed. With no database at all the
# advisories check fails under CI (CI=true); elsewhere it prints one loud warning line and
# passes, so that a new user's first test run does not fail for want of network.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v cargo-deny >/dev/null; then
  echo "cargo-deny: not installed; installing it now with 'cargo install --locked cargo-deny'" \
    "(builds from source, several minutes, once per machine)"
  cargo install --locked cargo-deny
fi
# `--offline` reads the metadata of every package in Cargo.lock, those of other platforms too
# (wasm, Windows), which a build on this one never downloads: fetch them (the registry is
# reachable; a fresh machine has only what its builds needed).
cargo fetch --locked >/dev/null
cargo deny --offline check --hide-inclusion-graph licenses bans sources

# cargo-deny's folder for the default database URL.
db_root="${CARGO_HOME:-$HOME/.cargo}/advisory-dbs"
db="$db_root/advisory-db-3157b0e258782691"
shared_bundle="../shared/advisory-db.bundle"

if timeout 20 git ls-remote https://github.com/RustSec/advisory-db HEAD >/dev/null 2>&1; then
  echo "advisories: database fetched from GitHub"
  cargo deny check --hide-inclusion-graph advisories
  exit
fi

# The snapshot to use: ADVISORY_DB_SNAPSHOT first, then the shared bundle.
snapshot="" origin=""
if [ -n "${ADVISORY_DB_SNAPSHOT:-}" ]; then
  if [ ! -e "$ADVISORY_DB_SNAPSHOT" ]; then
    echo "advisories: FAILED — ADVISORY_DB_SNAPSHOT names $ADVISORY_DB_SNAPSHOT, which does not exist" >&2
    exit 1
  fi
  snapshot="$ADVISORY_DB_SNAPSHOT" origin="ADVISORY_DB_SNAPSHOT ($ADVISORY_DB_SNAPSHOT)"
elif [ -f "$shared_bundle" ]; then
  snapshot="$shared_bundle" origin="the shared bundle ($shared_bundle)"
fi

if [ -z "$snapshot" ]; then
  why="GitHub unreachable, ADVISORY_DB_SNAPSHOT unset and no $shared_bundle"
  if [ "${CI:-}" = "true" ]; then
    echo "advisories: FAILED — $why" >&2
    exit 1
  fi
  echo "advisories: WARNING — NOT CHECKED: $why (set ADVISORY_DB_SNAPSHOT to a clone or bundle of github.com/rustsec/advisory-db; CI=true makes this a failure)" >&2
  exit 0
fi

# A clone of the snapshot where cargo-deny looks for the default database; `git clone` reads a
# folder and a bundle file alike.
rm -rf "$db"
mkdir -p "$db_root"
git clone --quiet "$snapshot" "$db"
echo "advisories: GitHub unreachable; using $origin, as of $(git -C "$db" log -1 --format=%cI)"
cargo deny --offline check --hide-inclusion-graph advisories
