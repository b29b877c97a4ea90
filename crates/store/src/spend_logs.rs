//! One row per request, and what a batch of them adds: key/team/user/end-user spend and the daily
//! rollups the dashboard reads. A batch is one transaction, and only rows that were actually
//! inserted count towards spend, so writing the same batch twice (a replayed spool, a commit
//! whose answer was lost) changes nothing the second time.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashSet};

use futures_util::TryStreamExt;
use serde::{Deserialize, Serialize};
use sqlx::any::AnyRow;
use time::OffsetDateTime;

use super::entity::to_i64;
use super::{col, from_ms, time_col, to_ms, KeyHash, Page, Store, StoreError};
use sluice_core::record::JournalHold;
use sluice_core::usage::Usage;

/// How the request ended, as the spend log shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SpendStatus {
    /// The upstream answered 2xx (and, for streams, finished).
    Success,
    /// Anything else; the tokens it did use are still charged.
    Failure,
}

impl SpendStatus {
    /// The name stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Success => "success",
            Self::Failure => "failure",
        }
    }

    /// `success` or `failure`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "success" => Some(Self::Success),
            "failure" => Some(Self::Failure),
            _ => None,
        }
    }
}

/// One request's spend record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpendLog {
    /// Unique per record (a UUID made by [`SpendLog::new`]); the request id may repeat.
    pub id: String,
    /// The request id the client saw (`x-request-id`).
    pub request_id: String,
    /// The virtual key's hash; `None` for the master key or no auth.
    pub api_key: Option<KeyHash>,
    /// The key's team.
    pub team_id: Option<String>,
    /// The key's user.
    pub user_id: Option<String>,
    /// The `user` field of the request (LiteLLM's end user).
    pub end_user: Option<String>,
    /// The model name the client asked for.
    pub model_group: String,
    /// Which deployment served it.
    pub deployment_id: Option<String>,
    /// That deployment's provider prefix.
    pub provider: Option<String>,
    /// Tokens used.
    pub usage: Usage,
    /// Cost in USD.
    pub spend: f64,
    /// Success or failure.
    pub status: SpendStatus,
    /// When the request arrived.
    #[serde(with = "millis")]
    pub start_time: OffsetDateTime,
    /// When its answer ended.
    #[serde(with = "millis")]
    pub end_time: OffsetDateTime,
    /// Time to the first byte of the answer, in milliseconds.
    pub ttfb_ms: Option<u64>,
    /// Served from sluice's response cache.
    pub cache_hit: bool,
    /// What a cache hit saved: the upstream cost of the answer it replayed, in USD (0 for
    /// every other request). Spool files written before it existed read as 0.
    #[serde(default)]
    pub saved_spend: f64,
    /// The model group the client asked for, when a fallback served another (`model_group`).
    /// Spool files written before the request detail existed read every field below as empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_model: Option<String>,
    /// sluice's own time in the request, in microseconds (`x-sluice-overhead-duration-ms`).
    #[serde(default)]
    pub overhead_us: Option<u64>,
    /// Attempts retried on another deployment.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub retries: u32,
    /// Fallback groups moved to.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub fallbacks: u32,
    /// Hedged second attempts.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub hedges: u32,
    /// Every upstream attempt, in start order; empty for none (a cache hit, a refusal) and
    /// for the common single attempt that answered with no retry, fallback or hedge (its
    /// deployment is `deployment_id`, its time the request's less sluice's overhead), so the
    /// usual record carries no list to serialise twice (spool and row).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attempts: Vec<AttemptLog>,
    /// The request's `messages` (or `input` / `prompt`) as JSON text, at most
    /// [`MAX_CONTENT`] bytes; only with `store_prompts_in_spend_logs`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub messages: Option<String>,
    /// The answer as JSON text (a stream's put back together), at most [`MAX_CONTENT`] bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<String>,
    /// What the row records when it is not a model request: `call_mcp_tool` (LiteLLM's name)
    /// for an MCP tool call, `mcp_<method>` for another MCP exchange.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_type: Option<String>,
    /// Why it failed or was refused, when sluice knows more than the status (tool calls).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The HTTP status the client got (`None` in rows written before it was kept, and for
    /// MCP exchanges, which have no status of their own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_status: Option<u16>,
    /// A failure's error type as the client got it (`rate_limit_error`, `server_error`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_type: Option<String>,
    /// A failure's message as the client got it (capped: `record::ErrorNote::MAX_MESSAGE`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_message: Option<String>,
    /// The request's tags (LiteLLM's `request_tags`), as the request gave them; empty for
    /// none. What [`Store::spend_by_tag`] sums by. Spool files written before tags were kept
    /// read as none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub request_tags: Vec<String>,
    /// The per-request journal's hold on the file that has this record's line: dropped once
    /// the row is written or spooled, which lets the file go. Not part of the record.
    #[serde(skip)]
    pub journal: Option<JournalHold>,
}

/// For serde's `skip_serializing_if`: counts that are zero are left out of spool lines.
fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// Most bytes of prompt or answer one spend log keeps: enough to read a request, bounded so
/// a 10 MB prompt does not become a 10 MB row.
pub const MAX_CONTENT: usize = 64 * 1024;

/// One upstream attempt as the spend log keeps it (the `attempts` column holds a JSON list).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttemptLog {
    /// The deployment called.
    pub deployment: String,
    /// Its model group (a fallback's differs from the request's).
    pub model_group: String,
    /// Its provider prefix.
    pub provider: String,
    /// Started as a hedge of a slow first attempt.
    pub hedge: bool,
    /// When it started, in microseconds after the request arrived.
    pub start_us: u64,
    /// How long it ran, in microseconds (`None`: still open when recorded).
    pub duration_us: Option<u64>,
    /// `ok`, `cancelled`, `open`, or the failure kind (`timeout`, `rate_limited`, ...).
    pub result: String,
    /// A failed attempt's HTTP status (the deployment's, or the one sluice gave it: 504 for
    /// a timeout). Lists written before it was kept read as none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// A failed attempt's error message (capped: `record::ErrorNote::MAX_MESSAGE`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl SpendLog {
    /// A record with a fresh id, no owner, zero usage and cost; the caller fills the rest.
    pub fn new(request_id: String, model_group: String, start_time: OffsetDateTime) -> Self {
        Self {
            id: sluice_core::random::uuid_v4().to_string(),
            request_id,
            api_key: None,
            team_id: None,
            user_id: None,
            end_user: None,
            model_group,
            deployment_id: None,
            provider: None,
            usage: Usage::default(),
            spend: 0.0,
            status: SpendStatus::Success,
            start_time,
            end_time: start_time,
            ttfb_ms: None,
            cache_hit: false,
            saved_spend: 0.0,
            requested_model: None,
            overhead_us: None,
            retries: 0,
            fallbacks: 0,
            hedges: 0,
            attempts: Vec::new(),
            messages: None,
            response: None,
            call_type: None,
            error: None,
            http_status: None,
            error_type: None,
            error_message: None,
            request_tags: Vec::new(),
            journal: None,
        }
    }

    /// The UTC day the request belongs to in the rollups.
    fn day(&self) -> String {
        let d = self.start_time.to_offset(time::UtcOffset::UTC).date();
        format!("{:04}-{:02}-{:02}", d.year(), u8::from(d.month()), d.day())
    }
}

fn small(n: u64) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// Spool files keep times as Unix milliseconds, like the database.
mod millis {
    use serde::{Deserialize, Deserializer, Serializer};
    use time::OffsetDateTime;

    pub fn serialize<S: Serializer>(t: &OffsetDateTime, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_i64(super::to_ms(*t))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<OffsetDateTime, D::Error> {
        let ms = i64::deserialize(d)?;
        super::from_ms("time", ms).map_err(serde::de::Error::custom)
    }
}

/// One row of the daily rollup: a key's use of a model group on one UTC day.
#[derive(Debug, Clone, PartialEq)]
pub struct DailySpend {
    /// `YYYY-MM-DD`, UTC.
    pub day: String,
    /// Key hash, empty for requests without a virtual key.
    pub api_key: String,
    /// Team, empty for none.
    pub team_id: String,
    /// Model group.
    pub model_group: String,
    /// Requests counted.
    pub requests: u64,
    /// Of which failed.
    pub failed_requests: u64,
    /// Input tokens (cached included).
    pub prompt_tokens: u64,
    /// Output tokens.
    pub completion_tokens: u64,
    /// Cached input tokens.
    pub cached_tokens: u64,
    /// Input tokens written to the provider's prompt cache.
    pub cache_creation_tokens: u64,
    /// USD.
    pub spend: f64,
}

/// Which spend logs `GET /spend/logs` wants; unset fields do not filter. Every filter is a
/// condition in the SQL, so a narrow filter reads only the rows it returns.
#[derive(Debug, Clone, Default)]
pub struct SpendLogFilter {
    /// One record, by its own id ([`SpendLog::id`]).
    pub id: Option<String>,
    /// One key's records.
    pub api_key: Option<KeyHash>,
    /// The records of the key with this alias.
    pub key_alias: Option<String>,
    /// One user's records.
    pub user_id: Option<String>,
    /// One team's records.
    pub team_id: Option<String>,
    /// One model group's records (the group that served).
    pub model_group: Option<String>,
    /// Only successes or only failures.
    pub status: Option<SpendStatus>,
    /// One request's records.
    pub request_id: Option<String>,
    /// Requests that started at or after this time.
    pub start: Option<OffsetDateTime>,
    /// Requests that started before this time.
    pub end: Option<OffsetDateTime>,
    /// Also read the prompt and answer (heavy: asked for one request's detail, not lists).
    pub content: bool,
    /// The page past a row (keyset): the rows older or newer than it. With a cursor the
    /// page's `offset` is not used, and a deep page costs what the first does.
    pub cursor: Option<Cursor>,
    /// Which slice.
    pub page: Page,
}

/// A row's place in the log's order (newest first: start time, then id, both descending):
/// what a page of the log starts after.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogPosition {
    /// The row's start time, in Unix milliseconds (as stored).
    pub start_ms: i64,
    /// The row's own id.
    pub id: String,
}

