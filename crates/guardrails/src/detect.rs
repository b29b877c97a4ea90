//! Finding sensitive values in a text. The built-in patterns are one combined search: it
//! reports where the leftmost candidate of any pattern starts, an anchored search there tells
//! which patterns match and how far, and a check (Luhn, mod-97, entropy...) turns a candidate
//! into a finding; the search then goes on after it. A text with nothing to find costs one
//! pass, a text with findings barely more. The operator's own patterns are a second combined
//! search (a Unicode `\b` in one of them then slows only them), and the two patterns whose
//! match can run long and still fail its check (a high-entropy run over 200 characters, an
//! `sk-` word without a digit) search alone, so that a long failing run is read once. Blocked
//! words are one Aho-Corasick automaton. Overlapping findings are resolved to the earliest,
//! then longest, then the detector listed first.

use std::sync::Arc;

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use regex::Regex;
use regex_automata::{meta, Anchored, Input, PatternSet};

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
fn patterns_of(e: Entity) -> &'static [(&'static str, Check)] {
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

impl Check {
    /// Whether a match can be arbitrarily long and still fail: such a pattern is searched alone
    /// (see the module's doc), never among the candidates.
    fn fails_long(self) -> bool {
        matches!(self, Check::Entropy | Check::OpenAi)
    }
}

/// Which combined search a built-in pattern joins. Patterns are grouped so that each search
/// keeps a fast way past text that cannot match: the secrets start with literals (`sk-ant-`,
/// `AKIA`, `-----BEGIN`...) the engine skips to; an e-mail address has its `@` and an IPv6
/// address its `:` to look for, which the engine does only for a pattern searched alone; and
/// the numbers are searched only around digits ([`NUMBERS`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Group {
    Numbers,
    Prefixed,
    Email,
    Ipv6,
}

fn group_of(e: Entity, check: Check) -> Group {
    match (e, check) {
        (Entity::EmailAddress, _) => Group::Email,
        (Entity::IpAddress, Check::Ipv6) => Group::Ipv6,
        (Entity::CreditCard | Entity::IbanCode | Entity::UsSsn | Entity::PhoneNumber, _)
        | (Entity::IpAddress, _) => Group::Numbers,
        _ => Group::Prefixed,
    }
}

/// Where the numbers' matches can be: each has an ASCII digit within its first
/// `digit_within + 1` bytes (an IBAN's check digits follow two letters, a phone number's first
/// digit a `+` or `(`) and is at most `longest` bytes long (an IBAN of 34 characters written in
/// fours). `numbers_are_found_near_a_digit` holds the patterns to it. Each search reads a
/// `window` from a digit on: long enough that text dense with digits is read about once.
#[derive(Debug, Clone, Copy)]
struct Near {
    digit_within: usize,
    longest: usize,
    window: usize,
}

/// The numbers' [`Near`].
const NUMBERS: Near = Near {
    digit_within: 3,
    longest: 48,
    window: 256,
};

/// A built-in pattern as it is compiled: its word boundaries are ASCII ones. The patterns only
/// name ASCII characters, and a Unicode `\b` would stop the fast engine at the first non-ASCII
/// byte of a text (an accented word made a 2 KB check 300 times slower).
fn ascii_boundaries(re: &str) -> String {
    re.replace(r"\b", r"(?-u:\b)")
}

/// What a pattern's match must pass, and the target it reports.
#[derive(Debug, Clone, Copy)]
struct Rule {
    check: Check,
    target: usize,
}

/// Patterns searched together for their leftmost candidates; pattern `i` is `rules[i]`.
#[derive(Debug, Clone)]
struct Combined {
    regex: meta::Regex,
    rules: Vec<Rule>,
    /// When set, the search looks only around digits.
    near: Option<Near>,
}

