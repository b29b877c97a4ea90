//! `guardrails:` (LiteLLM's list of `guardrail_name` + `litellm_params`) → built
//! [`Guardrail`]s. A kind sluice runs in process is validated key by key, so is an external
//! one (its vendor's keys in `vendors.rs`); a kind LiteLLM calls a service for that sluice
//! does not is an error that says it is not built in yet, never a guardrail silently off.

use std::collections::BTreeMap;

use sluice_core::settings::read::{boolean, number, text, whole};
use sluice_core::settings::{did_you_mean, Env, Problems, Scalar};
use sluice_guardrails::detect::Spec;
use sluice_guardrails::entity::PRESIDIO_NOT_BUILT_IN;
use sluice_guardrails::{
    Action, BuildError, Detector, Entity, Guardrail, Kind, Modes, Settings, SpecSettings,
};

use crate::raw::{RawBlockedWord, RawGuardrail, RawGuardrailParams, RawPattern, RawToolRule};
use crate::validate::texts;
use sluice_guardrails::tools::{RuleSettings, ToolRuleError};
use sluice_guardrails::{Decision, OnDisallowed, ToolSettings};

/// LiteLLM's guardrail kinds that call a service (or need a model): not built in yet.
const NOT_YET: &[&str] = &[
    "lakera",
    "aporia",
    "guardrails_ai",
    "aim",
    "pangea",
    "lasso",
    "model_armor",
    "noma",
    "pillar",
    "panw_prisma_airs",
    "zscaler_ai_guard",
    "javelin",
    "custom_guardrail",
];

/// The default score at which `prompt_injection` blocks: one strong phrase ("ignore all
/// previous instructions", 0.95) or two middling ones.
const DEFAULT_THRESHOLD: f64 = 0.8;

/// `litellm_content_filter`'s prebuilt pattern names sluice serves, and the detector each is.
/// The card names all detect every card (Luhn-checked), not one network's.
const PREBUILT: &[(&str, Entity)] = &[
    ("email", Entity::EmailAddress),
    ("us_ssn", Entity::UsSsn),
    ("us_phone", Entity::PhoneNumber),
    ("credit_card", Entity::CreditCard),
    ("visa", Entity::CreditCard),
    ("mastercard", Entity::CreditCard),
    ("amex", Entity::CreditCard),
    ("discover", Entity::CreditCard),
    ("aws_access_key", Entity::AwsAccessKey),
    ("github_token", Entity::GithubToken),
    ("slack_token", Entity::SlackToken),
    ("ipv4", Entity::IpAddress),
    ("ipv6", Entity::IpAddress),
];

/// Every guardrail, built; problems recorded with their paths.
pub(super) fn guardrails(
    raw: Option<Vec<RawGuardrail>>,
    env: &dyn Env,
    p: &mut Problems,
) -> Vec<Guardrail> {
    let mut out: Vec<Guardrail> = Vec::new();
    for (i, g) in raw.unwrap_or_default().into_iter().enumerate() {
        let at = format!("guardrails[{i}]");
        let Some(settings) = one(&at, g, env, p) else {
            continue;
        };
        if out.iter().any(|o| *o.name == *settings.name) {
            p.error(
                format!("{at}.guardrail_name"),
                format!(
                    "\"{}\" is already the name of another guardrail",
                    settings.name
                ),
            );
            continue;
        }
        match Guardrail::build(settings) {
            Ok(g) => out.push(g),
            // Each custom pattern was compiled alone when validated; this is their union.
            Err(BuildError::Pattern(_, why)) => p.error(
                format!("{at}.litellm_params.patterns"),
                format!("the patterns do not compile together: {why}"),
            ),
            // Each rule was compiled alone when validated; this cannot fail after that.
            Err(BuildError::Tools(e)) => {
                p.error(format!("{at}.litellm_params.rules[{}]", e.rule), e.why)
            }
        }
    }
    out
}

fn one(at: &str, g: RawGuardrail, env: &dyn Env, p: &mut Problems) -> Option<Settings> {
    let name = text(g.guardrail_name).map(|n| n.trim().to_owned());
    let name = match name {
        Some(n) if !n.is_empty() => n,
        _ => {
            p.error(
                format!("{at}.guardrail_name"),
                "required: the name requests select it by",
            );
            return None;
        }
    };
    let Some(params) = g.litellm_params else {
        p.error(
            format!("{at}.litellm_params"),
            "required: the guardrail's kind and mode",
        );
        return None;
    };
    let at = format!("{at}.litellm_params");
    let kind = kind(&at, params.guardrail.clone(), p)?;
    settings(&at, name, kind, params, env, p)
}

