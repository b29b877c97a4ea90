//! The vendors' own keys of an external guardrail (`presidio`, `lakera_v2`, `bedrock`,
//! `azure/prompt_shield`, `azure/text_moderations`), under LiteLLM's names and environment
//! variables, validated into [`Vendor`] with each problem at its key's path. Kept apart from
//! `guardrails.rs` so a vendor's keys read in one place.

use std::collections::BTreeMap;

use sluice_core::settings::read::{boolean, number, text, whole};
use sluice_core::settings::{Env, Problems, Scalar};
use sluice_core::Secret;
use sluice_guardrails::{
    Action, AzureTextSettings, BedrockSettings, Kind, LakeraSettings, PresidioSettings, Vendor,
};

use crate::raw::RawGuardrailParams;
use crate::validate::texts;

/// Azure AI Content Safety's API version unless `api_version` says otherwise (LiteLLM's).
const AZURE_API_VERSION: &str = "2024-09-01";

/// Lakera Guard's endpoint unless `api_base` (or `LAKERA_API_BASE`) says otherwise.
const LAKERA_API_BASE: &str = "https://api.lakera.ai";

/// Azure text moderation's severity at which a category blocks when no threshold is set.
const AZURE_DEFAULT_SEVERITY: u32 = 2;

/// What a vendor's keys give the external guardrail: its base URL, its key and its settings.
pub(super) struct Service {
    /// The base URL asked (Presidio: the analyzer's).
    pub api_base: String,
    /// The key sent, if the vendor takes one.
    pub api_key: Option<Secret>,
    /// The vendor's own settings.
    pub vendor: Vendor,
}

/// A base URL: given, trimmed of its last `/`, and http(s); `None` (with an error at `path`)
/// otherwise.
pub(super) fn base_url(
    path: &str,
    given: Option<String>,
    what: &str,
    p: &mut Problems,
) -> Option<String> {
    match given.map(|b| b.trim().trim_end_matches('/').to_owned()) {
        Some(b) if b.starts_with("http://") || b.starts_with("https://") => Some(b),
        Some(b) => {
            p.error(
                path,
                format!("expected an http:// or https:// URL, got {b:?}"),
            );
            None
        }
        None => {
            p.error(path, format!("required: {what}"));
            None
        }
    }
}

/// The first of the environment variables `names` that is set and not empty.
fn var(env: &dyn Env, names: &[&str]) -> Option<String> {
    names
        .iter()
        .find_map(|n| env.var(n).filter(|v| !v.trim().is_empty()))
}

/// Keys only some vendors read: set on another kind, a warning that they are ignored.
pub(super) fn warn_foreign(at: &str, kind: Kind, params: &RawGuardrailParams, p: &mut Problems) {
    use Kind::{
        AzurePromptShield as Shield, AzureTextModeration as Text, Bedrock, Lakera, Presidio,
    };
    let keys: [(&str, bool, &[Kind]); 27] = [
        (
            "presidio_analyzer_api_base",
            params.presidio_analyzer_api_base.is_some(),
            &[Presidio],
        ),
        (
            "presidio_anonymizer_api_base",
            params.presidio_anonymizer_api_base.is_some(),
            &[Presidio],
        ),
        (
            "presidio_language",
            params.presidio_language.is_some(),
            &[Presidio],
        ),
        (
            "presidio_score_thresholds",
            params.presidio_score_thresholds.is_some(),
            &[Presidio],
        ),
        ("project_id", params.project_id.is_some(), &[Lakera]),
        ("breakdown", params.breakdown.is_some(), &[Lakera]),
        ("metadata", params.metadata.is_some(), &[Lakera]),
        ("dev_info", params.dev_info.is_some(), &[Lakera]),
        ("on_flagged", params.on_flagged.is_some(), &[Lakera]),
        ("api_version", params.api_version.is_some(), &[Shield, Text]),
        (
            "severity_threshold",
            params.severity_threshold.is_some(),
            &[Text],
        ),
        (
            "severity_threshold_by_category",
            params.severity_threshold_by_category.is_some(),
            &[Text],
        ),
        (
            "categories",
            params.categories.is_some(),
            &[Text, Kind::OpenAiModeration],
        ),
        ("model", params.model.is_some(), &[Kind::OpenAiModeration]),
        ("outputType", params.output_type.is_some(), &[Text]),
        ("blocklistNames", params.blocklist_names.is_some(), &[Text]),
        (
            "haltOnBlocklistHit",
            params.halt_on_blocklist_hit.is_some(),
            &[Text],
        ),
        (
            "guardrailIdentifier",
            params.guardrail_identifier.is_some(),
            &[Bedrock],
        ),
        (
            "guardrailVersion",
            params.guardrail_version.is_some(),
            &[Bedrock],
        ),
        (
            "aws_region_name",
            params.aws_region_name.is_some(),
            &[Bedrock],
        ),
        (
            "aws_access_key_id",
            params.aws_access_key_id.is_some(),
            &[Bedrock],
        ),
        (
            "aws_secret_access_key",
            params.aws_secret_access_key.is_some(),
            &[Bedrock],
        ),
        (
            "aws_session_token",
            params.aws_session_token.is_some(),
            &[Bedrock],
        ),
        (
            "aws_bedrock_runtime_endpoint",
            params.aws_bedrock_runtime_endpoint.is_some(),
            &[Bedrock],
        ),
        (
            "mask_request_content",
            params.mask_request_content.is_some(),
            &[Bedrock],
        ),
        (
            "mask_response_content",
            params.mask_response_content.is_some(),
            &[Bedrock],
        ),
        (
            "additional_provider_specific_params",
            params.additional_provider_specific_params.is_some(),
            &[Kind::GenericApi],
        ),
    ];
    for (key, set, kinds) in keys {
        if set && !kinds.contains(&kind) {
            let names: Vec<&str> = kinds.iter().map(|k| k.name()).collect();
            p.warn(
                format!("{at}.{key}"),
                format!("only {} guardrails read it; ignored", names.join(" and ")),
            );
        }
    }
}

