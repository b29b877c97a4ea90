//! MCP servers and guardrails LiteLLM keeps in its database (`LiteLLM_MCPServerTable`,
//! `LiteLLM_GuardrailsTable`). sluice configures both in its config file, so the import
//! writes them as a config file of their own for the main one to `include:` (mode 0600: the
//! credentials in it are opened). The file is rewritten only when its content changes.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Map, Value};
use time::OffsetDateTime;

use sluice_core::limits::SubjectKind;
use sluice_store::{Store, StoreError};

use super::columns::{self, fingerprint, Columns};
use super::decrypt::{LiteLlmKey, Opened};
use super::deployments::open;
use super::holders::Incoming;
use super::report::{Report, RowError};
use super::source::Row;
use super::write::Kind;

/// A server or guardrail, as its config entry.
#[derive(Debug, Clone)]
pub struct Entry {
    /// Its name in the config (a server's key, a guardrail's `guardrail_name`).
    pub name: String,
    /// The entry.
    pub value: Value,
}

const MCP_UNSUPPORTED: &str = "not supported by sluice's MCP gateway";

/// `LiteLLM_MCPServerTable`.
const MCP: Columns = Columns {
    mapped: &[
        "server_id", "server_name", "alias", "description", "url", "transport", "auth_type",
        "command", "args", "env", "static_headers", "credentials", "allowed_tools", "mcp_info",
        "token_url", "oauth2_flow", "timeout",
    ],
    kept: &[],
    dropped: &[
        ("extra_headers", "forwarding a client's headers to the server is not supported"),
        ("mcp_access_groups", "MCP access groups are not supported: name servers in a key's or team's object_permission.mcp_servers"),
        ("authorization_url", MCP_UNSUPPORTED),
        ("registration_url", MCP_UNSUPPORTED),
        ("allow_all_keys", "every key may use every server unless its object_permission names servers"),
        ("spec_path", "OpenAPI-to-MCP servers are not supported"),
        ("byok_api_key_help_url", MCP_UNSUPPORTED),
        ("byok_description", MCP_UNSUPPORTED),
        ("is_byok", "bring-your-own-key servers are not supported"),
        ("tool_name_to_description", MCP_UNSUPPORTED),
        ("tool_name_to_display_name", MCP_UNSUPPORTED),
        ("source_url", MCP_UNSUPPORTED),
        ("instructions", MCP_UNSUPPORTED),
        ("delegate_auth_to_upstream", MCP_UNSUPPORTED),
        ("env_vars", MCP_UNSUPPORTED),
        ("oauth_passthrough", "passing a client's OAuth token through is not supported"),
        ("max_concurrent_requests", MCP_UNSUPPORTED),
        ("token_exchange_endpoint", "token exchange is not supported"),
        ("audience", "token exchange is not supported"),
        ("subject_token_type", "token exchange is not supported"),
        ("token_exchange_profile", "token exchange is not supported"),
        ("dcr_bridge", MCP_UNSUPPORTED),
        ("issuer", MCP_UNSUPPORTED),
        ("per_server_oauth_discovery", MCP_UNSUPPORTED),
        ("pinned_tools", MCP_UNSUPPORTED),
        ("rpm", "per-server rate limits are not supported"),
    ],
    bookkeeping: &[
        "created_at", "created_by", "updated_at", "updated_by", "status", "last_health_check",
        "health_check_error", "available_on_public_internet", "approval_status", "submitted_by",
        "submitted_at", "reviewed_at", "review_notes",
    ],
};

/// `LiteLLM_GuardrailsTable`.
const GUARDRAIL: Columns = Columns {
    mapped: &[
        "guardrail_id",
        "guardrail_name",
        "litellm_params",
        "guardrail_info",
        "team_id",
        "status",
    ],
    kept: &[],
    dropped: &[],
    bookkeeping: &["created_at", "updated_at", "reviewed_at", "submitted_at"],
};

/// The keys of LiteLLM's MCP credentials that sluice's `mcp_servers` entries take.
const CREDENTIALS: &[&str] = &[
    "auth_value",
    "client_id",
    "client_secret",
    "scopes",
    "token_url",
];

