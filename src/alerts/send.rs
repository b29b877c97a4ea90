//! Where alerts go: Slack incoming webhooks (`{"text"}`), Microsoft Teams webhooks (an
//! Adaptive Card, as LiteLLM sends), any webhook (LiteLLM's `WebhookEvent` JSON) and e-mail
//! over SMTP (STARTTLS and login, `lettre`). A channel that fails is logged and does not stop
//! the others; nothing here runs on the request path, and no URL, password or key appears in
//! a log line (webhook URLs carry credentials).

use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Uri};
use lettre::message::header::ContentType;
use lettre::transport::smtp::authentication::Credentials;
use lettre::transport::smtp::client::{Certificate, Tls, TlsParameters};
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};
use serde_json::json;

use sluice_config::{Alerting, Secret, Smtp};
use sluice_net::client::{ClientRegistry, HttpClient};
use sluice_telemetry::callbacks::deliver::post_json;

use super::budget::Crossing;

/// The configured channels, built once.
pub struct Channels {
    client: HttpClient,
    slack: Vec<Secret>,
    slack_outage: Vec<Secret>,
    slack_report: Vec<Secret>,
    ms_teams: Option<Secret>,
    webhook: Option<Secret>,
    email: Option<Email>,
}

struct Email {
    transport: AsyncSmtpTransport<Tokio1Executor>,
    sender: String,
}

impl std::fmt::Debug for Channels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Channels")
            .field("slack", &self.slack.len())
            .field("ms_teams", &self.ms_teams.is_some())
            .field("webhook", &self.webhook.is_some())
            .field("email", &self.email.is_some())
            .finish()
    }
}

/// Why the e-mail channel could not be set up (a host the SMTP client refuses, a CA file it
/// cannot read); the message names the variable.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct SmtpError(String);

impl Channels {
    /// The channels `a` names. Budget alerts go to `alert_to_webhook_url.budget_alerts` when
    /// set, else to `SLACK_WEBHOOK_URL`.
    pub fn new(a: &Alerting) -> Result<Self, SmtpError> {
        let slack_for = |kind| match a.routed.get(&kind) {
            Some(urls) => urls.clone(),
            None => a.slack.iter().cloned().collect(),
        };
        let slack = slack_for(sluice_config::AlertKind::Budget);
        let slack_outage = slack_for(sluice_config::AlertKind::Outage);
        let slack_report = slack_for(sluice_config::AlertKind::Report);
        let email = a.email.as_ref().map(email).transpose()?;
        Ok(Self {
            client: ClientRegistry::default()
                .get(Duration::from_secs(5))
                .shared()
                .clone(),
            slack,
            slack_outage,
            slack_report,
            ms_teams: a.ms_teams.clone(),
            webhook: a.webhook.clone(),
            email,
        })
    }

    /// Send one budget alert everywhere it goes; returns how many channels took it.
    pub async fn send(&self, c: &Crossing) -> usize {
        let text = text(c);
        let mut sent = 0;
        for url in &self.slack {
            sent += usize::from(self.post(url, json!({ "text": text }), "slack").await);
        }
        if let Some(url) = &self.ms_teams {
            sent += usize::from(self.post(url, teams_card(&text), "ms_teams").await);
        }
        if let Some(url) = &self.webhook {
            sent += usize::from(self.post(url, webhook_event(c, &text), "webhook").await);
        }
        if let Some(e) = &self.email {
            sent += usize::from(e.send(c, &text).await);
        }
        sent
    }

    /// Send a deployment's outage or recovery to Slack, Teams and the webhook (no e-mail: no
    /// holder to address it to).
    pub async fn send_deployment(&self, e: &super::outage::DeploymentEvent) -> usize {
        let text = e.text();
        let mut sent = 0;
        for url in &self.slack_outage {
            sent += usize::from(self.post(url, json!({ "text": text }), "slack").await);
        }
        if let Some(url) = &self.ms_teams {
            sent += usize::from(self.post(url, teams_card(&text), "ms_teams").await);
        }
        if let Some(url) = &self.webhook {
            let event = json!({
                "event": e.event(),
                "event_group": "deployment",
                "event_message": text,
                "model_group": e.group,
                "deployment_id": e.id,
                "provider": e.provider,
            });
            sent += usize::from(self.post(url, event, "webhook").await);
        }
        sent
    }

    /// Send a report (`event`: `spend_report`, `daily_report`) to Slack, Teams and the webhook
    /// (no e-mail: a report has no holder to address it to).
    pub async fn send_report(&self, event: &'static str, text: &str) -> usize {
        let mut sent = 0;
        for url in &self.slack_report {
            sent += usize::from(self.post(url, json!({ "text": text }), "slack").await);
        }
        if let Some(url) = &self.ms_teams {
            sent += usize::from(self.post(url, teams_card(text), "ms_teams").await);
        }
        if let Some(url) = &self.webhook {
            let event = json!({
                "event": event,
                "event_group": "report",
                "event_message": text,
            });
            sent += usize::from(self.post(url, event, "webhook").await);
        }
        sent
    }

