//! `general_settings.alerting` and its companions: LiteLLM's alert channels (`slack`,
//! `ms_teams`, `webhook`, `email`, each configured by LiteLLM's environment variables), which
//! alerts go out (`alert_types`), and Slack-format webhooks per alert type
//! (`alert_to_webhook_url`).

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;
use sluice_core::settings::read::boolean;
use sluice_core::settings::{Env, Problems, Scalar};
use sluice_core::Secret;

use crate::model::{AlertKind, Alerting, Smtp};
use crate::raw::OneOrMany;

/// LiteLLM's alert types that sluice does not send (yet): accepted, and named in a warning.
const NOT_SENT: &[&str] = &[
    "llm_exceptions",
    "llm_too_slow",
    "llm_requests_hanging",
    "failed_tracking_spend",
    "user_spend_thresholds",
    "user_spend_anomalies",
    "db_exceptions",
    "new_model_added",
    "model_deprecation_warnings",
    "region_outage_alerts",
    "fallback_reports",
    "new_virtual_key_created",
    "virtual_key_updated",
    "virtual_key_deleted",
    "new_team_created",
    "team_updated",
    "team_deleted",
    "new_internal_user_created",
    "internal_user_updated",
    "internal_user_deleted",
];

/// The raw settings, taken out of `general_settings`.
pub(super) struct RawAlerting {
    pub alerting: Option<OneOrMany>,
    pub alert_types: Option<OneOrMany>,
    pub alert_to_webhook_url: Option<Value>,
    pub spend_report_frequency: Option<Scalar>,
    pub alerting_args: Option<Value>,
}

/// A report's period: LiteLLM's `7d`, or (sluice's) `s`, `m` and `h` units too.
fn period(path: &str, v: &Scalar, p: &mut Problems) -> Option<Duration> {
    let text = v.text();
    let t = text.trim();
    let (n, unit) = t.split_at(t.len().saturating_sub(1));
    let secs = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3_600,
        "d" => 86_400,
        _ => 0,
    };
    match n.parse::<u64>() {
        Ok(n) if n > 0 && secs > 0 => Some(Duration::from_secs(n * secs)),
        _ => {
            p.error(
                path,
                format!("expected a number of days such as \"7d\" (or s, m, h), got {t:?}"),
            );
            None
        }
    }
}

/// Validate the alerting settings; `None` without `alerting`.
pub(super) fn alerting(raw: RawAlerting, env: &dyn Env, p: &mut Problems) -> Option<Alerting> {
    let channels = raw.alerting?.texts();
    let var = |name: &str| env.var(name).filter(|v| !v.trim().is_empty());
    let mut a = Alerting::default();
    for c in &channels {
        // A channel without its variable is off, said in a warning (LiteLLM starts too, and
        // fails only when it sends).
        let need = |p: &mut Problems, name: &str| {
            let v = var(name);
            if v.is_none() {
                p.warn(
                    "general_settings.alerting",
                    format!("`{c}` needs the environment variable {name}; its alerts are not sent"),
                );
            }
            v.map(Secret::new)
        };
        match c.trim() {
            "slack" => a.slack = need(p, "SLACK_WEBHOOK_URL"),
            "ms_teams" => a.ms_teams = need(p, "MS_TEAMS_WEBHOOK_URL"),
            "webhook" => a.webhook = need(p, "WEBHOOK_URL"),
            "email" => a.email = smtp(env, p),
            other => p.error(
                "general_settings.alerting",
                format!("`{other}` is not an alert channel: slack, ms_teams, webhook or email"),
            ),
        }
    }
    if let Some(types) = raw.alert_types {
        a.budget = false;
        a.outage = false;
        a.spend_reports = false;
        a.daily_reports = false;
        for t in types.texts() {
            match t.trim() {
                "budget_alerts" => a.budget = true,
                "outage_alerts" | "cooldown_deployment" => a.outage = true,
                "spend_reports" => a.spend_reports = true,
                "daily_reports" => a.daily_reports = true,
                other if NOT_SENT.contains(&other) => p.warn(
                    "general_settings.alert_types",
                    format!(
                        "`{other}` alerts are not sent by sluice (budget_alerts, outage_alerts, \
                         cooldown_deployment, spend_reports and daily_reports are)"
                    ),
                ),
                other => p.error(
                    "general_settings.alert_types",
                    format!("`{other}` is not one of LiteLLM's alert types"),
                ),
            }
        }
    }
    if let Some(v) = raw.alert_to_webhook_url {
        a.routed = routed(v, p);
    }
    if let Some(f) = raw.spend_report_frequency.as_ref() {
        if let Some(d) = period("general_settings.spend_report_frequency", f, p) {
            a.spend_report_frequency = d;
        }
    }
    let daily = match raw
        .alerting_args
        .as_ref()
        .map(|v| v.get("daily_report_frequency"))
    {
        Some(Some(v)) => Some((
            "general_settings.alerting_args.daily_report_frequency",
            v.clone(),
        )),
        _ => var("SLACK_DAILY_REPORT_FREQUENCY")
            .map(|v| ("SLACK_DAILY_REPORT_FREQUENCY", Value::String(v))),
    };
    if let Some((path, v)) = daily {
        let secs = v
            .as_f64()
            .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
            .filter(|s| *s >= 1.0);
        match secs {
            Some(s) => a.daily_report_frequency = Duration::from_secs_f64(s),
            None => p.error(path, "expected a number of seconds, at least 1"),
        }
    }
    Some(a)
}