impl Combined {
    /// The search of `patterns`; an error names the pattern at fault when the operator wrote
    /// them (`custom`).
    fn build(
        patterns: &[String],
        rules: Vec<Rule>,
        near: Option<Near>,
        custom: bool,
    ) -> Result<Option<Combined>, BuildError> {
        if patterns.is_empty() {
            return Ok(None);
        }
        let regex = meta::Regex::new_many(patterns).map_err(|e| {
            let at = e.pattern().filter(|_| custom).map(|p| p.as_usize());
            BuildError::Pattern(at.unwrap_or(usize::MAX), e.to_string())
        })?;
        Ok(Some(Combined { regex, rules, near }))
    }

    /// The leftmost match starting at or after `at`. Searched around digits: from the next
    /// digit at or after `*digits` (no match before it has its first digit there), a window
    /// that begins `digit_within` bytes before the digit holds whole every match starting
    /// before its last `longest` bytes; a match found there is the leftmost, and when none is,
    /// the search goes on from the first digit of those last bytes. The text between digits is
    /// never read by the automaton.
    fn leftmost(&self, text: &str, at: usize, digits: &mut usize) -> Option<regex_automata::Match> {
        let Some(near) = self.near else {
            return self.regex.search(&Input::new(text).range(at..));
        };
        let bytes = text.as_bytes();
        *digits = (*digits).max(at);
        loop {
            let d = *digits + bytes.get(*digits..)?.iter().position(u8::is_ascii_digit)?;
            let from = at.max(d.saturating_sub(near.digit_within));
            let to = text.len().min(d + near.window);
            // A match starting before `sure` ends inside the window (or the text ends there).
            let sure = if to == text.len() {
                to + 1
            } else {
                to - near.longest
            };
            // Look-around (`\b`) still sees the text on either side of the window.
            match self.regex.search(&Input::new(text).range(from..to)) {
                Some(m) if m.start() < sure => return Some(m),
                None if to == text.len() => return None,
                _ => *digits = sure.max(d + 1),
            }
        }
    }

    /// Append the findings in `text`, in order and not overlapping one another. As a pattern
    /// searched alone would, a pattern does not match again inside its own failed candidate
    /// (`1.2.3.4.5` is no address, and `2.3.4.5` inside it is none either).
    fn scan(&self, text: &str, out: &mut Vec<Finding>) {
        let re = &self.regex;
        let mut matching: Option<PatternSet> = None;
        // Per pattern, where its last candidate ended (made at the first failed candidate).
        let mut resume: Vec<usize> = Vec::new();
        let (mut at, mut digits) = (0, 0);
        while at <= text.len() {
            let Some(first) = self.leftmost(text, at, &mut digits) else {
                break;
            };
            let start = first.start();
            // The search reports one pattern: every pattern matching at `start` is a candidate.
            let set = matching.get_or_insert_with(|| PatternSet::new(re.pattern_len()));
            set.clear();
            let here = Input::new(text).range(start..).anchored(Anchored::Yes);
            re.which_overlapping_matches(&here, set);
            let mut best: Option<Finding> = None;
            for p in set.iter() {
                if resume.get(p.as_usize()).is_some_and(|&r| start < r) {
                    continue;
                }
                let end = if p == first.pattern() {
                    Some(first.end())
                } else {
                    let one = Input::new(text)
                        .range(start..)
                        .anchored(Anchored::Pattern(p));
                    re.search(&one).map(|m| m.end())
                };
                let Some(end) = end.filter(|&e| e > start) else {
                    continue;
                };
                let rule = self.rules[p.as_usize()];
                if !rule.check.passes(&text[start..end], &text[end..]) {
                    if resume.is_empty() {
                        resume.resize(self.rules.len(), 0);
                    }
                    resume[p.as_usize()] = end;
                    continue;
                }
                // Longest first; on a tie the pattern listed first (lower ids come first).
                if best.is_some_and(|b| b.end >= end) {
                    continue;
                }
                best = Some(Finding {
                    start,
                    end,
                    target: rule.target,
                });
            }
            at = match best {
                Some(f) => {
                    out.push(f);
                    f.end
                }
                None => start + text[start..].chars().next().map_or(1, char::len_utf8),
            };
        }
    }
}