impl LogPosition {
    /// Where `l` stands in the log.
    pub fn of(l: &SpendLog) -> Self {
        Self {
            start_ms: to_ms(l.start_time),
            id: l.id.clone(),
        }
    }

    /// A position as [`LogPosition::to_text`] writes it (`<milliseconds>.<id>`).
    pub fn parse(text: &str) -> Option<Self> {
        let (ms, id) = text.split_once('.')?;
        let ok = !id.is_empty() && id.len() <= 64;
        Some(Self {
            start_ms: ms.parse().ok()?,
            id: id.to_owned(),
        })
        .filter(|_| ok)
    }

    /// The position as a link carries it.
    pub fn to_text(&self) -> String {
        format!("{}.{}", self.start_ms, self.id)
    }
}

/// Which side of a row a page of the log lies on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cursor {
    /// The rows older than this one (the next page).
    Before(LogPosition),
    /// The rows newer than this one (the previous page); still returned newest first.
    After(LogPosition),
}

/// A value bound into a filter's SQL.
#[derive(Debug, Clone, PartialEq)]
enum Arg {
    Text(String),
    Int(i64),
}

impl SpendLogFilter {
    /// `WHERE …` (or nothing) and its values, numbered from `$3` (`$1`, `$2`: limit, offset).
    fn conditions(&self) -> (String, Vec<Arg>) {
        let mut conds: Vec<String> = Vec::new();
        let mut args: Vec<Arg> = Vec::new();
        // Each `?` of `cond` becomes the next number, bound to the next of `values`.
        let mut push_all = |cond: &str, values: Vec<Arg>| {
            let mut sql = String::new();
            let mut values = values.into_iter();
            for (i, part) in cond.split('?').enumerate() {
                if i > 0 {
                    args.extend(values.next());
                    sql.push_str(&format!("${}", args.len() + 2));
                }
                sql.push_str(part);
            }
            conds.push(sql);
        };
        let mut push = |cond: &str, arg: Arg| push_all(cond, vec![arg]);
        for (cond, value) in [
            ("id = ?", self.id.as_deref()),
            ("api_key = ?", self.api_key.as_ref().map(KeyHash::as_str)),
            // Aliases live on the keys; a deleted key's logs keep only its hash.
            // An alias names one key at most (`key_alias` is unique): an equality, whose
            // index (api_key, start_time) reads the rows in the page's order.
            (
                "api_key = (SELECT token FROM keys WHERE key_alias = ?)",
                self.key_alias.as_deref(),
            ),
            ("user_id = ?", self.user_id.as_deref()),
            ("team_id = ?", self.team_id.as_deref()),
            ("model_group = ?", self.model_group.as_deref()),
            ("request_id = ?", self.request_id.as_deref()),
        ] {
            if let Some(v) = value {
                push(cond, Arg::Text(v.to_owned()));
            }
        }
        for (cond, value) in [
            ("start_time >= ?", self.start),
            ("start_time < ?", self.end),
        ] {
            if let Some(t) = value {
                push(cond, Arg::Int(to_ms(t)));
            }
        }
        // Past the cursor: `start_time <= t` is a plain range every index on (…, start_time)
        // narrows by (a row value `(start_time, id) < (t, id)` is not, in SQLite); the rest
        // of the condition breaks ties within the millisecond.
        if let Some(c) = &self.cursor {
            let (p, older) = match c {
                Cursor::Before(p) => (p, true),
                Cursor::After(p) => (p, false),
            };
            let (cmp, strict) = if older { ("<=", "<") } else { (">=", ">") };
            push_all(
                &format!("start_time {cmp} ? AND (start_time {strict} ? OR id {strict} ?)"),
                vec![
                    Arg::Int(p.start_ms),
                    Arg::Int(p.start_ms),
                    Arg::Text(p.id.clone()),
                ],
            );
        }
        // The status is one of two words, written into the SQL rather than bound, so that the
        // planners can use the index of failures (a partial index is chosen only for a
        // condition they can see).
        if let Some(s) = self.status {
            conds.push(format!("status = '{}'", s.as_str()));
        }
        let sql = if conds.is_empty() {
            String::new()
        } else {
            format!("WHERE {}", conds.join(" AND "))
        };
        (sql, args)
    }

    /// The read's order: newest first, or, for the page before a row, oldest first (the
    /// nearest newer rows; [`Store::spend_logs`] turns them back).
    fn order(&self) -> &'static str {
        match self.cursor {
            Some(Cursor::After(_)) => "start_time, id",
            _ => "start_time DESC, id DESC",
        }
    }
}

/// The most rows a read reserves room for before it has them (`GET /spend/logs`' largest page).
const MAX_PAGE_ROWS: usize = 10_000;

/// The spans, in days back from the newest time a page can hold, that a PostgreSQL read with
/// no lower time bound tries before the whole log ([`Store::spend_logs`]).
const NARROW_READS_DAYS: [i64; 3] = [1, 7, 31];

/// What one batch write did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BatchOutcome {
    /// Rows newly stored (and counted towards spend).
    pub inserted: u64,
    /// Rows already present (a replay), skipped.
    pub duplicates: u64,
}

const LOG_COLUMNS: [&str; 35] = [
    "id",
    "request_id",
    "api_key",
    "team_id",
    "user_id",
    "end_user",
    "model_group",
    "deployment_id",
    "provider",
    "prompt_tokens",
    "completion_tokens",
    "cached_tokens",
    "cache_creation_tokens",
    "reasoning_tokens",
    "spend",
    "status",
    "start_time",
    "end_time",
    "ttfb_ms",
    "cache_hit",
    "saved_spend",
    "requested_model",
    "overhead_us",
    "retries",
    "fallbacks",
    "hedges",
    "request_tags",
    "attempts",
    "messages",
    "response",
    "call_type",
    "error",
    "http_status",
    "error_type",
    "error_message",
];

/// On SQLite (in process, no round trips) one row per statement is cheapest: the statement is
/// prepared once and cached, where a 200-row statement is parsed again for every partial chunk
/// and SQLite looks each of its 4,000 `$n` parameters up by name, a scan over all of them
/// (callgrind: 80 % of a request's instructions went there).
const ROWS_PER_STATEMENT_SQLITE: usize = 1;