/// An MCP server, tracked like every imported object (its entry goes to the config file, not
/// the store).
pub struct McpServer;

/// A guardrail, likewise.
pub struct GuardrailEntry;

macro_rules! written_to_the_file {
    ($t:ty, $kind:literal, $report:literal, $table:literal) => {
        impl Kind for $t {
            const KIND: &'static str = $kind;
            const REPORT: &'static str = $report;
            const TABLE: &'static str = $table;
            const SUBJECT: Option<SubjectKind> = None;

            async fn exists(_: &Store, _: &str) -> Result<Option<bool>, StoreError> {
                Ok(None)
            }
            async fn create(&self, _: &Store, _: OffsetDateTime) -> Result<(), StoreError> {
                Ok(())
            }
            async fn update(&self, _: &Store, _: OffsetDateTime) -> Result<(), StoreError> {
                Ok(())
            }
            async fn delete(_: &Store, _: &str, _: OffsetDateTime) -> Result<(), StoreError> {
                Ok(())
            }
        }
    };
}

written_to_the_file!(
    McpServer,
    "mcp_server",
    "mcp_servers",
    "LiteLLM_MCPServerTable"
);
written_to_the_file!(
    GuardrailEntry,
    "guardrail",
    "guardrails",
    "LiteLLM_GuardrailsTable"
);

/// The name sluice's config gives a LiteLLM MCP server: its alias, else its name, else its id.
pub fn mcp_name(r: &Row) -> String {
    ["alias", "server_name", "server_id"]
        .iter()
        .find_map(|c| r.text(c).ok().flatten())
        .unwrap_or_else(|| r.id.clone())
}

/// A server not yet reviewed (LiteLLM's submissions) is not served; `None` for it.
pub fn mcp_server(
    r: &Row,
    key: Option<&LiteLlmKey>,
    report: &mut Report,
) -> Result<Option<Incoming<Entry>>, RowError> {
    let mut ignored = Map::new();
    MCP.extras(r, &mut ignored, report);
    if let Some(s) = r.text("approval_status")?.filter(|s| s != "active") {
        report.not_carried(
            r.table,
            &r.id,
            "approval_status",
            format!("`{s}`: only approved (active) servers are imported"),
        );
        return Ok(None);
    }
    let mut e = Map::new();
    for c in [
        "url",
        "transport",
        "auth_type",
        "command",
        "description",
        "token_url",
        "oauth2_flow",
    ] {
        if let Some(v) = r.text(c)? {
            e.insert(c.into(), v.into());
        }
    }
    for c in ["args", "allowed_tools"] {
        let list = r.list(c)?;
        if !list.is_empty() {
            e.insert(c.into(), list.into());
        }
    }
    if let Some(t) = r.float("timeout")? {
        e.insert("timeout".into(), t.into());
    }
    for c in ["env", "static_headers"] {
        let m = secret_map(r, c, key)?;
        if !m.is_empty() {
            e.insert(c.into(), Value::Object(m));
        }
    }
    let mut credentials = secret_map(r, "credentials", key)?;
    for c in CREDENTIALS {
        if let Some(v) = credentials.remove(*c) {
            e.entry(*c).or_insert(v);
        }
    }
    for name in credentials.keys() {
        report.not_carried(
            r.table,
            &r.id,
            &format!("credentials.{name}"),
            MCP_UNSUPPORTED,
        );
    }
    let info = r.object("mcp_info")?;
    if let Some(cost) = info
        .get("mcp_server_cost_info")
        .filter(|c| !columns::says_nothing(c))
    {
        e.insert(
            "mcp_info".into(),
            serde_json::json!({ "mcp_server_cost_info": cost }),
        );
    }
    let name = mcp_name(r);
    Ok(Some(entry(r, name, e)))
}

