//! The internal request made to fit the target model, before a writer renders it: sampling
//! parameters the model refuses are dropped (and noted), an end-user id the provider refuses
//! is replaced by a stable hash. What the writers shape per model (thinking, the output-cap
//! field, effort levels) they read from the same [`ModelRules`] in [`Params`].

use bytes::Bytes;
use sluice_core::endpoint::Dialect;
use sluice_core::error::ApiError;
use sluice_core::rules::{Effort, ModelRules, OutputCap, Sampling};

use crate::anthropic::{self, RawOutputConfig, RawThinking, Shape};
use crate::envelope::{self, Edits, Span, Tunable, Tunables};
use crate::ir::{ChatRequest, Thinking};
use crate::Params;

/// Fit `req` to the rules `params` carries; what is dropped is noted in `params`.
pub fn fit(req: &mut ChatRequest, params: &mut Params) {
    let rules = *params.rules();
    match rules.sampling {
        Sampling::Any => {}
        Sampling::OneOf => {
            if req.temperature.is_some() && req.top_p.take().is_some() {
                params.hint("top_p");
            }
        }
        Sampling::Refused => {
            if req.temperature.take().is_some() {
                params.hint("temperature");
            }
            if req.top_p.take().is_some() {
                params.hint("top_p");
            }
            if req.top_k.take().is_some() {
                params.hint("top_k");
            }
        }
    }
    if let Some(user) = &mut req.user {
        if let Some(fitted) = rules.user_ids.fit(user) {
            *user = fitted;
        }
    }
}

/// The edits that fit a same-dialect call's body to its model, and the names of what they
/// drop (for `x-sluice-dropped-params`); `None` when the body already fits. Only chat calls
/// (`chat/completions`, Anthropic's `messages`) are fitted.
pub fn pass_through(
    body: &[u8],
    t: &Tunables,
    dialect: Dialect,
    rules: &ModelRules,
) -> Result<Option<(Edits, Vec<&'static str>)>, ApiError> {
    let mut edits = Edits::default();
    let mut dropped: Vec<&'static str> = Vec::new();
    let span = |which| t.span(body, which);
    let mut remove = |which: Tunable, name: &'static str, edits: &mut Edits| {
        if let Some(s) = span(which) {
            edits.remove.push(s.range());
            dropped.push(name);
        }
    };
    match rules.sampling {
        Sampling::Any => {}
        Sampling::OneOf => {
            if span(Tunable::Temperature).is_some() {
                remove(Tunable::TopP, "top_p", &mut edits);
            }
        }
        Sampling::Refused => {
            remove(Tunable::Temperature, "temperature", &mut edits);
            remove(Tunable::TopP, "top_p", &mut edits);
            remove(Tunable::TopK, "top_k", &mut edits);
        }
    }
    if let Some(user) = span(Tunable::User) {
        // The raw text (quotes and escapes included) is never shorter than the id: a short
        // one is read only where contact details are refused.
        let ids = rules.user_ids;
        let long = ids
            .max_len
            .is_some_and(|max| user.range().len() > usize::from(max) + 2);
        let fitted = (long || ids.no_contact)
            .then(|| user_value(body, user))
            .flatten()
            .and_then(|u| ids.fit(&u));
        if let Some(fitted) = fitted {
            edits.replace.push((user.range(), json_string(&fitted)));
        }
    }
    match dialect {
        Dialect::OpenAi => {
            if let (OutputCap::MaxCompletionTokens, Some(span)) =
                (rules.output_cap, span(Tunable::MaxTokens))
            {
                if t.max_completion_tokens {
                    // Both given: the newer field stands.
                    edits.remove.push(span.range());
                } else {
                    let key = envelope::key_range(body, span.start())?;
                    edits
                        .replace
                        .push((key, Bytes::from_static(b"\"max_completion_tokens\"")));
                }
            }
        }
        Dialect::Anthropic => anthropic_thinking(body, t, rules, &mut edits, &mut dropped)?,
        // Sent to their own vendor untouched: the vendor's API fits its own models.
        Dialect::Gemini | Dialect::Converse => {}
    }
    Ok((!edits.is_empty()).then_some((edits, dropped)))
}