/// The service of an external `kind` other than `generic_guardrail_api`, from its keys.
pub(super) fn service(
    at: &str,
    kind: Kind,
    params: &RawGuardrailParams,
    output_parse_pii: bool,
    env: &dyn Env,
    p: &mut Problems,
) -> Option<Service> {
    let key = |p: &mut Problems, vars: &[&str], required: bool| {
        let k = text(params.api_key.clone()).or_else(|| var(env, vars));
        if k.is_none() && required {
            p.error(
                format!("{at}.api_key"),
                format!(
                    "required: the {} key{}",
                    kind.name(),
                    if vars.is_empty() {
                        String::new()
                    } else {
                        format!(" (or {})", vars.join(", "))
                    }
                ),
            );
        }
        k.map(Secret::new)
    };
    match kind {
        Kind::Presidio => presidio(at, params, output_parse_pii, env, p),
        Kind::Lakera => {
            let api_key = key(p, &["LAKERA_API_KEY"], true);
            let base = text(params.api_base.clone())
                .or_else(|| var(env, &["LAKERA_API_BASE"]))
                .unwrap_or_else(|| LAKERA_API_BASE.to_owned());
            let api_base = base_url(&format!("{at}.api_base"), Some(base), "", p)?;
            let monitor = match text(params.on_flagged.clone())
                .map(|v| v.trim().to_ascii_lowercase())
                .as_deref()
            {
                None | Some("block") => false,
                Some("monitor") => true,
                Some(other) => {
                    p.error(
                        format!("{at}.on_flagged"),
                        format!("expected block or monitor, got \"{other}\""),
                    );
                    false
                }
            };
            let metadata = match &params.metadata {
                None => None,
                Some(v) if v.is_mapping() => serde_json::to_string(v).ok(),
                Some(_) => {
                    p.error(
                        format!("{at}.metadata"),
                        "expected a mapping of names to values",
                    );
                    None
                }
            };
            let settings = LakeraSettings {
                project_id: text(params.project_id.clone()),
                breakdown: boolean(&format!("{at}.breakdown"), params.breakdown.clone(), p)
                    .unwrap_or(true),
                metadata,
                dev_info: boolean(&format!("{at}.dev_info"), params.dev_info.clone(), p)
                    .unwrap_or(true),
                monitor,
            };
            Some(Service {
                api_base,
                api_key: Some(api_key?),
                vendor: Vendor::Lakera(settings),
            })
        }
        Kind::AzurePromptShield | Kind::AzureTextModeration => {
            let api_base = base_url(
                &format!("{at}.api_base"),
                text(params.api_base.clone()),
                "the Azure AI Content Safety resource's endpoint (https://<name>.cognitiveservices.azure.com)",
                p,
            );
            let api_key = key(p, &[], true);
            let api_version = text(params.api_version.clone())
                .map(|v| v.trim().to_owned())
                .unwrap_or_else(|| AZURE_API_VERSION.to_owned());
            let vendor = if kind == Kind::AzurePromptShield {
                Vendor::AzurePromptShield { api_version }
            } else {
                Vendor::AzureTextModeration(azure_text(at, params, api_version, p)?)
            };
            Some(Service {
                api_base: api_base?,
                api_key: Some(api_key?),
                vendor,
            })
        }
        Kind::Bedrock => bedrock(at, params, env, p),
        Kind::OpenAiModeration => {
            // The group's deployments hold the credentials and the address.
            for (key, set) in [
                ("api_key", params.api_key.is_some()),
                ("api_base", params.api_base.is_some()),
            ] {
                if set {
                    p.warn(
                        format!("{at}.{key}"),
                        "openai_moderation calls the model group `model` names through \
                         sluice's routing, with its deployments' credentials; ignored",
                    );
                }
            }
            let Some(model) = text(params.model.clone()).filter(|m| !m.trim().is_empty()) else {
                p.error(
                    format!("{at}.model"),
                    "required: the model_list group that answers /v1/moderations \
                     (e.g. a group with model: openai/omni-moderation-latest)",
                );
                return None;
            };
            Some(Service {
                api_base: String::new(),
                api_key: None,
                vendor: sluice_guardrails::Vendor::OpenAiModeration(
                    sluice_guardrails::ModerationSettings {
                        model,
                        categories: super::texts(params.categories.clone()),
                    },
                ),
            })
        }
        Kind::GenericApi
        | Kind::HideSecrets
        | Kind::ContentFilter
        | Kind::PromptInjection
        | Kind::ToolPermission
        | Kind::PromptSize => None,
    }
}

