//! `sluice check-config`'s report: the resolved model list as sluice will serve it, secrets
//! masked, so a user sees what each `os.environ/` reference and default turned into.

use std::fmt::Write as _;

use super::model::{Config, Deployment};
use sluice_core::Secret;
use sluice_providers::ProviderConfig;

/// The resolved config as text, one block per model group.
pub fn describe(config: &Config) -> String {
    let mut out = String::new();
    let mut groups: Vec<&str> = Vec::new();
    for d in &config.deployments {
        if !groups.contains(&d.model_name.as_str()) {
            groups.push(&d.model_name);
        }
    }
    let _ = writeln!(
        out,
        "{} deployment{} in {} model group{}",
        config.deployments.len(),
        plural(config.deployments.len()),
        groups.len(),
        plural(groups.len())
    );
    for g in groups {
        let _ = writeln!(out, "\n{g}");
        for d in config.deployments.iter().filter(|d| d.model_name == g) {
            deployment(&mut out, d);
        }
    }
    if !config.router.model_group_alias.is_empty() {
        let _ = writeln!(out, "\nmodel_group_alias");
        for a in &config.router.model_group_alias {
            let hidden = if a.hidden { " (hidden)" } else { "" };
            let _ = writeln!(out, "  {} → {}{hidden}", a.alias, a.group);
        }
    }
    let g = &config.general;
    let _ = writeln!(out, "\ngeneral_settings");
    let _ = writeln!(out, "  master_key: {}", masked(g.master_key.as_ref()));
    let _ = writeln!(
        out,
        "  max_request_size: {} bytes",
        g.max_request_body_bytes
    );
    if g.database_url.is_some() {
        let _ = writeln!(out, "  database_url: {}", masked(g.database_url.as_ref()));
    }
    if let Some(s) = &config.router.routing_strategy {
        let _ = writeln!(out, "router_settings.routing_strategy: {}", s.name());
    }
    let tags = config.router.tag_filtering;
    if tags.enabled {
        let _ = writeln!(
            out,
            "router_settings.enable_tag_filtering: true (a deployment matches {} of a request's tags)",
            if tags.match_any { "any" } else { "all" }
        );
    }
    if !config.callbacks.sinks.is_empty() {
        let _ = writeln!(out, "\ncallbacks");
    }
    for s in &config.callbacks.sinks {
        let events = match (s.on_success, s.on_failure) {
            (true, true) => "success+failure",
            (true, false) => "success",
            _ => "failure",
        };
        let _ = writeln!(
            out,
            "  - {}: {} → {}  ({events}; batch {}, flush {:.1}s{})",
            s.name,
            s.kind.type_name(),
            s.kind.destination(),
            s.batch_size,
            s.flush_interval.as_secs_f64(),
            if s.message_logging {
                "; with prompts and answers"
            } else {
                ""
            }
        );
    }
    guardrails(&mut out, config);
    pass_through(&mut out, config);
    mcp_servers(&mut out, config);
    out
}

/// The MCP tool servers: where each is reached (host only), which credential headers go with
/// it (names only), its tool lists and bounds.
fn mcp_servers(out: &mut String, config: &Config) {
    use sluice_mcp::settings::Transport;
    if config.mcp.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "
mcp_servers (POST /mcp)"
    );
    for s in &config.mcp.servers {
        let reach = match &s.transport {
            Transport::Http(h) | Transport::Sse(h) => {
                use sluice_mcp::settings::Credential;
                let kind = if matches!(s.transport, Transport::Sse(_)) {
                    "sse"
                } else {
                    "http"
                };
                // Scheme and host only: some servers' URLs carry a token in the path.
                let origin = |u: &http::Uri| {
                    format!(
                        "{}://{}",
                        u.scheme_str().unwrap_or("http"),
                        u.authority().map_or("", |a| a.as_str()),
                    )
                };
                let mut names: Vec<&str> = Vec::new();
                if let Some(Credential::Header(n, _)) = &h.credential {
                    names.push(n.as_str());
                }
                names.extend(h.headers.iter().map(|(n, _)| n.as_str()));
                let mut notes = Vec::new();
                if !names.is_empty() {
                    notes.push(format!("headers: {}", names.join(", ")));
                }
                if let Some(Credential::OAuth(c)) = &h.credential {
                    notes.push(format!(
                        "oauth2 client_credentials at {}",
                        origin(&c.token_url)
                    ));
                }
                if notes.is_empty() {
                    format!("{kind} {}", origin(&h.url))
                } else {
                    format!("{kind} {}  ({})", origin(&h.url), notes.join("; "))
                }
            }
            Transport::Stdio(st) => {
                let env: Vec<&str> = st.env.keys().map(String::as_str).collect();
                format!(
                    "stdio {} {}  (env: {})",
                    st.command,
                    st.args.join(" "),
                    env.join(", ")
                )
            }
        };
        let _ = writeln!(out, "  {}  → {reach}", s.name);
        let allowed = s
            .tools
            .allowed
            .as_ref()
            .map_or_else(|| "all".to_owned(), |a| a.join(", "));
        let _ = writeln!(
            out,
            "    tools: {allowed}{}; timeout {:.1}s, answers up to {} bytes",
            if s.tools.disallowed.is_empty() {
                String::new()
            } else {
                format!(" except {}", s.tools.disallowed.join(", "))
            },
            s.timeout.as_secs_f64(),
            s.max_response_bytes
        );
    }
}

