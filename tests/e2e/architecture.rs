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