/// The columns a SQLite read returns: every one, with the prompt and answer read only when
/// asked for (NULL otherwise, so a list of 200 rows does not carry 200 prompts), and the REAL
/// columns as the text of their exact value ([`Real`]).
fn select_list(content: bool) -> String {
    LOG_COLUMNS
        .iter()
        .map(|&c| match c {
            "messages" | "response" if !content => format!("CAST(NULL AS TEXT) AS {c}"),
            // 17 significant digits: enough for any double (`!` lifts printf's cap of 16;
            // `CAST(… AS TEXT)` and `json_object` keep 15).
            c if REAL_COLUMNS.contains(&c) => format!("printf('%!.17g', {c}) AS {c}"),
            c => c.to_owned(),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The numeric columns, which a PostgreSQL read packs into one text value ([`pg_select_list`]).
const NUMBER_COLUMNS: [&str; 16] = [
    "prompt_tokens",
    "completion_tokens",
    "cached_tokens",
    "cache_creation_tokens",
    "reasoning_tokens",
    "spend",
    "start_time",
    "end_time",
    "ttfb_ms",
    "cache_hit",
    "saved_spend",
    "overhead_us",
    "retries",
    "fallbacks",
    "hedges",
    "http_status",
];

/// The columns a PostgreSQL read returns: first the [`NUMBER_COLUMNS`] as one text,
/// comma-separated, empty for NULL (a float as its shortest exact text, with sqlx's and
/// PostgreSQL 12's default `extra_float_digits`), then every text column (the prompt and
/// answer NULL unless asked for). Each value sqlx's `Any` driver hands over costs ~150 ns
/// whatever its size (a column descriptor and a converted value per row): 18 values a row
/// instead of 35 is a third off a 10,000-row read, and the database's own formatting of 16
/// numbers is cheap, where `json_agg` on PostgreSQL 15 costs more than the decoding it saves
/// (docs/store.md).
fn pg_select_list(content: bool) -> String {
    let numbers: Vec<String> = NUMBER_COLUMNS
        .iter()
        .map(|c| format!("COALESCE(CAST({c} AS TEXT), '')"))
        .collect();
    let texts = LOG_COLUMNS
        .iter()
        .filter(|c| !NUMBER_COLUMNS.contains(c))
        .map(|&c| match c {
            "messages" | "response" if !content => format!("CAST(NULL AS TEXT) AS {c}"),
            c => c.to_owned(),
        });
    std::iter::once(format!("{} AS numbers", numbers.join(" || ',' || ")))
        .chain(texts)
        .collect::<Vec<_>>()
        .join(", ")
}

/// On SQLite, one query that answers a page of the log as a single JSON text, a [`JsonRow`]
/// per row in the page's order: SQLite writes the array (`json_group_array`, in C) and the
/// store reads one value, where sqlx's `Any` driver would hand each of 350,000 values of a
/// 10,000-row page over from its worker thread (docs/store.md). `page` is the
/// `SELECT … LIMIT` of the rows, with [`select_list`]'s columns.
fn sqlite_json_sql(page: &str, order: &str) -> String {
    let pairs: Vec<String> = LOG_COLUMNS.iter().map(|c| format!("'{c}', {c}")).collect();
    format!(
        "SELECT COALESCE(json_group_array(json_object({}) ORDER BY {order}), '[]') AS logs \
         FROM ({page}) t",
        pairs.join(", ")
    )
}

/// One value of a row read from PostgreSQL, handed by column name to [`JsonRow`]'s own
/// deserialiser ([`JsonRow::of_pg`]), which stays the one place that maps names to fields.
enum Cell {
    Null,
    Int(i64),
    Float(f64),
    Text(String),
}

impl<'de> serde::Deserializer<'de> for Cell {
    type Error = serde::de::value::Error;

    fn deserialize_any<V: serde::de::Visitor<'de>>(self, v: V) -> Result<V::Value, Self::Error> {
        match self {
            Self::Null => v.visit_none(),
            Self::Int(n) => v.visit_i64(n),
            Self::Float(x) => v.visit_f64(x),
            Self::Text(t) => v.visit_string(t),
        }
    }

    fn deserialize_option<V: serde::de::Visitor<'de>>(self, v: V) -> Result<V::Value, Self::Error> {
        match self {
            Self::Null => v.visit_none(),
            other => v.visit_some(other),
        }
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        unit unit_struct newtype_struct seq tuple tuple_struct map struct enum identifier
        ignored_any
    }
}

impl serde::de::IntoDeserializer<'_, serde::de::value::Error> for Cell {
    type Deserializer = Self;

    fn into_deserializer(self) -> Self {
        self
    }
}

/// The `request_tags` column: a JSON list of strings, `[]` for none.
fn tags_json(tags: &[String]) -> String {
    if tags.is_empty() {
        return "[]".to_owned();
    }
    serde_json::to_string(tags).unwrap_or_else(|_| "[]".to_owned())
}

/// The `attempts` column: a JSON list, NULL for none (a cache hit, a refusal).
fn attempts_json(attempts: &[AttemptLog]) -> Option<String> {
    if attempts.is_empty() {
        return None;
    }
    serde_json::to_string(attempts).ok()
}