    async fn post(&self, url: &Secret, body: serde_json::Value, channel: &'static str) -> bool {
        let Ok(uri) = url.expose().parse::<Uri>() else {
            tracing::warn!(channel, "alert not sent: the webhook URL does not parse");
            return false;
        };
        let body = Bytes::from(body.to_string());
        match post_json(&self.client, &uri, HeaderMap::new(), body).await {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(channel, error = %e, "alert not delivered");
                false
            }
        }
    }
}

fn email(s: &Smtp) -> Result<Email, SmtpError> {
    let mut builder = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(&s.host);
    if s.starttls {
        // STARTTLS, required, the server's certificate verified against the public roots and
        // `SMTP_CA_FILE`'s (LiteLLM's smtplib does not verify it).
        let mut params = TlsParameters::builder(s.host.clone());
        if let Some(ca) = &s.ca_file {
            let pem = std::fs::read(ca).map_err(|e| SmtpError(format!("SMTP_CA_FILE: {e}")))?;
            let cert =
                Certificate::from_pem(&pem).map_err(|e| SmtpError(format!("SMTP_CA_FILE: {e}")))?;
            params = params.add_root_certificate(cert);
        }
        let params = params
            .build_rustls()
            .map_err(|e| SmtpError(format!("SMTP_HOST: {e}")))?;
        builder = builder.tls(Tls::Required(params));
    }
    let mut builder = builder.port(s.port).timeout(Some(Duration::from_secs(30)));
    if let (Some(user), Some(pass)) = (&s.username, &s.password) {
        builder = builder.credentials(Credentials::new(user.clone(), pass.expose().to_owned()));
    }
    Ok(Email {
        transport: builder.build(),
        sender: s.sender.clone(),
    })
}

impl Email {
    /// One message to the alert's recipients (none: nothing sent).
    async fn send(&self, c: &Crossing, text: &str) -> bool {
        if c.emails.is_empty() {
            return false;
        }
        let Ok(from) = self.sender.parse() else {
            tracing::warn!("alert e-mail not sent: SMTP_SENDER_EMAIL is not an address");
            return false;
        };
        let mut b = Message::builder().from(from).subject(format!(
            "sluice budget alert: {} for {} {}",
            c.level.message(),
            c.group(),
            c.alias.as_deref().unwrap_or(&c.id)
        ));
        let mut any = false;
        for to in &c.emails {
            if let Ok(addr) = to.parse() {
                b = b.to(addr);
                any = true;
            }
        }
        if !any {
            return false;
        }
        let Ok(message) = b.header(ContentType::TEXT_PLAIN).body(text.to_owned()) else {
            return false;
        };
        match self.transport.send(message).await {
            Ok(_) => true,
            Err(e) => {
                tracing::warn!(error = %e, "alert e-mail not delivered");
                false
            }
        }
    }
}

/// The alert as text (Slack's and Teams' message, the e-mail's body): what happened, then
/// LiteLLM's `*field:* value` lines.
fn text(c: &Crossing) -> String {
    let mut t = format!("Budget alert: {}\n", c.level.message());
    let mut line = |k: &str, v: &str| t.push_str(&format!("*{k}:* `{v}`\n"));
    line("event_group", c.group());
    line(&format!("{}_id", c.group()), &c.id);
    if let Some(a) = &c.alias {
        line("alias", a);
    }
    if let Some(team) = &c.team {
        line("team_id", team);
    }
    if let Some(user) = &c.user {
        line("user_id", user);
    }
    line("spend", &format!("{}", c.spend));
    if let Some(m) = c.max_budget {
        line("max_budget", &format!("{m}"));
    }
    if let Some(s) = c.soft_budget {
        line("soft_budget", &format!("{s}"));
    }
    t
}

/// LiteLLM's Teams message: an Adaptive Card with one wrapped text block.
fn teams_card(text: &str) -> serde_json::Value {
    json!({
        "type": "message",
        "attachments": [{
            "contentType": "application/vnd.microsoft.card.adaptive",
            "content": {
                "type": "AdaptiveCard",
                "version": "1.4",
                "body": [{"type": "TextBlock", "text": text, "wrap": true}]
            }
        }]
    })
}

/// LiteLLM's `WebhookEvent`: the figures and who, with `event`, `event_group` and
/// `event_message`.
fn webhook_event(c: &Crossing, text: &str) -> serde_json::Value {
    use sluice_core::limits::SubjectKind;
    json!({
        "event": c.level.event(),
        "event_group": c.group(),
        "event_message": text,
        "spend": c.spend,
        "max_budget": c.max_budget,
        "soft_budget": c.soft_budget,
        "token": (c.kind == SubjectKind::Key).then_some(&c.id),
        "key_alias": (c.kind == SubjectKind::Key).then_some(c.alias.as_ref()).flatten(),
        "team_id": c.team,
        "team_alias": (c.kind == SubjectKind::Team).then_some(c.alias.as_ref()).flatten(),
        "user_id": c.user,
        "customer_id": (c.kind == SubjectKind::EndUser).then_some(&c.id),
        "organization_id": (c.kind == SubjectKind::Organization).then_some(&c.id),
        "user_email": c.emails.first(),
    })
}