fn presidio(
    at: &str,
    params: &RawGuardrailParams,
    restore: bool,
    env: &dyn Env,
    p: &mut Problems,
) -> Option<Service> {
    let analyzer = base_url(
        &format!("{at}.presidio_analyzer_api_base"),
        text(params.presidio_analyzer_api_base.clone())
            .or_else(|| var(env, &["PRESIDIO_ANALYZER_API_BASE"])),
        "the Presidio analyzer's URL (or PRESIDIO_ANALYZER_API_BASE)",
        p,
    );
    let anonymizer = base_url(
        &format!("{at}.presidio_anonymizer_api_base"),
        text(params.presidio_anonymizer_api_base.clone())
            .or_else(|| var(env, &["PRESIDIO_ANONYMIZER_API_BASE"])),
        "the Presidio anonymizer's URL (or PRESIDIO_ANONYMIZER_API_BASE)",
        p,
    );
    let mut entities = Vec::new();
    for (name, a) in params.pii_entities_config.clone().unwrap_or_default() {
        let path = format!("{at}.pii_entities_config.{name}");
        let entity = name.trim();
        if entity.is_empty()
            || !entity
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            p.error(
                path,
                "expected a Presidio entity name (PERSON, EMAIL_ADDRESS, ...)",
            );
            continue;
        }
        match text(Some(a))
            .map(|a| a.trim().to_ascii_uppercase())
            .as_deref()
        {
            Some("MASK") => entities.push((entity.to_owned(), Action::Mask)),
            Some("BLOCK") => entities.push((entity.to_owned(), Action::Block)),
            other => p.error(
                path,
                format!(
                    "expected MASK or BLOCK, got \"{}\"",
                    other.unwrap_or_default()
                ),
            ),
        }
    }
    let mut score_thresholds = Vec::new();
    for (name, v) in params.presidio_score_thresholds.clone().unwrap_or_default() {
        let path = format!("{at}.presidio_score_thresholds.{name}");
        match number(&path, Some(v), false, p) {
            Some(t) if t <= 1.0 => score_thresholds.push((name, t)),
            Some(_) => p.error(path, "expected a score from 0 to 1"),
            None => {}
        }
    }
    let settings = PresidioSettings {
        anonymizer_base: anonymizer?,
        language: text(params.presidio_language.clone())
            .map(|l| l.trim().to_owned())
            .unwrap_or_else(|| "en".to_owned()),
        entities,
        score_thresholds,
        restore,
    };
    Some(Service {
        api_base: analyzer?,
        api_key: None,
        vendor: Vendor::Presidio(settings),
    })
}