/// An Anthropic-dialect body's thinking made the shape the model takes, and `max_tokens`
/// given when the client left it out (Anthropic requires it).
fn anthropic_thinking(
    body: &[u8],
    t: &Tunables,
    rules: &ModelRules,
    edits: &mut Edits,
    dropped: &mut Vec<&'static str>,
) -> Result<(), ApiError> {
    let output_config = t.span(body, Tunable::OutputConfig);
    let asked = t.span(body, Tunable::Thinking).and_then(|span| {
        let raw: RawThinking = serde_json::from_slice(&body[span.range()]).ok()?;
        let effort = output_config
            .and_then(|c| serde_json::from_slice::<RawOutputConfig>(&body[c.range()]).ok())
            .and_then(|c| c.effort)
            .and_then(|e| Effort::parse(&e));
        match raw.kind.as_str() {
            "enabled" => Some((span, Thinking::Budget(raw.budget_tokens?), effort)),
            "adaptive" => Some((span, Thinking::Adaptive(effort), effort)),
            _ => None,
        }
    });
    let max_tokens = t
        .span(body, Tunable::MaxTokens)
        .and_then(|s| serde_json::from_slice::<u64>(&body[s.range()]).ok());
    let mut budget = None;
    if let Some((span, thinking, effort)) = asked {
        let shape = anthropic::Shape::of(thinking, rules);
        let changed = !matches!(
            (thinking, shape),
            (Thinking::Budget(_), Shape::Budget(_)) | (Thinking::Adaptive(_), Shape::Adaptive(_))
        );
        if changed {
            let mut written = serde_json::Map::new();
            shape.write(&mut written);
            if let Some(v) = written.get("thinking") {
                edits
                    .replace
                    .push((span.range(), Bytes::from(v.to_string())));
            }
            match (shape, output_config) {
                // Adaptive now: the effort goes in `output_config`, unless the client's has one.
                (Shape::Adaptive(Some(e)), None) => edits.insert.push(Bytes::from(format!(
                    "\"output_config\":{{\"effort\":\"{}\"}},",
                    e.name()
                ))),
                // A budget now: an effort-only `output_config` goes with adaptive thinking.
                (Shape::Budget(_), Some(c)) if effort.is_some() && effort_only(body, c) => {
                    edits.remove.push(c.range());
                }
                _ => {}
            }
            dropped.push("thinking");
        }
        budget = shape.budget();
    }
    if max_tokens.is_none() {
        let wanted = anthropic::DEFAULT_MAX_TOKENS + budget.unwrap_or(0);
        let max = rules
            .max_output_tokens
            .map_or(wanted, |cap| wanted.min(u64::from(cap)));
        edits
            .insert
            .push(Bytes::from(format!("\"max_tokens\":{max},")));
    }
    Ok(())
}

/// `output_config` holds nothing but `effort`.
fn effort_only(body: &[u8], span: Span) -> bool {
    serde_json::from_slice::<serde_json::Map<String, serde_json::Value>>(&body[span.range()])
        .is_ok_and(|m| m.len() == 1 && m.contains_key("effort"))
}

fn user_value(body: &[u8], span: Span) -> Option<String> {
    serde_json::from_slice(&body[span.range()]).ok()
}

