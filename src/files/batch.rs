//! A batch's usage, charged once: when a retrieve shows the batch `completed` with `usage`,
//! its tokens are charged to the key that created it, at batch prices, under a spend row whose
//! request id is the batch's own id without a creator (so every id of one upstream batch is the
//! same row).
//!
//! Batch prices: LiteLLM prices batches with `input_cost_per_token_batches` /
//! `output_cost_per_token_batches`, else half the model's price (OpenAI's batch discount).
//! sluice's price table does not read the `_batches` keys yet, so a batch costs half of its
//! deployment's token prices.
//!
//! "Once", and "its creator": the store's `owned_objects` row of the batch is flipped to
//! `charged` by one conditional UPDATE ([`sluice_store::Store::claim_batch_charge`]); only the
//! retrieve that flips it charges, and it charges the owner the row names, whichever id (the
//! creator's, the master key's) retrieved it and on whichever instance of a fleet. A batch
//! with no row (created before owners were kept) is charged to the creator its signed id
//! names, and its row is written then. A store that cannot be reached charges nothing; a later
//! retrieve charges. Without a store there are no virtual keys, and nothing to charge.

use std::time::Instant;

use http::header::HeaderValue;
use http::Method;
use serde_json::Value;
use time::OffsetDateTime;

use sluice_core::limits;
use sluice_core::price::Price;
use sluice_core::record::RequestRecord;
use sluice_core::usage::Usage;
use sluice_providers::DeploymentTarget;
use sluice_store::OwnedObject;

use super::ids::{self, IdKey, Kind};
use crate::server::AppState;
use crate::spend::Charges;

/// Charge a retrieved batch's usage to its owner, if it is completed, has usage, and was not
/// charged before. `creator` is the creator the retrieving id named (checked by its MAC).
pub(super) async fn charge_once(
    state: &AppState,
    keys: &IdKey,
    target: &DeploymentTarget,
    creator: Option<&str>,
    batch: &Value,
) {
    let usage = &batch["usage"];
    let (Some("completed"), Some(id), Some(input), Some(output)) = (
        batch["status"].as_str(),
        batch["id"].as_str(),
        usage["input_tokens"].as_u64(),
        usage["output_tokens"].as_u64(),
    ) else {
        return;
    };
    let Some(services) = state.store() else {
        return;
    };
    let deployment = &*target.info.id;
    let row = ids::encode(keys, Kind::Batch, deployment, None, id);
    let unknown = OwnedObject {
        kind: Kind::Batch.stored(),
        deployment: deployment.to_owned(),
        upstream_id: id.to_owned(),
        sluice_id: ids::encode(keys, Kind::Batch, deployment, creator, id),
        owner_key: creator.map(str::to_owned),
        team_id: None,
        created_at: OffsetDateTime::now_utc(),
        charged: true,
    };
    let owner = match services.store.claim_batch_charge(&unknown).await {
        // The master key's batch (or an open gateway's): nobody to charge.
        Ok(Some(None)) | Ok(None) => return,
        Ok(Some(Some(owner))) => owner,
        Err(e) => {
            tracing::warn!(error = %e, batch = %row, "batch charge could not be claimed; a later retrieve charges it");
            return;
        }
    };
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
    let key = hex32(&owner).and_then(|d| directory.key(&d));
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
