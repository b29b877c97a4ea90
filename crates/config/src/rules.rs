//! Each deployment's [`ModelRules`], resolved at load from data, never from model names in
//! code: the registry's capability flags (LiteLLM's `model_prices_and_context_window.json`:
//! `supports_adaptive_thinking`, `supports_sampling_params`, the reasoning-effort flags, …)
//! and sluice's own rule table (`data/model_rules.yaml`, for what the registry does not say,
//! each rule dated and sourced). A new model is taken care of by a new registry file (no
//! release: `LITELLM_MODEL_COST_MAP_URL`), a new kind of rule by a line of the table.

use std::sync::LazyLock;

use serde::Deserialize;
use serde_json::{Map, Value};
use sluice_core::rules::{Effort, Efforts, ModelRules, OutputCap, Sampling, ThinkingStyle};

/// What the registry says about one model, as far as the translations need it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Capabilities {
    /// `supports_reasoning`.
    pub reasoning: bool,
    /// `supports_adaptive_thinking`.
    pub adaptive_thinking: bool,
    /// `supports_legacy_thinking` (a budget, beside adaptive thinking).
    pub legacy_thinking: bool,
    /// `supports_sampling_params: false`.
    pub no_sampling: bool,
    /// `supports_output_config`.
    pub output_config: bool,
    /// `supports_native_structured_output` (or, on Bedrock,
    /// `supports_bedrock_native_structured_output`).
    pub native_structured_output: bool,
    /// `thinking_on_by_default` or `thinking_always_on`.
    pub thinks_by_default: bool,
    /// `max_output_tokens`.
    pub max_output_tokens: Option<u32>,
    /// The reasoning efforts it knows (`reasoning_effort_levels`, or the
    /// `supports_*_reasoning_effort` flags).
    pub efforts: Efforts,
}

impl Capabilities {
    /// The capabilities one registry entry states; `None` when it states none of them.
    pub fn from_entry(entry: &Map<String, Value>) -> Option<Self> {
        let flag = |k: &str| entry.get(k).and_then(Value::as_bool);
        let on = |k: &str| flag(k) == Some(true);
        let caps = Self {
            reasoning: on("supports_reasoning"),
            adaptive_thinking: on("supports_adaptive_thinking"),
            legacy_thinking: on("supports_legacy_thinking"),
            no_sampling: flag("supports_sampling_params") == Some(false),
            output_config: on("supports_output_config"),
            native_structured_output: on("supports_native_structured_output")
                || on("supports_bedrock_native_structured_output"),
            thinks_by_default: on("thinking_on_by_default") || on("thinking_always_on"),
            max_output_tokens: entry
                .get("max_output_tokens")
                .and_then(Value::as_u64)
                .and_then(|n| u32::try_from(n).ok()),
            efforts: Efforts::UNKNOWN,
        };
        let efforts = efforts(entry, &caps);
        let caps = Self { efforts, ..caps };
        (caps != Self::default()).then_some(caps)
    }
}

/// The efforts an entry knows: its `reasoning_effort_levels` list, else, for a reasoning model,
/// low/medium/high and the levels its flags add (Anthropic's `output_config.effort` has no
/// `none` or `minimal`).
fn efforts(entry: &Map<String, Value>, caps: &Capabilities) -> Efforts {
    if let Some(levels) = entry
        .get("reasoning_effort_levels")
        .and_then(Value::as_array)
    {
        let known: Vec<Effort> = levels
            .iter()
            .filter_map(|l| l.as_str().and_then(Effort::parse))
            .collect();
        if !known.is_empty() {
            return Efforts::of(&known);
        }
    }
    if !caps.reasoning {
        return Efforts::UNKNOWN;
    }
    let mut set = Efforts::of(&[Effort::Low, Effort::Medium, Effort::High]);
    for (flag, level) in [
        ("supports_none_reasoning_effort", Effort::None),
        ("supports_minimal_reasoning_effort", Effort::Minimal),
        ("supports_xhigh_reasoning_effort", Effort::XHigh),
        ("supports_max_reasoning_effort", Effort::Max),
    ] {
        if entry.get(flag).and_then(Value::as_bool) == Some(true) {
            set = set.with(level);
        }
    }
    set
}

/// One rule of `data/model_rules.yaml`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// Its name, for the docs and tests.
    pub name: String,
    /// Provider prefixes (`*`: any).
    #[serde(default)]
    pub providers: Vec<String>,
    /// Model-name globs; empty: any model.
    #[serde(default)]
    pub models: Vec<String>,
    /// Registry flags that must hold.
    #[serde(default)]
    pub when: When,
    /// The output-cap field.
    #[serde(default)]
    pub output_cap: Option<CapField>,
    /// The sampling parameters taken.
    #[serde(default)]
    pub sampling: Option<SamplingRule>,
    /// Longest end-user id.
    #[serde(default)]
    pub user_id_max_len: Option<u16>,
    /// E-mail addresses and phone numbers hashed.
    #[serde(default)]
    pub user_id_no_contact: Option<bool>,
    /// When the rule was checked.
    pub since: String,
    /// Where it comes from.
    pub source: String,
}

