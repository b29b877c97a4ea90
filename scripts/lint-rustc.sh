#!/bin/sh
# The RUSTC_WORKSPACE_WRAPPER of the tests' one compilation (scripts/test.sh): clippy-driver,
# which compiles sluice's own crates (never the dependencies) with clippy's lints as
# `cargo clippy` does, and every warning, rustc's and clippy's, an error. Only this build
# denies warnings: a user's `cargo build` on a newer compiler that warns about something new
# still builds. `-D warnings` is rustc's own public flag (no CLIPPY_ARGS, whose encoding is
# cargo-clippy's private business).
exec "${SLUICE_CLIPPY_DRIVER:?set by scripts/test.sh: the path of clippy-driver}" "$@" -D warnings