/// `($1, …, $cols), (…), …` for `rows` rows of `cols` parameters each.
fn placeholders(rows: usize, cols: usize) -> String {
    (0..rows)
        .map(|r| {
            let p: Vec<String> = (1..=cols).map(|c| format!("${}", r * cols + c)).collect();
            format!("({})", p.join(", "))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// `INSERT … VALUES ($1, …), (…) …` for `rows` rows. A row already there is skipped: its key
/// (`id`, `start_time`; the partition key is part of every unique key on PostgreSQL) is the
/// same when a record is written again, since a replay keeps the record's start time.
fn insert_sql(rows: usize) -> String {
    format!(
        "INSERT INTO spend_logs ({}) VALUES {} ON CONFLICT DO NOTHING RETURNING id",
        LOG_COLUMNS.join(", "),
        placeholders(rows, LOG_COLUMNS.len())
    )
}

/// Holders (keys, teams, users, tags, end users) per spend statement: 1,000 parameters.
const HOLDERS_PER_STATEMENT: usize = 250;

/// Inserts `logs` with one bound parameter per column (SQLite, where a statement is prepared
/// once and cached); returns the ids newly inserted.
async fn insert_bound(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    logs: &[SpendLog],
) -> Result<HashSet<String>, StoreError> {
    let mut inserted: HashSet<String> = HashSet::with_capacity(logs.len());
    let per_statement = ROWS_PER_STATEMENT_SQLITE;
    // The statement text depends only on the chunk's length: built once per length.
    let mut statement: Option<(usize, String)> = None;
    for chunk in logs.chunks(per_statement) {
        if statement.as_ref().map(|(n, _)| *n) != Some(chunk.len()) {
            statement = Some((chunk.len(), insert_sql(chunk.len())));
        }
        let sql = statement.as_ref().map_or("", |(_, s)| s.as_str());
        let mut q = sqlx::query(sql);
        for l in chunk {
            q = q
                .bind(l.id.clone())
                .bind(l.request_id.clone())
                .bind(l.api_key.as_ref().map(|k| k.as_str().to_owned()))
                .bind(l.team_id.clone())
                .bind(l.user_id.clone())
                .bind(l.end_user.clone())
                .bind(l.model_group.clone())
                .bind(l.deployment_id.clone())
                .bind(l.provider.clone())
                .bind(to_i64(l.usage.prompt_tokens))
                .bind(to_i64(l.usage.completion_tokens))
                .bind(to_i64(l.usage.cached_tokens))
                .bind(to_i64(l.usage.cache_creation_tokens))
                .bind(to_i64(l.usage.reasoning_tokens))
                .bind(l.spend)
                .bind(l.status.as_str())
                .bind(to_ms(l.start_time))
                .bind(to_ms(l.end_time))
                .bind(l.ttfb_ms.map(to_i64))
                .bind(i64::from(l.cache_hit))
                .bind(l.saved_spend)
                .bind(l.requested_model.clone())
                .bind(l.overhead_us.map(to_i64))
                .bind(i64::from(l.retries))
                .bind(i64::from(l.fallbacks))
                .bind(i64::from(l.hedges))
                .bind(tags_json(&l.request_tags))
                .bind(attempts_json(&l.attempts))
                .bind(l.messages.clone())
                .bind(l.response.clone())
                .bind(l.call_type.clone())
                .bind(l.error.clone())
                .bind(l.http_status.map(i64::from))
                .bind(l.error_type.clone())
                .bind(l.error_message.clone());
        }
        for row in q.fetch_all(&mut **tx).await? {
            inserted.insert(col(&row, "id")?);
        }
    }
    Ok(inserted)
}

/// A spend log row keyed by column name: one element of [`insert_json`]'s JSON array, of the
/// array SQLite builds for [`Store::read_logs`], and what a PostgreSQL row read is handed to
/// by name ([`JsonRow::of_pg`]). The one place (with [`JsonRow::of`] and
/// [`JsonRow::into_log`]) that says how a record maps to the table's columns, both ways.
#[derive(Serialize, Deserialize)]
struct JsonRow<'a> {
    id: Cow<'a, str>,
    request_id: Cow<'a, str>,
    api_key: Option<Cow<'a, str>>,
    team_id: Option<Cow<'a, str>>,
    user_id: Option<Cow<'a, str>>,
    end_user: Option<Cow<'a, str>>,
    model_group: Cow<'a, str>,
    deployment_id: Option<Cow<'a, str>>,
    provider: Option<Cow<'a, str>>,
    prompt_tokens: i64,
    completion_tokens: i64,
    cached_tokens: i64,
    cache_creation_tokens: i64,
    reasoning_tokens: i64,
    spend: Real,
    status: Cow<'a, str>,
    start_time: i64,
    end_time: i64,
    ttfb_ms: Option<i64>,
    cache_hit: i64,
    saved_spend: Real,
    requested_model: Option<Cow<'a, str>>,
    overhead_us: Option<i64>,
    retries: i64,
    fallbacks: i64,
    hedges: i64,
    request_tags: Cow<'a, str>,
    attempts: Option<Cow<'a, str>>,
    messages: Option<Cow<'a, str>>,
    response: Option<Cow<'a, str>>,
    call_type: Option<Cow<'a, str>>,
    error: Option<Cow<'a, str>>,
    http_status: Option<i64>,
    error_type: Option<Cow<'a, str>>,
    error_message: Option<Cow<'a, str>>,
}

impl<'a> JsonRow<'a> {
    fn of(l: &'a SpendLog) -> Self {
        // JSON has no NaN: a cost that is not a number is stored as 0 (it would poison every
        // sum it joined).
        let finite = |x: f64| Real(if x.is_finite() { x } else { 0.0 });
        let text = |t: &'a Option<String>| t.as_deref().map(Cow::Borrowed);
        Self {
            id: Cow::Borrowed(&l.id),
            request_id: Cow::Borrowed(&l.request_id),
            api_key: l.api_key.as_ref().map(|k| Cow::Borrowed(k.as_str())),
            team_id: text(&l.team_id),
            user_id: text(&l.user_id),
            end_user: text(&l.end_user),
            model_group: Cow::Borrowed(&l.model_group),
            deployment_id: text(&l.deployment_id),
            provider: text(&l.provider),
            prompt_tokens: to_i64(l.usage.prompt_tokens),
            completion_tokens: to_i64(l.usage.completion_tokens),
            cached_tokens: to_i64(l.usage.cached_tokens),
            cache_creation_tokens: to_i64(l.usage.cache_creation_tokens),
            reasoning_tokens: to_i64(l.usage.reasoning_tokens),
            spend: finite(l.spend),
            status: Cow::Borrowed(l.status.as_str()),
            start_time: to_ms(l.start_time),
            end_time: to_ms(l.end_time),
            ttfb_ms: l.ttfb_ms.map(to_i64),
            cache_hit: i64::from(l.cache_hit),
            saved_spend: finite(l.saved_spend),
            requested_model: text(&l.requested_model),
            overhead_us: l.overhead_us.map(to_i64),
            retries: i64::from(l.retries),
            fallbacks: i64::from(l.fallbacks),
            hedges: i64::from(l.hedges),
            request_tags: Cow::Owned(tags_json(&l.request_tags)),
            attempts: attempts_json(&l.attempts).map(Cow::Owned),
            messages: text(&l.messages),
            response: text(&l.response),
            call_type: text(&l.call_type),
            error: text(&l.error),
            http_status: l.http_status.map(i64::from),
            error_type: text(&l.error_type),
            error_message: text(&l.error_message),
        }
    }

    /// A row of [`pg_select_list`]'s columns.
    fn of_pg(row: &AnyRow) -> Result<Self, StoreError> {
        use sqlx::Row;
        let corrupt = |column: &'static str, why: String| StoreError::Corrupt { column, why };
        let numbers: String = row
            .try_get(0)
            .map_err(|e| corrupt("spend_logs", e.to_string()))?;
        let mut cells: Vec<(&'static str, Cell)> = Vec::with_capacity(LOG_COLUMNS.len());
        let mut parts = numbers.split(',');
        for c in NUMBER_COLUMNS {
            let part = parts.next().unwrap_or_default();
            let cell = if part.is_empty() {
                Cell::Null
            } else if REAL_COLUMNS.contains(&c) {
                Cell::Float(part.parse().map_err(|_| corrupt(c, part.to_owned()))?)
            } else {
                Cell::Int(part.parse().map_err(|_| corrupt(c, part.to_owned()))?)
            };
            cells.push((c, cell));
        }
        let texts = LOG_COLUMNS.iter().filter(|c| !NUMBER_COLUMNS.contains(c));
        for (i, &c) in texts.enumerate() {
            let value: Option<String> =
                row.try_get(i + 1).map_err(|e| corrupt(c, e.to_string()))?;
            cells.push((c, value.map_or(Cell::Null, Cell::Text)));
        }
        Self::deserialize(serde::de::value::MapDeserializer::new(cells.into_iter()))
            .map_err(|e| corrupt("spend_logs", e.to_string()))
    }

    /// The record a stored row holds.
    fn into_log(self) -> Result<SpendLog, StoreError> {
        let count = |n: i64| u64::try_from(n).unwrap_or(0);
        let text = |t: Option<Cow<'a, str>>| t.map(Cow::into_owned);
        Ok(SpendLog {
            id: self.id.into_owned(),
            request_id: self.request_id.into_owned(),
            api_key: self.api_key.and_then(|h| KeyHash::from_hex(&h)),
            team_id: text(self.team_id),
            user_id: text(self.user_id),
            end_user: text(self.end_user),
            model_group: self.model_group.into_owned(),
            deployment_id: text(self.deployment_id),
            provider: text(self.provider),
            usage: Usage {
                prompt_tokens: count(self.prompt_tokens),
                completion_tokens: count(self.completion_tokens),
                cached_tokens: count(self.cached_tokens),
                cache_creation_tokens: count(self.cache_creation_tokens),
                reasoning_tokens: count(self.reasoning_tokens),
                ..Usage::default()
            },
            spend: self.spend.0,
            status: if self.status == "success" {
                SpendStatus::Success
            } else {
                SpendStatus::Failure
            },
            start_time: from_ms("start_time", self.start_time)?,
            end_time: from_ms("end_time", self.end_time)?,
            ttfb_ms: self.ttfb_ms.map(count),
            cache_hit: self.cache_hit != 0,
            saved_spend: self.saved_spend.0,
            requested_model: text(self.requested_model),
            overhead_us: self.overhead_us.map(count),
            retries: small(count(self.retries)),
            fallbacks: small(count(self.fallbacks)),
            hedges: small(count(self.hedges)),
            // A list this writer wrote; one that does not read is shown as no attempts.
            attempts: self
                .attempts
                .and_then(|j| serde_json::from_str(&j).ok())
                .unwrap_or_default(),
            messages: text(self.messages),
            response: text(self.response),
            call_type: text(self.call_type),
            error: text(self.error),
            http_status: self.http_status.and_then(|n| u16::try_from(n).ok()),
            error_type: text(self.error_type),
            error_message: text(self.error_message),
            // A list this writer wrote; one that does not read is shown as no tags.
            request_tags: serde_json::from_str(&self.request_tags).unwrap_or_default(),
            journal: None,
        })
    }
}

/// A REAL column of [`JsonRow`]: written as a JSON number (PostgreSQL's `float8` input reads
/// it exactly), read from the text the database wrote it as ([`REAL_COLUMNS`]) and parsed by
/// Rust's own float parser, so a cost comes back to the last bit (serde_json's number parsing
/// may miss the last bit of a 17-digit float).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Real(f64);

impl Serialize for Real {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(self.0)
    }
}

impl<'de> Deserialize<'de> for Real {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl serde::de::Visitor<'_> for Visit {
            type Value = Real;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a number, or a number as text")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Real, E> {
                v.trim().parse().map(Real).map_err(E::custom)
            }
            fn visit_f64<E>(self, v: f64) -> Result<Real, E> {
                Ok(Real(v))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Real, E> {
                Ok(Real(v as f64))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Real, E> {
                Ok(Real(v as f64))
            }
        }
        d.deserialize_any(Visit)
    }
}

/// The REAL columns, which a read has the database write as text ([`Real`]).
const REAL_COLUMNS: [&str; 2] = ["spend", "saved_spend"];

/// Rows per JSON insert on PostgreSQL (a writer's batch there is 5,000 at most).
const ROWS_PER_JSON_STATEMENT: usize = 5_000;

/// Inserts `logs` on PostgreSQL as one JSON text parameter per statement, unpacked by
/// `json_populate_recordset` into the table's row type: one parameter to send and parse
/// instead of 35 per row (statements are not cached through the `Any` driver, so a 200-row
/// statement of 7,000 parameters was parsed afresh each time). Returns the ids newly inserted.
async fn insert_json(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    logs: &[SpendLog],
) -> Result<HashSet<String>, StoreError> {
    let columns = LOG_COLUMNS.join(", ");
    let sql = format!(
        "INSERT INTO spend_logs ({columns}) SELECT {columns} \
         FROM json_populate_recordset(CAST(NULL AS spend_logs), CAST($1 AS json)) \
         ON CONFLICT DO NOTHING RETURNING id"
    );
    let mut inserted = HashSet::with_capacity(logs.len());
    for chunk in logs.chunks(ROWS_PER_JSON_STATEMENT) {
        let rows: Vec<JsonRow<'_>> = chunk.iter().map(JsonRow::of).collect();
        let json = serde_json::to_string(&rows).map_err(|e| StoreError::Corrupt {
            column: "spend_logs",
            why: e.to_string(),
        })?;
        for row in sqlx::query(&sql).bind(json).fetch_all(&mut **tx).await? {
            inserted.insert(col(&row, "id")?);
        }
    }
    Ok(inserted)
}

/// Rollup rows per upsert statement: one round trip for most batches (11 × 100 parameters).
const ROLLUPS_PER_STATEMENT: usize = 100;

/// Adds a batch's sums to the daily rollups (`daily_spend`, `daily_spend_by`): one multi-row
/// upsert per [`ROLLUPS_PER_STATEMENT`] rows, in key order, so batches on several instances
/// lock rollup rows in the same order. Rows within a statement are distinct (they come from
/// maps), as PostgreSQL's `ON CONFLICT DO UPDATE` requires.
async fn upsert_rollups(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    totals: &Totals<'_>,
) -> Result<(), StoreError> {
    let daily: Vec<&DailySpend> = totals.daily.values().collect();
    for chunk in daily.chunks(ROLLUPS_PER_STATEMENT) {
        let sql = format!(
            "INSERT INTO daily_spend (day, api_key, team_id, model_group, requests, \
             failed_requests, prompt_tokens, completion_tokens, cached_tokens, \
             cache_creation_tokens, spend) VALUES {} \
             ON CONFLICT (day, api_key, team_id, model_group) DO UPDATE SET \
             requests = daily_spend.requests + excluded.requests, \
             failed_requests = daily_spend.failed_requests + excluded.failed_requests, \
             prompt_tokens = daily_spend.prompt_tokens + excluded.prompt_tokens, \
             completion_tokens = daily_spend.completion_tokens + excluded.completion_tokens, \
             cached_tokens = daily_spend.cached_tokens + excluded.cached_tokens, \
             cache_creation_tokens = daily_spend.cache_creation_tokens \
             + excluded.cache_creation_tokens, \
             spend = daily_spend.spend + excluded.spend",
            placeholders(chunk.len(), 11)
        );
        let mut q = sqlx::query(&sql);
        for d in chunk {
            q = q
                .bind(d.day.clone())
                .bind(d.api_key.clone())
                .bind(d.team_id.clone())
                .bind(d.model_group.clone())
                .bind(to_i64(d.requests))
                .bind(to_i64(d.failed_requests))
                .bind(to_i64(d.prompt_tokens))
                .bind(to_i64(d.completion_tokens))
                .bind(to_i64(d.cached_tokens))
                .bind(to_i64(d.cache_creation_tokens))
                .bind(d.spend);
        }
        q.execute(&mut **tx).await?;
    }
    let by: Vec<(&(&str, String, &str), &ByDay)> = totals.by.iter().collect();
    for chunk in by.chunks(ROLLUPS_PER_STATEMENT) {
        let sql = format!(
            "INSERT INTO daily_spend_by (kind, day, name, requests, spend, total_tokens, \
             first_seen, last_seen) VALUES {} \
             ON CONFLICT (kind, day, name) DO UPDATE SET \
             requests = daily_spend_by.requests + excluded.requests, \
             spend = daily_spend_by.spend + excluded.spend, \
             total_tokens = daily_spend_by.total_tokens + excluded.total_tokens, \
             first_seen = CASE WHEN excluded.first_seen < daily_spend_by.first_seen \
             THEN excluded.first_seen ELSE daily_spend_by.first_seen END, \
             last_seen = CASE WHEN excluded.last_seen > daily_spend_by.last_seen \
             THEN excluded.last_seen ELSE daily_spend_by.last_seen END",
            placeholders(chunk.len(), 8)
        );
        let mut q = sqlx::query(&sql);
        for ((kind, day, name), d) in chunk {
            q = q
                .bind(*kind)
                .bind(day.clone())
                .bind((*name).to_owned())
                .bind(d.requests)
                .bind(d.spend)
                .bind(d.total_tokens)
                .bind(d.first_seen)
                .bind(d.last_seen);
        }
        q.execute(&mut **tx).await?;
    }
    Ok(())
}

impl Store {
    /// Stores a batch of spend logs and adds their cost to keys, teams, users and the daily
    /// rollups, all in one transaction.
    pub async fn write_spend_batch(&self, logs: &[SpendLog]) -> Result<BatchOutcome, StoreError> {
        self.write_batch(logs, Charge::Holders).await
    }

    /// Stores spend logs brought over from another gateway (`sluice import`), with their daily
    /// rollups but without adding their cost to keys, teams, users or end users: the holders'
    /// own spend, imported with them, already counts it. Rows already present are skipped, so
    /// the same logs imported twice count once.
    pub async fn import_spend_batch(&self, logs: &[SpendLog]) -> Result<BatchOutcome, StoreError> {
        self.write_batch(logs, Charge::RollupsOnly).await
    }

    async fn write_batch(
        &self,
        logs: &[SpendLog],
        charge: Charge,
    ) -> Result<BatchOutcome, StoreError> {
        let days: std::collections::BTreeSet<i64> = logs
            .iter()
            .map(|l| super::partitions::day_of(to_ms(l.start_time)))
            .collect();
        self.ensure_spend_days(&days).await?;
        let written = self.write_batch_tx(logs, charge).await;
        if written.is_err() {
            // A day this instance knew may have been dropped by another's retention: the
            // replay of this batch reads the catalog again.
            self.partitions.forget();
        }
        written
    }

    async fn write_batch_tx(
        &self,
        logs: &[SpendLog],
        charge: Charge,
    ) -> Result<BatchOutcome, StoreError> {
        let mut tx = self.pool().begin().await?;
        let mut inserted: HashSet<String> = match self.backend() {
            super::Backend::Postgres => insert_json(&mut tx, logs).await?,
            super::Backend::Sqlite => insert_bound(&mut tx, logs).await?,
        };
        let fresh: Vec<&SpendLog> = logs.iter().filter(|l| inserted.remove(&l.id)).collect();
        let totals = Totals::of(&fresh);
        if charge == Charge::Holders {
            self.charge_holders(&mut tx, &totals).await?;
        }
        upsert_rollups(&mut tx, &totals).await?;
        tx.commit().await?;
        let n = fresh.len() as u64;
        Ok(BatchOutcome {
            inserted: n,
            duplicates: logs.len() as u64 - n,
        })
    }

    /// Adds a batch's fresh spend to the keys, teams, users, organizations, tags and end users
    /// it names (end users need no admin call to exist: the first request naming one creates
    /// its row): a few statements per table whatever the batch holds, never one per request
    /// or per holder, so a batch of 1,000 requests from 300 end users is ~15 round trips.
    async fn charge_holders(
        &self,
        tx: &mut sqlx::Transaction<'_, sqlx::Any>,
        totals: &Totals<'_>,
    ) -> Result<(), StoreError> {
        for (table, id_col, sums) in [
            ("keys", "token", &totals.keys),
            ("teams", "team_id", &totals.teams),
            ("users", "user_id", &totals.users),
            // Tags without a row (only counted, `/spend/tags`) match nothing.
            ("tags", "tag_name", &totals.tags),
        ] {
            let rows: Vec<(&str, f64)> = sums.iter().map(|(k, v)| (*k, *v)).collect();
            for chunk in rows.chunks(HOLDERS_PER_STATEMENT) {
                self.add_spend_to(tx, table, id_col, chunk).await?;
            }
        }
        self.add_organization_spend(tx, &totals.keys).await?;
        let now = to_ms(OffsetDateTime::now_utc());
        let end_users: Vec<(&str, f64)> = totals.end_users.iter().map(|(k, v)| (*k, *v)).collect();
        for chunk in end_users.chunks(HOLDERS_PER_STATEMENT) {
            let sql = format!(
                "INSERT INTO end_users (user_id, spend, created_at, updated_at) VALUES {} \
                 ON CONFLICT (user_id) DO UPDATE SET spend = end_users.spend + excluded.spend",
                placeholders(chunk.len(), 4)
            );
            let mut q = sqlx::query(&sql);
            for (id, spend) in chunk {
                q = q.bind((*id).to_owned()).bind(*spend).bind(now).bind(now);
            }
            q.execute(&mut **tx).await?;
        }
        Ok(())
    }

    /// `spend += s` for each `(id, s)` of `rows` in `table`, in one statement. On PostgreSQL
    /// the rows are first locked in id order (one `SELECT … FOR UPDATE`): the update's join
    /// would lock them in whatever order its plan reads them, and two instances' batches
    /// locking the same keys in different orders could deadlock.
    async fn add_spend_to(
        &self,
        tx: &mut sqlx::Transaction<'_, sqlx::Any>,
        table: &str,
        id_col: &str,
        rows: &[(&str, f64)],
    ) -> Result<(), StoreError> {
        if self.backend() == super::Backend::Postgres {
            let ids: Vec<String> = (1..=rows.len()).map(|i| format!("${i}")).collect();
            let sql = format!(
                "SELECT {id_col} FROM {table} WHERE {id_col} IN ({}) ORDER BY {id_col} FOR UPDATE",
                ids.join(", ")
            );
            let mut q = sqlx::query(&sql);
            for (id, _) in rows {
                q = q.bind((*id).to_owned());
            }
            q.execute(&mut **tx).await?;
        }
        // `SELECT $1 AS id, $2 AS spend UNION ALL SELECT $3, $4 …`: a table of the sums both
        // databases read (SQLite names a bare VALUES list's columns its own way).
        let values: Vec<String> = (0..rows.len())
            .map(|i| match i {
                0 => "SELECT $1 AS id, $2 AS spend".to_owned(),
                i => format!("SELECT ${}, ${}", 2 * i + 1, 2 * i + 2),
            })
            .collect();
        let sql = format!(
            "UPDATE {table} SET spend = {table}.spend + v.spend FROM ({}) AS v \
             WHERE {table}.{id_col} = v.id",
            values.join(" UNION ALL ")
        );
        let mut q = sqlx::query(&sql);
        for (id, spend) in rows {
            q = q.bind((*id).to_owned()).bind(*spend);
        }
        q.execute(&mut **tx).await?;
        Ok(())
    }

    /// Adds the batch's spend per key to the organization each key is under (its own, else its
    /// team's): one lookup per 500 keys, then one update for all of them, locked in id order (the
    /// same lock order on every instance).
    async fn add_organization_spend(
        &self,
        tx: &mut sqlx::Transaction<'_, sqlx::Any>,
        keys: &BTreeMap<&str, f64>,
    ) -> Result<(), StoreError> {
        let mut orgs: BTreeMap<String, f64> = BTreeMap::new();
        let ids: Vec<(&str, f64)> = keys.iter().map(|(k, v)| (*k, *v)).collect();
        for chunk in ids.chunks(super::objects::IDS_PER_QUERY) {
            let params: Vec<String> = (1..=chunk.len()).map(|i| format!("${i}")).collect();
            let sql = format!(
                "SELECT k.token AS token, COALESCE(k.organization_id, t.organization_id) AS org \
                 FROM keys k LEFT JOIN teams t ON t.team_id = k.team_id \
                 WHERE k.token IN ({}) \
                 AND COALESCE(k.organization_id, t.organization_id) IS NOT NULL",
                params.join(", ")
            );
            let mut q = sqlx::query(&sql);
            for (k, _) in chunk {
                q = q.bind((*k).to_owned());
            }
            for row in q.fetch_all(&mut **tx).await? {
                let token: String = col(&row, "token")?;
                let org: String = col(&row, "org")?;
                let spend = keys.get(token.as_str()).copied().unwrap_or(0.0);
                *orgs.entry(org).or_default() += spend;
            }
        }
        let rows: Vec<(&str, f64)> = orgs.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        for chunk in rows.chunks(HOLDERS_PER_STATEMENT) {
            self.add_spend_to(tx, "organizations", "organization_id", chunk)
                .await?;
        }
        Ok(())
    }

    /// Spend logs matching every filter set, newest first (`GET /spend/logs`); past a
    /// [`Cursor`], the page of `limit` rows on its side.
    ///
    /// On PostgreSQL a read with no lower bound on time (the first page, the next page of the
    /// newest, any page without `start`) is tried on the newest day first, then the newest
    /// week and month, and the whole log last: a query with no bound plans over every day's
    /// table (56 ms at 365 days, docs/store.md), one with a bound only over its days. A
    /// narrower try that fills the page has exactly the rows the whole log would give (every
    /// row it leaves out is older than all it returns); one that does not is tried wider. A
    /// lookup by `id` stops at the first try that finds the row.
    pub async fn spend_logs(&self, filter: &SpendLogFilter) -> Result<Vec<SpendLog>, StoreError> {
        let unbounded = filter.start.is_none() && !matches!(filter.cursor, Some(Cursor::After(_)));
        if self.backend() != super::Backend::Postgres || !unbounded {
            return self.read_logs(filter).await;
        }
        let top = match (&filter.cursor, filter.end) {
            (Some(Cursor::Before(p)), _) => from_ms("start_time", p.start_ms)?,
            (None, Some(end)) => end,
            _ => OffsetDateTime::now_utc(),
        };
        for days in NARROW_READS_DAYS {
            let narrow = SpendLogFilter {
                start: Some(top - time::Duration::days(days)),
                ..filter.clone()
            };
            let logs = self.read_logs(&narrow).await?;
            let full = u64::try_from(logs.len()).unwrap_or(u64::MAX) >= filter.page.limit;
            if full || (filter.id.is_some() && !logs.is_empty()) {
                return Ok(logs);
            }
        }
        self.read_logs(filter).await
    }

    /// [`Store::spend_logs`] as one query: on SQLite one JSON text ([`sqlite_json_sql`]), on
    /// PostgreSQL 18 values a row ([`pg_select_list`]), each row decoded as it arrives
    /// (10,000 decoded rows held at once cost half as much again as the same rows streamed,
    /// docs/store.md).
    pub(crate) async fn read_logs(
        &self,
        filter: &SpendLogFilter,
    ) -> Result<Vec<SpendLog>, StoreError> {
        let (cond, args) = filter.conditions();
        let columns = match self.backend() {
            super::Backend::Sqlite => select_list(filter.content),
            super::Backend::Postgres => pg_select_list(filter.content),
        };
        let page = format!(
            "SELECT {columns} FROM spend_logs {cond} ORDER BY {} LIMIT $1 OFFSET $2",
            filter.order(),
        );
        let sql = match self.backend() {
            super::Backend::Sqlite => sqlite_json_sql(&page, filter.order()),
            super::Backend::Postgres => page,
        };
        let offset = match filter.cursor {
            Some(_) => 0,
            None => filter.page.offset,
        };
        let mut q = sqlx::query(&sql)
            .bind(to_i64(filter.page.limit))
            .bind(to_i64(offset));
        for a in args {
            q = match a {
                Arg::Text(v) => q.bind(v),
                Arg::Int(n) => q.bind(n),
            };
        }
        // Sized for the page up front: 10,000 records grown by doubling were copied ~14 times.
        let page = usize::try_from(filter.page.limit).unwrap_or(usize::MAX);
        let mut logs = Vec::with_capacity(page.min(MAX_PAGE_ROWS));
        match self.backend() {
            super::Backend::Sqlite => {
                let row = q.fetch_one(self.pool()).await?;
                let json: String = col(&row, "logs")?;
                let rows: Vec<JsonRow<'_>> =
                    serde_json::from_str(&json).map_err(|e| StoreError::Corrupt {
                        column: "spend_logs",
                        why: e.to_string(),
                    })?;
                logs.reserve(rows.len());
                for r in rows {
                    logs.push(r.into_log()?);
                }
            }
            super::Backend::Postgres => {
                let mut rows = q.fetch(self.pool());
                while let Some(row) = rows.try_next().await? {
                    logs.push(JsonRow::of_pg(&row)?.into_log()?);
                }
            }
        }
        if matches!(filter.cursor, Some(Cursor::After(_))) {
            logs.reverse();
        }
        Ok(logs)
    }

    /// Daily rollups for `from..=to` (`YYYY-MM-DD`), by day then key then model.
    pub async fn daily_spend(&self, from: &str, to: &str) -> Result<Vec<DailySpend>, StoreError> {
        let rows = sqlx::query(
            "SELECT * FROM daily_spend WHERE day >= $1 AND day <= $2 \
             ORDER BY day, api_key, team_id, model_group",
        )
        .bind(from.to_owned())
        .bind(to.to_owned())
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|row| {
                let count =
                    |c: &'static str| col::<i64>(row, c).map(|n| u64::try_from(n).unwrap_or(0));
                Ok(DailySpend {
                    day: col(row, "day")?,
                    api_key: col(row, "api_key")?,
                    team_id: col(row, "team_id")?,
                    model_group: col(row, "model_group")?,
                    requests: count("requests")?,
                    failed_requests: count("failed_requests")?,
                    prompt_tokens: count("prompt_tokens")?,
                    completion_tokens: count("completion_tokens")?,
                    cached_tokens: count("cached_tokens")?,
                    cache_creation_tokens: count("cache_creation_tokens")?,
                    spend: col(row, "spend")?,
                })
            })
            .collect()
    }

    /// Spend, requests and tokens per request tag (LiteLLM's `/spend/tags`) of the requests
    /// that started in `start..end` (either bound may be open; LiteLLM takes the dates and
    /// ignores them), most spend first, then by tag. A request counts under each tag it
    /// carried, so a request with two tags is in two rows, as in LiteLLM; a tag it listed
    /// twice counts it once (LiteLLM would count it twice); untagged requests are in no row.
    ///
    /// Open bounds and whole UTC days are read from the daily rollups; other bounds sum the
    /// log.
    pub async fn spend_by_tag(
        &self,
        start: Option<OffsetDateTime>,
        end: Option<OffsetDateTime>,
    ) -> Result<Vec<TagSpend>, StoreError> {
        let day = |t: Option<OffsetDateTime>, end: bool| -> Option<Option<String>> {
            let Some(t) = t else {
                return Some(None);
            };
            let t = t.to_offset(time::UtcOffset::UTC);
            (t.time() == time::Time::MIDNIGHT).then(|| {
                let d = if end {
                    t.date().previous_day()
                } else {
                    Some(t.date())
                };
                Some(day_text(d.unwrap_or(time::Date::MIN)))
            })
        };
        match (day(start, false), day(end, true)) {
            (Some(first), Some(last)) => self.spend_by_tag_rollups(first, last).await,
            _ => self.spend_by_tag_logs(start, end).await,
        }
    }

    /// [`Store::spend_by_tag`] from the rollups, days `first..=last` (either open).
    async fn spend_by_tag_rollups(
        &self,
        first: Option<String>,
        last: Option<String>,
    ) -> Result<Vec<TagSpend>, StoreError> {
        let mut conds = vec![format!("kind = '{BY_TAG}'")];
        let mut args = Vec::new();
        for (cond, value) in [("day >= ", first), ("day <= ", last)] {
            if let Some(v) = value {
                args.push(v);
                conds.push(format!("{cond}${}", args.len()));
            }
        }
        let sql = format!(
            "SELECT name AS tag, CAST(SUM(requests) AS BIGINT) AS log_count, \
             SUM(spend) AS total_spend, CAST(SUM(total_tokens) AS BIGINT) AS total_tokens, \
             MIN(first_seen) AS first_seen, MAX(last_seen) AS last_seen \
             FROM daily_spend_by WHERE {} GROUP BY name ORDER BY total_spend DESC, tag",
            conds.join(" AND ")
        );
        let mut q = sqlx::query(&sql);
        for a in args {
            q = q.bind(a);
        }
        q.fetch_all(self.pool())
            .await?
            .iter()
            .map(TagSpend::decode)
            .collect()
    }

    /// [`Store::spend_by_tag`] summed from the log.
    pub(crate) async fn spend_by_tag_logs(
        &self,
        start: Option<OffsetDateTime>,
        end: Option<OffsetDateTime>,
    ) -> Result<Vec<TagSpend>, StoreError> {
        // Rows without tags are skipped before their JSON is read: most requests carry none.
        let mut conds = vec!["s.request_tags <> '[]'".to_owned()];
        let mut args: Vec<i64> = Vec::new();
        for (cond, value) in [("s.start_time >= ", start), ("s.start_time < ", end)] {
            if let Some(t) = value {
                args.push(to_ms(t));
                conds.push(format!("{cond}${}", args.len()));
            }
        }
        let tags = match self.backend() {
            super::Backend::Sqlite => "json_each(s.request_tags) AS j",
            super::Backend::Postgres => {
                "jsonb_array_elements_text(CAST(s.request_tags AS jsonb)) AS j(value)"
            }
        };
        // DISTINCT: a tag listed twice in one request counts it once.
        let sql = format!(
            "SELECT tag, COUNT(*) AS log_count, SUM(spend) AS total_spend, \
             CAST(SUM(tokens) AS BIGINT) AS total_tokens, \
             MIN(start_time) AS first_seen, MAX(start_time) AS last_seen \
             FROM (SELECT DISTINCT s.id AS id, j.value AS tag, s.spend AS spend, \
             s.prompt_tokens + s.completion_tokens AS tokens, s.start_time AS start_time \
             FROM spend_logs s CROSS JOIN {tags} WHERE {}) t \
             GROUP BY tag ORDER BY total_spend DESC, tag",
            conds.join(" AND ")
        );
        let mut q = sqlx::query(&sql);
        for a in args {
            q = q.bind(a);
        }
        q.fetch_all(self.pool())
            .await?
            .iter()
            .map(TagSpend::decode)
            .collect()
    }
}