fn kind(at: &str, v: Option<Scalar>, p: &mut Problems) -> Option<Kind> {
    let built_in = || {
        Kind::NAMES
            .iter()
            .map(|(n, _)| *n)
            .collect::<Vec<_>>()
            .join(", ")
    };
    match text(v).as_deref().map(str::trim) {
        None | Some("") => {
            p.error(
                format!("{at}.guardrail"),
                format!(
                    "required: the guardrail's kind; built-in kinds: {}",
                    built_in()
                ),
            );
            None
        }
        Some(k) => match Kind::from_name(k) {
            Some(kind) => Some(kind),
            None if NOT_YET.contains(&k) => {
                p.error(
                    format!("{at}.guardrail"),
                    format!(
                        "\"{k}\" is not built in sluice yet; built-in kinds: {}",
                        built_in()
                    ),
                );
                None
            }
            None => {
                let known = Kind::NAMES
                    .iter()
                    .map(|(n, _)| *n)
                    .chain(NOT_YET.iter().copied());
                p.error(
                    format!("{at}.guardrail"),
                    format!(
                        "unknown guardrail kind \"{k}\"{}; built-in kinds: {}",
                        did_you_mean(k, known),
                        built_in()
                    ),
                );
                None
            }
        },
    }
}

fn settings(
    at: &str,
    name: String,
    kind: Kind,
    params: RawGuardrailParams,
    env: &dyn Env,
    p: &mut Problems,
) -> Option<Settings> {
    let errors = p.errors.len();
    let modes = modes(at, params.mode.clone(), p);
    let default_on =
        boolean(&format!("{at}.default_on"), params.default_on.clone(), p).unwrap_or(false);
    let output_parse_pii = boolean(
        &format!("{at}.output_parse_pii"),
        params.output_parse_pii.clone(),
        p,
    )
    .unwrap_or(false);
    super::vendors::warn_foreign(at, kind, &params, p);
    let external = if kind.is_external() {
        external(
            at,
            kind,
            &params,
            ExternalKeys {
                api_base: &params.api_base,
                api_key: &params.api_key,
                params: &params.additional_provider_specific_params,
                on_error: &params.on_error,
                timeout: &params.timeout,
            },
            (output_parse_pii, env),
            p,
        )
    } else {
        for (key, set) in [
            ("api_key", params.api_key.is_some()),
            ("api_base", params.api_base.is_some()),
            ("on_error", params.on_error.is_some()),
            ("timeout", params.timeout.is_some()),
        ] {
            if set {
                p.warn(
                    format!("{at}.{key}"),
                    "a built-in guardrail calls no service; ignored",
                );
            }
        }
        None
    };
    let tools = if kind == Kind::ToolPermission {
        tools(
            at,
            ToolKeys {
                rules: params.rules,
                default_action: params.default_action,
                on_disallowed_action: params.on_disallowed_action,
                template: params.violation_message_template,
            },
            p,
        )
    } else {
        for (key, set) in [
            ("rules", params.rules.is_some()),
            ("default_action", params.default_action.is_some()),
            (
                "on_disallowed_action",
                params.on_disallowed_action.is_some(),
            ),
            (
                "violation_message_template",
                params.violation_message_template.is_some(),
            ),
        ] {
            if set {
                p.warn(
                    format!("{at}.{key}"),
                    "only tool_permission guardrails read it; ignored",
                );
            }
        }
        ToolSettings::default()
    };
    let size = sluice_guardrails::SizeLimits {
        max_characters: whole(
            &format!("{at}.max_characters"),
            params.max_characters.clone(),
            p,
        ),
        max_tokens: whole(&format!("{at}.max_tokens"), params.max_tokens.clone(), p),
    };
    if kind == Kind::PromptSize {
        if size.max_characters.is_none() && size.max_tokens.is_none() {
            p.error(
                at,
                "a prompt_size guardrail needs max_characters or max_tokens",
            );
        }
    } else if size != sluice_guardrails::SizeLimits::default() {
        p.warn(
            format!("{at}.max_characters"),
            "only prompt_size guardrails read max_characters and max_tokens; ignored",
        );
    }
    if modes.logging_only
        && (kind.is_external()
            || matches!(
                kind,
                Kind::PromptInjection | Kind::ToolPermission | Kind::PromptSize
            ))
    {
        p.error(
            format!("{at}.mode"),
            "logging_only masks what is logged; this kind finds nothing to mask (use a \
             litellm_content_filter or hide-secrets guardrail)",
        );
    }
    if kind == Kind::AzurePromptShield && modes.post_call {
        p.error(
            format!("{at}.mode"),
            "azure/prompt_shield judges prompts (pre_call, during_call), not answers",
        );
    }
    let mut spec = SpecSettings::default();
    if kind == Kind::HideSecrets {
        spec.entities = Entity::SECRETS.iter().map(|e| (*e, Action::Mask)).collect();
    }
    // Presidio's entities are the analyzer's names, read with its other keys.
    if kind != Kind::Presidio {
        entities(at, params.pii_entities_config, &mut spec, p);
    }
    patterns(at, params.patterns, &mut spec, p);
    words(at, params.blocked_words, &mut spec, p);
    let threshold = match kind {
        Kind::PromptInjection => {
            let path = format!("{at}.threshold");
            match number(&path, params.threshold, true, p) {
                Some(t) if t > 1.0 => {
                    p.error(path, "expected a score above 0 and at most 1");
                    DEFAULT_THRESHOLD
                }
                Some(t) => t,
                None => DEFAULT_THRESHOLD,
            }
        }
        _ => {
            if params.threshold.is_some() {
                p.warn(
                    format!("{at}.threshold"),
                    "only prompt_injection guardrails read it; ignored",
                );
            }
            DEFAULT_THRESHOLD
        }
    };
    if kind == Kind::ContentFilter
        && spec.entities.is_empty()
        && spec.patterns.is_empty()
        && spec.words.is_empty()
    {
        p.error(
            at,
            "a litellm_content_filter needs patterns, blocked_words or pii_entities_config",
        );
    }
    let presidio_masks = matches!(
        external.as_ref().map(|e| &e.vendor),
        Some(sluice_guardrails::Vendor::Presidio(s))
            if s.entities.is_empty() || s.entities.iter().any(|(_, a)| *a == Action::Mask)
    );
    if output_parse_pii && !presidio_masks && !spec.entities.iter().any(|(_, a)| *a == Action::Mask)
    {
        p.warn(
            format!("{at}.output_parse_pii"),
            "this guardrail masks nothing, so there is nothing to give back",
        );
    }
    (p.errors.len() == errors).then_some(Settings {
        name,
        kind,
        modes,
        default_on,
        output_parse_pii,
        spec,
        threshold,
        tools,
        size,
        external,
    })
}

