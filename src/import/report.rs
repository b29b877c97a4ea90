//! What one pass of an import did: counts per kind of object, what could not be carried
//! over (by table, row and field, and why), what was carried but is not acted on by sluice,
//! and the rows that failed. Printed for people, or as one JSON line per pass.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

/// What happened to the objects of one kind.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// Written for the first time.
    pub new: u64,
    /// Written again: changed at the source (or its spend moved).
    pub updated: u64,
    /// Already as the source has them.
    pub unchanged: u64,
    /// Gone from the source, so removed here.
    pub deleted: u64,
}

/// A field of a row that is not carried over, or carried but not acted on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Gap {
    /// LiteLLM's table.
    pub table: String,
    /// The row's id; `*` for every row of the table.
    pub id: String,
    /// The column (or `*`: the whole row).
    pub field: String,
    /// Why, and what sluice does instead.
    pub why: String,
}

/// A row that could not be imported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[error("{table} row `{id}`, column {column}: {why}")]
pub struct RowError {
    /// LiteLLM's table.
    pub table: &'static str,
    /// The row's id.
    pub id: String,
    /// The column at fault.
    pub column: String,
    /// What is wrong with it.
    pub why: String,
}

/// One pass's report.
#[derive(Debug, Default, Serialize)]
pub struct Report {
    /// Nothing was written.
    pub dry_run: bool,
    /// Counts per kind of object (`keys`, `teams`, ..., `spend_logs`).
    pub objects: BTreeMap<&'static str, Counts>,
    /// Fields (or whole rows, or tables) not carried over.
    pub not_carried: Vec<Gap>,
    /// Fields carried over (kept in the object's metadata) that sluice does not act on.
    pub not_enforced: Vec<Gap>,
    /// Things the operator should know (a setting the imported data needs, a file written).
    pub notes: Vec<String>,
    /// Rows that failed; everything else was imported.
    pub errors: Vec<RowError>,
    /// The most memory the process has held so far (its peak resident set), in bytes.
    pub peak_memory_bytes: Option<u64>,
}

impl Report {
    /// An empty report.
    pub fn new(dry_run: bool) -> Self {
        Self {
            dry_run,
            ..Self::default()
        }
    }

    /// The counts of one kind, created at zero.
    pub fn counts(&mut self, kind: &'static str) -> &mut Counts {
        self.objects.entry(kind).or_default()
    }

    /// Records a field not carried over.
    pub fn not_carried(&mut self, table: &str, id: &str, field: &str, why: impl Into<String>) {
        self.not_carried.push(Gap {
            table: table.to_owned(),
            id: id.to_owned(),
            field: field.to_owned(),
            why: why.into(),
        });
    }

    /// Records a field kept but not acted on.
    pub fn not_enforced(&mut self, table: &str, id: &str, field: &str, why: impl Into<String>) {
        self.not_enforced.push(Gap {
            table: table.to_owned(),
            id: id.to_owned(),
            field: field.to_owned(),
            why: why.into(),
        });
    }

    /// The report for people: counts, then gaps grouped by table and field (a few row ids
    /// each), then every error.
    pub fn text(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{}",
            if self.dry_run {
                "sluice import litellm (dry run: nothing was written)"
            } else {
                "sluice import litellm"
            }
        );
        let _ = writeln!(
            out,
            "  {:<22}{:>9}{:>9}{:>11}{:>9}",
            "object", "new", "updated", "unchanged", "deleted"
        );
        for (kind, c) in &self.objects {
            let _ = writeln!(
                out,
                "  {kind:<22}{:>9}{:>9}{:>11}{:>9}",
                c.new, c.updated, c.unchanged, c.deleted
            );
        }
        for (title, gaps) in [
            ("not carried over", &self.not_carried),
            ("carried over, not acted on by sluice", &self.not_enforced),
        ] {
            if gaps.is_empty() {
                continue;
            }
            let _ = writeln!(out, "\n{title}:");
            let mut grouped: BTreeMap<(&str, &str, &str), Vec<&str>> = BTreeMap::new();
            for g in gaps {
                grouped
                    .entry((g.table.as_str(), g.field.as_str(), g.why.as_str()))
                    .or_default()
                    .push(g.id.as_str());
            }
            for ((table, field, why), ids) in grouped {
                let shown: Vec<&str> = ids.iter().take(5).copied().collect();
                let more = ids.len().saturating_sub(shown.len());
                let more = if more > 0 {
                    format!(" and {more} more")
                } else {
                    String::new()
                };
                let _ = writeln!(out, "  {table}.{field}: {why}");
                let _ = writeln!(out, "    rows: {}{more}", shown.join(", "));
            }
        }
        if !self.notes.is_empty() {
            let _ = writeln!(out, "\nnotes:");
            for n in &self.notes {
                let _ = writeln!(out, "  {n}");
            }
        }
        if !self.errors.is_empty() {
            let _ = writeln!(out, "\nerrors ({} rows not imported):", self.errors.len());
            for e in &self.errors {
                let _ = writeln!(out, "  {e}");
            }
        }
        if let Some(peak) = self.peak_memory_bytes {
            #[expect(clippy::cast_precision_loss, reason = "a figure for people")]
            let mb = peak as f64 / 1_048_576.0;
            let _ = writeln!(out, "\npeak memory: {mb:.1} MiB");
        }
        out
    }
}

/// The process's peak resident set (`VmHWM` in `/proc/self/status`), where the system tells.
pub fn peak_memory() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gaps_are_grouped_and_errors_named() {
        let mut r = Report::new(true);
        r.counts("keys").new = 2;
        for id in ["a", "b", "c", "d", "e", "f", "g"] {
            r.not_carried("LiteLLM_UserTable", id, "password", "argon2 here");
        }
        r.errors.push(RowError {
            table: "LiteLLM_VerificationToken",
            id: "abc".into(),
            column: "budget_duration".into(),
            why: "bad".into(),
        });
        let t = r.text();
        assert!(t.contains("dry run"), "{t}");
        assert!(t.contains("LiteLLM_UserTable.password: argon2 here"), "{t}");
        assert!(t.contains("rows: a, b, c, d, e and 2 more"), "{t}");
        assert!(
            t.contains("LiteLLM_VerificationToken row `abc`, column budget_duration: bad"),
            "{t}"
        );
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["objects"]["keys"]["new"], 2);
        assert_eq!(json["not_carried"][0]["field"], "password");
    }
}
