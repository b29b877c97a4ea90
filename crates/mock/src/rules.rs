//! The refusals of the real APIs for today's models, so that a gateway tested against the mock
//! is refused where the provider would refuse it (a mock that takes everything hides every
//! translation bug). The rules, as of 2026-11, with the providers' own messages:
//!
//! - Anthropic's Messages API (`claude*` models): `max_tokens` is required; `temperature`,
//!   `top_p` and `top_k` are not in the API's types (the official SDK's `MessageCreateParams`
//!   since 1.0); Claude 4.7 and later refuse `thinking: {type: enabled}`, Claude before 4.6
//!   refuses `thinking: {type: adaptive}`; a `metadata.user_id` that is an e-mail address or
//!   a phone number is refused.
//! - OpenAI's reasoning models (`o1`, `o3`, `o4`, `gpt-5` families): `max_tokens` is refused
//!   ("use `max_completion_tokens`"), and `temperature`/`top_p` other than 1.
//! - Gemini 3: a function call the model made, sent back without its `thoughtSignature`, is
//!   refused; the mock signs the function calls it makes for those models (`gemini.rs`).
//!
//! The model families are named here because the mock plays the provider: a provider knows
//! its own models. The gateway learns the same facts from data (its model registry).

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

/// The fields of a chat or Messages body the rules read.
#[derive(Deserialize)]
struct Probe<'a> {
    #[serde(borrow, default)]
    max_tokens: Option<&'a RawValue>,
    #[serde(default)]
    temperature: Option<f64>,
    #[serde(default)]
    top_p: Option<f64>,
    #[serde(borrow, default)]
    top_k: Option<&'a RawValue>,
    #[serde(default)]
    thinking: Option<Kind>,
    #[serde(default)]
    metadata: Option<Metadata>,
}

#[derive(Deserialize)]
struct Kind {
    #[serde(rename = "type", default)]
    kind: String,
}

#[derive(Deserialize)]
struct Metadata {
    #[serde(default)]
    user_id: Option<String>,
}

/// Claude's version in a model id (`claude-opus-4-7`, `claude-sonnet-5`,
/// `claude-3-5-sonnet-20241022`, `claude-haiku-4-5@20251001`): major and minor.
fn claude_version(model: &str) -> Option<(u32, u32)> {
    let rest = &model[model.find("claude-")? + "claude-".len()..];
    let mut parts = rest.split(['-', '@', '.', ':']).peekable();
    // `claude-3-5-sonnet` starts with its version; `claude-opus-4-7` with its family.
    if parts.peek().is_some_and(|p| p.parse::<u32>().is_err()) {
        parts.next();
    }
    // Version numbers are short; a date (`20251001`) is not one.
    let mut numbers = parts
        .take_while(|p| p.len() <= 2)
        .map_while(|p| p.parse::<u32>().ok());
    let major = numbers.next()?;
    Some((major, numbers.next().unwrap_or(0)))
}

/// What Anthropic's API refuses of a Messages body for `model`, in its words.
pub(super) fn anthropic_refusal(model: &str, body: &[u8]) -> Option<String> {
    if !model.contains("claude") {
        return None;
    }
    let probe: Probe<'_> = serde_json::from_slice(body).ok()?;
    if probe.max_tokens.is_none() {
        return Some("max_tokens: Field required".into());
    }
    for (name, present) in [
        ("temperature", probe.temperature.is_some()),
        ("top_p", probe.top_p.is_some()),
        ("top_k", probe.top_k.is_some()),
    ] {
        if present {
            return Some(format!("{name}: Extra inputs are not permitted"));
        }
    }
    let version = claude_version(model).unwrap_or((0, 0));
    match probe.thinking.as_ref().map(|t| t.kind.as_str()) {
        Some("enabled") if version >= (4, 7) => {
            return Some(
                "\"thinking.type.enabled\" is not supported for this model. Use \
                 \"thinking.type.adaptive\" and \"output_config.effort\" to control thinking \
                 behavior."
                    .into(),
            )
        }
        Some("adaptive") if version < (4, 6) => {
            return Some(
                "\"thinking.type.adaptive\" is not supported for this model. Use \
                 \"thinking.type.enabled\" with \"budget_tokens\"."
                    .into(),
            )
        }
        _ => {}
    }
    let user = probe.metadata.and_then(|m| m.user_id)?;
    let email = user
        .split_once('@')
        .is_some_and(|(a, b)| !a.is_empty() && b.contains('.'));
    let digits = user.strip_prefix('+').unwrap_or(&user);
    let phone = digits.len() >= 7
        && digits
            .bytes()
            .all(|b| b.is_ascii_digit() || b" ()-".contains(&b));
    (email || phone).then(|| {
        "metadata.user_id: user_id appears to contain an email address or phone number".into()
    })
}

/// An OpenAI reasoning model (`o1`, `o3-mini`, `o4-mini`, `gpt-5.2`, ...).
fn openai_reasoning(model: &str) -> bool {
    let m = model.rsplit('/').next().unwrap_or(model);
    m.starts_with("gpt-5")
        || ["o1", "o3", "o4"]
            .iter()
            .any(|p| m == *p || m.starts_with(&format!("{p}-")))
}

/// What OpenAI's API refuses of a chat body for `model`: the message and the parameter.
pub(super) fn openai_refusal(model: &str, body: &[u8]) -> Option<(String, &'static str)> {
    if !openai_reasoning(model) {
        return None;
    }
    let probe: Probe<'_> = serde_json::from_slice(body).ok()?;
    if probe.max_tokens.is_some() {
        return Some((
            "Unsupported parameter: 'max_tokens' is not supported with this model. Use \
             'max_completion_tokens' instead."
                .into(),
            "max_tokens",
        ));
    }
    for (name, value) in [("temperature", probe.temperature), ("top_p", probe.top_p)] {
        if let Some(v) = value.filter(|v| (*v - 1.0).abs() > f64::EPSILON) {
            return Some((
                format!(
                    "Unsupported value: '{name}' does not support {v} with this model. Only the \
                     default (1) value is supported."
                ),
                name,
            ));
        }
    }
    None
}

