//! LiteLLM's PostgreSQL database, read-only. Every row is read whole as JSON
//! (`to_jsonb(row)`), so one reader serves every table and every release of LiteLLM's schema:
//! a column an older release lacks is simply absent, and a column a newer release added is
//! seen (and reported if it is not carried) instead of silently skipped.

use std::collections::BTreeSet;

use serde_json::{Map, Value};
use sqlx::any::{AnyPoolOptions, AnyRow};
use sqlx::AnyPool;
use sqlx::Row as _;
use time::{OffsetDateTime, PrimitiveDateTime};

use sluice_store::BudgetDuration;

use super::error::ImportError;
use super::report::RowError;

/// A connection to LiteLLM's database, through sqlx's `Any` driver, the store's: every row is
/// read as one text column, so no driver of its own is linked in for it.
pub struct Source {
    pool: AnyPool,
    tables: BTreeSet<String>,
}

impl Source {
    /// Connects and lists LiteLLM's tables; a database without LiteLLM's key table is refused.
    pub async fn connect(url: &str) -> Result<Self, ImportError> {
        sqlx::any::install_default_drivers();
        if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
            return Err(ImportError::Source(sqlx::Error::Configuration(
                "LiteLLM's database URL must start with postgres:// or postgresql://".into(),
            )));
        }
        // No cached statements, as for the store: a statement first prepared with a NULL
        // parameter keeps the type sqlx guessed for it.
        let sep = if url.contains('?') { '&' } else { '?' };
        let pool = AnyPoolOptions::new()
            .max_connections(2)
            .acquire_timeout(std::time::Duration::from_secs(10))
            .connect(&format!("{url}{sep}statement-cache-capacity=0"))
            .await
            .map_err(ImportError::Source)?;
        let tables = sqlx::query(
            "SELECT table_name::text AS name FROM information_schema.tables \
             WHERE table_schema = current_schema() AND table_name LIKE 'LiteLLM\\_%'",
        )
        .fetch_all(&pool)
        .await
        .map_err(ImportError::Source)?
        .iter()
        .map(|r| r.try_get::<String, _>("name"))
        .collect::<Result<BTreeSet<_>, _>>()
        .map_err(ImportError::Source)?;
        if !tables.contains("LiteLLM_VerificationToken") {
            return Err(ImportError::NotLiteLlm);
        }
        Ok(Self { pool, tables })
    }

    /// Whether the database has this table (older releases lack some).
    pub fn has(&self, table: &str) -> bool {
        self.tables.contains(table)
    }

    /// LiteLLM's tables, by name.
    pub fn tables(&self) -> impl Iterator<Item = &str> {
        self.tables.iter().map(String::as_str)
    }

    /// Every row of `table`, in `id` order; none when the table does not exist.
    pub async fn rows(
        &self,
        table: &'static str,
        id: &'static str,
    ) -> Result<Vec<Row>, ImportError> {
        if !self.has(table) {
            return Ok(Vec::new());
        }
        let sql = format!("SELECT to_jsonb(t)::text AS row FROM \"{table}\" t ORDER BY t.\"{id}\"");
        let rows = sqlx::query(&sql)
            .fetch_all(&self.pool)
            .await
            .map_err(ImportError::Source)?;
        rows.iter().map(|r| Row::read(table, id, r)).collect()
    }

    /// How many rows `table` has (0 when it does not exist).
    pub async fn count(&self, table: &str) -> Result<u64, ImportError> {
        if !self.has(table) {
            return Ok(0);
        }
        let sql = format!("SELECT COUNT(*)::bigint AS n FROM \"{table}\"");
        let n: i64 = sqlx::query(&sql)
            .fetch_one(&self.pool)
            .await
            .and_then(|r| r.try_get("n"))
            .map_err(ImportError::Source)?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    /// Up to `limit` spend logs that started at or after `since` (`None`: all), after the row
    /// `after` (its `startTime` as LiteLLM's JSON gives it, and its request id), in
    /// `(startTime, request_id)` order: a keyset page, so a million rows are read a page at a
    /// time with no offset to rescan. The bulky columns sluice does not keep are left out.
    pub async fn spend_logs(
        &self,
        since: Option<OffsetDateTime>,
        after: Option<&(String, String)>,
        limit: i64,
    ) -> Result<Vec<Row>, ImportError> {
        const TABLE: &str = "LiteLLM_SpendLogs";
        if !self.has(TABLE) {
            return Ok(Vec::new());
        }
        let since_text = since.map(naive_utc);
        let mut q = String::from(
            "SELECT (to_jsonb(t) - 'proxy_server_request' - 'metadata')::text AS row \
             FROM \"LiteLLM_SpendLogs\" t WHERE ($1::timestamp IS NULL OR t.\"startTime\" >= $1::timestamp)",
        );
        if after.is_some() {
            q.push_str(" AND (t.\"startTime\", t.request_id) > ($2::timestamp, $3)");
        }
        q.push_str(" ORDER BY t.\"startTime\", t.request_id LIMIT ");
        q.push_str(&limit.to_string());
        let mut query = sqlx::query(&q).bind(since_text);
        if let Some((time, id)) = after {
            query = query.bind(time.clone()).bind(id.clone());
        }
        let rows = query
            .fetch_all(&self.pool)
            .await
            .map_err(ImportError::Source)?;
        rows.iter()
            .map(|r| Row::read(TABLE, "request_id", r))
            .collect()
    }

    /// How many spend logs started at or after `since` (`None`: all).
    pub async fn count_spend_logs(
        &self,
        since: Option<OffsetDateTime>,
    ) -> Result<u64, ImportError> {
        if !self.has("LiteLLM_SpendLogs") {
            return Ok(0);
        }
        let n: i64 = sqlx::query(
            "SELECT COUNT(*)::bigint AS n FROM \"LiteLLM_SpendLogs\" \
             WHERE ($1::timestamp IS NULL OR \"startTime\" >= $1::timestamp)",
        )
        .bind(since.map(naive_utc))
        .fetch_one(&self.pool)
        .await
        .and_then(|r| r.try_get("n"))
        .map_err(ImportError::Source)?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    /// Closes the connections.
    pub async fn close(&self) {
        self.pool.close().await;
    }
}

/// A time as LiteLLM stores it: `timestamp without time zone`, in UTC.
fn naive_utc(t: OffsetDateTime) -> String {
    let t = t.to_offset(time::UtcOffset::UTC);
    format!(
        "{:04}-{:02}-{:02} {:02}:{:02}:{:02}.{:06}",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second(),
        t.microsecond()
    )
}

/// One row of one of LiteLLM's tables, with accessors that name the table, row and column
/// when a value is not what LiteLLM writes there.
#[derive(Debug, Clone)]
pub struct Row {
    /// The table it came from.
    pub table: &'static str,
    /// Its id (the table's key column), for messages.
    pub id: String,
    fields: Map<String, Value>,
}

impl Row {
    fn read(table: &'static str, id_column: &'static str, r: &AnyRow) -> Result<Self, ImportError> {
        let text: String = r.try_get("row").map_err(ImportError::Source)?;
        let fields: Map<String, Value> = serde_json::from_str(&text)
            .map_err(|e| ImportError::Source(sqlx::Error::Decode(Box::new(e))))?;
        let id = match fields.get(id_column) {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Null) | None => String::new(),
            Some(other) => other.to_string(),
        };
        Ok(Self { table, id, fields })
    }

    /// A row built from JSON (tests).
    #[cfg(test)]
    pub fn from_json(table: &'static str, id: &str, fields: Value) -> Self {
        Self {
            table,
            id: id.to_owned(),
            fields: fields.as_object().cloned().unwrap_or_default(),
        }
    }

    /// Every column, as read.
    pub fn fields(&self) -> &Map<String, Value> {
        &self.fields
    }

    /// A column's value; SQL NULL (and a column this release lacks) is `None`.
    pub fn get(&self, column: &str) -> Option<&Value> {
        self.fields.get(column).filter(|v| !v.is_null())
    }

    /// An error about `column` of this row.
    pub fn error(&self, column: &str, why: impl Into<String>) -> RowError {
        RowError {
            table: self.table,
            id: self.id.clone(),
            column: column.to_owned(),
            why: why.into(),
        }
    }

    /// A text column; empty text reads as none (LiteLLM's default for several columns).
    pub fn text(&self, column: &str) -> Result<Option<String>, RowError> {
        match self.get(column) {
            None => Ok(None),
            Some(Value::String(s)) if s.is_empty() => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(v) => Err(self.error(column, format!("expected text, found {v}"))),
        }
    }

    /// A number column.
    pub fn float(&self, column: &str) -> Result<Option<f64>, RowError> {
        match self.get(column) {
            None => Ok(None),
            Some(v) => v
                .as_f64()
                .map(Some)
                .ok_or_else(|| self.error(column, format!("expected a number, found {v}"))),
        }
    }

    /// A count column (limits, tokens): a whole number, not negative.
    pub fn count(&self, column: &str) -> Result<Option<u64>, RowError> {
        match self.get(column) {
            None => Ok(None),
            Some(v) => v
                .as_u64()
                .or_else(|| {
                    v.as_f64()
                        .filter(|f| *f >= 0.0 && f.fract() == 0.0)
                        .map(|f| f as u64)
                })
                .map(Some)
                .ok_or_else(|| {
                    self.error(column, format!("expected a whole number ≥ 0, found {v}"))
                }),
        }
    }

    /// A boolean column; NULL is false.
    pub fn flag(&self, column: &str) -> Result<bool, RowError> {
        match self.get(column) {
            None => Ok(false),
            Some(Value::Bool(b)) => Ok(*b),
            Some(v) => Err(self.error(column, format!("expected true or false, found {v}"))),
        }
    }

    /// A `timestamp without time zone` column, read as UTC (LiteLLM writes UTC).
    pub fn time(&self, column: &str) -> Result<Option<OffsetDateTime>, RowError> {
        let Some(text) = self.text(column)? else {
            return Ok(None);
        };
        parse_naive(&text)
            .map(Some)
            .ok_or_else(|| self.error(column, format!("`{text}` is not a timestamp")))
    }

    /// A `text[]` column; NULL is empty, NULL elements are skipped.
    pub fn list(&self, column: &str) -> Result<Vec<String>, RowError> {
        match self.get(column) {
            None => Ok(Vec::new()),
            Some(Value::Array(items)) => items
                .iter()
                .filter(|v| !v.is_null())
                .map(|v| {
                    v.as_str().map(str::to_owned).ok_or_else(|| {
                        self.error(column, format!("expected a list of text, found {v}"))
                    })
                })
                .collect(),
            Some(v) => Err(self.error(column, format!("expected a list, found {v}"))),
        }
    }

    /// A `jsonb` object column; NULL is empty. LiteLLM has written some of them as a JSON
    /// string holding the object: that is read too.
    pub fn object(&self, column: &str) -> Result<Map<String, Value>, RowError> {
        match self.get(column) {
            None => Ok(Map::new()),
            Some(Value::Object(m)) => Ok(m.clone()),
            Some(Value::String(s)) if s.trim().is_empty() => Ok(Map::new()),
            Some(Value::String(s)) => match serde_json::from_str::<Value>(s) {
                Ok(Value::Object(m)) => Ok(m),
                Ok(Value::Null) => Ok(Map::new()),
                _ => Err(self.error(column, "expected a JSON object, found text")),
            },
            Some(v) => Err(self.error(column, format!("expected a JSON object, found {v}"))),
        }
    }

    /// A `budget_duration` column (`30d`, `1mo`, ...).
    pub fn duration(&self, column: &str) -> Result<Option<BudgetDuration>, RowError> {
        self.text(column)?
            .map(|d| {
                d.parse().map_err(|e: sluice_store::budget::BadDuration| {
                    self.error(column, e.to_string())
                })
            })
            .transpose()
    }
}

