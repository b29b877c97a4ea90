//! LiteLLM's `tool_permission` guardrail: which tools a request may offer the model and which
//! tool calls a model's answer may carry. Rules match a tool's name (`*` matches any run of
//! characters: `mcp__github_*`), in order; the first that matches decides `allow` or `deny`,
//! else `default_action`. An allowing rule may also constrain the call's arguments
//! (`allowed_param_patterns`: a path such as `to[]` or `a.b[].c` to a regex every value found
//! there must match). What is disallowed is refused (`block`) or taken out (`rewrite`).

use regex::Regex;
use serde_json::Value;

/// `allow` or `deny`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// The tool may be offered or called.
    Allow,
    /// It may not.
    Deny,
}

/// `on_disallowed_action`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnDisallowed {
    /// Refuse the request, or the answer, with the guardrail's error.
    #[default]
    Block,
    /// Take the tool out of the request, or the call out of the answer (with a note in its
    /// text), and go on.
    Rewrite,
}

/// One rule as the config wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleSettings {
    /// `id`: named in refusals.
    pub id: String,
    /// `tool_name`: a name, `*` matching any run of characters.
    pub tool_name: String,
    /// `decision`.
    pub decision: Decision,
    /// `allowed_param_patterns`: (path, regex).
    pub params: Vec<(String, String)>,
}

/// The guardrail's settings as the config validated them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ToolSettings {
    /// The rules, first match wins.
    pub rules: Vec<RuleSettings>,
    /// `default_action`: for a tool no rule matches (LiteLLM's default: deny).
    pub default: Option<Decision>,
    /// `on_disallowed_action`.
    pub on_disallowed: OnDisallowed,
    /// `violation_message_template`, with `{tool_name}`, `{rule_id}`, `{default_message}`.
    pub template: Option<String>,
}

/// A rule compiled.
#[derive(Debug, Clone)]
struct Rule {
    id: String,
    name: Regex,
    decision: Decision,
    params: Vec<(Vec<Step>, Regex, String)>,
}

/// One segment of an argument path: a member, and whether it is an array to go through.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Step {
    key: String,
    each: bool,
}

/// Compiled tool rules, shared by a config snapshot's requests.
#[derive(Debug, Clone)]
pub struct ToolPolicy {
    rules: Vec<Rule>,
    default: Decision,
    /// What happens to a disallowed tool.
    pub on_disallowed: OnDisallowed,
    template: Option<String>,
}

/// Why a tool is not allowed: its name, the rule that said so (`None`: the default), and the
/// message (the template's, when one is configured).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    /// The tool's name.
    pub tool: String,
    /// The deciding rule's id.
    pub rule: Option<String>,
    /// What the refusal says.
    pub message: String,
}

/// A rule or pattern that does not compile: its index (`usize::MAX` for the name) and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("rules[{rule}]: {why}")]
pub struct ToolRuleError {
    /// The rule's index.
    pub rule: usize,
    /// What is wrong.
    pub why: String,
}

/// `mcp__github_*` → `^mcp__github_.*$`.
fn glob(pattern: &str) -> Result<Regex, regex::Error> {
    let parts: Vec<String> = pattern.split('*').map(regex::escape).collect();
    Regex::new(&format!("^{}$", parts.join(".*")))
}

fn path(p: &str) -> Vec<Step> {
    p.split('.')
        .filter(|s| !s.is_empty())
        .map(|s| match s.strip_suffix("[]") {
            Some(key) => Step {
                key: key.to_owned(),
                each: true,
            },
            None => Step {
                key: s.to_owned(),
                each: false,
            },
        })
        .collect()
}

/// Every value at `steps` under `v` (none when the path is absent).
fn values_at<'v>(v: &'v Value, steps: &[Step], out: &mut Vec<&'v Value>) {
    let Some((first, rest)) = steps.split_first() else {
        out.push(v);
        return;
    };
    let next = if first.key.is_empty() {
        Some(v)
    } else {
        v.get(&first.key)
    };
    let Some(next) = next else {
        return;
    };
    if first.each {
        if let Value::Array(items) = next {
            for item in items {
                values_at(item, rest, out);
            }
        }
    } else {
        values_at(next, rest, out);
    }
}

