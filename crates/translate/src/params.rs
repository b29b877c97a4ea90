//! What a translation does with the request parameters its target cannot carry. Clients add
//! fields faster than any gateway learns them, so a parameter is refused only when the answer's
//! meaning depends on it:
//!
//! - a *hint* only tunes the provider (prompt caching, metadata, service tiers, context
//!   management, beta features, …): it is dropped, and its name is noted for the client's
//!   `x-sluice-dropped-params` header;
//! - a parameter the answer's *meaning* depends on (more than one choice, log-probabilities, a
//!   tool the target cannot call, an output format it cannot honour, content it cannot read) is
//!   a 400 naming it, unless `drop_params` is on (then it is dropped and noted like a hint);
//! - a key nobody has classified is a hint.
//!
//! The readers classify the client's top-level keys ([`openai_key`], [`anthropic_key`]); the
//! writers note the internal request's settings their format has no place for ([`Setting`]).
//! `docs/translation.md` has the rule and the full lists.

use std::borrow::Cow;

use http::HeaderValue;
use serde::Deserialize;
use serde_json::Value;
use sluice_core::endpoint::Dialect;
use sluice_core::rules::ModelRules;

use crate::TranslateError;

/// The most names the response header lists; a longer list ends with `...`.
const MAX_LISTED: usize = 32;
/// The longest name the response header carries; longer ones are cut.
const MAX_NAME: usize = 64;

/// One translated request's policy for parameters the target cannot take (`drop_params`, and
/// the client's dialect to name them in) and the record of what it left out. Nothing is
/// allocated until something is dropped.
#[derive(Debug)]
pub struct Params {
    drop: bool,
    client: Dialect,
    rules: ModelRules,
    dropped: Vec<Cow<'static, str>>,
}

impl Params {
    /// The policy for a request from a `client` dialect; `drop` is `litellm_settings.drop_params`.
    pub fn new(drop: bool, client: Dialect) -> Self {
        Self {
            drop,
            client,
            rules: ModelRules::default(),
            dropped: Vec::new(),
        }
    }

    /// The same policy for a call to a model with these rules (what the writers shape the
    /// thinking, output-cap and sampling fields by).
    pub fn with_rules(mut self, rules: ModelRules) -> Self {
        self.rules = rules;
        self
    }

    /// The target model's rules.
    pub fn rules(&self) -> &ModelRules {
        &self.rules
    }

    /// `drop_params` is on: parameters the answer depends on are dropped, not refused.
    pub fn drops(&self) -> bool {
        self.drop
    }

    /// The client's dialect, whose spelling dropped settings are named in.
    pub fn client(&self) -> Dialect {
        self.client
    }

    /// A hint the target has no place for: dropped and noted.
    pub fn hint(&mut self, name: impl Into<Cow<'static, str>>) {
        let name = name.into();
        if !self.dropped.contains(&name) {
            self.dropped.push(name);
        }
    }

    /// A parameter the answer depends on: refused by name, or dropped and noted with
    /// `drop_params`.
    pub fn meaning(&mut self, name: impl Into<Cow<'static, str>>) -> Result<(), TranslateError> {
        let name = name.into();
        if self.drop {
            self.hint(name);
            Ok(())
        } else {
            Err(TranslateError::Unsupported(
                name.chars().take(100).collect(),
            ))
        }
    }

    /// Like [`Params::meaning`], with the refusal a writer words itself (an image the target
    /// cannot fetch names the part and says why).
    pub fn meaning_or(
        &mut self,
        name: &'static str,
        refusal: impl FnOnce() -> TranslateError,
    ) -> Result<(), TranslateError> {
        if self.drop {
            self.hint(name);
            Ok(())
        } else {
            Err(refusal())
        }
    }

    /// A setting of the internal request the target's format has no place for, as a hint.
    pub fn hint_setting(&mut self, setting: Setting) {
        self.hint(setting.name(self.client));
    }

    /// A setting of the internal request the target cannot honour, as a meaning parameter.
    pub fn meaning_setting(&mut self, setting: Setting) -> Result<(), TranslateError> {
        self.meaning(setting.name(self.client))
    }

    /// A top-level key the client's reader does not carry into the internal request, treated
    /// as `classify` says.
    pub fn unread(
        &mut self,
        key: String,
        value: &Value,
        classify: fn(&str, &Value) -> Key,
    ) -> Result<(), TranslateError> {
        if asks_nothing(value) {
            return Ok(());
        }
        match classify(&key, value) {
            Key::Carried => Ok(()),
            Key::Hint => {
                self.hint(key);
                Ok(())
            }
            Key::Meaning => self.meaning(key),
        }
    }

    /// The names dropped so far, in the order they were met.
    pub fn dropped(&self) -> &[Cow<'static, str>] {
        &self.dropped
    }

