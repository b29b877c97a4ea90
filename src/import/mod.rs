//! `sluice import litellm`: move a LiteLLM proxy's database into sluice's store without
//! re-issuing a key, and keep moving it while both serve (`--follow`).
//!
//! One pass reads LiteLLM's tables (`source`), maps each row to sluice's (`holders`,
//! `deployments`, `config_out`, `spend`) and writes what changed (`write`), in the order rows
//! point at each other: budgets, organizations, tags, teams, users, memberships, end users, keys,
//! deployments, MCP servers and guardrails, spend logs. Every column is either carried, kept
//! in metadata, or reported (`columns`); a row that cannot be read is reported with its table,
//! id and column, and the rest go on.

mod columns;
mod config_out;
mod decrypt;
mod deployments;
mod error;
mod holders;
mod report;
mod source;
mod spend;
mod write;

use std::collections::HashSet;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use time::OffsetDateTime;

use sluice_config::{self as config, ProcessEnv};
use sluice_store::{Location, OrgMember, Store, StoreOptions, TeamRole, DEFAULT_SQLITE_PATH};

use crate::cli::{LitellmImportArgs, SpendLogsArg};
use crate::models::Seal;
use decrypt::LiteLlmKey;
use holders::{Incoming, Lookups};
use report::{peak_memory, Report};
use source::{Row, Source};
use write::{TeamMembership, Writer};

pub use error::ImportError;
pub use spend::Since;

/// What every pass needs.
struct Import {
    source: Source,
    store: Store,
    key: Option<LiteLlmKey>,
    seal: Option<Seal>,
    since: Since,
    dry_run: bool,
    config_out: PathBuf,
    store_model_in_db: bool,
    has_master_key: bool,
}

/// Runs the command: one pass, or passes every `--follow` seconds until SIGINT or SIGTERM.
pub async fn run(args: LitellmImportArgs) -> ExitCode {
    match run_passes(args).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("sluice import litellm: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run_passes(args: LitellmImportArgs) -> Result<ExitCode, ImportError> {
    let import = prepare(&args).await?;
    let mut stop = Box::pin(stop_signal());
    loop {
        let outcome = import.pass().await;
        let failed = match outcome {
            Ok(report) => {
                print_report(&report, args.json);
                !report.errors.is_empty()
            }
            // While following, LiteLLM's database being away for a moment is not the end.
            Err(e) if args.follow.is_some() => {
                eprintln!(
                    "sluice import litellm: this pass failed, the next one will try again: {e}"
                );
                true
            }
            Err(e) => return Err(e),
        };
        let Some(every) = args.follow else {
            import.source.close().await;
            return Ok(if failed {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            });
        };
        tokio::select! {
            () = tokio::time::sleep(Duration::from_secs_f64(every.max(0.1))) => {}
            () = &mut stop => {
                import.source.close().await;
                return Ok(ExitCode::SUCCESS);
            }
        }
    }
}

/// Resolves on SIGINT or SIGTERM.
async fn stop_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}

#[expect(clippy::print_stdout, reason = "the report is the command's output")]
fn print_report(report: &Report, json: bool) {
    if json {
        match serde_json::to_string(report) {
            Ok(line) => println!("{line}"),
            Err(e) => eprintln!("sluice import litellm: the report cannot be written as JSON: {e}"),
        }
    } else {
        print!("{}", report.text());
    }
}