impl TagSpend {
    fn decode(row: &AnyRow) -> Result<Self, StoreError> {
        let count = |c: &'static str| col::<i64>(row, c).map(|n| u64::try_from(n).unwrap_or(0));
        Ok(Self {
            tag: col(row, "tag")?,
            requests: count("log_count")?,
            spend: col(row, "total_spend")?,
            total_tokens: count("total_tokens")?,
            first_seen: time_col(row, "first_seen")?,
            last_seen: time_col(row, "last_seen")?,
        })
    }
}

/// What [`Store::spend_grouped`] sums by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpendBy {
    /// Team id (empty: no team).
    Team,
    /// Model group.
    Model,
    /// Key hash (empty: no key).
    Key,
    /// The key's user (empty: none).
    User,
    /// The request's end user, its `user` field (empty: none).
    EndUser,
}

impl SpendBy {
    fn column(self) -> &'static str {
        match self {
            Self::Team => "team_id",
            Self::Model => "model_group",
            Self::Key => "api_key",
            Self::User => "user_id",
            Self::EndUser => "end_user",
        }
    }
}

/// One group's row of [`Store::spend_grouped`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GroupSpend {
    /// The team id, model group or key hash; empty for requests without one.
    pub name: String,
    /// Requests.
    pub requests: u64,
    /// USD.
    pub spend: f64,
    /// Prompt and completion tokens.
    pub total_tokens: u64,
}

