//! Build script: stamps the git commit into the binary, so `sluice --version` (and the
//! readiness answer) tell which source a running binary or container image came from.
//!
//! The commit is `SLUICE_GIT_COMMIT` when set (a Docker build has no `.git` in its context,
//! so the Dockerfile passes it as a build argument), else `git rev-parse --short HEAD`, else
//! `unknown` (a source tarball, or no git installed). No crate: one `git` call.

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=SLUICE_GIT_COMMIT");
    let commit = std::env::var("SLUICE_GIT_COMMIT")
        .ok()
        .filter(|c| !c.trim().is_empty())
        .map(|c| c.trim().to_owned())
        .or_else(|| git(&["rev-parse", "--short", "HEAD"]))
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=SLUICE_GIT_COMMIT={commit}");
    // Rerun when HEAD moves: HEAD itself (a checkout), the branch it points at (a commit) and
    // packed-refs (a gc). `--git-path` resolves each in a worktree or a plain clone alike.
    // Only files that exist: cargo reruns a build script on every build for a missing one.
    let branch = git(&["symbolic-ref", "-q", "HEAD"]);
    for path in ["HEAD", "packed-refs"].into_iter().chain(branch.as_deref()) {
        if let Some(p) = git(&["rev-parse", "--git-path", path]) {
            if std::path::Path::new(&p).exists() {
                println!("cargo:rerun-if-changed={p}");
            }
        }
    }
}

/// One line of a git command's output, or `None` when git is missing or fails (not a
/// repository).
fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let line = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    (!line.is_empty()).then_some(line)
}