async fn prepare(args: &LitellmImportArgs) -> Result<Import, ImportError> {
    let loaded = config::load_file(&args.config, &ProcessEnv)
        .map_err(|e| ImportError::Config(e.to_string()))?;
    let general = &loaded.config.general;
    let location = Location::from_settings(
        general.database_url.as_ref(),
        None,
        &args.data_dir.join(DEFAULT_SQLITE_PATH),
    )?;
    if let Location::Postgres(url) = &location {
        if same_database(url.expose(), &args.database_url) {
            return Err(ImportError::SameDatabase(redact(&args.database_url)));
        }
    }
    let source = Source::connect(&args.database_url).await?;
    let store = Store::open(StoreOptions::new(location)).await?;
    let salt = std::env::var("LITELLM_SALT_KEY")
        .ok()
        .filter(|s| !s.is_empty());
    let master = general.master_key.as_ref();
    let key = args
        .litellm_salt_key
        .clone()
        .or_else(|| salt.clone())
        .or_else(|| master.map(|m| m.expose().to_owned()))
        .map(|k| LiteLlmKey::new(&k));
    let seal = master.map(|m| Seal::new(salt.as_deref(), m)).transpose()?;
    let since = match args.spend_logs {
        SpendLogsArg::All => Since::Everything,
        SpendLogsArg::None => Since::Nothing,
        SpendLogsArg::Since(t) => Since::From(t),
    };
    let config_out = args.config_out.clone().unwrap_or_else(|| {
        args.config
            .parent()
            .map_or_else(PathBuf::new, std::path::Path::to_path_buf)
            .join("litellm-import.yaml")
    });
    Ok(Import {
        source,
        store,
        key,
        seal,
        since,
        dry_run: args.dry_run,
        config_out,
        store_model_in_db: general.store_model_in_db,
        has_master_key: master.is_some(),
    })
}

/// Whether two PostgreSQL URLs name the same database (host, port and database name).
fn same_database(a: &str, b: &str) -> bool {
    use sqlx::postgres::PgConnectOptions;
    use std::str::FromStr as _;
    match (PgConnectOptions::from_str(a), PgConnectOptions::from_str(b)) {
        (Ok(a), Ok(b)) => {
            a.get_host() == b.get_host()
                && a.get_port() == b.get_port()
                && a.get_database().unwrap_or("") == b.get_database().unwrap_or("")
        }
        _ => a.trim() == b.trim(),
    }
}

/// A URL without its password, for messages.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => format!("{}://…@{}", &url[..s], &url[at + 1..]),
        _ => url.to_owned(),
    }
}

/// Tables whose rows the import reads.
const READ: &[&str] = &[
    "LiteLLM_VerificationToken",
    "LiteLLM_TeamTable",
    "LiteLLM_UserTable",
    "LiteLLM_OrganizationTable",
    "LiteLLM_OrganizationMembership",
    "LiteLLM_BudgetTable",
    "LiteLLM_TagTable",
    "LiteLLM_EndUserTable",
    "LiteLLM_ProxyModelTable",
    "LiteLLM_MCPServerTable",
    "LiteLLM_GuardrailsTable",
    "LiteLLM_SpendLogs",
    "LiteLLM_ModelTable",
    "LiteLLM_ObjectPermissionTable",
    "LiteLLM_TeamMembership",
];

/// Tables sluice rebuilds or keeps its own way (rollups from the spend logs, deleted keys
/// from their absence, LiteLLM's own jobs and health records): not reported.
const DERIVED: &[&str] = &[
    "LiteLLM_DailyUserSpend",
    "LiteLLM_DailyTeamSpend",
    "LiteLLM_DailyTagSpend",
    "LiteLLM_DailyOrganizationSpend",
    "LiteLLM_DailyEndUserSpend",
    "LiteLLM_DailyAgentSpend",
    "LiteLLM_DeletedVerificationToken",
    "LiteLLM_DeletedTeamTable",
    "LiteLLM_CronJob",
    "LiteLLM_HealthCheckTable",
    "LiteLLM_ErrorLogs",
];

/// `LiteLLM_Config` rows LiteLLM keeps for itself, not settings an operator saved.
const CONFIG_BOOKKEEPING: &[&str] = &["mcp_catalog"];

/// Why the rows of a table sluice does not import stay behind.
fn left_behind(table: &str) -> &'static str {
    match table {
        "LiteLLM_Config" => "settings saved through LiteLLM's UI are not read: put them in the config file",
        "LiteLLM_CredentialsTable" => "stored credentials are not imported: put them in the config (litellm_params, os.environ/...)",
        "LiteLLM_AuditLog" => "LiteLLM's audit history is not imported (sluice's own audit log starts with the import)",
        "LiteLLM_ManagedFileTable" | "LiteLLM_ManagedObjectTable" => "files and batches uploaded through LiteLLM stay with LiteLLM and its providers",
        "LiteLLM_InvitationLink" => "invitation links are not imported: invite users again",
        "LiteLLM_UserNotifications" => "user notifications are not imported",
        _ => "sluice has no equivalent; not imported",
    }
}