    /// The `x-sluice-dropped-params` value (`context_management,metadata`), when something was
    /// dropped. Names are cut to 64 characters, characters a header cannot carry become `?`,
    /// and at most 32 are listed.
    pub fn header_value(&self) -> Option<HeaderValue> {
        if self.dropped.is_empty() {
            return None;
        }
        let mut out = String::with_capacity(self.dropped.len() * 16);
        for (i, name) in self.dropped.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            if i == MAX_LISTED {
                out.push_str("...");
                break;
            }
            out.extend(name.chars().take(MAX_NAME).map(|c| {
                if c.is_ascii_graphic() && c != ',' {
                    c
                } else {
                    '?'
                }
            }));
        }
        HeaderValue::from_str(&out).ok()
    }
}

/// How a reader treats a top-level key it does not carry into the internal request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    /// sluice acts on it itself (the routing fields LiteLLM reads from a body, stream options):
    /// nothing is lost.
    Carried,
    /// It only tunes the provider: dropped and noted.
    Hint,
    /// The answer depends on it: refused, or dropped with `drop_params`.
    Meaning,
}

/// Keys an OpenAI chat request may carry that sluice itself acts on: the envelope reads the
/// routing fields, the stream's usage is asked for and removed as the client wanted.
const OPENAI_CARRIED: [&str; 5] = [
    "fallbacks",
    "num_retries",
    "timeout",
    "cache",
    "stream_options",
];

/// OpenAI chat keys the answer depends on, which no translated target takes: log-probabilities,
/// token bias, audio output, the legacy `functions`, web search. (`n` is read and refused
/// above 1 by the reader.)
const OPENAI_MEANING: [&str; 7] = [
    "logprobs",
    "top_logprobs",
    "logit_bias",
    "audio",
    "functions",
    "function_call",
    "web_search_options",
];

/// A top-level OpenAI chat key the reader does not carry: see [`OPENAI_CARRIED`] and
/// [`OPENAI_MEANING`]; output `modalities` other than text mean audio; everything else is a
/// hint.
pub fn openai_key(key: &str, value: &Value) -> Key {
    if OPENAI_CARRIED.contains(&key) {
        Key::Carried
    } else if OPENAI_MEANING.contains(&key) {
        Key::Meaning
    } else if key == "modalities" {
        let text_only = value
            .as_array()
            .is_some_and(|m| m.iter().all(|v| v == "text"));
        if text_only {
            Key::Carried
        } else {
            Key::Meaning
        }
    } else {
        Key::Hint
    }
}

/// A top-level Anthropic Messages key the reader does not carry: `mcp_servers` hands the
/// model tools only Anthropic can call (meaning); LiteLLM's routing and cache fields are sluice's;
/// everything else is a hint.
pub fn anthropic_key(key: &str, _value: &Value) -> Key {
    match key {
        "mcp_servers" => Key::Meaning,
        "fallbacks" | "num_retries" | "timeout" | "cache" => Key::Carried,
        _ => Key::Hint,
    }
}

/// `null`, `false`, `0`, `""`, `[]` or `{}`: the client asked for nothing, so nothing is lost.
pub fn asks_nothing(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
    }
}

/// The `type`s of the content blocks in a request's `messages` (and inside blocks' own
/// `content`, as tool results hold them) that are not in `known`, each once, in order. Read
/// again from the body only when a reader met blocks it cannot translate, to name them.
pub fn unknown_block_types(body: &[u8], known: &[&str]) -> Vec<String> {
    #[derive(Deserialize)]
    struct Probe {
        #[serde(default)]
        messages: Vec<ProbeMessage>,
    }
    #[derive(Deserialize)]
    struct ProbeMessage {
        #[serde(default)]
        content: Value,
    }
    fn collect(content: &Value, known: &[&str], out: &mut Vec<String>) {
        for block in content.as_array().into_iter().flatten() {
            if let Some(t) = block["type"].as_str() {
                if !known.contains(&t) && !out.iter().any(|o| o == t) {
                    out.push(t.to_owned());
                }
            }
            collect(&block["content"], known, out);
        }
    }
    let mut out = Vec::new();
    if let Ok(probe) = serde_json::from_slice::<Probe>(body) {
        for m in &probe.messages {
            collect(&m.content, known, &mut out);
        }
    }
    out
}

/// A setting of the internal request that some target's format cannot carry, named as the
/// client spelt it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setting {
    /// The end user's id (OpenAI's `user`, Anthropic's `metadata.user_id`).
    User,
    /// Anthropic's prompt-caching markers, on any block or tool.
    CacheControl,
    /// Top-k sampling.
    TopK,
    /// At most one tool call per turn.
    ParallelToolCalls,
    /// Structured output.
    ResponseFormat,
    /// An image the target cannot take (a URL for one that fetches nothing, a format it
    /// does not read).
    Image,
}