/// Each guardrail: its kind, when it runs, and what it masks or blocks.
fn guardrails(out: &mut String, config: &Config) {
    use sluice_guardrails::{Action, Kind};
    if config.guardrails.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "
guardrails"
    );
    for g in &config.guardrails {
        let s = &g.settings;
        let kind = s.kind.name();
        let modes: Vec<&str> = [
            (s.modes.pre_call, "pre_call"),
            (s.modes.during_call, "during_call"),
            (s.modes.post_call, "post_call"),
            (s.modes.logging_only, "logging_only"),
        ]
        .into_iter()
        .filter_map(|(on, m)| on.then_some(m))
        .collect();
        let names = |a: Action| -> Vec<String> {
            let entities = s.spec.entities.iter().filter(|(_, x)| *x == a);
            let patterns = s.spec.patterns.iter().filter(|(_, _, x)| *x == a);
            let words = s.spec.words.iter().filter(|(_, x)| *x == a).count();
            entities
                .map(|(e, _)| e.name().to_owned())
                .chain(patterns.map(|(n, _, _)| n.clone()))
                .chain((words > 0).then(|| format!("{words} blocked word(s)")))
                .collect()
        };
        let mut what = Vec::new();
        for (label, a) in [("mask", Action::Mask), ("block", Action::Block)] {
            let n = names(a);
            if !n.is_empty() {
                what.push(format!("{label} {}", n.join(", ")));
            }
        }
        if s.kind == Kind::PromptInjection {
            what.push(format!("block at score {}", s.threshold));
        }
        if let Some(e) = &s.external {
            what.push(format!(
                "asks {} within {:?}, on error {}",
                e.api_base,
                e.timeout,
                match e.on_error {
                    sluice_guardrails::OnError::Block => "block",
                    sluice_guardrails::OnError::Allow => "allow",
                }
            ));
        }
        if let Some(c) = s.size.max_characters {
            what.push(format!("block over {c} characters"));
        }
        if let Some(t) = s.size.max_tokens {
            what.push(format!("block over about {t} tokens"));
        }
        if s.kind == Kind::ToolPermission {
            let t = &s.tools;
            what.push(format!(
                "{} rule(s), default {}, {} what is disallowed",
                t.rules.len(),
                match t.default {
                    Some(sluice_guardrails::Decision::Allow) => "allow",
                    _ => "deny",
                },
                match t.on_disallowed {
                    sluice_guardrails::OnDisallowed::Block => "block",
                    sluice_guardrails::OnDisallowed::Rewrite => "rewrite",
                }
            ));
        }
        let _ = writeln!(
            out,
            "  - {}: {kind}, {}{}{}  ({})",
            g.name,
            modes.join("+"),
            if s.default_on { ", default on" } else { "" },
            if s.output_parse_pii {
                ", output_parse_pii"
            } else {
                ""
            },
            what.join("; ")
        );
    }
}

/// The provider pass-through routes: where each configured one goes and with which
/// credentials (masked); the others answer 501 naming what to set.
fn pass_through(out: &mut String, config: &Config) {
    let _ = writeln!(out, "\npass-through routes");
    let mut missing = Vec::new();
    for (route, u) in &config.pass_through.upstreams {
        let credentials = u.as_ref().ok().and_then(|u| match &u.specific {
            ProviderConfig::Bedrock(c) => c
                .aws
                .as_ref()
                .map(|a| format!("AWS key {}", a.access_key_id.masked())),
            ProviderConfig::Vertex(c) => c
                .credentials
                .as_ref()
                .map(|_| format!("service account, project {} in {}", c.project, c.location)),
            _ => u
                .api_keys
                .first()
                .map(|k| format!("api_key {}", k.key.masked())),
        });
        match (u, credentials) {
            (Ok(u), Some(c)) => {
                let base = u.api_base.as_deref().unwrap_or_default();
                let _ = writeln!(out, "  {}  → {base}  ({c})", route.label());
            }
            _ => missing.push(route.label()),
        }
    }
    if !missing.is_empty() {
        let _ = writeln!(out, "  not configured (answer 501): {}", missing.join(", "));
    }
}

