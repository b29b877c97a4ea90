//! Finding sensitive values in a text: every configured detector's regex in one
//! [`RegexSet`], so a text with nothing to find costs one pass; only the detectors that fired
//! then look for their matches, and a check (Luhn, mod-97, entropy...) turns a candidate into a
//! finding. Blocked words are one Aho-Corasick automaton. Overlapping findings are resolved to
//! the earliest, then longest, then the detector listed first.

use std::sync::Arc;

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use regex::{Regex, RegexSet};

use crate::checks;
use crate::entity::Entity;

/// What a guardrail does with a finding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Replace the value by a placeholder (`<EMAIL_ADDRESS_1>`) and let the request go on.
    Mask,
    /// Refuse the request (or the answer).
    Block,
}

/// One thing a detector reports: a label for placeholders, records and metrics (an entity's
/// name, a pattern's name, or `BLOCKED_WORD`) and what to do when it is found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// Placeholder and record label.
    pub label: Arc<str>,
    /// What to do with a finding.
    pub action: Action,
}

/// A match: a byte range of the text and the index of its [`Target`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Finding {
    /// First byte.
    pub start: usize,
    /// One past the last byte.
    pub end: usize,
    /// Index into [`Detector::targets`].
    pub target: usize,
}

/// The check a candidate must pass to be a finding.
#[derive(Debug, Clone, Copy)]
enum Check {
    None,
    Luhn,
    Iban,
    Ssn,
    Ipv4,
    Ipv6,
    Phone,
    Entropy,
    OpenAi,
}

impl Check {
    fn passes(self, m: &str, after: &str) -> bool {
        match self {
            Check::None => true,
            Check::Luhn => checks::luhn(m),
            Check::Iban => checks::iban(m),
            Check::Ssn => checks::us_ssn(m),
            Check::Ipv4 => checks::ipv4(m, after),
            Check::Ipv6 => checks::ipv6(m),
            Check::Phone => {
                checks::phone(m) && (m.starts_with('+') || m.bytes().any(|b| !b.is_ascii_digit()))
            }
            Check::Entropy => m.len() <= 200 && checks::high_entropy(m),
            Check::OpenAi => {
                !m.starts_with("sk-ant-") && m.bytes().skip(3).any(|b| b.is_ascii_digit())
            }
        }
    }
}