impl Store {
    /// Spend and requests of the requests that started in `start..end`, summed by `by`, most
    /// spend first (a spend report's tables). Whole UTC days (what `/spend/groups` and the
    /// console ask) are read from the daily rollups, a few rows per day whatever the traffic;
    /// any other range sums the log (a report's hours), by its time index.
    pub async fn spend_grouped(
        &self,
        start: OffsetDateTime,
        end: OffsetDateTime,
        by: SpendBy,
    ) -> Result<Vec<GroupSpend>, StoreError> {
        match whole_days(start, end) {
            Some((first, last)) => self.spend_grouped_rollups(&first, &last, by).await,
            None => self.spend_grouped_logs(start, end, by).await,
        }
    }

    /// [`Store::spend_grouped`] from the rollups, days `first..=last`.
    async fn spend_grouped_rollups(
        &self,
        first: &str,
        last: &str,
        by: SpendBy,
    ) -> Result<Vec<GroupSpend>, StoreError> {
        let sql = match by {
            SpendBy::Team | SpendBy::Model | SpendBy::Key => format!(
                "SELECT {column} AS name, CAST(SUM(requests) AS BIGINT) AS requests, \
                 SUM(spend) AS spend, \
                 CAST(SUM(prompt_tokens + completion_tokens) AS BIGINT) AS total_tokens \
                 FROM daily_spend WHERE day >= $1 AND day <= $2 \
                 GROUP BY {column} ORDER BY spend DESC, name",
                column = by.column()
            ),
            SpendBy::User | SpendBy::EndUser => {
                let kind = if by == SpendBy::User {
                    BY_USER
                } else {
                    BY_END_USER
                };
                format!(
                    "SELECT name, CAST(SUM(requests) AS BIGINT) AS requests, \
                     SUM(spend) AS spend, CAST(SUM(total_tokens) AS BIGINT) AS total_tokens \
                     FROM daily_spend_by WHERE kind = '{kind}' AND day >= $1 AND day <= $2 \
                     GROUP BY name ORDER BY spend DESC, name"
                )
            }
        };
        let rows = sqlx::query(&sql)
            .bind(first.to_owned())
            .bind(last.to_owned())
            .fetch_all(self.pool())
            .await?;
        rows.iter().map(GroupSpend::decode).collect()
    }