impl ToolPolicy {
    /// Compile validated settings.
    pub fn new(s: &ToolSettings) -> Result<Self, ToolRuleError> {
        let mut rules = Vec::with_capacity(s.rules.len());
        for (i, r) in s.rules.iter().enumerate() {
            let err = |why: String| ToolRuleError { rule: i, why };
            let name = glob(&r.tool_name).map_err(|e| err(format!("tool_name: {e}")))?;
            let mut params = Vec::with_capacity(r.params.len());
            for (p, re) in &r.params {
                let re =
                    Regex::new(re).map_err(|e| err(format!("allowed_param_patterns.{p}: {e}")))?;
                params.push((path(p), re, p.clone()));
            }
            rules.push(Rule {
                id: r.id.clone(),
                name,
                decision: r.decision,
                params,
            });
        }
        Ok(Self {
            rules,
            default: s.default.unwrap_or(Decision::Deny),
            on_disallowed: s.on_disallowed,
            template: s.template.clone(),
        })
    }

    fn denial(&self, tool: &str, rule: Option<&str>, default_message: String) -> Denial {
        let message = match &self.template {
            None => default_message,
            Some(t) => t
                .replace("{tool_name}", tool)
                .replace("{rule_id}", rule.unwrap_or("None"))
                .replace("{default_message}", &default_message),
        };
        Denial {
            tool: tool.to_owned(),
            rule: rule.map(str::to_owned),
            message,
        }
    }

