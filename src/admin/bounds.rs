//! LiteLLM's `upperbound_key_generate_params` on `POST /key/generate`: a value the request
//! leaves out takes the bound, and one over it is a 400 naming the field and both values,
//! as LiteLLM answers. Applied to every caller that makes keys, as LiteLLM applies it.

use serde_json::{Map, Value};

use sluice_config::KeyBounds;
use sluice_core::error::ApiError;
use sluice_store::BudgetDuration;

/// The body with the bounds applied, or `None` when there are none (the body as sent).
pub(super) fn apply(body: &[u8], bounds: &KeyBounds) -> Result<Option<Vec<u8>>, ApiError> {
    if *bounds == KeyBounds::default() {
        return Ok(None);
    }
    let mut map: Map<String, Value> = if body.iter().all(u8::is_ascii_whitespace) {
        Map::new()
    } else {
        serde_json::from_slice(body).map_err(|e| ApiError::InvalidJson(e.to_string()))?
    };
    let numbers: [(&'static str, Option<f64>); 4] = [
        ("max_budget", bounds.max_budget),
        (
            "max_parallel_requests",
            bounds.max_parallel_requests.map(|n| n as f64),
        ),
        ("tpm_limit", bounds.tpm_limit.map(|n| n as f64)),
        ("rpm_limit", bounds.rpm_limit.map(|n| n as f64)),
    ];
    for (field, bound) in numbers {
        let Some(bound) = bound else { continue };
        match map.get(field).filter(|v| !v.is_null()) {
            None => {
                let v = if field == "max_budget" {
                    Value::from(bound)
                } else {
                    Value::from(bound as u64)
                };
                map.insert(field.into(), v);
            }
            Some(v) => {
                let asked = v.as_f64().ok_or_else(|| ApiError::InvalidParam {
                    param: field,
                    message: "expected a number".into(),
                })?;
                if asked > bound {
                    return Err(over(field, &v.to_string(), &bound.to_string()));
                }
            }
        }
    }
    for (field, bound) in [
        ("budget_duration", bounds.budget_duration.as_deref()),
        ("duration", bounds.duration.as_deref()),
    ] {
        let Some(bound) = bound else { continue };
        let limit = seconds(field, bound)?;
        match map.get(field).and_then(Value::as_str) {
            None => {
                map.insert(field.into(), bound.into());
            }
            Some(asked) if seconds(field, asked)? > limit => {
                return Err(over(field, asked, bound));
            }
            Some(_) => {}
        }
    }
    serde_json::to_vec(&map)
        .map(Some)
        .map_err(|_| ApiError::Internal("bounded body"))
}

fn seconds(field: &'static str, d: &str) -> Result<i64, ApiError> {
    d.parse::<BudgetDuration>()
        .map(BudgetDuration::approx_seconds)
        .map_err(|e| ApiError::InvalidParam {
            param: field,
            message: e.to_string(),
        })
}

fn over(field: &'static str, asked: &str, bound: &str) -> ApiError {
    ApiError::InvalidParam {
        param: field,
        message: format!(
            "{field} is over max limit set in config - user_value={asked}; max_value={bound}"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bounds() -> KeyBounds {
        KeyBounds {
            max_budget: Some(10.0),
            duration: Some("30d".into()),
            rpm_limit: Some(100),
            ..KeyBounds::default()
        }
    }

    #[test]
    fn missing_values_take_the_bound_and_larger_ones_are_refused() {
        let out = apply(br#"{"key_alias": "a", "max_budget": 5}"#, &bounds())
            .unwrap()
            .unwrap();
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["max_budget"], 5.0);
        assert_eq!(v["rpm_limit"], 100);
        assert_eq!(v["duration"], "30d");
        let e = apply(br#"{"max_budget": 50}"#, &bounds()).unwrap_err();
        assert!(
            e.to_string().contains("max_budget is over max limit"),
            "{e}"
        );
        let e = apply(br#"{"duration": "2mo", "rpm_limit": 1}"#, &bounds()).unwrap_err();
        assert!(e.to_string().contains("duration"), "{e}");
        assert!(apply(br#"{"duration": "7d"}"#, &bounds()).is_ok());
        assert!(apply(b"{}", &KeyBounds::default()).unwrap().is_none());
    }
}
