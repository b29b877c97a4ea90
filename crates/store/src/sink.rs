//! Finished inference requests become spend-log records for the writer. Runs on the recorder
//! task, never on a request.

use time::OffsetDateTime;

use super::writer::SpendSender;
use super::{KeyHash, SpendLog, SpendStatus};
use sluice_core::limits::dollars;
use sluice_core::record::{Outcome, RecordSink, RequestRecord};

/// Feeds the spend-log writer.
#[derive(Debug)]
pub struct SpendSink {
    sender: SpendSender,
}

impl SpendSink {
    /// A sink feeding `sender`.
    pub fn new(sender: SpendSender) -> Self {
        Self { sender }
    }
}

/// The spend log of a finished request; `None` for requests that never named a model group
/// (health checks, unknown routes, refused credentials).
pub fn spend_log(r: &RequestRecord, now: OffsetDateTime) -> Option<SpendLog> {
    let model = r.model.as_deref()?;
    let start = now - r.start.elapsed();
    let mut l = SpendLog::new(
        r.request_id.to_str().unwrap_or("-").to_owned(),
        model.to_owned(),
        start,
    );
    if let Some(k) = &r.key {
        l.api_key = KeyHash::from_hex(&k.hash);
        l.team_id = k.team_id.as_deref().map(str::to_owned);
        l.user_id = k.user_id.as_deref().map(str::to_owned);
    }
    l.end_user = r.end_user.as_deref().map(str::to_owned);
    l.deployment_id = r.deployment.as_deref().map(str::to_owned);
    l.provider = r.provider.map(str::to_owned);
    l.usage = r.usage.unwrap_or_default();
    l.spend = r.cost.map_or(0.0, dollars);
    l.status = if (200..300).contains(&r.status)
        && matches!(r.outcome, Outcome::Done | Outcome::StreamComplete)
    {
        SpendStatus::Success
    } else {
        SpendStatus::Failure
    };
    l.end_time = now;
    l.ttfb_ms = r.ttfb.map(|t| t.as_millis() as u64);
    l.cache_hit = r.cache_hit;
    l.saved_spend = r.saved.map_or(0.0, dollars);
    Some(l)
}

impl RecordSink for SpendSink {
    fn accept(&self, record: &RequestRecord) {
        if let Some(l) = spend_log(record, OffsetDateTime::now_utc()) {
            self.sender.send(l);
        }
    }
}
