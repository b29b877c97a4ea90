//! What a finished request owes, settled in one place for whole answers (the pipeline) and
//! streams (the relay, when the stream ends): its tokens go to its deployment's usage and to
//! every caller's tokens-per-minute window, its cost to every caller's budget and to the
//! record. Dropping the charges then frees the deployment's and the callers' in-flight slots.
//! Everything here is arithmetic and atomics; the spend log is written later, off the path.

use std::sync::Arc;

use sluice_core::limits::{nanos, wall_ms, Nanos, Permit, Remaining};
use sluice_core::price::Price;
use sluice_core::record::RequestRecord;
use sluice_routing::{Group, InFlight};

use crate::fleet::{Fleet, Settlement};

/// Output tokens a request without a `max_tokens` is assumed to ask for when its budget
/// reservation is estimated (a caller with no cost history yet). Generous on purpose: the
/// reservation only holds budget back while the request is in flight, and a fresh key's first
/// burst is what it bounds.
pub const DEFAULT_RESERVED_OUTPUT_TOKENS: u64 = 1024;

/// Bytes of a request body per prompt token, for the estimate: about four characters a token
/// in English, and a JSON body's syntax makes the count generous.
const BYTES_PER_TOKEN: usize = 4;

/// What a request may cost, before it is sent: the dearest deployment of its group priced for
/// the body as prompt and `max_tokens` (or [`DEFAULT_RESERVED_OUTPUT_TOKENS`]) as output.
/// Reserved against the budgets of callers with no cost history, so that a burst on a fresh
/// key stays within its budget (`limits::admit_reserving`).
pub fn estimate(group: &Group, body_len: usize, max_tokens: Option<u64>) -> Nanos {
    let prompt = (body_len / BYTES_PER_TOKEN) as f64;
    let output = max_tokens.unwrap_or(DEFAULT_RESERVED_OUTPUT_TOKENS) as f64;
    let usd = group
        .members()
        .iter()
        .map(|m| {
            let p = m.target.price;
            p.input * prompt + p.output * output
        })
        .filter(|c| c.is_finite())
        .fold(0.0, f64::max);
    nanos(usd)
}

/// Who a request's usage and cost are charged to.
#[derive(Debug, Default)]
pub struct Charges {
    /// The deployment's in-flight slot (usage-based routing counts its tokens).
    pub deployment: Option<InFlight>,
    /// The caller's admission: key, team, user and end-user counters.
    pub permit: Option<Permit>,
    /// The deployment's price, when sluice knows it.
    pub price: Option<Price>,
    /// The fleet's share, when the permit came from the shared counters.
    pub fleet: Option<FleetShare>,
}

/// A request admitted by the fleet: its charges go to Redis too when it ends.
#[derive(Debug)]
pub struct FleetShare {
    /// The fleet.
    pub fleet: Arc<Fleet>,
    /// How the fleet admitted it, which says how it settles.
    pub admission: Admission,
    /// The fleet-wide capacity left, for the response headers.
    pub remaining: Remaining,
    tokens: u64,
    cost: Nanos,
}

/// How the fleet admitted a request.
#[derive(Debug)]
pub enum Admission {
    /// By the shared script: the request id (its slot in the shared in-flight sets).
    Counted(Arc<str>),
    /// On this instance's leased slices, reserving this estimate of its cost.
    Leased(Nanos),
}

impl FleetShare {
    /// A share of a request the fleet admitted.
    pub fn new(fleet: Arc<Fleet>, admission: Admission, remaining: Remaining) -> Self {
        Self {
            fleet,
            admission,
            remaining,
            tokens: 0,
            cost: 0,
        }
    }
}

/// Whatever happened, a fleet-admitted request gives back its shared parallel slot and adds
/// its tokens and cost to the shared counters when its charges are dropped.
impl Drop for Charges {
    fn drop(&mut self) {
        if let (Some(share), Some(permit)) = (self.fleet.take(), &self.permit) {
            match share.admission {
                Admission::Counted(request_id) => share.fleet.settle(Settlement {
                    request_id,
                    subjects: permit.subjects().cloned().collect(),
                    tokens: share.tokens,
                    cost: share.cost,
                    at_ms: wall_ms(),
                }),
                Admission::Leased(estimate) => {
                    share
                        .fleet
                        .settle_leased(permit.subjects(), share.tokens, share.cost, estimate)
                }
            }
        }
    }
}

impl Charges {
    /// Charge the record's usage (if any) and write its cost into the record. Returns the
    /// cost.
    pub fn settle(&mut self, record: &mut RequestRecord) -> Option<Nanos> {
        let usage = record.usage?;
        let tokens = usage.prompt_tokens + usage.completion_tokens;
        if let Some(g) = &self.deployment {
            g.add_tokens(tokens);
        }
        let cost = self.price.map(|p| nanos(p.cost(&usage)));
        if let Some(p) = &mut self.permit {
            p.add_tokens(wall_ms(), tokens);
            if let Some(c) = cost {
                p.charge(c);
            }
        }
        if let Some(share) = &mut self.fleet {
            share.tokens = tokens;
            share.cost = cost.unwrap_or(0);
        }
        record.cost = cost;
        cost
    }
}