/// One of LiteLLM's MCP secret maps (`credentials`, `static_headers`, `env`): an object of
/// (possibly sealed) values, or the whole object sealed as one string (its
/// `encrypt_secret_map`).
fn secret_map(
    r: &Row,
    column: &str,
    key: Option<&LiteLlmKey>,
) -> Result<Map<String, Value>, RowError> {
    if let (Some(Value::String(s)), Some(k)) = (r.get(column), key) {
        // Stored as a JSON string holding the sealed object, or as the sealed text itself.
        let text = serde_json::from_str::<String>(s).unwrap_or_else(|_| s.clone());
        match k.open(&text) {
            Opened::Plain(plain) => {
                return match serde_json::from_str(&plain) {
                    Ok(Value::Object(m)) => Ok(m),
                    _ => Err(r.error(column, "opened, but not a JSON object")),
                };
            }
            Opened::WrongKey => {
                return Err(r.error(column, "sealed under another key than the one given (LiteLLM's LITELLM_SALT_KEY, else its master key)"));
            }
            Opened::NotSealed => {}
        }
    }
    let mut m = r.object(column)?;
    if !m.is_empty() {
        open(r, column, &mut m, key)?;
    }
    Ok(m)
}

/// A guardrail; `None` for one LiteLLM scopes to a team or has not approved (not imported,
/// reported: sluice's config guardrails are global, named per request or `default_on`).
pub fn guardrail(
    r: &Row,
    key: Option<&LiteLlmKey>,
    report: &mut Report,
) -> Result<Option<Incoming<Entry>>, RowError> {
    let mut ignored = Map::new();
    GUARDRAIL.extras(r, &mut ignored, report);
    if let Some(team) = r.text("team_id")? {
        report.not_carried(
            r.table,
            &r.id,
            "team_id",
            format!("a guardrail of team `{team}` is not imported: sluice's guardrails are global"),
        );
        return Ok(None);
    }
    if let Some(s) = r.text("status")?.filter(|s| s != "active") {
        report.not_carried(
            r.table,
            &r.id,
            "status",
            format!("`{s}`: only active guardrails are imported"),
        );
        return Ok(None);
    }
    let name = r
        .text("guardrail_name")?
        .ok_or_else(|| r.error("guardrail_name", "missing"))?;
    let mut params = r.object("litellm_params")?;
    open(r, "litellm_params", &mut params, key)?;
    // LiteLLM stores its whole settings model, every field it has for any vendor, most of
    // them null or its default: the file keeps the settings sluice's guardrails read.
    let mut unread: Vec<String> = Vec::new();
    params.retain(|k, v| {
        if v.is_null() {
            return false;
        }
        let read = sluice_config::GUARDRAIL_PARAM_KEYS.contains(&k.as_str());
        if !read {
            unread.push(k.clone());
        }
        read
    });
    if !unread.is_empty() {
        report.not_carried(
            r.table,
            &r.id,
            "litellm_params",
            format!(
                "settings sluice's guardrails do not read (most are LiteLLM's defaults): {}",
                unread.join(", ")
            ),
        );
    }
    let mut e = Map::new();
    e.insert("guardrail_name".into(), name.clone().into());
    e.insert("litellm_params".into(), Value::Object(params));
    let info = r.object("guardrail_info")?;
    if !info.is_empty() {
        e.insert("guardrail_info".into(), Value::Object(info));
    }
    Ok(Some(entry(r, name, e)))
}

/// A config entry read from `r`, tracked by `r`'s id and fingerprint.
fn entry(r: &Row, name: String, value: Map<String, Value>) -> Incoming<Entry> {
    Incoming {
        id: r.id.clone(),
        fingerprint: fingerprint(r, &[]),
        row: Entry {
            name,
            value: Value::Object(value),
        },
        spend: 0.0,
    }
}