/// A Gemini 3 model, which signs its function calls.
pub(super) fn signs_calls(model: &str) -> bool {
    model.contains("gemini-3")
}

/// Gemini 3's refusal of a conversation that sends one of its function calls back unsigned.
pub(super) fn gemini_refusal(model: &str, body: &[u8]) -> Option<String> {
    if !signs_calls(model) {
        return None;
    }
    let v: Value = serde_json::from_slice(body).ok()?;
    let unsigned = v["contents"]
        .as_array()?
        .iter()
        .enumerate()
        .find_map(|(i, c)| {
            let parts = c["parts"].as_array()?;
            let at = parts.iter().position(|p| {
                c["role"] == "model"
                    && p.get("functionCall").is_some()
                    && p.get("thoughtSignature").is_none()
            })?;
            Some((i, at))
        });
    unsigned.map(|(i, at)| {
        format!(
            "Function call is missing a thought_signature in functionCall parts. This is required \
             for tools to work correctly, and missing thought_signature may lead to degraded \
             model performance. Additional data, function call `default_api:f` , position \
             {}. Please refer to https://ai.google.dev/gemini-api/docs/thought-signatures for \
             more details.",
            i * 100 + at
        )
    })
}

/// The signature the mock gives the `n`-th function call it makes: base64 of a fixed text, so
/// a test can recognise it coming back.
pub(super) fn signature(n: u64) -> String {
    use std::fmt::Write;
    let raw = format!("mock-thought-signature-{n}");
    // Base64 by hand (the standard alphabet, padded): the mock has no base64 crate.
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in raw.as_bytes().chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                let _ = out.write_char(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_versions_are_read_from_every_id_shape() {
        assert_eq!(claude_version("claude-opus-4-7"), Some((4, 7)));
        assert_eq!(claude_version("claude-sonnet-5"), Some((5, 0)));
        assert_eq!(claude_version("claude-3-5-sonnet-20241022"), Some((3, 5)));
        assert_eq!(claude_version("claude-haiku-4-5@20251001"), Some((4, 5)));
        assert_eq!(
            claude_version("us.anthropic.claude-opus-4-8-v1:0"),
            Some((4, 8))
        );
        assert_eq!(claude_version("claude-upstream"), None);
    }

    #[test]
    fn anthropic_refuses_what_the_real_api_refuses() {
        let r = |model: &str, body: &str| anthropic_refusal(model, body.as_bytes());
        let ok = r#"{"max_tokens":9,"messages":[]}"#;
        assert_eq!(r("claude-opus-4-7", ok), None);
        assert!(r("claude-opus-4-7", r#"{"messages":[]}"#)
            .unwrap()
            .contains("max_tokens"));
        assert!(r("claude-haiku-4-5", r#"{"max_tokens":9,"temperature":1}"#)
            .unwrap()
            .starts_with("temperature"));
        let enabled = r#"{"max_tokens":9,"thinking":{"type":"enabled","budget_tokens":1024}}"#;
        assert!(r("claude-opus-4-7", enabled).unwrap().contains("adaptive"));
        assert_eq!(r("claude-opus-4-6", enabled), None);
        let adaptive = r#"{"max_tokens":9,"thinking":{"type":"adaptive"}}"#;
        assert!(r("claude-sonnet-4-5", adaptive).is_some());
        assert_eq!(r("claude-sonnet-4-6", adaptive), None);
        let email = r#"{"max_tokens":9,"metadata":{"user_id":"a@b.io"}}"#;
        assert!(r("claude-x", email).unwrap().contains("email"));
        // A model that is not Claude is not Anthropic's to refuse.
        assert_eq!(r("mock-model", r#"{"temperature":1}"#), None);
    }

    #[test]
    fn openai_reasoning_models_refuse_max_tokens_and_sampling() {
        let r = |model: &str, body: &str| openai_refusal(model, body.as_bytes()).map(|x| x.1);
        assert_eq!(r("o3", r#"{"max_tokens":5}"#), Some("max_tokens"));
        assert_eq!(r("gpt-5.2", r#"{"temperature":0.2}"#), Some("temperature"));
        assert_eq!(
            r("o4-mini", r#"{"max_completion_tokens":5,"temperature":1}"#),
            None
        );
        assert_eq!(r("gpt-4o", r#"{"max_tokens":5,"temperature":0.2}"#), None);
        assert_eq!(r("o3x", r#"{"max_tokens":5}"#), None);
    }

    #[test]
    fn gemini_3_refuses_its_own_calls_sent_back_unsigned() {
        let unsigned = r#"{"contents":[{"role":"user","parts":[{"text":"x"}]},
            {"role":"model","parts":[{"functionCall":{"name":"f","args":{}}}]}]}"#;
        assert!(gemini_refusal("gemini-3-pro-preview", unsigned.as_bytes()).is_some());
        assert_eq!(
            gemini_refusal("gemini-2.5-flash", unsigned.as_bytes()),
            None
        );
        let signed = unsigned.replace(
            r#"{"functionCall""#,
            r#"{"thoughtSignature":"c2ln","functionCall""#,
        );
        assert_eq!(
            gemini_refusal("gemini-3-pro-preview", signed.as_bytes()),
            None
        );
        assert_eq!(signature(7), "bW9jay10aG91Z2h0LXNpZ25hdHVyZS03");
    }
}