    /// [`Store::spend_grouped`] summed from the log.
    pub(crate) async fn spend_grouped_logs(
        &self,
        start: OffsetDateTime,
        end: OffsetDateTime,
        by: SpendBy,
    ) -> Result<Vec<GroupSpend>, StoreError> {
        let column = by.column();
        let sql = format!(
            "SELECT COALESCE({column}, '') AS name, COUNT(*) AS requests, SUM(spend) AS spend, \
             CAST(SUM(prompt_tokens + completion_tokens) AS BIGINT) AS total_tokens \
             FROM spend_logs WHERE start_time >= $1 AND start_time < $2 \
             GROUP BY COALESCE({column}, '') ORDER BY spend DESC, name"
        );
        let rows = sqlx::query(&sql)
            .bind(to_ms(start))
            .bind(to_ms(end))
            .fetch_all(self.pool())
            .await?;
        rows.iter().map(GroupSpend::decode).collect()
    }
}

impl GroupSpend {
    fn decode(row: &AnyRow) -> Result<Self, StoreError> {
        Ok(Self {
            name: col(row, "name")?,
            requests: u64::try_from(col::<i64>(row, "requests")?).unwrap_or(0),
            spend: col::<Option<f64>>(row, "spend")?.unwrap_or(0.0),
            total_tokens: u64::try_from(col::<Option<i64>>(row, "total_tokens")?.unwrap_or(0))
                .unwrap_or(0),
        })
    }
}

/// One tag's row of [`Store::spend_by_tag`]: serialised under LiteLLM's `/spend/tags` names
/// (`individual_request_tag`, `log_count`, `total_spend`), so the endpoint can answer the list
/// as is, plus `total_tokens`, which LiteLLM's answer lacks.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TagSpend {
    /// The tag.
    #[serde(rename = "individual_request_tag")]
    pub tag: String,
    /// Requests that carried it.
    #[serde(rename = "log_count")]
    pub requests: u64,
    /// Their spend, in USD.
    #[serde(rename = "total_spend")]
    pub spend: f64,
    /// Their prompt and completion tokens.
    pub total_tokens: u64,
    /// When the first of them started (`/tag/list` shows it as a dynamic tag's `created_at`).
    #[serde(skip)]
    pub first_seen: Option<OffsetDateTime>,
    /// When the last of them started.
    #[serde(skip)]
    pub last_seen: Option<OffsetDateTime>,
}

