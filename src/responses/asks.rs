//! What a Responses request's body says of kept state, read by a borrowed probe (nothing is
//! built): whether it is kept (`store`), what it continues (`previous_response_id`,
//! `conversation`), whether it runs in the background, and its model.

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

use sluice_core::error::ApiError;

/// What a Responses request's body says of kept state (a borrowed probe: nothing is built).
#[derive(Deserialize)]
pub(super) struct Asks<'a> {
    #[serde(default, borrow)]
    pub(super) store: Option<&'a RawValue>,
    #[serde(default, borrow)]
    pub(super) previous_response_id: Option<&'a RawValue>,
    #[serde(default, borrow)]
    pub(super) conversation: Option<&'a RawValue>,
    #[serde(default, borrow)]
    pub(super) background: Option<&'a RawValue>,
    #[serde(default, borrow)]
    pub(super) model: Option<&'a RawValue>,
}

/// Whether a member is `true`.
pub(super) fn is_true(v: Option<&RawValue>) -> bool {
    v.is_some_and(|v| v.get() == "true")
}

/// Whether a member is given and not `null`.
pub(super) fn present(v: Option<&RawValue>) -> bool {
    v.is_some_and(|v| v.get() != "null")
}

/// A string value, or a `{"id": ...}` object's id (a conversation may be named either way).
pub(super) fn id_of(v: &RawValue, param: &'static str) -> Result<String, ApiError> {
    match serde_json::from_str::<Value>(v.get()) {
        Ok(Value::String(s)) if !s.is_empty() => Ok(s),
        Ok(Value::Object(o)) => o
            .get("id")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or(ApiError::InvalidParam {
                param,
                message: "expected an id".into(),
            }),
        _ => Err(ApiError::InvalidParam {
            param,
            message: "expected an id".into(),
        }),
    }
}