impl Import {
    /// One pass over every table.
    async fn pass(&self) -> Result<Report, ImportError> {
        let now = OffsetDateTime::now_utc();
        let mut report = Report::new(self.dry_run);
        let w = Writer {
            store: &self.store,
            dry_run: self.dry_run,
            now,
        };
        let mut lookups = Lookups::default();

        // MCP servers first: object permissions name them by id, sluice by name.
        let servers = self
            .source
            .rows("LiteLLM_MCPServerTable", "server_id")
            .await?;
        for r in &servers {
            lookups
                .mcp_names
                .insert(r.id.clone(), config_out::mcp_name(r));
        }
        for r in self
            .source
            .rows("LiteLLM_ObjectPermissionTable", "object_permission_id")
            .await?
        {
            let p = lookups.permission(&r);
            lookups.permissions.insert(r.id.clone(), p);
        }
        for r in self.source.rows("LiteLLM_ModelTable", "id").await? {
            if let Some(a) = r.get("aliases") {
                lookups.team_aliases.insert(r.id.clone(), a.clone());
            }
        }

        let rows = self.source.rows("LiteLLM_BudgetTable", "budget_id").await?;
        let budgets = collect(&rows, &mut report, |r, rep| holders::budget(r, rep, now));
        for b in &budgets {
            lookups.budgets.insert(b.id.clone(), b.row.clone());
        }
        w.apply(budgets, &ids(&rows), &mut report).await?;

        let rows = self
            .source
            .rows("LiteLLM_OrganizationTable", "organization_id")
            .await?;
        let orgs = collect(&rows, &mut report, |r, rep| {
            holders::organization(r, &lookups, rep, now)
        });
        w.apply(orgs, &ids(&rows), &mut report).await?;

        let rows = self.source.rows("LiteLLM_TagTable", "tag_name").await?;
        let tags = collect(&rows, &mut report, |r, rep| {
            holders::tag(r, &lookups, rep, now)
        });
        w.apply(tags, &ids(&rows), &mut report).await?;

        let rows = self.source.rows("LiteLLM_TeamTable", "team_id").await?;
        let mut teams = Vec::new();
        let mut members = Vec::new();
        let mut member_ids = HashSet::new();
        for r in &rows {
            match holders::team(r, &lookups, &mut report, now) {
                Ok((t, m)) => {
                    for m in m {
                        member_ids.insert(m.id.clone());
                        members.push(team_member(&t.id, m));
                    }
                    teams.push(t);
                }
                Err(e) => report.errors.push(e),
            }
        }
        w.apply(teams, &ids(&rows), &mut report).await?;

        let rows = self.source.rows("LiteLLM_UserTable", "user_id").await?;
        let users = collect(&rows, &mut report, |r, rep| {
            holders::user(r, &lookups, rep, now)
        });
        w.apply(users, &ids(&rows), &mut report).await?;
        w.apply(members, &member_ids, &mut report).await?;

        let rows = self
            .source
            .rows("LiteLLM_OrganizationMembership", "user_id")
            .await?;
        let member_id = |r: &Row| {
            let org = r.text("organization_id").ok().flatten().unwrap_or_default();
            format!("{org}\u{1f}{}", r.id)
        };
        let (org_members, present): (Vec<Incoming<OrgMember>>, _) =
            collect_some(&rows, &mut report, member_id, |r, rep| {
                holders::org_member(r, &lookups, rep, now).map(Some)
            });
        w.apply(org_members, &present, &mut report).await?;

        let rows = self.source.rows("LiteLLM_EndUserTable", "user_id").await?;
        let end_users = collect(&rows, &mut report, |r, rep| {
            holders::end_user(r, &lookups, rep, now)
        });
        w.apply(end_users, &ids(&rows), &mut report).await?;

        let rows = self
            .source
            .rows("LiteLLM_VerificationToken", "token")
            .await?;
        let keys = collect(&rows, &mut report, |r, rep| {
            holders::key(r, &lookups, rep, now)
        });
        w.apply(keys, &ids(&rows), &mut report).await?;

        self.deployments(&w, &mut report).await?;
        self.config_file(&w, &servers, &mut report).await?;
        spend::import(&self.source, &w, self.since, &mut report).await?;
        self.team_memberships(&mut report).await?;
        self.other_tables(&mut report).await?;
        if !self.has_master_key {
            report.notes.push("sluice's config has no general_settings.master_key: the gateway does not check keys, so the imported ones are not needed to call it. Set LiteLLM's master key there.".into());
        }
        report.peak_memory_bytes = peak_memory();
        Ok(report)
    }