/// Longest an external guardrail's check may take unless `timeout` says otherwise.
const DEFAULT_EXTERNAL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// An external kind's keys of a guardrail's `litellm_params`.
struct ExternalKeys<'a> {
    api_base: &'a Option<Scalar>,
    api_key: &'a Option<Scalar>,
    params: &'a Option<serde_yaml_ng::Value>,
    on_error: &'a Option<Scalar>,
    timeout: &'a Option<Scalar>,
}

/// An external kind's service: `timeout` and `on_error` for every kind; for
/// `generic_guardrail_api`, `api_base` (required), `api_key` and
/// `additional_provider_specific_params`; the vendors' own keys otherwise (`vendors.rs`).
fn external(
    at: &str,
    kind: Kind,
    raw: &RawGuardrailParams,
    params: ExternalKeys<'_>,
    (output_parse_pii, env): (bool, &dyn Env),
    p: &mut Problems,
) -> Option<sluice_guardrails::ExternalSettings> {
    let service = if kind == Kind::GenericApi {
        super::vendors::base_url(
            &format!("{at}.api_base"),
            text(params.api_base.clone()),
            "the guardrail service's URL",
            p,
        )
        .map(|api_base| super::vendors::Service {
            api_base,
            api_key: text(params.api_key.clone()).map(sluice_core::Secret::new),
            vendor: sluice_guardrails::Vendor::Generic,
        })
    } else {
        super::vendors::service(at, kind, raw, output_parse_pii, env, p)
    };
    let on_error = match text(params.on_error.clone())
        .map(|v| v.trim().to_ascii_lowercase())
        .as_deref()
    {
        None | Some("block") => sluice_guardrails::OnError::Block,
        Some("allow") => sluice_guardrails::OnError::Allow,
        Some(other) => {
            p.error(
                format!("{at}.on_error"),
                format!("expected allow or block, got \"{other}\""),
            );
            sluice_guardrails::OnError::Block
        }
    };
    let timeout =
        sluice_core::settings::read::seconds(&format!("{at}.timeout"), params.timeout.clone(), p)
            .filter(|t| !t.is_zero())
            .unwrap_or(DEFAULT_EXTERNAL_TIMEOUT);
    let params_json = match params.params {
        None => "{}".to_owned(),
        Some(v) if v.is_mapping() => serde_json::to_string(v).unwrap_or_else(|_| "{}".into()),
        Some(_) => {
            p.error(
                format!("{at}.additional_provider_specific_params"),
                "expected a mapping of parameter names to values",
            );
            "{}".to_owned()
        }
    };
    let service = service?;
    Some(sluice_guardrails::ExternalSettings {
        api_base: service.api_base,
        api_key: service.api_key,
        params: params_json,
        timeout,
        on_error,
        vendor: service.vendor,
    })
}