/// The file's text: a header, then `mcp_servers:` and `guardrails:` (whichever has entries).
pub fn render(servers: &[Entry], guardrails: &[Entry]) -> String {
    let mut root = Map::new();
    if !servers.is_empty() {
        let by_name: BTreeMap<&str, &Value> = servers
            .iter()
            .map(|s| (s.name.as_str(), &s.value))
            .collect();
        root.insert(
            "mcp_servers".into(),
            serde_json::to_value(by_name).unwrap_or_default(),
        );
    }
    if !guardrails.is_empty() {
        root.insert(
            "guardrails".into(),
            guardrails.iter().map(|g| g.value.clone()).collect(),
        );
    }
    let body = serde_yaml_ng::to_string(&Value::Object(root)).unwrap_or_default();
    format!(
        "# Written by `sluice import litellm` from LiteLLM's database (LiteLLM_MCPServerTable,\n\
         # LiteLLM_GuardrailsTable). It holds their credentials opened: keep it private (mode 0600).\n\
         # Name it in the main config's `include:` list. A re-run rewrites it.\n{body}"
    )
}

/// Writes `text` to `path` if it differs from what is there (through a file beside it, so a
/// reader never sees half of it), readable by the owner only. Returns whether it wrote.
pub fn write_if_changed(path: &Path, text: &str) -> std::io::Result<bool> {
    if std::fs::read_to_string(path).is_ok_and(|old| old == text) {
        return Ok(false);
    }
    let tmp = path.with_extension("yaml.tmp");
    {
        use std::io::Write as _;
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt as _;
            options.mode(0o600);
        }
        let mut f = options.open(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600))?;
    }
    std::fs::rename(&tmp, path)?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const LEGACY: &str =
        "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXqTKON1cPKR_UjN-_KQsOL7v5B-oaLwIH9gKY551vL25o6w==";

    #[test]
    fn a_server_becomes_a_config_entry_with_its_credentials_opened() {
        let key = LiteLlmKey::new("sk-litellm-master-1234");
        let r = Row::from_json(
            "LiteLLM_MCPServerTable",
            "srv-1",
            json!({"server_id": "srv-1", "server_name": "docs", "alias": null,
                   "url": "http://127.0.0.1:9/mcp", "transport": "http", "auth_type": "bearer_token",
                   "credentials": {"auth_value": LEGACY}, "allowed_tools": ["search"],
                   "extra_headers": ["x-user"], "status": "healthy", "available_on_public_internet": true,
                   "approval_status": "active"}),
        );
        let mut report = Report::new(false);
        let s = mcp_server(&r, Some(&key), &mut report).unwrap().unwrap();
        assert_eq!(s.row.name, "docs");
        assert_eq!(s.row.value["auth_value"], "sk-upstream-secret");
        assert_eq!(s.row.value["allowed_tools"], json!(["search"]));
        assert_eq!(report.not_carried.len(), 1);
        assert_eq!(report.not_carried[0].field, "extra_headers");
        let text = render(&[s.row], &[]);
        assert!(text.contains("mcp_servers:\n  docs:\n"), "{text}");
        let loaded = sluice_config::load_str(
            &format!("model_list: [{{model_name: m, litellm_params: {{model: mock/m}}}}]\n{text}"),
            &sluice_config::ProcessEnv,
        );
        assert!(loaded.is_ok(), "{loaded:?}");
    }

    #[test]
    fn team_guardrails_stay_out_and_global_ones_are_written() {
        let mut report = Report::new(false);
        let team = Row::from_json(
            "LiteLLM_GuardrailsTable",
            "g1",
            json!({"guardrail_name": "t", "team_id": "team-a"}),
        );
        assert!(guardrail(&team, None, &mut report).unwrap().is_none());
        let g = Row::from_json(
            "LiteLLM_GuardrailsTable",
            "g2",
            json!({"guardrail_name": "secrets", "status": "active",
                   "litellm_params": {"guardrail": "hide-secrets", "mode": "pre_call"}}),
        );
        let g = guardrail(&g, None, &mut report).unwrap().unwrap();
        let text = render(&[], &[g.row]);
        assert!(text.contains("guardrail_name: secrets"), "{text}");
        let dir = std::env::temp_dir().join(format!("sluice-config-out-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("litellm-import.yaml");
        assert!(write_if_changed(&path, &text).unwrap());
        assert!(
            !write_if_changed(&path, &text).unwrap(),
            "unchanged: not rewritten"
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            assert_eq!(
                std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
                0o600
            );
        }
        std::fs::remove_dir_all(&dir).ok();
    }
}