    async fn deployments(&self, w: &Writer<'_>, report: &mut Report) -> Result<(), ImportError> {
        let rows = self
            .source
            .rows("LiteLLM_ProxyModelTable", "model_id")
            .await?;
        let (models, present) = collect_some(
            &rows,
            report,
            |r| r.id.clone(),
            |r, rep| deployments::model(r, self.key.as_ref(), self.seal.as_ref(), rep, w.now),
        );
        if !models.is_empty() && !self.store_model_in_db {
            report.notes.push("LiteLLM's stored deployments were imported, but sluice serves stored deployments only with general_settings.store_model_in_db: true (as LiteLLM does): set it.".into());
        }
        w.apply(models, &present, report).await?;
        Ok(())
    }

    async fn config_file(
        &self,
        w: &Writer<'_>,
        servers: &[Row],
        report: &mut Report,
    ) -> Result<(), ImportError> {
        let (entries, present) = collect_some(
            servers,
            report,
            |r| r.id.clone(),
            |r, rep| config_out::mcp_server(r, self.key.as_ref(), rep),
        );
        let rows = self
            .source
            .rows("LiteLLM_GuardrailsTable", "guardrail_id")
            .await?;
        let (guardrails, present_g) = collect_some(
            &rows,
            report,
            |r| r.id.clone(),
            |r, rep| config_out::guardrail(r, self.key.as_ref(), rep),
        );
        let text = config_out::render(
            &entries.iter().map(|e| e.row.clone()).collect::<Vec<_>>(),
            &guardrails.iter().map(|g| g.row.clone()).collect::<Vec<_>>(),
        );
        let any = !entries.is_empty() || !guardrails.is_empty();
        w.apply(
            entries.into_iter().map(server_entry).collect(),
            &present,
            report,
        )
        .await?;
        w.apply(
            guardrails.into_iter().map(guardrail_entry).collect(),
            &present_g,
            report,
        )
        .await?;
        // Nothing stored, and no file of an earlier run to empty: no file.
        if !any && !self.config_out.exists() {
            return Ok(());
        }
        let path = self.config_out.display();
        if self.dry_run {
            report.notes.push(format!(
                "MCP servers and guardrails would be written to {path}"
            ));
            return Ok(());
        }
        match config_out::write_if_changed(&self.config_out, &text) {
            Ok(true) => report.notes.push(format!(
                "MCP servers and guardrails written to {path} (mode 0600: it holds their credentials). Add it to the config's `include:` list, then restart or reload sluice."
            )),
            Ok(false) => {}
            Err(e) => report.errors.push(report::RowError {
                table: "LiteLLM_MCPServerTable",
                id: "*".into(),
                column: "*".into(),
                why: format!("{path} could not be written: {e}"),
            }),
        }
        Ok(())
    }

    /// Members' budgets within a team (`LiteLLM_TeamMembership`) are not carried: listed.
    async fn team_memberships(&self, report: &mut Report) -> Result<(), ImportError> {
        for r in self
            .source
            .rows("LiteLLM_TeamMembership", "user_id")
            .await?
        {
            let team = r.text("team_id").ok().flatten().unwrap_or_default();
            let id = format!("{team}/{}", r.id);
            if r.text("budget_id").ok().flatten().is_some() {
                report.not_carried(
                    r.table,
                    &id,
                    "budget_id",
                    "a member's own budget within a team is not enforced by sluice",
                );
            }
        }
        Ok(())
    }

