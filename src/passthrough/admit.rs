//! Step 6 of the calls the pass-through module serves outside the inference pipeline (a
//! provider route, a custom route, a web search): admission, in one place.

use std::sync::Arc;

use sluice_core::error::ApiError;
use sluice_core::price::Price;
use sluice_core::record::RequestRecord;

use crate::auth::{Caller, KeyEntry, Wanted};
use crate::server::pipeline::admit;
use crate::server::AppState;
use crate::spend::Charges;

/// Step 6 of a call outside the inference pipeline (a provider route, a custom route, a web
/// search): the caller's access to `wanted`, its (and its end user's) limits and budgets. The
/// key goes on the record; the charges settle the answer at `price`.
pub(super) async fn admitted(
    state: &AppState,
    caller: Caller,
    end_user: Option<&str>,
    wanted: Wanted<'_>,
    record: &mut RequestRecord,
    wall: u64,
    price: Option<Price>,
) -> Result<(Option<Arc<KeyEntry>>, Charges), ApiError> {
    let (permit, fleet) = admit(state, &caller, end_user, wanted, &record.request_id, wall).await?;
    let key = caller.into_key();
    record.key = key.as_ref().map(|k| k.info.clone());
    Ok((
        key,
        Charges {
            deployment: None,
            permit,
            price,
            fleet,
        },
    ))
}
