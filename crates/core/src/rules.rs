//! What one model accepts, as a translation must know it: the shape of its extended thinking,
//! whether it takes sampling parameters, which output-cap field it reads, the reasoning efforts
//! it knows. Providers change these per model, and a gateway that hard-codes model names
//! breaks at the next release; so a deployment's rules are resolved once, at config load, from
//! data (the price and capability registry plus sluice's own documented rule table, in the
//! config crate) and the translations read only this value.

/// A model's request rules. Cheap to copy; the default is what a model nothing is known about
/// gets: the request is forwarded as the client wrote it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ModelRules {
    /// How it is asked to think.
    pub thinking: ThinkingStyle,
    /// Which sampling parameters it takes.
    pub sampling: Sampling,
    /// The field its output cap goes in.
    pub output_cap: OutputCap,
    /// The reasoning efforts it knows (empty: unknown, every effort is passed as asked).
    pub efforts: Efforts,
    /// Its largest output, when the registry says (an Anthropic-format request without
    /// `max_tokens` is given at most this).
    pub max_output_tokens: Option<u32>,
    /// It answers in a JSON schema natively (Anthropic's `output_config.format`).
    pub native_structured_output: bool,
    /// It reasons by default (asking for effort `none` must turn thinking off explicitly).
    pub thinks_by_default: bool,
    /// How its provider takes an end-user id.
    pub user_ids: UserIds,
}

/// How a provider takes an end-user id (`user`, `metadata.user_id`): clients send e-mail
/// addresses and long ids, which some providers refuse. A refused id is replaced by a stable
/// hash of it, so the provider's abuse monitoring still tells users apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct UserIds {
    /// Longest id taken (OpenAI-compatible servers commonly cap `user` at 64).
    pub max_len: Option<u16>,
    /// E-mail addresses and phone numbers are refused (Anthropic).
    pub no_contact: bool,
}

impl UserIds {
    /// The id to send for `id`: `None` when it is taken as it is.
    pub fn fit(self, id: &str) -> Option<String> {
        let too_long = self.max_len.is_some_and(|max| id.len() > usize::from(max));
        (too_long || (self.no_contact && looks_like_contact(id))).then(|| hashed_id(id))
    }
}

/// An e-mail address or a phone number, as Anthropic refuses them (LiteLLM's patterns:
/// `local@domain.tld`, and 7 or more of digits, spaces, parentheses and dashes after an
/// optional `+`).
fn looks_like_contact(id: &str) -> bool {
    let email = id.split_once('@').is_some_and(|(local, domain)| {
        !local.is_empty()
            && local
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._%+-".contains(&b))
            && domain.rsplit_once('.').is_some_and(|(host, tld)| {
                !host.is_empty()
                    && host
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b".-".contains(&b))
                    && tld.len() >= 2
                    && tld.bytes().all(|b| b.is_ascii_alphabetic())
            })
    });
    let digits = id.strip_prefix('+').unwrap_or(id);
    let phone = digits.len() >= 7
        && digits
            .bytes()
            .all(|b| b.is_ascii_digit() || b" ()-".contains(&b));
    email || phone
}

/// A stable 64-bit FNV-1a hash of an id, as `u-` and 16 hex digits: the same user always
/// maps to the same value, across instances and releases.
fn hashed_id(id: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in id.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("u-{h:016x}")
}

/// The rules of any model a wildcard deployment (`anthropic/*`) may be asked for: its model
/// is known only per request, so its rules are looked up then (in the same registry and table
/// as a named deployment's, at load). Cheap to clone.
#[derive(Clone)]
pub struct RuleBook(std::sync::Arc<dyn Fn(&str) -> ModelRules + Send + Sync>);

impl RuleBook {
    /// A book that looks rules up with `lookup`.
    pub fn new(lookup: impl Fn(&str) -> ModelRules + Send + Sync + 'static) -> Self {
        Self(std::sync::Arc::new(lookup))
    }

