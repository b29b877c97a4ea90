//! The crate graph stays one-way and matches ARCHITECTURE.md: each crate depends on exactly
//! the crates its row of the "Crates" table names, every one of them from an earlier row (so
//! no cycle can form), and its dev-dependencies come from earlier rows too. A new arrow that
//! nobody wrote down fails here.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

/// The table's rows, in order: crate → the crates it may depend on.
fn documented() -> Vec<(String, BTreeSet<String>)> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/ARCHITECTURE.md");
    let text = std::fs::read_to_string(path).unwrap();
    let section = text
        .split("\n## Crates")
        .nth(1)
        .expect("ARCHITECTURE.md has a \"## Crates\" section");
    let section = section.split("\n## ").next().unwrap();
    let names = |cell: &str| -> Vec<String> {
        cell.split('`')
            .skip(1)
            .step_by(2)
            .filter(|n| n.starts_with("sluice"))
            .map(str::to_owned)
            .collect()
    };
    section
        .lines()
        .filter(|l| l.starts_with("| `sluice"))
        .map(|l| {
            let cells: Vec<&str> = l.split('|').collect();
            let name = names(cells[1]).remove(0);
            (name, names(cells[2]).into_iter().collect())
        })
        .collect()
}

/// Every workspace crate's sluice dependencies, normal and dev, from `cargo metadata`.
fn actual() -> BTreeMap<String, (BTreeSet<String>, BTreeSet<String>)> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut crates = BTreeMap::new();
    for p in meta["packages"].as_array().unwrap() {
        let (mut normal, mut dev) = (BTreeSet::new(), BTreeSet::new());
        for d in p["dependencies"].as_array().unwrap() {
            let name = d["name"].as_str().unwrap();
            if !name.starts_with("sluice") {
                continue;
            }
            match d["kind"].as_str() {
                Some("dev") => dev.insert(name.to_owned()),
                _ => normal.insert(name.to_owned()),
            };
        }
        crates.insert(p["name"].as_str().unwrap().to_owned(), (normal, dev));
    }
    crates
}

#[test]
fn crate_graph_is_one_way_and_documented() {
    let table = documented();
    let crates = actual();
    let listed: BTreeSet<&String> = table.iter().map(|(n, _)| n).collect();
    let real: BTreeSet<&String> = crates.keys().collect();
    assert_eq!(
        listed, real,
        "the Crates table lists exactly the workspace's crates"
    );
    let mut earlier: BTreeSet<String> = BTreeSet::new();
    for (name, allowed) in &table {
        let (normal, dev) = &crates[name];
        assert_eq!(
            normal, allowed,
            "{name} depends on {normal:?}; ARCHITECTURE.md says {allowed:?}"
        );
        for d in allowed {
            assert!(
                earlier.contains(d),
                "{name} may depend on {d}, which is not an earlier row: the graph must point one way"
            );
        }
        for d in dev {
            assert!(
                earlier.contains(d),
                "{name}'s tests use {d}, which is not an earlier row"
            );
        }
        earlier.insert(name.clone());
    }
}

/// The binary crate's modules (`src/`): every file's module path (`server::steps`), its
/// non-test source, and the names its `mod.rs` re-exports from a child (`pub use state::X`).
struct SourceTree {
    files: BTreeMap<Vec<String>, String>,
    reexports: BTreeMap<Vec<String>, BTreeMap<String, Vec<String>>>,
}