fn json_string(s: &str) -> Bytes {
    Bytes::from(serde_json::Value::from(s).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};
    use sluice_core::rules::{ThinkingStyle, UserIds};

    fn fitted(rules: ModelRules) -> (ChatRequest, Option<String>) {
        let mut req = ChatRequest {
            temperature: Some(0.2),
            top_p: Some(0.9),
            top_k: Some(5),
            user: Some("jane@example.com".into()),
            ..ChatRequest::default()
        };
        let mut params = Params::new(false, Dialect::OpenAi).with_rules(rules);
        fit(&mut req, &mut params);
        let dropped = params
            .header_value()
            .map(|v| v.to_str().unwrap_or_default().to_owned());
        (req, dropped)
    }

    #[test]
    fn sampling_the_model_refuses_is_dropped_and_named() {
        let (req, dropped) = fitted(ModelRules {
            sampling: Sampling::Refused,
            ..ModelRules::default()
        });
        assert_eq!((req.temperature, req.top_p, req.top_k), (None, None, None));
        assert_eq!(dropped.as_deref(), Some("temperature,top_p,top_k"));

        let (req, dropped) = fitted(ModelRules {
            sampling: Sampling::OneOf,
            ..ModelRules::default()
        });
        assert_eq!((req.temperature, req.top_p), (Some(0.2), None));
        assert_eq!(dropped.as_deref(), Some("top_p"));

        let (req, dropped) = fitted(ModelRules::default());
        assert_eq!(
            (req.temperature, req.top_p, req.top_k),
            (Some(0.2), Some(0.9), Some(5))
        );
        assert_eq!(req.user.as_deref(), Some("jane@example.com"));
        assert_eq!(dropped, None);
    }

    #[test]
    fn an_id_the_provider_refuses_is_hashed() {
        let (req, _) = fitted(ModelRules {
            user_ids: UserIds {
                max_len: Some(256),
                no_contact: true,
            },
            ..ModelRules::default()
        });
        let user = req.user.unwrap_or_default();
        assert!(user.starts_with("u-") && !user.contains('@'), "{user}");
    }

    fn through(body: &str, dialect: Dialect, rules: ModelRules) -> (Value, Vec<&'static str>) {
        let body = Bytes::from(body.to_owned());
        let env = envelope::Envelope::parse(&body).unwrap();
        let fitted = pass_through(&body, &env.tunables, dialect, &rules).unwrap();
        let segs =
            envelope::splice(&body, &env, None, false, fitted.as_ref().map(|f| &f.0)).unwrap();
        let out: Vec<u8> = segs.concat();
        (
            serde_json::from_slice(&out).unwrap(),
            fitted.map(|f| f.1).unwrap_or_default(),
        )
    }

    #[test]
    fn an_openai_reasoning_model_gets_max_completion_tokens_and_no_temperature() {
        let o3 = ModelRules {
            output_cap: OutputCap::MaxCompletionTokens,
            sampling: Sampling::Refused,
            ..ModelRules::default()
        };
        let (v, dropped) = through(
            r#"{"model":"o3","max_tokens":100,"temperature":0.2,"messages":[]}"#,
            Dialect::OpenAi,
            o3,
        );
        assert_eq!(
            v,
            json!({"model":"o3","max_completion_tokens":100,"messages":[]})
        );
        assert_eq!(dropped, ["temperature"]);
        let (v, _) = through(
            r#"{"model":"o3","max_tokens":100,"max_completion_tokens":50,"messages":[]}"#,
            Dialect::OpenAi,
            o3,
        );
        assert_eq!(
            v,
            json!({"model":"o3","max_completion_tokens":50,"messages":[]})
        );
        // A model without rules is left alone.
        let (v, dropped) = through(
            r#"{"model":"gpt-4o","max_tokens":100,"temperature":0.2,"messages":[]}"#,
            Dialect::OpenAi,
            ModelRules::default(),
        );
        assert_eq!(v["max_tokens"], 100);
        assert!(dropped.is_empty());
    }

    #[test]
    fn claude_gets_the_thinking_shape_it_takes() {
        let opus47 = ModelRules {
            thinking: ThinkingStyle::Adaptive,
            sampling: Sampling::Refused,
            ..ModelRules::default()
        };
        let (v, dropped) = through(
            r#"{"model":"claude-opus-4-7","max_tokens":9000,"temperature":1,"thinking":{"type":"enabled","budget_tokens":4096},"messages":[]}"#,
            Dialect::Anthropic,
            opus47,
        );
        assert_eq!(v["thinking"], json!({"type": "adaptive"}));
        assert_eq!(v["output_config"], json!({"effort": "high"}));
        assert!(v.get("temperature").is_none());
        assert_eq!(dropped, ["temperature", "thinking"]);

        let haiku = ModelRules::default();
        let (v, _) = through(
            r#"{"model":"claude-haiku-4-5","max_tokens":9000,"thinking":{"type":"adaptive"},"output_config":{"effort":"low"},"messages":[]}"#,
            Dialect::Anthropic,
            haiku,
        );
        assert_eq!(
            v["thinking"],
            json!({"type": "enabled", "budget_tokens": 1024})
        );
        assert!(v.get("output_config").is_none(), "{v}");

        // Adaptive to a model that takes it: unchanged.
        let (v, dropped) = through(
            r#"{"model":"claude-opus-4-7","max_tokens":9,"thinking":{"type":"adaptive"},"messages":[]}"#,
            Dialect::Anthropic,
            opus47,
        );
        assert_eq!(v["thinking"], json!({"type": "adaptive"}));
        assert!(dropped.is_empty());
    }

    #[test]
    fn an_anthropic_request_without_max_tokens_gets_one() {
        let rules = ModelRules {
            max_output_tokens: Some(2048),
            ..ModelRules::default()
        };
        let (v, _) = through(
            r#"{"model":"claude-x","messages":[{"role":"user","content":"hi"}]}"#,
            Dialect::Anthropic,
            rules,
        );
        assert_eq!(v["max_tokens"], 2048);
        assert_eq!(v["messages"][0]["content"], "hi");
    }

    #[test]
    fn a_long_user_id_is_hashed_in_place() {
        let rules = ModelRules {
            user_ids: UserIds {
                max_len: Some(64),
                no_contact: false,
            },
            ..ModelRules::default()
        };
        let long = "u".repeat(150);
        let (v, _) = through(
            &format!(r#"{{"model":"m","user":"{long}","messages":[]}}"#),
            Dialect::OpenAi,
            rules,
        );
        let user = v["user"].as_str().unwrap();
        assert!(user.starts_with("u-") && user.len() == 18);
    }
}