    /// The rules of `model`.
    pub fn of(&self, model: &str) -> ModelRules {
        (self.0)(model)
    }
}

impl std::fmt::Debug for RuleBook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RuleBook")
    }
}

/// How a model is asked to think.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ThinkingStyle {
    /// `thinking: {type: enabled, budget_tokens}` only (Claude before 4.6, and any model the
    /// registry says nothing about).
    #[default]
    Budget,
    /// Both; adaptive preferred (Claude 4.6).
    Either,
    /// `thinking: {type: adaptive}` with `output_config.effort` only (Claude Opus 4.7 on):
    /// a budget is refused.
    Adaptive,
}

impl ThinkingStyle {
    /// Adaptive thinking is accepted.
    pub const fn adaptive(self) -> bool {
        matches!(self, Self::Either | Self::Adaptive)
    }

    /// A thinking budget is accepted.
    pub const fn budget(self) -> bool {
        matches!(self, Self::Budget | Self::Either)
    }
}

/// Which sampling parameters (`temperature`, `top_p`, `top_k`) a model takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Sampling {
    /// All of them.
    #[default]
    Any,
    /// Either `temperature` or `top_p`, not both (recent Claude models).
    OneOf,
    /// None: the model refuses them (Claude Opus 4.7 on, OpenAI's reasoning models).
    Refused,
}

/// The request field a model's output cap goes in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OutputCap {
    /// `max_tokens`.
    #[default]
    MaxTokens,
    /// `max_completion_tokens` (OpenAI's reasoning models refuse `max_tokens`).
    MaxCompletionTokens,
}

/// A reasoning effort, every level OpenAI's SDK lists (`ReasoningEffort`) and Anthropic's
/// `output_config.effort` takes, in increasing order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Effort {
    /// `none`: no reasoning.
    None,
    /// `minimal`.
    Minimal,
    /// `low`.
    Low,
    /// `medium`.
    Medium,
    /// `high`.
    High,
    /// `xhigh`.
    XHigh,
    /// `max`.
    Max,
}

impl Effort {
    /// Every level, in order.
    pub const ALL: [Effort; 7] = [
        Self::None,
        Self::Minimal,
        Self::Low,
        Self::Medium,
        Self::High,
        Self::XHigh,
        Self::Max,
    ];

    /// The level an OpenAI `reasoning_effort` or Anthropic `effort` value names.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "none" => Self::None,
            "minimal" => Self::Minimal,
            "low" => Self::Low,
            "medium" => Self::Medium,
            "high" => Self::High,
            "xhigh" => Self::XHigh,
            "max" => Self::Max,
            _ => return None,
        })
    }

    /// Its spelling.
    pub const fn name(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Minimal => "minimal",
            Self::Low => "low",
            Self::Medium => "medium",
            Self::High => "high",
            Self::XHigh => "xhigh",
            Self::Max => "max",
        }
    }

    /// The thinking budget a level stands for where a model takes a budget (LiteLLM's
    /// defaults; Anthropic's smallest budget is 1024).
    pub const fn budget(self) -> u64 {
        match self {
            Self::None | Self::Minimal | Self::Low => 1024,
            Self::Medium => 2048,
            Self::High => 4096,
            Self::XHigh => 8192,
            Self::Max => 16384,
        }
    }

    /// The level closest to a thinking budget.
    pub const fn from_budget(budget: u64) -> Self {
        match budget {
            0..=1024 => Self::Low,
            1025..=2048 => Self::Medium,
            2049..=4096 => Self::High,
            4097..=8192 => Self::XHigh,
            _ => Self::Max,
        }
    }

    const fn bit(self) -> u8 {
        1 << self as u8
    }
}

/// A set of reasoning efforts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Efforts(u8);

impl Efforts {
    /// No level known: every effort is passed as asked.
    pub const UNKNOWN: Self = Self(0);

    /// The set of these levels.
    pub fn of(levels: &[Effort]) -> Self {
        Self(levels.iter().fold(0, |bits, e| bits | e.bit()))
    }