/// Registry flags a rule depends on.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct When {
    /// `supports_reasoning`.
    #[serde(default)]
    pub supports_reasoning: Option<bool>,
}

/// `output_cap` in the rule table.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CapField {
    /// `max_tokens`.
    MaxTokens,
    /// `max_completion_tokens`.
    MaxCompletionTokens,
}

/// `sampling` in the rule table.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SamplingRule {
    /// All taken.
    Any,
    /// `temperature` or `top_p`.
    OneOf,
    /// None taken.
    Refused,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Table {
    rules: Vec<Rule>,
}

/// The rule table built into the binary (checked by a unit test; a broken one would apply no
/// rule).
static RULES: LazyLock<Vec<Rule>> = LazyLock::new(|| {
    serde_yaml_ng::from_str::<Table>(include_str!("../data/model_rules.yaml"))
        .map(|t| t.rules)
        .unwrap_or_default()
});

/// The embedded rule table.
pub fn table() -> &'static [Rule] {
    &RULES
}

/// `*` matches any run of characters; everything else itself.
fn glob(pattern: &str, text: &str) -> bool {
    let mut parts = pattern.split('*');
    let Some(first) = parts.next() else {
        return true;
    };
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    for (i, part) in parts.iter().enumerate() {
        if i + 1 == parts.len() {
            return rest.ends_with(part);
        }
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.is_empty()
}

impl Rule {
    fn applies(&self, provider: &str, model: &str, caps: Option<&Capabilities>) -> bool {
        let provider_ok =
            self.providers.is_empty() || self.providers.iter().any(|p| p == "*" || p == provider);
        let model_ok = self.models.is_empty() || self.models.iter().any(|g| glob(g, model));
        let when_ok = self
            .when
            .supports_reasoning
            .is_none_or(|want| caps.is_some_and(|c| c.reasoning) == want);
        provider_ok && model_ok && when_ok
    }
}

/// A deployment's rules: the registry's capabilities for its model (when it has an entry), then
/// each rule of the table that applies, in order.
pub fn resolve(provider: &str, model: &str, caps: Option<&Capabilities>) -> ModelRules {
    resolve_with(table(), provider, model, caps)
}

fn resolve_with(
    rules: &[Rule],
    provider: &str,
    model: &str,
    caps: Option<&Capabilities>,
) -> ModelRules {
    let mut r = ModelRules::default();
    if let Some(c) = caps {
        r.thinking = match (c.adaptive_thinking, c.legacy_thinking) {
            (true, true) => ThinkingStyle::Either,
            (true, false) => ThinkingStyle::Adaptive,
            (false, _) => ThinkingStyle::Budget,
        };
        if c.no_sampling {
            r.sampling = Sampling::Refused;
        }
        r.efforts = c.efforts;
        r.max_output_tokens = c.max_output_tokens;
        r.native_structured_output = c.native_structured_output;
        r.thinks_by_default = c.thinks_by_default;
    }
    for rule in rules.iter().filter(|x| x.applies(provider, model, caps)) {
        if let Some(cap) = rule.output_cap {
            r.output_cap = match cap {
                CapField::MaxTokens => OutputCap::MaxTokens,
                CapField::MaxCompletionTokens => OutputCap::MaxCompletionTokens,
            };
        }
        if let Some(s) = rule.sampling {
            let s = match s {
                SamplingRule::Any => Sampling::Any,
                SamplingRule::OneOf => Sampling::OneOf,
                SamplingRule::Refused => Sampling::Refused,
            };
            r.sampling = stricter(r.sampling, s);
        }
        if let Some(n) = rule.user_id_max_len {
            r.user_ids.max_len = Some(n);
        }
        if let Some(b) = rule.user_id_no_contact {
            r.user_ids.no_contact = b;
        }
    }
    r
}

fn stricter(a: Sampling, b: Sampling) -> Sampling {
    let rank = |s: Sampling| match s {
        Sampling::Any => 0,
        Sampling::OneOf => 1,
        Sampling::Refused => 2,
    };
    if rank(b) > rank(a) {
        b
    } else {
        a
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_table_parses_names_real_providers_and_dates_every_rule() {
        let raw: Table = serde_yaml_ng::from_str(include_str!("../data/model_rules.yaml")).unwrap();
        assert_eq!(raw.rules.len(), table().len());
        assert!(!table().is_empty());
        for rule in table() {
            for p in &rule.providers {
                assert!(
                    p == "*" || sluice_providers::Provider::from_prefix(p).is_some(),
                    "{}: unknown provider {p}",
                    rule.name
                );
            }
            assert!(rule.since.len() == 10, "{}: since is a date", rule.name);
            assert!(!rule.source.trim().is_empty(), "{}: a source", rule.name);
        }
    }

    #[test]
    fn globs_match_model_names() {
        assert!(glob(
            "*claude-opus-4-5*",
            "us.anthropic.claude-opus-4-5-20251101-v1:0"
        ));
        assert!(glob("*claude*", "claude-sonnet-5"));
        assert!(!glob("*claude-sonnet-4-5*", "claude-3-5-sonnet-20241022"));
        assert!(glob("gpt-*", "gpt-5.2"));
        assert!(!glob("gpt-*", "o3"));
        assert!(glob("o3", "o3"));
        assert!(!glob("o3", "o3-mini"));
    }

    fn caps(json: &str) -> Capabilities {
        let entry: Map<String, Value> = serde_json::from_str(json).unwrap();
        Capabilities::from_entry(&entry).unwrap_or_default()
    }

    #[test]
    fn an_openai_reasoning_model_gets_max_completion_tokens_and_no_sampling() {
        let o3 = caps(r#"{"supports_reasoning": true}"#);
        let r = resolve("openai", "o3", Some(&o3));
        assert_eq!(r.output_cap, OutputCap::MaxCompletionTokens);
        assert_eq!(r.sampling, Sampling::Refused);
        assert!(r.efforts.contains(Effort::Medium) && !r.efforts.contains(Effort::None));
        let gpt4o = caps(r#"{"supports_vision": true}"#);
        let r = resolve("openai", "gpt-4o", Some(&gpt4o));
        assert_eq!(
            (r.output_cap, r.sampling),
            (OutputCap::MaxTokens, Sampling::Any)
        );
        // The same model served by an OpenAI-compatible server keeps `max_tokens`.
        assert_eq!(
            resolve("hosted_vllm", "o3", Some(&o3)).output_cap,
            OutputCap::MaxTokens
        );
    }

    #[test]
    fn claude_thinking_and_sampling_come_from_the_registry_and_the_table() {
        let opus47 = caps(
            r#"{"supports_reasoning": true, "supports_adaptive_thinking": true,
                "supports_sampling_params": false, "supports_xhigh_reasoning_effort": true,
                "max_output_tokens": 128000}"#,
        );
        let r = resolve("anthropic", "claude-opus-4-7", Some(&opus47));
        assert_eq!(r.thinking, ThinkingStyle::Adaptive);
        assert_eq!(r.sampling, Sampling::Refused);
        assert!(r.efforts.contains(Effort::XHigh) && !r.efforts.contains(Effort::Max));
        assert_eq!(r.max_output_tokens, Some(128_000));
        assert!(r.user_ids.no_contact);

        let sonnet46 = caps(
            r#"{"supports_reasoning": true, "supports_adaptive_thinking": true,
                "supports_legacy_thinking": true}"#,
        );
        let r = resolve("anthropic", "claude-sonnet-4-6", Some(&sonnet46));
        assert_eq!(r.thinking, ThinkingStyle::Either);
        // Anthropic's Messages API takes no sampling parameters at all (its SDK's types).
        assert_eq!(r.sampling, Sampling::Refused);
        let r = resolve("bedrock", "anthropic.claude-sonnet-4-6", Some(&sonnet46));
        assert_eq!(r.sampling, Sampling::OneOf);

        let sonnet45 = caps(r#"{"supports_reasoning": true}"#);
        let r = resolve(
            "bedrock",
            "anthropic.claude-sonnet-4-5-20250929-v1:0",
            Some(&sonnet45),
        );
        assert_eq!(r.thinking, ThinkingStyle::Budget);
        assert_eq!(r.sampling, Sampling::OneOf);

        // A model neither knows is forwarded as the client wrote it.
        let r = resolve("bedrock", "anthropic.claude-3-5-sonnet-20241022-v2:0", None);
        assert_eq!(
            (r.thinking, r.sampling),
            (ThinkingStyle::Budget, Sampling::Any)
        );
    }

    #[test]
    fn user_ids_are_capped_per_provider() {
        assert_eq!(resolve("groq", "llama", None).user_ids.max_len, Some(64));
        assert_eq!(resolve("openrouter", "x", None).user_ids.max_len, Some(128));
        let claude = resolve("anthropic", "claude-haiku-4-5", None).user_ids;
        assert_eq!((claude.max_len, claude.no_contact), (Some(256), true));
    }
}