impl SourceTree {
    fn read() -> Self {
        let root = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/src"));
        let mut files = BTreeMap::new();
        let mut stack = vec![root.to_path_buf()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                    continue;
                }
                if path.extension().is_none_or(|e| e != "rs") {
                    continue;
                }
                let rel = path.strip_prefix(root).unwrap().with_extension("");
                let mut module: Vec<String> = rel
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect();
                let last = module.last().cloned().unwrap_or_default();
                // Test-only files and the crate roots are not part of the graph.
                if matches!(last.as_str(), "tests" | "testing")
                    || matches!(module.as_slice(), [m] if m == "lib" || m == "main")
                {
                    continue;
                }
                if last == "mod" {
                    module.pop();
                }
                let text = std::fs::read_to_string(&path).unwrap();
                // A file's own tests may use anything.
                let text = match text.find("#[cfg(test)]\nmod tests") {
                    Some(i) => text[..i].to_owned(),
                    None => text,
                };
                let text: String = text
                    .lines()
                    .filter(|l| !l.trim_start().starts_with("//"))
                    .collect::<Vec<_>>()
                    .join("\n");
                files.insert(module, text);
            }
        }
        let mut reexports = BTreeMap::new();
        for (module, text) in &files {
            let mut names = BTreeMap::new();
            // Statements, not lines: a `pub use` may span several.
            for line in text.split(';') {
                let line = line.trim();
                let Some(rest) = line
                    .strip_prefix("pub use ")
                    .or_else(|| line.strip_prefix("pub(crate) use "))
                else {
                    continue;
                };
                let Some((child, items)) = rest.split_once("::") else {
                    continue;
                };
                let mut child_path = module.clone();
                child_path.push(child.to_owned());
                if !files.contains_key(&child_path) {
                    continue;
                }
                let items = items
                    .trim_end_matches(';')
                    .trim_matches(|c| c == '{' || c == '}');
                for item in items.split(',') {
                    let name = item.trim().rsplit(" as ").next().unwrap_or("").trim();
                    let name = name.rsplit("::").next().unwrap_or(name);
                    if !name.is_empty() {
                        names.insert(name.to_owned(), child_path.clone());
                    }
                }
            }
            reexports.insert(module.clone(), names);
        }
        Self { files, reexports }
    }

    /// The module a path names: its longest prefix that is a module of the tree, or the child
    /// a module's `mod.rs` re-exports the next name from.
    fn module_of(&self, path: &[String]) -> Option<Vec<String>> {
        for n in (1..=path.len()).rev() {
            let prefix = &path[..n];
            if self.files.contains_key(prefix) {
                if let Some(next) = path.get(n) {
                    if let Some(child) = self.reexports.get(prefix).and_then(|r| r.get(next)) {
                        return Some(child.clone());
                    }
                }
                return Some(prefix.to_vec());
            }
        }
        None
    }

    /// Every module each module's code names (`crate::…`, `super::…`, groups in `use`).
    fn edges(&self) -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
        let mut out: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
        for (module, text) in &self.files {
            let bytes = text.as_bytes();
            let mut i = 0;
            while i < bytes.len() {
                if !text.is_char_boundary(i) {
                    i += 1;
                    continue;
                }
                let starts = ["crate::", "super::"]
                    .iter()
                    .find(|p| text[i..].starts_with(**p))
                    .filter(|_| {
                        i == 0
                            || !(bytes[i - 1].is_ascii_alphanumeric()
                                || bytes[i - 1] == b'_'
                                || bytes[i - 1] == b':')
                    });
                let Some(start) = starts else {
                    i += 1;
                    continue;
                };
                let mut base: Vec<String> = if *start == "crate::" {
                    Vec::new()
                } else {
                    // `super` of a file's module (a `mod.rs` is its folder's module).
                    let mut b = module.clone();
                    b.pop();
                    b
                };
                i += start.len();
                while text[i..].starts_with("super::") {
                    base.pop();
                    i += "super::".len();
                }
                let end = text[i..]
                    .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                    .map_or(text.len(), |e| i + e);
                let mut path = base.clone();
                path.extend(
                    text[i..end]
                        .split("::")
                        .filter(|s| !s.is_empty())
                        .map(str::to_owned),
                );
                let group = text[..end].ends_with("::") && text[end..].starts_with('{');
                // The path itself, unless it only opens a group (`use crate::a::{b, c::d};`),
                // whose items are what is used.
                let mut targets = if group {
                    Vec::new()
                } else {
                    vec![path.clone()]
                };
                if group {
                    if let Some(close) = text[end..].find('}') {
                        for item in text[end + 1..end + close].split(',') {
                            let item = item.trim().split(" as ").next().unwrap_or("").trim();
                            if item.is_empty() || item == "self" {
                                continue;
                            }
                            let mut p = path.clone();
                            p.extend(item.split("::").map(str::to_owned));
                            targets.push(p);
                        }
                    }
                }
                for t in targets {
                    if let Some(m) = self.module_of(&t) {
                        // A module and its own descendants and ancestors are one unit here.
                        if !m.starts_with(module) && !module.starts_with(&m) {
                            out.entry(module.clone()).or_default().insert(m);
                        }
                    }
                }
                i = end;
            }
        }
        out
    }
}

