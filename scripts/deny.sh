#!/usr/bin/env bash
# cargo deny over the workspace (deny.toml; docs/reliability.md "Supply chain"): licences,
# bans and sources, then advisories against the RustSec database — fetched when GitHub is
# reachable, else a local snapshot (ADVISORY_DB_SNAPSHOT, a git clone of
# github.com/rustsec/advisory-db) copied where cargo-deny looks and used without fetching;
# the snapshot's commit date is printed. No database at all fails the advisories check.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cargo-deny >/dev/null || cargo install --locked cargo-deny
# `--offline` reads the metadata of every package in Cargo.lock, those of other platforms too
# (wasm, Windows), which a build on this one never downloads: fetch them (the registry is
# reachable; a fresh machine has only what its builds needed).
cargo fetch --locked >/dev/null
cargo deny --offline check --hide-inclusion-graph licenses bans sources

db_root="${CARGO_HOME:-$HOME/.cargo}/advisory-dbs"
# cargo-deny's folder for the default database URL.
db="$db_root/advisory-db-3157b0e258782691"
snapshot="${ADVISORY_DB_SNAPSHOT:-/work/.mirror/rustsec+advisory-db/repo}"
if timeout 20 git ls-remote https://github.com/RustSec/advisory-db HEAD >/dev/null 2>&1; then
  echo "advisories: database fetched from GitHub"
  cargo deny check --hide-inclusion-graph advisories
  exit
fi
if [ -d "$snapshot" ]; then
  rm -rf "$db"; mkdir -p "$db_root"
  git clone --quiet "$snapshot" "$db"
elif [ ! -d "$db/.git" ]; then
  echo "advisories: FAILED — GitHub unreachable and no advisory database snapshot ($snapshot)" >&2
  exit 1
fi
echo "advisories: GitHub unreachable; local database as of $(git -C "$db" log -1 --format=%cI)"
cargo deny --offline check --hide-inclusion-graph advisories