/// A pattern searched alone ([`Check::fails_long`]).
#[derive(Debug, Clone)]
struct Alone {
    seek: Seek,
    rule: Rule,
}

/// How a pattern searched alone is found.
#[derive(Debug, Clone)]
enum Seek {
    Regex(Regex),
    /// The high-entropy pattern, `[A-Za-z0-9+/_-]{32,}={0,2}`, found as what it matches: each
    /// longest run of 32 or more token bytes, with up to two `=` after it. A byte loop does in
    /// one table lookup a byte what the automaton, counting to 32 from every position, does
    /// several times slower; `token_runs_are_the_pattern` holds the two to the same answers.
    TokenRuns,
}

/// The high-entropy pattern's characters.
fn token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'_' | b'-')
}

/// Each match of `[A-Za-z0-9+/_-]{32,}={0,2}` in `text`, in order, as `find_iter` gives them.
fn token_runs(text: &str) -> impl Iterator<Item = (usize, usize)> + '_ {
    let bytes = text.as_bytes();
    let mut at = 0;
    std::iter::from_fn(move || {
        while at < bytes.len() {
            let start = at + bytes[at..].iter().position(|&b| token_byte(b))?;
            let run = bytes[start..]
                .iter()
                .take_while(|&&b| token_byte(b))
                .count();
            at = start + run;
            if run >= 32 {
                let pad = bytes[at..]
                    .iter()
                    .take(2)
                    .take_while(|&&b| b == b'=')
                    .count();
                at += pad;
                return Some((start, at));
            }
        }
        None
    })
}

impl Alone {
    fn scan(&self, text: &str, out: &mut Vec<Finding>) {
        let mut push = |start: usize, end: usize| {
            if self.rule.check.passes(&text[start..end], &text[end..]) {
                out.push(Finding {
                    start,
                    end,
                    target: self.rule.target,
                });
            }
        };
        match &self.seek {
            Seek::Regex(re) => re.find_iter(text).for_each(|m| push(m.start(), m.end())),
            Seek::TokenRuns => token_runs(text).for_each(|(s, e)| push(s, e)),
        }
    }
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
    /// The built-in patterns, by [`Group`], then the operator's patterns.
    combined: Vec<Combined>,
    alone: Vec<Alone>,
    words: Option<(AhoCorasick, Vec<usize>)>,
}