/// The "Modules" table of ARCHITECTURE.md, in order: a module (a folder or file of `src/`,
/// or one of `server/`'s files) and the modules it may use, `↺` marking a use of a later row.
fn documented_modules() -> Vec<(String, BTreeMap<String, bool>)> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/ARCHITECTURE.md");
    let text = std::fs::read_to_string(path).unwrap();
    let section = text
        .split("\n## Modules")
        .nth(1)
        .expect("ARCHITECTURE.md has a \"## Modules\" section");
    let section = section.split("\n## ").next().unwrap();
    section
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| {
            let cells: Vec<&str> = l.split('|').collect();
            let name = cells[1].trim().trim_matches('`').to_owned();
            let uses = cells[2]
                .split(',')
                .map(str::trim)
                .filter(|u| u.starts_with('`'))
                .map(|u| {
                    let back = u.ends_with('↺');
                    (
                        u.trim_end_matches('↺').trim().trim_matches('`').to_owned(),
                        back,
                    )
                })
                .collect();
            (name, uses)
        })
        .collect()
}

/// The binary crate's module graph matches ARCHITECTURE.md's "Modules" table exactly, and
/// points one way but for the uses the table marks `↺` (each a use of a later row: the ones
/// left to remove). A new arrow, a new backward one, or one the table names after it went
/// fails here. `http` imports nothing of the crate.
#[test]
fn module_graph_inside_src_is_documented_and_one_way_but_for_marked_edges() {
    let tree = SourceTree::read();
    let table = documented_modules();
    let rows: Vec<Vec<String>> = table
        .iter()
        .map(|(n, _)| n.split("::").map(str::to_owned).collect())
        .collect();
    // A module belongs to the longest row that names it or an ancestor.
    let row_of = |m: &[String]| -> Option<usize> {
        rows.iter()
            .enumerate()
            .filter(|(_, r)| m.starts_with(r))
            .max_by_key(|(_, r)| r.len())
            .map(|(i, _)| i)
    };
    for m in tree.files.keys() {
        assert!(
            row_of(m).is_some(),
            "src module {} has no row in ARCHITECTURE.md's Modules table",
            m.join("::")
        );
    }
    let mut actual: Vec<BTreeSet<String>> = vec![BTreeSet::new(); rows.len()];
    for (from, tos) in tree.edges() {
        let Some(a) = row_of(&from) else { continue };
        for to in tos {
            let Some(b) = row_of(&to) else { continue };
            if a != b {
                actual[a].insert(table[b].0.clone());
            }
        }
    }
    let mut problems = Vec::new();
    for (i, (name, uses)) in table.iter().enumerate() {
        let said: BTreeSet<String> = uses.keys().cloned().collect();
        if said != actual[i] {
            problems.push(format!(
                "{name} uses {:?}; ARCHITECTURE.md says {said:?}",
                actual[i]
            ));
        }
        for (u, back) in uses {
            let j = table.iter().position(|(n, _)| n == u);
            match j {
                None => problems.push(format!("{name}: {u} is not a row")),
                Some(j) if j > i && !back => problems.push(format!(
                    "{name} uses {u}, a later row, unmarked: the graph must point one way"
                )),
                Some(j) if j < i && *back => {
                    problems.push(format!("{name}: {u} is an earlier row; drop its ↺"))
                }
                _ => {}
            }
        }
    }
    assert!(
        table
            .first()
            .is_some_and(|(n, u)| n == "http" && u.is_empty()),
        "http comes first and uses nothing"
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