    /// This set with `e` in it.
    pub const fn with(self, e: Effort) -> Self {
        Self(self.0 | e.bit())
    }

    /// This set without `e`.
    pub const fn without(self, e: Effort) -> Self {
        Self(self.0 & !e.bit())
    }

    /// Whether `e` is in it.
    pub const fn contains(self, e: Effort) -> bool {
        self.0 & e.bit() != 0
    }

    /// Nothing is known.
    pub const fn is_unknown(self) -> bool {
        self.0 == 0
    }

    /// The level to send for `asked`: itself when the model knows it (or nothing is known),
    /// else the nearest known level below it, else the nearest above (`xhigh` to a model
    /// whose highest is `high` becomes `high`; `minimal` to one whose lowest is `low`, `low`).
    pub fn fit(self, asked: Effort) -> Effort {
        if self.is_unknown() || self.contains(asked) {
            return asked;
        }
        let below = Effort::ALL
            .iter()
            .rev()
            .copied()
            .find(|e| *e < asked && *e != Effort::None && self.contains(*e));
        let above = Effort::ALL
            .iter()
            .copied()
            .find(|e| *e > asked && self.contains(*e));
        below.or(above).unwrap_or(asked)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contact_details_and_long_ids_are_hashed_stably() {
        let anthropic = UserIds {
            max_len: Some(256),
            no_contact: true,
        };
        let hashed = anthropic.fit("jane.doe@example.com").unwrap();
        assert!(hashed.starts_with("u-") && hashed.len() == 18, "{hashed}");
        assert_eq!(anthropic.fit("jane.doe@example.com"), Some(hashed));
        assert!(anthropic.fit("+1 (555) 123-4567").is_some());
        assert_eq!(anthropic.fit("user-42"), None);
        assert_eq!(
            anthropic.fit("team@internal"),
            None,
            "no dot-TLD: not an e-mail"
        );
        let openai = UserIds {
            max_len: Some(64),
            no_contact: false,
        };
        assert_eq!(openai.fit("jane.doe@example.com"), None);
        let long = "x".repeat(150);
        assert_ne!(openai.fit(&long), openai.fit(&"y".repeat(150)));
        assert_eq!(openai.fit(&long).unwrap().len(), 18);
        assert_eq!(UserIds::default().fit(&long), None);
    }

    #[test]
    fn an_effort_a_model_lacks_becomes_the_nearest_it_has() {
        let claude = Efforts::of(&[Effort::Low, Effort::Medium, Effort::High]);
        assert_eq!(claude.fit(Effort::XHigh), Effort::High);
        assert_eq!(claude.fit(Effort::Max), Effort::High);
        assert_eq!(claude.fit(Effort::Minimal), Effort::Low);
        assert_eq!(claude.fit(Effort::Medium), Effort::Medium);
        // Nothing known: the client's level as asked.
        assert_eq!(Efforts::UNKNOWN.fit(Effort::XHigh), Effort::XHigh);
        // `none` is never what a higher level falls to.
        let gpt = Efforts::of(&[Effort::None, Effort::Low, Effort::High]);
        assert_eq!(gpt.fit(Effort::Minimal), Effort::Low);
        assert_eq!(gpt.fit(Effort::Medium), Effort::Low);
    }

    #[test]
    fn efforts_spell_and_budget_as_the_sdks_and_litellm_do() {
        for e in Effort::ALL {
            assert_eq!(Effort::parse(e.name()), Some(e));
        }
        assert_eq!(Effort::parse("extreme"), None);
        assert_eq!(Effort::from_budget(Effort::High.budget()), Effort::High);
        assert_eq!(Effort::from_budget(32_000), Effort::Max);
        assert!(ThinkingStyle::Either.adaptive() && ThinkingStyle::Either.budget());
        assert!(!ThinkingStyle::Adaptive.budget());
        assert!(!ThinkingStyle::Budget.adaptive());
    }
}