/// `daily_spend_by.kind` of the rollup by the key's user.
const BY_USER: &str = "user";
/// `daily_spend_by.kind` of the rollup by end user (the request's `user`).
const BY_END_USER: &str = "end_user";
/// `daily_spend_by.kind` of the rollup by request tag.
const BY_TAG: &str = "tag";

/// `start..end` as whole UTC days, `(first, last)` both included, as the rollups key them
/// (`YYYY-MM-DD`); `None` when either is not a UTC midnight (or the range is empty), which
/// only the log itself answers.
fn whole_days(start: OffsetDateTime, end: OffsetDateTime) -> Option<(String, String)> {
    let midnight = |t: OffsetDateTime| {
        let t = t.to_offset(time::UtcOffset::UTC);
        (t.time() == time::Time::MIDNIGHT).then(|| t.date())
    };
    let (first, after) = (midnight(start)?, midnight(end)?);
    let last = after.previous_day().filter(|l| *l >= first)?;
    Some((day_text(first), day_text(last)))
}

/// A rollup's day key.
fn day_text(d: time::Date) -> String {
    format!("{:04}-{:02}-{:02}", d.year(), u8::from(d.month()), d.day())
}

/// Whether a batch's spend is added to the holders it names (requests served here) or only to
/// the daily rollups (spend logs imported with their holders' totals).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Charge {
    Holders,
    RollupsOnly,
}

/// A batch's sums, computed once in memory so the database sees one statement per key, team,
/// user and rollup row instead of one per request. Ordered maps, so every instance locks rows
/// in the same order and two concurrent batches on PostgreSQL cannot deadlock each other.
#[derive(Default)]
struct Totals<'a> {
    keys: BTreeMap<&'a str, f64>,
    teams: BTreeMap<&'a str, f64>,
    users: BTreeMap<&'a str, f64>,
    end_users: BTreeMap<&'a str, f64>,
    tags: BTreeMap<&'a str, f64>,
    daily: BTreeMap<(String, &'a str, &'a str, &'a str), DailySpend>,
    /// `daily_spend_by`'s rows: (kind, day, name).
    by: BTreeMap<(&'static str, String, &'a str), ByDay>,
}

/// One `daily_spend_by` row's sums within a batch.
#[derive(Debug, Clone, Copy)]
struct ByDay {
    requests: i64,
    spend: f64,
    total_tokens: i64,
    first_seen: i64,
    last_seen: i64,
}

impl ByDay {
    fn add(&mut self, l: &SpendLog) {
        let at = to_ms(l.start_time);
        self.requests += 1;
        self.spend += l.spend;
        self.total_tokens += to_i64(l.usage.prompt_tokens) + to_i64(l.usage.completion_tokens);
        self.first_seen = self.first_seen.min(at);
        self.last_seen = self.last_seen.max(at);
    }
}

impl Default for ByDay {
    fn default() -> Self {
        Self {
            requests: 0,
            spend: 0.0,
            total_tokens: 0,
            first_seen: i64::MAX,
            last_seen: i64::MIN,
        }
    }
}

impl<'a> Totals<'a> {
    fn of(logs: &[&'a SpendLog]) -> Self {
        let mut t = Self::default();
        for l in logs {
            if let Some(k) = &l.api_key {
                *t.keys.entry(k.as_str()).or_default() += l.spend;
            }
            if let Some(team) = &l.team_id {
                *t.teams.entry(team).or_default() += l.spend;
            }
            if let Some(user) = &l.user_id {
                *t.users.entry(user).or_default() += l.spend;
            }
            if let Some(end_user) = &l.end_user {
                *t.end_users.entry(end_user).or_default() += l.spend;
            }
            let day = l.day();
            // A request names each tag once (`server::tags`); a log written otherwise still
            // charges a tag once, and counts once in the tag's rollup.
            for (i, tag) in l.request_tags.iter().enumerate() {
                if !l.request_tags[..i].contains(tag) {
                    *t.tags.entry(tag.as_str()).or_default() += l.spend;
                    t.by.entry((BY_TAG, day.clone(), tag)).or_default().add(l);
                }
            }
            for (kind, name) in [(BY_USER, &l.user_id), (BY_END_USER, &l.end_user)] {
                let name = name.as_deref().unwrap_or("");
                t.by.entry((kind, day.clone(), name)).or_default().add(l);
            }
            let key = l.api_key.as_ref().map_or("", KeyHash::as_str);
            let team = l.team_id.as_deref().unwrap_or("");
            let d = t
                .daily
                .entry((day, key, team, &l.model_group))
                .or_insert_with_key(|(day, key, team, model)| DailySpend {
                    day: day.clone(),
                    api_key: (*key).to_owned(),
                    team_id: (*team).to_owned(),
                    model_group: (*model).to_owned(),
                    requests: 0,
                    failed_requests: 0,
                    prompt_tokens: 0,
                    completion_tokens: 0,
                    cached_tokens: 0,
                    cache_creation_tokens: 0,
                    spend: 0.0,
                });
            d.requests += 1;
            d.failed_requests += u64::from(l.status == SpendStatus::Failure);
            d.prompt_tokens += l.usage.prompt_tokens;
            d.completion_tokens += l.usage.completion_tokens;
            d.cached_tokens += l.usage.cached_tokens;
            d.cache_creation_tokens += l.usage.cache_creation_tokens;
            d.spend += l.spend;
        }
        t
    }
}

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn filters_become_numbered_sql_conditions() {
        assert_eq!(
            SpendLogFilter::default().conditions(),
            (String::new(), vec![])
        );
        let at = time::macros::datetime!(2026-03-01 10:00 UTC);
        let f = SpendLogFilter {
            key_alias: Some("app".into()),
            team_id: Some("t1".into()),
            status: Some(SpendStatus::Failure),
            start: Some(at),
            ..Default::default()
        };
        let (sql, args) = f.conditions();
        assert_eq!(
            sql,
            "WHERE api_key = (SELECT token FROM keys WHERE key_alias = $3) AND team_id = $4 \
             AND start_time >= $5 AND status = 'failure'"
        );
        assert_eq!(
            args,
            [
                Arg::Text("app".into()),
                Arg::Text("t1".into()),
                Arg::Int(to_ms(at)),
            ]
        );
        // Past a row: a plain range on start_time, then the tie broken by id.
        let older = SpendLogFilter {
            cursor: Some(Cursor::Before(LogPosition {
                start_ms: 7,
                id: "x".into(),
            })),
            ..Default::default()
        };
        assert_eq!(
            older.conditions(),
            (
                "WHERE start_time <= $3 AND (start_time < $4 OR id < $5)".to_owned(),
                vec![Arg::Int(7), Arg::Int(7), Arg::Text("x".into())]
            )
        );
        assert_eq!(older.order(), "start_time DESC, id DESC");
    }

    #[test]
    fn lists_leave_prompts_out() {
        let list = select_list(false);
        assert!(list.contains("CAST(NULL AS TEXT) AS messages"), "{list}");
        assert!(list.contains("CAST(NULL AS TEXT) AS response"), "{list}");
        assert!(select_list(true).ends_with(
            "messages, response, call_type, error, http_status, error_type, error_message"
        ));
        assert_eq!(attempts_json(&[]), None);
        // PostgreSQL: the numbers packed in one value first, then every other column once.
        let pg = pg_select_list(false);
        assert!(pg.starts_with(
            "COALESCE(CAST(prompt_tokens AS TEXT), '') || ',' || \
             COALESCE(CAST(completion_tokens AS TEXT), '')"
        ));
        let (_, texts) = pg.split_once("'') AS numbers, ").unwrap();
        assert!(texts.starts_with("id, request_id, api_key,"), "{pg}");
        assert!(texts.contains("CAST(NULL AS TEXT) AS messages"), "{pg}");
        assert_eq!(
            texts.split(", ").count(),
            LOG_COLUMNS.len() - NUMBER_COLUMNS.len(),
            "{pg}"
        );
    }

    /// The columns a record is written as are the ones [`JsonRow`] reads back, by name.
    #[test]
    fn the_json_row_has_every_column() {
        let l = SpendLog::new("r".into(), "m".into(), time::OffsetDateTime::UNIX_EPOCH);
        let v = serde_json::to_value(JsonRow::of(&l)).unwrap();
        let mut keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        let mut columns = LOG_COLUMNS.to_vec();
        keys.sort_unstable();
        columns.sort_unstable();
        assert_eq!(keys, columns);
        assert!(NUMBER_COLUMNS.iter().all(|c| LOG_COLUMNS.contains(c)));
        assert!(REAL_COLUMNS.iter().all(|c| NUMBER_COLUMNS.contains(c)));
    }
}