impl Detector {
    /// Compile a spec. Only custom patterns can fail; the built-in ones are tested.
    pub fn new(spec: &Spec) -> Result<Detector, BuildError> {
        let built_in = |e: String| BuildError::Pattern(usize::MAX, e);
        let mut targets = Vec::new();
        let mut alone = Vec::new();
        let groups = [Group::Numbers, Group::Prefixed, Group::Email, Group::Ipv6];
        let mut grouped: [(Vec<String>, Vec<Rule>); 4] = Default::default();
        for &(entity, action) in &spec.entities {
            let target = targets.len();
            targets.push(Target {
                label: Arc::from(entity.name()),
                action,
            });
            for &(re, check) in patterns_of(entity) {
                let rule = Rule { check, target };
                let re = ascii_boundaries(re);
                if check.fails_long() {
                    let seek = match check {
                        Check::Entropy => Seek::TokenRuns,
                        _ => Seek::Regex(Regex::new(&re).map_err(|e| built_in(e.to_string()))?),
                    };
                    alone.push(Alone { seek, rule });
                } else {
                    let g = groups.iter().position(|g| *g == group_of(entity, check));
                    let (patterns, rules) = &mut grouped[g.unwrap_or(1)];
                    patterns.push(re);
                    rules.push(rule);
                }
            }
        }
        let mut combined = Vec::new();
        for (g, (patterns, rules)) in groups.iter().zip(grouped) {
            let near = (*g == Group::Numbers).then_some(NUMBERS);
            combined.extend(Combined::build(&patterns, rules, near, false)?);
        }
        let (mut patterns, mut rules) = (Vec::new(), Vec::new());
        for (i, (name, re, action)) in spec.patterns.iter().enumerate() {
            let target = targets.len();
            targets.push(Target {
                label: Arc::from(name.to_ascii_uppercase().as_str()),
                action: *action,
            });
            // Compiled alone first, so that an error names its pattern.
            Regex::new(re).map_err(|e| BuildError::Pattern(i, e.to_string()))?;
            patterns.push(re.clone());
            rules.push(Rule {
                check: Check::None,
                target,
            });
        }
        combined.extend(Combined::build(&patterns, rules, None, true)?);
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
                .map_err(|e| built_in(e.to_string()))?;
            Some((ac, of))
        };
        Ok(Detector {
            targets,
            combined,
            alone,
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
        for c in &self.combined {
            c.scan(text, out);
        }
        for a in &self.alone {
            a.scan(text, out);
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
    fn token_runs_are_the_pattern() {
        let (re, _) = patterns_of(Entity::HighEntropySecret)[0];
        let re = Regex::new(re).unwrap();
        let a = "A".repeat(31);
        let b = "b1+/_-".repeat(6);
        for text in [
            String::new(),
            a.clone(),
            format!("{a}B"),
            format!("x {a}B== y {b}=== {a} {b}=z"),
            format!("é{b}é{a}é{b}"),
            format!("{b}={b}"),
        ] {
            let want: Vec<(usize, usize)> =
                re.find_iter(&text).map(|m| (m.start(), m.end())).collect();
            assert_eq!(token_runs(&text).collect::<Vec<_>>(), want, "{text}");
        }
    }

    #[test]
    fn numbers_are_found_near_a_digit() {
        // Every match any number pattern can make, in texts built from the characters the
        // patterns read, keeps to [`NUMBERS`]: a digit within its first bytes, and short.
        let alphabet = b"01234567890123456789 .-+()ABZ";
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let mut checked = 0;
        for e in Entity::ALL {
            for &(re, check) in patterns_of(e) {
                if group_of(e, check) != Group::Numbers {
                    continue;
                }
                let re = Regex::new(&ascii_boundaries(re)).unwrap();
                for _ in 0..5_000 {
                    let len = 8 + (next() % 80) as usize;
                    let text: String = (0..len)
                        .map(|_| char::from(alphabet[(next() % alphabet.len() as u64) as usize]))
                        .collect();
                    for m in re.find_iter(&text) {
                        let digit = m.as_str().bytes().position(|b| b.is_ascii_digit());
                        assert!(
                            digit.is_some_and(|d| d <= NUMBERS.digit_within),
                            "{re}: {:?}",
                            m.as_str()
                        );
                        assert!(m.len() <= NUMBERS.longest, "{re}: {:?}", m.as_str());
                        checked += 1;
                    }
                }
            }
        }
        assert!(checked > 1_000, "{checked}");
        // The longest an IBAN can be, grouped in fours: still within the window.
        let iban = "GB82 WEST 1234 5698 7654 32AB CDEF GHIJ KL";
        let re = Regex::new(patterns_of(Entity::IbanCode)[0].0).unwrap();
        assert!(re.find(iban).is_some_and(|m| m.len() <= NUMBERS.longest));
    }

    #[test]
    fn non_ascii_neighbours_are_not_word_characters() {
        let d = all(Action::Mask);
        assert_eq!(
            found(
                &d,
                "écrivez à jane@example.fr ou appelez le (415) 555-2671."
            ),
            vec![
                ("EMAIL_ADDRESS".into(), "jane@example.fr".into()),
                ("PHONE_NUMBER".into(), "(415) 555-2671".into())
            ]
        );
        assert_eq!(
            found(&d, "carte:4111111111111111€"),
            one("CREDIT_CARD", "4111111111111111")
        );
    }

    #[test]
    fn overlaps_keep_earliest_longest() {
        let d = all(Action::Mask);
        // A card number's digits are not also a phone number.
        let f = found(&d, "4111-1111-1111-1111");
        assert_eq!(f, one("CREDIT_CARD", "4111-1111-1111-1111"));
    }
}