/// `tool_permission`'s keys of a guardrail's `litellm_params`.
struct ToolKeys {
    rules: Option<Vec<RawToolRule>>,
    default_action: Option<Scalar>,
    on_disallowed_action: Option<Scalar>,
    template: Option<Scalar>,
}

/// `tool_permission`'s keys: each rule checked (and compiled) alone, so an error names it.
fn tools(at: &str, params: ToolKeys, p: &mut Problems) -> ToolSettings {
    let decision = |path: &str, v: Option<Scalar>, p: &mut Problems| -> Option<Decision> {
        match text(v).map(|d| d.trim().to_ascii_lowercase()).as_deref() {
            None => None,
            Some("allow") => Some(Decision::Allow),
            Some("deny") => Some(Decision::Deny),
            Some(other) => {
                p.error(path, format!("expected allow or deny, got \"{other}\""));
                None
            }
        }
    };
    let mut out = ToolSettings {
        default: decision(&format!("{at}.default_action"), params.default_action, p),
        template: text(params.template),
        ..ToolSettings::default()
    };
    let path = format!("{at}.on_disallowed_action");
    out.on_disallowed = match text(params.on_disallowed_action)
        .map(|d| d.trim().to_ascii_lowercase())
        .as_deref()
    {
        None | Some("block") => OnDisallowed::Block,
        Some("rewrite") => OnDisallowed::Rewrite,
        Some(other) => {
            p.error(path, format!("expected block or rewrite, got \"{other}\""));
            OnDisallowed::Block
        }
    };
    let rules: Vec<RawToolRule> = params.rules.unwrap_or_default();
    if rules.is_empty() && out.default.is_none() {
        p.error(
            format!("{at}.rules"),
            "a tool_permission guardrail needs rules (or a default_action)",
        );
    }
    for (j, r) in rules.into_iter().enumerate() {
        let rp = format!("{at}.rules[{j}]");
        let Some(tool_name) = text(r.tool_name) else {
            p.error(
                format!("{rp}.tool_name"),
                "required: a tool name (`*` matches any run of characters)",
            );
            continue;
        };
        let Some(d) = decision(&format!("{rp}.decision"), r.decision.clone(), p) else {
            if r.decision.is_none() {
                p.error(format!("{rp}.decision"), "required: allow or deny");
            }
            continue;
        };
        let rule = RuleSettings {
            id: text(r.id).unwrap_or_else(|| format!("rules[{j}]")),
            tool_name,
            decision: d,
            params: r
                .allowed_param_patterns
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| (k, v.text()))
                .collect(),
        };
        if d == Decision::Deny && !rule.params.is_empty() {
            p.warn(
                format!("{rp}.allowed_param_patterns"),
                "a deny rule refuses the tool whatever its arguments; ignored",
            );
        }
        let alone = ToolSettings {
            rules: vec![rule.clone()],
            ..ToolSettings::default()
        };
        match sluice_guardrails::ToolPolicy::new(&alone) {
            Ok(_) => out.rules.push(rule),
            Err(e) => p.error(rp, e.why),
        }
    }
    out
}

fn modes(at: &str, v: Option<crate::raw::OneOrMany>, p: &mut Problems) -> Modes {
    let path = format!("{at}.mode");
    let list = texts(v);
    if list.is_empty() {
        p.error(
            &path,
            "required: pre_call, post_call, during_call or logging_only (or a list of them)",
        );
    }
    let mut m = Modes::default();
    for mode in list {
        match mode.trim() {
            "pre_call" => m.pre_call = true,
            "post_call" => m.post_call = true,
            "during_call" => m.during_call = true,
            "logging_only" => m.logging_only = true,
            "pre_mcp_call" | "during_mcp_call" => p.error(
                &path,
                format!("mode \"{mode}\" is not built in sluice yet; use pre_call, post_call, during_call or logging_only"),
            ),
            other => p.error(
                &path,
                format!(
                    "unknown mode \"{other}\"{}",
                    did_you_mean(other, ["pre_call", "post_call", "during_call", "logging_only"])
                ),
            ),
        }
    }
    m
}

