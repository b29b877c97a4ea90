//! A batch's usage, charged once: when a retrieve shows the batch `completed` with `usage`,
//! its tokens are charged to the key that created it (its hash is in the batch id), at batch
//! prices, under a spend row whose request id is the batch's own id (without its creator, so
//! every id of one upstream batch is the same row).
//!
//! Batch prices: LiteLLM prices batches with `input_cost_per_token_batches` /
//! `output_cost_per_token_batches`, else half the model's price (OpenAI's batch discount).
//! sluice's price table does not read the `_batches` keys yet, so a batch costs half of its
//! deployment's token prices.
//!
//! "Once": a set of charged batches in this process, and, with a database, a look for a spend
//! row with that request id before charging. Limits: two instances of a fleet that see the
//! same batch complete before either's spend row is written (the writer flushes every few
//! seconds) both charge it; without a database, a restarted instance charges it again.

use std::collections::HashSet;
use std::sync::{LazyLock, Mutex};
use std::time::Instant;

use bytes::Bytes;
use http::header::HeaderValue;
use http::Method;
use serde_json::Value;

use sluice_core::limits;
use sluice_core::price::Price;
use sluice_core::record::RequestRecord;
use sluice_core::usage::Usage;
use sluice_providers::DeploymentTarget;
use sluice_store::SpendLogFilter;

use super::ids::{self, Kind};
use crate::server::AppState;
use crate::spend::Charges;

/// Batches this process has charged (bounded: forgotten all at once when full, the store
/// still remembers them).
static CHARGED: LazyLock<Mutex<HashSet<String>>> = LazyLock::new(Mutex::default);
/// Most batch ids [`CHARGED`] keeps.
const MAX_REMEMBERED: usize = 100_000;

/// Charge a retrieved batch's usage to its creator, if it is completed, has usage, and was
/// not charged before.
pub(super) async fn charge_once(
    state: &AppState,
    target: &DeploymentTarget,
    creator: Option<&str>,
    answer: &Bytes,
) {
    let Some(creator) = creator else {
        return;
    };
    let Ok(batch) = serde_json::from_slice::<Value>(answer) else {
        return;
    };
    let usage = &batch["usage"];
    let (Some("completed"), Some(id), Some(input), Some(output)) = (
        batch["status"].as_str(),
        batch["id"].as_str(),
        usage["input_tokens"].as_u64(),
        usage["output_tokens"].as_u64(),
    ) else {
        return;
    };
    let row = ids::encode(Kind::Batch, &target.info.id, None, id);
    {
        let mut charged = CHARGED.lock().unwrap_or_else(|p| p.into_inner());
        if charged.len() >= MAX_REMEMBERED {
            charged.clear();
        }
        if !charged.insert(row.clone()) {
            return;
        }
    }
    if let Some(services) = state.store() {
        let filter = SpendLogFilter {
            request_id: Some(row.clone()),
            ..SpendLogFilter::default()
        };
        match services.store.spend_logs(&filter).await {
            Ok(rows) if !rows.is_empty() => return,
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, batch = %row, "spend log lookup failed; charging"),
        }
    }
    let Ok(request_id) = HeaderValue::from_str(&row) else {
        return;
    };
    let mut record = RequestRecord::new(request_id, Method::POST, "/v1/batches", Instant::now());
    record.status = 200;
    record.model = Some(target.info.model_name.clone());
    record.requested_model = record.model.clone();
    record.deployment = Some(target.info.id.clone());
    record.provider = Some(target.provider.name());
    record.usage = Some(Usage {
        prompt_tokens: input,
        completion_tokens: output,
        ..Usage::default()
    });
    let wall = limits::wall_ms();
    let directory = state.gate().directory();
    let key = hex32(creator).and_then(|d| directory.key(&d));
    let permit = key.as_ref().and_then(|k| {
        record.key = Some(k.info.clone());
        directory
            .subjects(k, None, &(*target.info.model_name).into(), wall)
            .ok()
            .map(|s| limits::admit_counted(s, wall))
    });
    if key.is_none() {
        tracing::warn!(batch = %row, "the key that created this batch is unknown here; usage recorded, not charged to it");
    }
    let mut charges = Charges {
        deployment: None,
        permit,
        price: Some(batch_price(target.price)),
        fleet: None,
    };
    charges.settle(&mut record);
    drop(charges);
    state.recorder().record(record);
}

/// A deployment's price for batch tokens: half its token prices.
fn batch_price(p: Price) -> Price {
    Price {
        input: p.input / 2.0,
        output: p.output / 2.0,
        cache_read: p.cache_read / 2.0,
        cache_write: p.cache_write / 2.0,
        reasoning: p.reasoning / 2.0,
        ..p
    }
}

/// 64 hex digits as 32 bytes.
fn hex32(s: &str) -> Option<[u8; 32]> {
    if s.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_tokens_cost_half() {
        let p = batch_price(Price {
            input: 2e-6,
            output: 8e-6,
            ..Price::default()
        });
        assert_eq!((p.input, p.output), (1e-6, 4e-6));
        assert_eq!(hex32(&"0f".repeat(32)), Some([15u8; 32]));
        assert_eq!(hex32("zz"), None);
    }
}