impl Setting {
    /// The parameter's name in the client's dialect.
    pub const fn name(self, client: Dialect) -> &'static str {
        match (self, client) {
            (Self::User, Dialect::OpenAi) => "user",
            (Self::User, Dialect::Anthropic) => "metadata.user_id",
            (Self::User, Dialect::Gemini) => "labels",
            (Self::User, Dialect::Converse) => "requestMetadata",
            (Self::CacheControl, Dialect::Converse) => "cachePoint",
            (Self::CacheControl, _) => "cache_control",
            (Self::TopK, Dialect::Gemini) => "generationConfig.topK",
            (Self::TopK, _) => "top_k",
            (Self::ParallelToolCalls, Dialect::OpenAi) => "parallel_tool_calls",
            (Self::ParallelToolCalls, Dialect::Anthropic) => {
                "tool_choice.disable_parallel_tool_use"
            }
            (Self::ParallelToolCalls, Dialect::Gemini) => "toolConfig",
            (Self::ParallelToolCalls, Dialect::Converse) => "toolConfig",
            (Self::ResponseFormat, Dialect::OpenAi) => "response_format",
            (Self::ResponseFormat, Dialect::Anthropic) => "output_config.format",
            (Self::ResponseFormat, Dialect::Gemini) => "generationConfig.responseSchema",
            (Self::ResponseFormat, Dialect::Converse) => "outputConfig",
            (Self::Image, Dialect::OpenAi) => "image_url",
            (Self::Image, Dialect::Anthropic | Dialect::Converse) => "image",
            (Self::Image, Dialect::Gemini) => "inlineData",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn hints_are_noted_once_meaning_is_refused_unless_dropping() {
        let mut p = Params::new(false, Dialect::Anthropic);
        assert!(p.header_value().is_none(), "nothing dropped, no header");
        p.hint("context_management");
        p.hint_setting(Setting::CacheControl);
        p.hint("context_management");
        assert_eq!(p.dropped(), ["context_management", "cache_control"]);
        assert!(
            matches!(p.meaning("mcp_servers"), Err(TranslateError::Unsupported(n)) if n == "mcp_servers")
        );
        assert_eq!(
            p.header_value().unwrap(),
            "context_management,cache_control"
        );
        let mut d = Params::new(true, Dialect::OpenAi);
        d.meaning_setting(Setting::ResponseFormat).unwrap();
        d.meaning_or("messages", || TranslateError::invalid("messages", "x"))
            .unwrap();
        assert_eq!(d.dropped(), ["response_format", "messages"]);
    }

    #[test]
    fn unread_keys_by_class_and_value() {
        let mut p = Params::new(false, Dialect::OpenAi);
        for (k, v) in [
            ("store", json!(true)),
            ("prompt_cache_key", json!("k")),
            ("some_future_field", json!({"a": [1]})),
            ("fallbacks", json!(["gpt"])),
            ("logprobs", json!(false)),
            ("modalities", json!(["text"])),
            ("metadata", json!({})),
        ] {
            p.unread(k.into(), &v, openai_key).unwrap();
        }
        assert_eq!(
            p.dropped(),
            ["store", "prompt_cache_key", "some_future_field"]
        );
        for (k, v) in [
            ("logprobs", json!(true)),
            ("logit_bias", json!({"1": 2})),
            ("modalities", json!(["text", "audio"])),
            ("web_search_options", json!({"search_context_size": "low"})),
        ] {
            assert!(
                matches!(p.unread(k.into(), &v, openai_key), Err(TranslateError::Unsupported(n)) if n == k)
            );
        }
        let mut a = Params::new(false, Dialect::Anthropic);
        a.unread(
            "context_management".into(),
            &json!({"edits": []}),
            anthropic_key,
        )
        .unwrap();
        a.unread(
            "context_management".into(),
            &json!({"edits": [{}]}),
            anthropic_key,
        )
        .unwrap();
        assert!(a
            .unread("mcp_servers".into(), &json!([{"url": "u"}]), anthropic_key)
            .is_err());
        assert_eq!(a.dropped(), ["context_management"]);
    }

    #[test]
    fn unknown_blocks_are_named_by_type() {
        let body = br#"{"messages":[{"role":"user","content":[{"type":"text","text":"x"},{"type":"document"},{"type":"tool_result","content":[{"type":"search_result"},{"type":"document"}]}]},{"role":"user","content":"plain"}]}"#;
        assert_eq!(
            unknown_block_types(body, &["text", "tool_result"]),
            ["document", "search_result"]
        );
    }

    #[test]
    fn setting_names_follow_the_client() {
        assert_eq!(Setting::User.name(Dialect::OpenAi), "user");
        assert_eq!(Setting::User.name(Dialect::Anthropic), "metadata.user_id");
        assert_eq!(
            Setting::ResponseFormat.name(Dialect::Anthropic),
            "output_config.format"
        );
    }

    #[test]
    fn header_value_is_safe_and_bounded() {
        let mut p = Params::new(false, Dialect::OpenAi);
        p.hint("a,b\u{e9}\n".to_owned());
        assert_eq!(p.header_value().unwrap(), "a?b??");
        p.hint("x".repeat(200));
        let v = p.header_value().unwrap();
        assert_eq!(v.len(), "a?b??,".len() + MAX_NAME);
        let mut many = Params::new(false, Dialect::OpenAi);
        for i in 0..100 {
            many.hint(format!("k{i}"));
        }
        let v = many.header_value().unwrap();
        let listed: Vec<&str> = v.to_str().unwrap().split(',').collect();
        assert_eq!(listed.len(), MAX_LISTED + 1);
        assert_eq!(listed.last(), Some(&"..."));
    }
}