/// The candidate patterns of a built-in entity, each with its check.
fn patterns(e: Entity) -> &'static [(&'static str, Check)] {
    match e {
        Entity::PrivateKey => &[(
            r"(?s)-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?-----END [A-Z0-9 ]*PRIVATE KEY-----",
            Check::None,
        )],
        Entity::Jwt => &[(
            r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
            Check::None,
        )],
        Entity::AnthropicApiKey => &[(r"\bsk-ant-[A-Za-z0-9_-]{20,}", Check::None)],
        Entity::OpenAiApiKey => &[(r"\bsk-[A-Za-z0-9_-]{20,}", Check::OpenAi)],
        Entity::AwsAccessKey => &[(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b", Check::None)],
        Entity::GithubToken => &[(
            r"\b(?:gh[pousr]_[A-Za-z0-9]{36}|github_pat_[A-Za-z0-9_]{22,255})\b",
            Check::None,
        )],
        Entity::SlackToken => &[(r"\bxox[abposr]-[A-Za-z0-9-]{10,}", Check::None)],
        Entity::GoogleApiKey => &[(r"\bAIza[0-9A-Za-z_-]{35}", Check::None)],
        Entity::HighEntropySecret => &[(r"[A-Za-z0-9+/_-]{32,}={0,2}", Check::Entropy)],
        // Written whole, in fours (16 digits), or as American Express's 4-6-5: the groupings
        // cards are printed in, so that other grouped numbers (an IBAN's) are not read as one.
        Entity::CreditCard => &[
            (r"\b[2-6][0-9]{12,18}\b", Check::Luhn),
            (r"\b[2-6][0-9]{3}(?: [0-9]{4}){3}\b", Check::Luhn),
            (r"\b[2-6][0-9]{3}(?:-[0-9]{4}){3}\b", Check::Luhn),
            (r"\b3[47][0-9]{2}[ -][0-9]{6}[ -][0-9]{5}\b", Check::Luhn),
        ],
        Entity::IbanCode => &[(
            r"\b[A-Z]{2}[0-9]{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?\b",
            Check::Iban,
        )],
        Entity::UsSsn => &[(r"\b[0-9]{3}-[0-9]{2}-[0-9]{4}\b", Check::Ssn)],
        Entity::EmailAddress => &[(
            r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b",
            Check::None,
        )],
        Entity::PhoneNumber => &[
            (
                r"(?:\+[0-9]{1,3}[ .-]?)?(?:\([0-9]{3}\)|\b[0-9]{3})[ .-]?[0-9]{3}[ .-]?[0-9]{4}\b",
                Check::Phone,
            ),
            (r"\+[0-9]{1,3}(?:[ .-]?[0-9]{1,4}){2,6}\b", Check::Phone),
        ],
        Entity::IpAddress => &[
            (
                r"\b[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}\b",
                Check::Ipv4,
            ),
            (
                r"(?:[0-9A-Fa-f]{1,4})?(?::(?:[0-9A-Fa-f]{1,4})?){2,7}",
                Check::Ipv6,
            ),
        ],
    }
}

/// One regex of the set, its check and its target.
#[derive(Debug, Clone)]
struct Rule {
    regex: Regex,
    check: Check,
    target: usize,
}

/// Why a detector could not be built: a custom pattern that is not a valid regex.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// The pattern at this index of the custom patterns does not compile.
    #[error("{0}")]
    Pattern(usize, String),
    /// A `tool_permission` rule does not compile.
    #[error("{0}")]
    Tools(#[from] crate::tools::ToolRuleError),
}

/// What a detector looks for, before it is built.
#[derive(Debug, Clone, Default)]
pub struct Spec {
    /// Built-in entities and their actions.
    pub entities: Vec<(Entity, Action)>,
    /// Custom regex patterns: name, regex, action.
    pub patterns: Vec<(String, String, Action)>,
    /// Blocked words (matched whole, ASCII case-insensitively) and their actions.
    pub words: Vec<(String, Action)>,
}

/// A built detector: immutable, shared by every request of a config snapshot.
#[derive(Debug, Clone)]
pub struct Detector {
    targets: Vec<Target>,
    set: RegexSet,
    rules: Vec<Rule>,
    words: Option<(AhoCorasick, Vec<usize>)>,
}

impl Detector {
    /// Compile a spec. Only custom patterns can fail; the built-in ones are tested.
    pub fn new(spec: &Spec) -> Result<Detector, BuildError> {
        let mut targets = Vec::new();
        let mut rules = Vec::new();
        for &(entity, action) in &spec.entities {
            let target = targets.len();
            targets.push(Target {
                label: Arc::from(entity.name()),
                action,
            });
            for &(re, check) in patterns(entity) {
                let regex =
                    Regex::new(re).map_err(|e| BuildError::Pattern(usize::MAX, e.to_string()))?;
                rules.push(Rule {
                    regex,
                    check,
                    target,
                });
            }
        }
        for (i, (name, re, action)) in spec.patterns.iter().enumerate() {
            let target = targets.len();
            targets.push(Target {
                label: Arc::from(name.to_ascii_uppercase().as_str()),
                action: *action,
            });
            let regex = Regex::new(re).map_err(|e| BuildError::Pattern(i, e.to_string()))?;
            rules.push(Rule {
                regex,
                check: Check::None,
                target,
            });
        }
        let set = RegexSet::new(rules.iter().map(|r| r.regex.as_str()))
            .map_err(|e| BuildError::Pattern(usize::MAX, e.to_string()))?;
        let words = if spec.words.is_empty() {
            None
        } else {
            let mut of = Vec::with_capacity(spec.words.len());
            for (_, action) in &spec.words {
                of.push(targets.len());
                targets.push(Target {
                    label: Arc::from("BLOCKED_WORD"),
                    action: *action,
                });
            }
            let ac = AhoCorasickBuilder::new()
                .ascii_case_insensitive(true)
                .match_kind(MatchKind::LeftmostLongest)
                .build(spec.words.iter().map(|(w, _)| w.as_str()))
                .map_err(|e| BuildError::Pattern(usize::MAX, e.to_string()))?;
            Some((ac, of))
        };
        Ok(Detector {
            targets,
            set,
            rules,
            words,
        })
    }

    /// What each finding's `target` index names.
    pub fn targets(&self) -> &[Target] {
        &self.targets
    }

    /// Every finding in `text`, in order, none overlapping, appended to `out` (cleared first).
    pub fn scan(&self, text: &str, out: &mut Vec<Finding>) {
        out.clear();
        if !self.rules.is_empty() {
            for i in self.set.matches(text).iter() {
                let rule = &self.rules[i];
                for m in rule.regex.find_iter(text) {
                    if rule.check.passes(m.as_str(), &text[m.end()..]) {
                        out.push(Finding {
                            start: m.start(),
                            end: m.end(),
                            target: rule.target,
                        });
                    }
                }
            }
        }
        if let Some((ac, of)) = &self.words {
            let bytes = text.as_bytes();
            for m in ac.find_iter(text) {
                let before = m.start().checked_sub(1).map(|i| bytes[i]);
                let after = bytes.get(m.end()).copied();
                let word =
                    |b: Option<u8>| b.is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_');
                if !word(before) && !word(after) {
                    out.push(Finding {
                        start: m.start(),
                        end: m.end(),
                        target: of[m.pattern().as_usize()],
                    });
                }
            }
        }
        if out.len() > 1 {
            out.sort_unstable_by(|a, b| {
                a.start
                    .cmp(&b.start)
                    .then(b.end.cmp(&a.end))
                    .then(a.target.cmp(&b.target))
            });
            let mut last_end = 0;
            out.retain(|f| {
                let keep = f.start >= last_end;
                if keep {
                    last_end = f.end;
                }
                keep
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(action: Action) -> Detector {
        let spec = Spec {
            entities: Entity::ALL.iter().map(|e| (*e, action)).collect(),
            ..Spec::default()
        };
        Detector::new(&spec).unwrap()
    }

    /// The labels found in `text`, with the matched text.
    fn found(d: &Detector, text: &str) -> Vec<(String, String)> {
        let mut out = Vec::new();
        d.scan(text, &mut out);
        out.iter()
            .map(|f| {
                (
                    d.targets()[f.target].label.to_string(),
                    text[f.start..f.end].to_owned(),
                )
            })
            .collect()
    }

    fn one(label: &str, value: &str) -> Vec<(String, String)> {
        vec![(label.to_owned(), value.to_owned())]
    }

    #[test]
    fn cards_pass_luhn_or_are_not_cards() {
        let d = all(Action::Mask);
        assert_eq!(
            found(&d, "card 4111 1111 1111 1111 exp 12/29"),
            one("CREDIT_CARD", "4111 1111 1111 1111")
        );
        assert_eq!(
            found(&d, "pay with 5500-0000-0000-0004."),
            one("CREDIT_CARD", "5500-0000-0000-0004")
        );
        assert!(found(&d, "ref 4111 1111 1111 1112 please").is_empty());
        assert!(found(&d, "order 4111111111111112").is_empty());
    }

    #[test]
    fn iban_ssn_email() {
        let d = all(Action::Mask);
        assert_eq!(
            found(&d, "IBAN DE89 3704 0044 0532 0130 00 thanks"),
            one("IBAN_CODE", "DE89 3704 0044 0532 0130 00")
        );
        let f = found(&d, "IBAN DE89 3704 0044 0532 0130 01 thanks");
        assert!(f.is_empty(), "{f:?}");
        assert_eq!(
            found(&d, "my ssn is 123-45-6789."),
            one("US_SSN", "123-45-6789")
        );
        assert!(found(&d, "part no 666-45-6789").is_empty());
        assert_eq!(
            found(&d, "write to jane.doe+x@example.co.uk today"),
            one("EMAIL_ADDRESS", "jane.doe+x@example.co.uk")
        );
        assert!(found(&d, "the @ sign and user@localhost").is_empty());
    }

    #[test]
    fn phones_need_a_shape_not_just_digits() {
        let d = all(Action::Mask);
        assert_eq!(
            found(&d, "call (415) 555-2671 now"),
            one("PHONE_NUMBER", "(415) 555-2671")
        );
        assert_eq!(
            found(&d, "call +44 20 7946 0958"),
            one("PHONE_NUMBER", "+44 20 7946 0958")
        );
        assert!(found(&d, "order 4155552671 shipped").is_empty());
        assert!(found(&d, "dial 555-2671").is_empty());
    }

    #[test]
    fn ip_addresses_and_version_numbers() {
        let d = all(Action::Mask);
        assert_eq!(
            found(&d, "host 10.0.12.7 down"),
            one("IP_ADDRESS", "10.0.12.7")
        );
        assert_eq!(
            found(&d, "v6 2001:db8::8a2e:370:7334 up"),
            one("IP_ADDRESS", "2001:db8::8a2e:370:7334")
        );
        assert!(found(&d, "version 1.2.3.4.5 and 300.1.1.1").is_empty());
        assert!(found(&d, "at 12:30:45 sharp").is_empty());
    }

    #[test]
    fn secrets_by_provider() {
        let d = all(Action::Block);
        let openai = "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv";
        assert_eq!(
            found(&d, &format!("key={openai}")),
            one("OPENAI_API_KEY", openai)
        );
        let anthropic = "sk-ant-api03-Ab3dEf6hIj9kLm2nOp5qRs8tUv";
        assert_eq!(
            found(&d, &format!("key {anthropic} ok")),
            one("ANTHROPIC_API_KEY", anthropic)
        );
        assert_eq!(
            found(&d, "aws AKIAIOSFODNN7EXAMPLE x"),
            one("AWS_ACCESS_KEY", "AKIAIOSFODNN7EXAMPLE")
        );
        let gh = "ghp_0123456789abcdefghijABCDEFGHIJ012345";
        assert_eq!(found(&d, gh), one("GITHUB_TOKEN", gh));
        let slack = "xoxb-1234567890-abcdefGHIJ";
        assert_eq!(found(&d, slack), one("SLACK_TOKEN", slack));
        let google = "AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q";
        assert_eq!(found(&d, google), one("GOOGLE_API_KEY", google));
        let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U";
        assert_eq!(found(&d, jwt), one("JWT", jwt));
        let pem = "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\nabc\n-----END RSA PRIVATE KEY-----";
        assert_eq!(found(&d, &format!("x {pem} y")), one("PRIVATE_KEY", pem));
    }

    #[test]
    fn secret_near_misses() {
        let d = all(Action::Block);
        // Prose with the prefixes, short keys, a public-key block, hashes and UUIDs.
        for text in [
            "ask-anything-you-like-about-this-topic please",
            "sk-short",
            "the sk-this-is-not-a-real-key-at-all prefix",
            "AKIA is how AWS key ids start",
            "-----BEGIN PUBLIC KEY-----\nMIIB\n-----END PUBLIC KEY-----",
            "commit 201b4eb5c1f0a2d3e4f5a6b7c8d9e0f1a2b3c4d5",
            "id 123e4567-e89b-12d3-a456-426614174000",
            "this_is_a_very_long_identifier_name_in_some_code_base",
        ] {
            assert!(found(&d, text).is_empty(), "{text}: {:?}", found(&d, text));
        }
    }

    #[test]
    fn high_entropy_tokens_none_of_the_named_claims() {
        let d = all(Action::Mask);
        let tok = "Zx8vQ2mLp9RtY4kWc7NbH3jFs6DgA1eU";
        assert_eq!(
            found(&d, &format!("token: {tok}")),
            one("HIGH_ENTROPY_SECRET", tok)
        );
    }

    #[test]
    fn words_are_whole_and_case_insensitive_patterns_named() {
        let spec = Spec {
            entities: vec![],
            patterns: vec![("ticket".into(), r"\bTKT-[0-9]{4}\b".into(), Action::Mask)],
            words: vec![("Project Falcon".into(), Action::Block)],
        };
        let d = Detector::new(&spec).unwrap();
        assert_eq!(
            found(&d, "about project falcon and TKT-1234"),
            vec![
                ("BLOCKED_WORD".into(), "project falcon".into()),
                ("TICKET".into(), "TKT-1234".into())
            ]
        );
        assert!(found(&d, "project falconry").is_empty());
        let bad = Spec {
            patterns: vec![("x".into(), "(".into(), Action::Mask)],
            ..Spec::default()
        };
        assert!(matches!(
            Detector::new(&bad),
            Err(BuildError::Pattern(0, _))
        ));
    }

    #[test]
    fn overlaps_keep_earliest_longest() {
        let d = all(Action::Mask);
        // A card number's digits are not also a phone number.
        let f = found(&d, "4111-1111-1111-1111");
        assert_eq!(f, one("CREDIT_CARD", "4111-1111-1111-1111"));
    }
}