/// `2026-01-31T12:34:56.789` (PostgreSQL's JSON form of a timestamp without time zone; also
/// with a space instead of `T`, with no fraction, or with an offset) as a UTC time.
pub fn parse_naive(text: &str) -> Option<OffsetDateTime> {
    use time::format_description::well_known::Rfc3339;
    if let Ok(t) = OffsetDateTime::parse(text, &Rfc3339) {
        return Some(t);
    }
    let normal = text.replacen(' ', "T", 1);
    let (main, fraction) = match normal.split_once('.') {
        Some((m, f)) => (m.to_owned(), f.to_owned()),
        None => (normal.clone(), String::new()),
    };
    let format = time::macros::format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]");
    let base = PrimitiveDateTime::parse(&main, &format).ok()?;
    let nanos = if fraction.is_empty() {
        0
    } else {
        let digits: String = fraction.chars().take(9).collect();
        if !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        format!("{digits:0<9}").parse::<u32>().ok()?
    };
    base.replace_nanosecond(nanos)
        .ok()
        .map(PrimitiveDateTime::assume_utc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn times_read_as_utc_in_every_form_postgres_gives() {
        let t = parse_naive("2026-01-31T12:34:56.789").unwrap();
        assert_eq!(t.unix_timestamp(), 1_769_862_896);
        assert_eq!(t.millisecond(), 789);
        assert_eq!(
            parse_naive("2026-01-31 12:34:56").unwrap().unix_timestamp(),
            1_769_862_896
        );
        assert_eq!(
            parse_naive("2026-01-31T12:34:56Z")
                .unwrap()
                .unix_timestamp(),
            1_769_862_896
        );
        assert_eq!(
            parse_naive("2026-01-31T12:34:56.000123")
                .unwrap()
                .microsecond(),
            123
        );
        assert!(parse_naive("yesterday").is_none());
        assert_eq!(naive_utc(t), "2026-01-31 12:34:56.789000");
    }

    #[test]
    fn accessors_name_table_row_and_column() {
        let r = Row::from_json(
            "LiteLLM_VerificationToken",
            "abc",
            json!({"rpm_limit": -1, "models": ["a", null, "b"], "metadata": "{\"x\": 1}",
                   "budget_duration": "3 fortnights", "blocked": null, "key_alias": ""}),
        );
        let e = r.count("rpm_limit").unwrap_err();
        assert_eq!(
            (e.table, e.id.as_str(), e.column.as_str()),
            ("LiteLLM_VerificationToken", "abc", "rpm_limit")
        );
        assert_eq!(r.list("models").unwrap(), ["a", "b"]);
        assert_eq!(r.object("metadata").unwrap()["x"], 1);
        assert_eq!(
            r.duration("budget_duration").unwrap_err().column,
            "budget_duration"
        );
        assert!(!r.flag("blocked").unwrap());
        assert_eq!(r.text("key_alias").unwrap(), None);
        assert_eq!(r.text("missing").unwrap(), None);
    }
}