/// `azure/text_moderations`' keys: the categories asked and the severities that block.
fn azure_text(
    at: &str,
    params: &RawGuardrailParams,
    api_version: String,
    p: &mut Problems,
) -> Option<AzureTextSettings> {
    let errors = p.errors.len();
    let severity = |path: String, v: Scalar, p: &mut Problems| match whole::<u32>(&path, Some(v), p)
    {
        Some(s) if s <= 7 => Some(s),
        Some(_) => {
            p.error(path, "expected a severity from 0 to 7");
            None
        }
        None => None,
    };
    let severity_threshold = params
        .severity_threshold
        .clone()
        .and_then(|v| severity(format!("{at}.severity_threshold"), v, p));
    let mut by_category = Vec::new();
    let by: BTreeMap<String, Scalar> = params
        .severity_threshold_by_category
        .clone()
        .unwrap_or_default();
    for (category, v) in by {
        if let Some(s) = severity(
            format!("{at}.severity_threshold_by_category.{category}"),
            v,
            p,
        ) {
            by_category.push((category, s));
        }
    }
    let categories = texts(params.categories.clone());
    let output_type =
        text(params.output_type.clone()).unwrap_or_else(|| "FourSeverityLevels".into());
    if !matches!(
        output_type.as_str(),
        "FourSeverityLevels" | "EightSeverityLevels"
    ) {
        p.error(
            format!("{at}.outputType"),
            format!("expected FourSeverityLevels or EightSeverityLevels, got \"{output_type}\""),
        );
    }
    let settings = AzureTextSettings {
        api_version,
        categories: if categories.is_empty() {
            ["Hate", "Sexual", "SelfHarm", "Violence"]
                .map(String::from)
                .to_vec()
        } else {
            categories
        },
        output_type,
        blocklist_names: texts(params.blocklist_names.clone()),
        halt_on_blocklist_hit: boolean(
            &format!("{at}.haltOnBlocklistHit"),
            params.halt_on_blocklist_hit.clone(),
            p,
        )
        .unwrap_or(false),
        severity_threshold: match (severity_threshold, by_category.is_empty()) {
            (None, true) => Some(AZURE_DEFAULT_SEVERITY),
            (s, _) => s,
        },
        by_category,
    };
    (p.errors.len() == errors).then_some(settings)
}

/// `bedrock`'s keys: the guardrail, its region and the AWS credentials (the keys, else the
/// standard environment variables, as Bedrock deployments read them).
fn bedrock(
    at: &str,
    params: &RawGuardrailParams,
    env: &dyn Env,
    p: &mut Problems,
) -> Option<Service> {
    let required = |key: &str, v: Option<String>, why: &str, p: &mut Problems| {
        if v.is_none() {
            p.error(format!("{at}.{key}"), format!("required: {why}"));
        }
        v.map(|v| v.trim().to_owned())
    };
    let identifier = required(
        "guardrailIdentifier",
        text(params.guardrail_identifier.clone()),
        "the Bedrock guardrail's id or ARN",
        p,
    );
    let version = required(
        "guardrailVersion",
        text(params.guardrail_version.clone()),
        "the guardrail's version (DRAFT or a number)",
        p,
    );
    let region = required(
        "aws_region_name",
        text(params.aws_region_name.clone()).or_else(|| {
            var(
                env,
                &["AWS_REGION_NAME", "AWS_REGION", "AWS_DEFAULT_REGION"],
            )
        }),
        "the guardrail's AWS region (or AWS_REGION_NAME, AWS_REGION)",
        p,
    );
    if let Some(r) = &region {
        if r.is_empty() || !r.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
            p.error(
                format!("{at}.aws_region_name"),
                format!("not an AWS region: {r:?}"),
            );
            return None;
        }
    }
    let key_id = required(
        "aws_access_key_id",
        text(params.aws_access_key_id.clone()).or_else(|| var(env, &["AWS_ACCESS_KEY_ID"])),
        "an AWS access key to sign with (or AWS_ACCESS_KEY_ID)",
        p,
    );
    let secret = required(
        "aws_secret_access_key",
        text(params.aws_secret_access_key.clone()).or_else(|| var(env, &["AWS_SECRET_ACCESS_KEY"])),
        "the AWS secret key to sign with (or AWS_SECRET_ACCESS_KEY)",
        p,
    );
    let mask_request = boolean(
        &format!("{at}.mask_request_content"),
        params.mask_request_content.clone(),
        p,
    );
    let mask_response = boolean(
        &format!("{at}.mask_response_content"),
        params.mask_response_content.clone(),
        p,
    );
    let region = region?;
    let given =
        text(params.api_base.clone()).or_else(|| text(params.aws_bedrock_runtime_endpoint.clone()));
    let path = if params.api_base.is_some() {
        "api_base"
    } else {
        "aws_bedrock_runtime_endpoint"
    };
    let api_base = base_url(
        &format!("{at}.{path}"),
        Some(given.unwrap_or_else(|| format!("https://bedrock-runtime.{region}.amazonaws.com"))),
        "",
        p,
    )?;
    let settings = BedrockSettings {
        identifier: identifier?,
        version: version?,
        region,
        access_key_id: Secret::new(key_id?),
        secret_access_key: Secret::new(secret?),
        session_token: text(params.aws_session_token.clone())
            .or_else(|| var(env, &["AWS_SESSION_TOKEN"]))
            .map(Secret::new),
        mask_request: mask_request.unwrap_or(false),
        mask_response: mask_response.unwrap_or(false),
    };
    Some(Service {
        api_base,
        api_key: None,
        vendor: Vendor::Bedrock(settings),
    })
}
