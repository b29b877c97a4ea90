//! What a finished request owes, settled in one place for whole answers (the pipeline) and
//! streams (the relay, when the stream ends): its tokens go to its deployment's usage and to
//! every caller's tokens-per-minute window, its cost to every caller's budget and to the
//! record. Dropping the charges then frees the deployment's and the callers' in-flight slots.
//! Everything here is arithmetic and atomics; the spend log is written later, off the path.

use crate::limits::{wall_ms, Nanos, Permit};
use crate::routing::InFlight;
use crate::telemetry::RequestRecord;

use super::price::Price;

/// Who a request's usage and cost are charged to.
#[derive(Debug, Default)]
pub struct Charges {
    /// The deployment's in-flight slot (usage-based routing counts its tokens).
    pub deployment: Option<InFlight>,
    /// The caller's admission: key, team, user and end-user counters.
    pub permit: Option<Permit>,
    /// The deployment's price, when sluice knows it.
    pub price: Option<Price>,
}

impl Charges {
    /// Charge the record's usage (if any) and write its cost into the record. Returns the
    /// cost.
    pub fn settle(&self, record: &mut RequestRecord) -> Option<Nanos> {
        let usage = record.usage?;
        let tokens = usage.prompt_tokens + usage.completion_tokens;
        if let Some(g) = &self.deployment {
            g.add_tokens(tokens);
        }
        let cost = self.price.map(|p| p.cost(&usage));
        if let Some(p) = &self.permit {
            p.add_tokens(wall_ms(), tokens);
            if let Some(c) = cost {
                p.charge(c);
            }
        }
        record.cost = cost;
        cost
    }
}