fn action(path: &str, v: Option<Scalar>, default: Action, p: &mut Problems) -> Action {
    match text(v).map(|a| a.trim().to_ascii_uppercase()).as_deref() {
        None => default,
        Some("MASK") => Action::Mask,
        Some("BLOCK") => Action::Block,
        Some(other) => {
            p.error(path, format!("expected MASK or BLOCK, got \"{other}\""));
            default
        }
    }
}

/// Set an entity's action, replacing one it already has.
fn set(spec: &mut SpecSettings, e: Entity, a: Action) {
    match spec.entities.iter_mut().find(|(x, _)| *x == e) {
        Some(slot) => slot.1 = a,
        None => spec.entities.push((e, a)),
    }
}

fn entities(
    at: &str,
    v: Option<BTreeMap<String, Scalar>>,
    spec: &mut SpecSettings,
    p: &mut Problems,
) {
    for (name, a) in v.unwrap_or_default() {
        let path = format!("{at}.pii_entities_config.{name}");
        match Entity::from_name(&name) {
            Some(e) => {
                let a = action(&path, Some(a), Action::Mask, p);
                set(spec, e, a);
            }
            None if PRESIDIO_NOT_BUILT_IN.contains(&name.as_str()) => p.error(
                path,
                format!("{name} needs a language model (Presidio's server), which sluice does not call yet"),
            ),
            None => p.error(
                path,
                format!(
                    "unknown entity{}; sluice detects {}",
                    did_you_mean(&name, Entity::ALL.iter().map(|e| e.name())),
                    Entity::ALL.map(Entity::name).join(", ")
                ),
            ),
        }
    }
}

fn patterns(at: &str, v: Option<Vec<RawPattern>>, spec: &mut SpecSettings, p: &mut Problems) {
    for (j, pat) in v.unwrap_or_default().into_iter().enumerate() {
        let path = format!("{at}.patterns[{j}]");
        let act = action(&format!("{path}.action"), pat.action, Action::Block, p);
        match text(pat.pattern_type).as_deref().map(str::trim) {
            Some("prebuilt") => {
                let Some(name) = text(pat.pattern_name) else {
                    p.error(
                        format!("{path}.pattern_name"),
                        "required for a prebuilt pattern",
                    );
                    continue;
                };
                match PREBUILT.iter().find(|(n, _)| *n == name) {
                    Some((_, e)) => set(spec, *e, act),
                    None => {
                        p.error(
                            format!("{path}.pattern_name"),
                            format!(
                            "prebuilt pattern \"{name}\" is not built in sluice{}; built in: {}",
                            did_you_mean(&name, PREBUILT.iter().map(|(n, _)| *n)),
                            PREBUILT.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
                        ),
                        )
                    }
                }
            }
            Some("regex") => {
                let (Some(name), Some(re)) = (text(pat.name), text(pat.pattern)) else {
                    p.error(path, "a regex pattern needs `name` and `pattern`");
                    continue;
                };
                let one = Spec {
                    patterns: vec![(name, re, act)],
                    ..Spec::default()
                };
                match Detector::new(&one) {
                    Ok(_) => spec.patterns.extend(one.patterns),
                    Err(
                        BuildError::Pattern(_, why) | BuildError::Tools(ToolRuleError { why, .. }),
                    ) => p.error(
                        format!("{path}.pattern"),
                        format!("not a valid regular expression: {why}"),
                    ),
                }
            }
            Some(other) => p.error(
                format!("{path}.pattern_type"),
                format!("expected prebuilt or regex, got \"{other}\""),
            ),
            None => p.error(
                format!("{path}.pattern_type"),
                "required: prebuilt or regex",
            ),
        }
    }
}

fn words(at: &str, v: Option<Vec<RawBlockedWord>>, spec: &mut SpecSettings, p: &mut Problems) {
    for (j, w) in v.unwrap_or_default().into_iter().enumerate() {
        let path = format!("{at}.blocked_words[{j}]");
        let act = action(&format!("{path}.action"), w.action, Action::Block, p);
        match text(w.keyword).filter(|k| !k.trim().is_empty()) {
            Some(k) => spec.words.push((k, act)),
            None => p.error(format!("{path}.keyword"), "required: the word or phrase"),
        }
    }
}