/// `alert_to_webhook_url`: alert type → a Slack-format webhook URL or a list of them.
fn routed(v: Value, p: &mut Problems) -> BTreeMap<AlertKind, Vec<Secret>> {
    const PATH: &str = "general_settings.alert_to_webhook_url";
    let mut out = BTreeMap::new();
    let Value::Object(map) = v else {
        p.error(PATH, "expected a map of alert type to webhook URL(s)");
        return out;
    };
    for (kind, urls) in map {
        let urls: Vec<Secret> = match urls {
            Value::String(u) => vec![Secret::new(u)],
            Value::Array(list) if list.iter().all(Value::is_string) => list
                .into_iter()
                .filter_map(|u| u.as_str().map(Secret::new))
                .collect(),
            _ => {
                p.error(format!("{PATH}.{kind}"), "expected a URL or a list of URLs");
                continue;
            }
        };
        match kind.as_str() {
            "budget_alerts" => {
                out.insert(AlertKind::Budget, urls);
            }
            "outage_alerts" | "cooldown_deployment" => {
                out.entry(AlertKind::Outage).or_default().extend(urls);
            }
            "spend_reports" | "daily_reports" => {
                out.entry(AlertKind::Report).or_default().extend(urls);
            }
            other if NOT_SENT.contains(&other) => p.warn(
                format!("{PATH}.{other}"),
                "alerts of this type are not sent by sluice",
            ),
            other => p.error(
                format!("{PATH}.{other}"),
                "not one of LiteLLM's alert types",
            ),
        }
    }
    out
}

/// LiteLLM's SMTP variables: `SMTP_HOST`, `SMTP_PORT` (587), `SMTP_USERNAME`,
/// `SMTP_PASSWORD`, `SMTP_SENDER_EMAIL` and `SMTP_TLS` (STARTTLS, default on); and sluice's
/// `SMTP_CA_FILE` (a private certificate authority for the server).
fn smtp(env: &dyn Env, p: &mut Problems) -> Option<Smtp> {
    let var = |name: &str| env.var(name).filter(|v| !v.trim().is_empty());
    let path = "general_settings.alerting";
    let Some(host) = var("SMTP_HOST") else {
        p.error(path, "`email` needs the environment variable SMTP_HOST");
        return None;
    };
    let Some(sender) = var("SMTP_SENDER_EMAIL") else {
        p.error(
            path,
            "`email` needs the environment variable SMTP_SENDER_EMAIL",
        );
        return None;
    };
    let port = match var("SMTP_PORT") {
        None => 587,
        Some(v) => match v.trim().parse::<u16>() {
            Ok(n) if n > 0 => n,
            _ => {
                p.error(path, format!("SMTP_PORT `{v}` is not a port number"));
                return None;
            }
        },
    };
    let starttls = boolean("SMTP_TLS", var("SMTP_TLS").map(Scalar::Str), p).unwrap_or(true);
    Some(Smtp {
        host,
        port,
        username: var("SMTP_USERNAME"),
        password: var("SMTP_PASSWORD").map(Secret::new),
        sender,
        starttls,
        ca_file: var("SMTP_CA_FILE").map(Into::into),
    })
}