    /// Every other table with rows: reported as a whole.
    async fn other_tables(&self, report: &mut Report) -> Result<(), ImportError> {
        let others: Vec<String> = self
            .source
            .tables()
            .filter(|t| !READ.contains(t) && !DERIVED.contains(t))
            .map(str::to_owned)
            .collect();
        for t in others {
            if t == "LiteLLM_Config" {
                // One row per setting saved through LiteLLM's UI, named by `param_name`; its own
                // bookkeeping rows (a trigger keeps the MCP catalog's revision there) are not
                // settings.
                for r in self.source.rows("LiteLLM_Config", "param_name").await? {
                    if !CONFIG_BOOKKEEPING.contains(&r.id.as_str()) {
                        report.not_carried(&t, &r.id, "param_value", left_behind(&t));
                    }
                }
                continue;
            }
            let n = self.source.count(&t).await?;
            if n > 0 {
                report.not_carried(&t, "*", "*", format!("{n} rows: {}", left_behind(&t)));
            }
        }
        Ok(())
    }
}

/// Maps every row, keeping the ones that map and reporting the rest.
fn collect<T>(
    rows: &[Row],
    report: &mut Report,
    mut map: impl FnMut(&Row, &mut Report) -> Result<Incoming<T>, report::RowError>,
) -> Vec<Incoming<T>> {
    let mut out = Vec::with_capacity(rows.len());
    for r in rows {
        match map(r, report) {
            Ok(i) => out.push(i),
            Err(e) => report.errors.push(e),
        }
    }
    out
}

/// Maps every row: a row mapped to `None` is left out on purpose (its mapping reported why),
/// a row that fails is reported. Returns what to write, and the ids (`id_of`) the source still
/// has, read or not: a row that failed is not a deleted row, a row left out is (what an
/// earlier run imported of it goes).
fn collect_some<T>(
    rows: &[Row],
    report: &mut Report,
    id_of: impl Fn(&Row) -> String,
    mut map: impl FnMut(&Row, &mut Report) -> Result<Option<Incoming<T>>, report::RowError>,
) -> (Vec<Incoming<T>>, HashSet<String>) {
    let mut out = Vec::with_capacity(rows.len());
    let mut present = HashSet::with_capacity(rows.len());
    for r in rows {
        match map(r, report) {
            Ok(Some(i)) => {
                present.insert(id_of(r));
                out.push(i);
            }
            Ok(None) => {}
            Err(e) => {
                present.insert(id_of(r));
                report.errors.push(e);
            }
        }
    }
    (out, present)
}

/// Every row's id: what the source still has (read or not).
fn ids(rows: &[Row]) -> HashSet<String> {
    rows.iter().map(|r| r.id.clone()).collect()
}

fn team_member(team: &str, m: Incoming<(String, TeamRole)>) -> Incoming<TeamMembership> {
    Incoming {
        id: m.id,
        row: TeamMembership {
            team_id: team.to_owned(),
            member: m.row,
        },
        spend: 0.0,
        fingerprint: m.fingerprint,
    }
}

fn server_entry(e: Incoming<config_out::Entry>) -> Incoming<config_out::McpServer> {
    Incoming {
        id: e.id,
        row: config_out::McpServer,
        spend: 0.0,
        fingerprint: e.fingerprint,
    }
}

fn guardrail_entry(e: Incoming<config_out::Entry>) -> Incoming<config_out::GuardrailEntry> {
    Incoming {
        id: e.id,
        row: config_out::GuardrailEntry,
        spend: 0.0,
        fingerprint: e.fingerprint,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_database_is_recognised_and_passwords_are_not_shown() {
        assert!(same_database(
            "postgres://a:pw@db.local:5432/litellm",
            "postgresql://b@db.local/litellm?sslmode=disable"
        ));
        assert!(!same_database(
            "postgres://db.local/litellm",
            "postgres://db.local/sluice"
        ));
        assert!(!same_database(
            "postgres://db.local/litellm",
            "postgres://other/litellm"
        ));
        assert_eq!(redact("postgres://u:secret@h:5/db"), "postgres://…@h:5/db");
        assert!(!redact("postgres://u:secret@h/db").contains("secret"));
    }
}
