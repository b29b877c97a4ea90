//! The repository runs on any machine: no tracked file names a path that exists on only one
//! (a workspace folder, a home folder, or a `/tmp/...` default outside the tests). Such a path
//! passes every run on the machine that wrote it and fails the first run anywhere else, as the
//! advisory database's snapshot path once did.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository's files: tracked ones from git, else every file outside build output.
fn files(root: &Path) -> Vec<PathBuf> {
    let listed = Command::new("git")
        .args(["ls-files", "-z"])
        .current_dir(root)
        .output()
        .ok()
        .filter(|o| o.status.success());
    if let Some(out) = listed {
        return out
            .stdout
            .split(|b| *b == 0)
            .filter(|p| !p.is_empty())
            .map(|p| root.join(String::from_utf8_lossy(p).as_ref()))
            .collect();
    }
    let mut found = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            let name = entry.file_name();
            if path.is_dir() {
                if ![".git", "target", ".venv", "node_modules"]
                    .contains(&name.to_str().unwrap_or(""))
                {
                    dirs.push(path);
                }
            } else {
                found.push(path);
            }
        }
    }
    found
}

/// Paths of one machine in `text`, as (line number, line). `in_tests` relaxes the `/tmp/` rule:
/// a test may name a temporary path as data.
fn machine_paths(text: &str, in_tests: bool) -> Vec<(usize, String)> {
    // Built from pieces so that this file does not match itself.
    let always = [
        ["/", "work/"].concat(),
        ["/", "root/"].concat(),
        ["/", "Users/"].concat(),
        ["/", "home/"].concat(),
    ];
    let tmp = ["/", "tmp/"].concat();
    let mut hits = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let path_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
        // Rooted only: a path itself, not a URL's or a relative path's folder of that name.
        let fixed = always.iter().any(|p| {
            line.match_indices(p.as_str())
                .any(|(i, _)| !line[..i].chars().next_back().is_some_and(path_char))
        });
        // `/tmp/<name>`: a fixed file or folder under the root's /tmp, not `${TMPDIR:-/tmp}`,
        // `/tmp` alone, a placeholder (`/tmp/...`) or a relative path (`target/tmp/e2e`).
        let temp = !in_tests
            && line.match_indices(tmp.as_str()).any(|(i, _)| {
                let rooted = !line[..i].chars().next_back().is_some_and(path_char);
                let named = line[i + tmp.len()..]
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
                rooted && named
            });
        if fixed || temp {
            hits.push((n + 1, line.trim().to_owned()));
        }
    }
    hits
}

#[test]
fn no_tracked_file_names_a_path_of_one_machine() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut found = Vec::new();
    for path in files(root) {
        let rel = path.strip_prefix(root).unwrap_or(&path).to_path_buf();
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue; // binary files (images, corpora)
        };
        let rel_str = rel.to_string_lossy();
        if rel_str == "Cargo.lock" {
            continue;
        }
        // Tests, their fixtures (recorded client traffic) and the tests module of a source
        // file may name temporary paths as data; nothing may name a workspace or home folder.
        let test_file = rel_str.starts_with("tests/")
            || rel_str.starts_with("fuzz/")
            || rel_str.ends_with("/tests.rs");
        let (code, tests) = match text.find("#[cfg(test)]") {
            Some(at) if rel_str.ends_with(".rs") => text.split_at(at),
            _ => (text.as_str(), ""),
        };
        let offset = code.lines().count();
        for (n, line) in machine_paths(code, test_file) {
            found.push(format!("{}:{n}: {line}", rel.display()));
        }
        for (n, line) in machine_paths(tests, true) {
            found.push(format!("{}:{}: {line}", rel.display(), n + offset));
        }
    }
    assert!(
        found.is_empty(),
        "paths that exist on one machine only (use a variable, a path relative to the \
         repository, or $HOME/$TMPDIR):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_rule_catches_each_kind_of_path() {
    let work = ["/", "work/.mirror/db"].concat();
    let home = ["/", "home/dev/.cargo"].concat();
    let tmp = ["x=\"", "/", "tmp/sluice-db\""].concat();
    // A relative path ending in tmp and a placeholder are not a path of one machine.
    let relative = ["target", "/", "tmp/e2e and `", "/", "tmp/...`"].concat();
    // Nor is a URL whose path has such a folder in it.
    let url = ["https://example.com/news", "/", "home/2025"].concat();
    let text =
        format!("ok line\n{work}\n{home}\n{tmp}\n${{TMPDIR:-/tmp}}/x.XXXX\n{relative}\n{url}\n");
    let hits: Vec<usize> = machine_paths(&text, false)
        .into_iter()
        .map(|h| h.0)
        .collect();
    assert_eq!(hits, [2, 3, 4]);
    // In tests a temporary path is data; a workspace path is still refused.
    let hits: Vec<usize> = machine_paths(&text, true)
        .into_iter()
        .map(|h| h.0)
        .collect();
    assert_eq!(hits, [2, 3]);
}