    /// Whether `tool` may be offered or called; `arguments` (a call's, parsed) are checked
    /// against the deciding rule's patterns when given.
    pub fn decide(&self, tool: &str, arguments: Option<&Value>) -> Result<(), Denial> {
        let Some(rule) = self.rules.iter().find(|r| r.name.is_match(tool)) else {
            return match self.default {
                Decision::Allow => Ok(()),
                Decision::Deny => Err(self.denial(
                    tool,
                    None,
                    format!("Tool '{tool}' denied by default action"),
                )),
            };
        };
        if rule.decision == Decision::Deny {
            return Err(self.denial(
                tool,
                Some(&rule.id),
                format!("Tool '{tool}' denied by rule '{}'", rule.id),
            ));
        }
        let Some(args) = arguments else {
            return Ok(());
        };
        let mut found = Vec::new();
        for (steps, re, shown) in &rule.params {
            found.clear();
            values_at(args, steps, &mut found);
            for v in &found {
                let text = match v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                if !re.is_match(&text) {
                    return Err(self.denial(
                        tool,
                        Some(&rule.id),
                        format!(
                            "Tool '{tool}' argument '{shown}' does not match rule '{}'",
                            rule.id
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Whether any rule constrains arguments (a streamed call must then be whole before it
    /// is judged).
    pub fn checks_arguments(&self) -> bool {
        self.rules.iter().any(|r| !r.params.is_empty())
    }
}

/// The name a `tools[]` entry of a request declares, in any client dialect: OpenAI chat's
/// `function.name`, the Responses API's and Anthropic's `name`. `None` for built-in tools
/// without one.
pub fn declared_name(tool: &Value) -> Option<&str> {
    tool.get("function")
        .and_then(|f| f.get("name"))
        .or_else(|| tool.get("name"))
        .and_then(Value::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn policy(default: Option<Decision>) -> ToolPolicy {
        ToolPolicy::new(&ToolSettings {
            rules: vec![
                RuleSettings {
                    id: "allow_bash".into(),
                    tool_name: "Bash".into(),
                    decision: Decision::Allow,
                    params: vec![],
                },
                RuleSettings {
                    id: "github".into(),
                    tool_name: "mcp__github_*".into(),
                    decision: Decision::Allow,
                    params: vec![],
                },
                RuleSettings {
                    id: "no_read".into(),
                    tool_name: "Read".into(),
                    decision: Decision::Deny,
                    params: vec![],
                },
                RuleSettings {
                    id: "mail".into(),
                    tool_name: "send_email".into(),
                    decision: Decision::Allow,
                    params: vec![
                        ("to[]".into(), r"^.+@berri\.ai$".into()),
                        ("meta.subject".into(), "^.{1,12}$".into()),
                    ],
                },
            ],
            default,
            on_disallowed: OnDisallowed::Block,
            template: None,
        })
        .unwrap()
    }

    #[test]
    fn first_matching_rule_decides_else_the_default() {
        let p = policy(None);
        assert_eq!(p.decide("Bash", None), Ok(()));
        assert_eq!(p.decide("mcp__github_create_issue", None), Ok(()));
        let d = p.decide("Read", None).unwrap_err();
        assert_eq!(d.rule.as_deref(), Some("no_read"));
        assert!(
            d.message.contains("denied by rule 'no_read'"),
            "{}",
            d.message
        );
        let d = p.decide("get_weather", None).unwrap_err();
        assert_eq!(d.rule, None);
        assert_eq!(d.message, "Tool 'get_weather' denied by default action");
        assert_eq!(
            policy(Some(Decision::Allow)).decide("get_weather", None),
            Ok(())
        );
        // `*` is a wildcard only; other regex characters are literal.
        assert!(p.decide("mcp__githubXcreate", None).is_err());
        assert!(p.decide("xBash", None).is_err());
    }

    #[test]
    fn argument_patterns_check_every_value_at_the_path() {
        let p = policy(None);
        let ok = json!({"to": ["a@berri.ai", "b@berri.ai"], "meta": {"subject": "hi"}});
        assert_eq!(p.decide("send_email", Some(&ok)), Ok(()));
        let bad = json!({"to": ["a@berri.ai", "x@evil.com"]});
        let d = p.decide("send_email", Some(&bad)).unwrap_err();
        assert!(d.message.contains("'to[]'"), "{}", d.message);
        let long = json!({"to": [], "meta": {"subject": "far too long a subject"}});
        assert!(p.decide("send_email", Some(&long)).is_err());
        // An absent path constrains nothing; the name alone is allowed.
        assert_eq!(p.decide("send_email", Some(&json!({}))), Ok(()));
        assert_eq!(p.decide("send_email", None), Ok(()));
    }

    #[test]
    fn the_template_fills_in_the_tool_and_rule() {
        let mut s = ToolSettings {
            template: Some("policy: no {tool_name} ({rule_id}) / {default_message}".into()),
            ..ToolSettings::default()
        };
        s.rules.push(RuleSettings {
            id: "r1".into(),
            tool_name: "Read".into(),
            decision: Decision::Deny,
            params: vec![],
        });
        let p = ToolPolicy::new(&s).unwrap();
        assert_eq!(
            p.decide("Read", None).unwrap_err().message,
            "policy: no Read (r1) / Tool 'Read' denied by rule 'r1'"
        );
        assert_eq!(
            p.decide("Other", None).unwrap_err().message,
            "policy: no Other (None) / Tool 'Other' denied by default action"
        );
    }

    #[test]
    fn declared_names_in_each_dialect() {
        let openai = json!({"type": "function", "function": {"name": "f"}});
        let anthropic = json!({"name": "g", "input_schema": {}});
        let responses = json!({"type": "function", "name": "h"});
        let builtin = json!({"type": "web_search"});
        assert_eq!(declared_name(&openai), Some("f"));
        assert_eq!(declared_name(&anthropic), Some("g"));
        assert_eq!(declared_name(&responses), Some("h"));
        assert_eq!(declared_name(&builtin), None);
    }

    #[test]
    fn a_bad_pattern_names_its_rule() {
        let s = ToolSettings {
            rules: vec![RuleSettings {
                id: "x".into(),
                tool_name: "t".into(),
                decision: Decision::Allow,
                params: vec![("a".into(), "(".into())],
            }],
            ..ToolSettings::default()
        };
        let e = ToolPolicy::new(&s).unwrap_err();
        assert_eq!(e.rule, 0);
        assert!(e.why.starts_with("allowed_param_patterns.a"), "{e}");
    }
}