/// One deployment as LiteLLM's `/model/info` lists it: `model_name`, `litellm_params` with
/// every key masked (an operator reads which key is in use, never the key), and `model_info`
/// with its id, origin and the per-token prices sluice charges.
pub fn deployment_info(d: &Deployment) -> serde_json::Value {
    let mut params = serde_json::Map::new();
    params.insert(
        "model".into(),
        format!("{}/{}", d.provider().name(), d.upstream.model).into(),
    );
    if let Some(base) = &d.upstream.api_base {
        params.insert("api_base".into(), base.as_str().into());
    }
    if let Some(k) = d.upstream.api_keys.first() {
        params.insert("api_key".into(), k.key.masked().into());
    }
    for (name, v) in [("rpm", d.rpm), ("tpm", d.tpm)] {
        if let Some(v) = v {
            params.insert(name.into(), v.into());
        }
    }
    if let Some(w) = d.weight {
        params.insert("weight".into(), w.into());
    }
    if let Some(t) = d.timeout {
        params.insert("timeout".into(), t.as_secs_f64().into());
    }
    if !d.tags.is_empty() {
        params.insert("tags".into(), d.tags.iter().map(|t| &**t).collect());
    }
    serde_json::json!({
        "model_name": d.model_name,
        "litellm_params": params,
        "model_info": {
            "id": d.id,
            "db_model": d.model_info.db_model,
            "mode": d.model_info.mode,
            "base_model": d.model_info.base_model,
            "region_name": d.upstream.region_name,
            "access_groups": d.model_info.access_groups.iter().map(|g| &**g).collect::<Vec<&str>>(),
            "litellm_provider": d.provider().name(),
            "input_cost_per_token": d.price.input,
            "output_cost_per_token": d.price.output,
        },
    })
}

fn deployment(out: &mut String, d: &Deployment) {
    let _ = writeln!(
        out,
        "  - {}/{}  id={}",
        d.provider().name(),
        d.upstream.model,
        d.id
    );
    match &d.upstream.api_base {
        Some(base) => {
            let _ = writeln!(out, "      api_base: {base}");
            match d.upstream.api_keys.as_slice() {
                [] => {
                    let _ = writeln!(out, "      api_key: {}", masked(None));
                }
                [one] => {
                    let _ = writeln!(out, "      api_key: {}", one.key.masked());
                }
                many => {
                    for k in many {
                        let _ = writeln!(
                            out,
                            "      api_key: {} (weight {})",
                            k.key.masked(),
                            k.weight
                        );
                    }
                }
            }
        }
        None if matches!(d.upstream.specific, ProviderConfig::Unserved(_)) => {
            let _ = writeln!(out, "      not served by sluice: requests answer 501");
        }
        None => {
            let _ = writeln!(out, "      answered in process");
        }
    }
    if let ProviderConfig::Azure(azure) = &d.upstream.specific {
        let _ = writeln!(out, "      api_version: {}", azure.api_version);
    }
    for (name, value) in &d.upstream.extra_headers {
        let _ = writeln!(out, "      header {name}: {}", value.masked());
    }
    if let Some(t) = d.timeout {
        let _ = writeln!(out, "      timeout: {}s", t.as_secs_f64());
    }
    if let Some(w) = d.weight {
        let _ = writeln!(out, "      weight: {w}");
    }
    if let Some(n) = d.num_retries {
        let _ = writeln!(out, "      num_retries: {n}");
    }
    if let Some(r) = &d.upstream.region_name {
        let _ = writeln!(out, "      region_name: {r}");
    }
    if !d.tags.is_empty() {
        let tags: Vec<&str> = d.tags.iter().map(|t| &**t).collect();
        let _ = writeln!(out, "      tags: {}", tags.join(", "));
    }
    for (name, v) in [("rpm", d.rpm), ("tpm", d.tpm)] {
        if let Some(v) = v {
            let _ = writeln!(out, "      {name}: {v}");
        }
    }
}

fn masked(s: Option<&Secret>) -> String {
    s.map_or_else(|| "(none)".to_owned(), Secret::masked)
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}
