//! LiteLLM's Generic Guardrail API (`generic_guardrail_api`): sluice POSTs the texts it would
//! check (and, on a request, its tools and who is calling) to
//! `{api_base}/beta/litellm_basic_guardrail_api`; the service answers `NONE`, `BLOCKED` with a
//! reason, or `GUARDRAIL_INTERVENED` with replacement texts.

use http::header::AUTHORIZATION;
use http::{HeaderMap, HeaderValue, Uri};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;
use sluice_core::record::RequestRecord;
use sluice_guardrails::ExternalSettings;

use crate::guardrails::external::{not_json, Call, Payload, Question, Verdict};

/// The path LiteLLM's contract names.
const PATH: &str = "/beta/litellm_basic_guardrail_api";

/// A Generic Guardrail API service.
#[derive(Debug)]
pub(crate) struct Generic {
    uri: Uri,
    auth: Option<HeaderValue>,
    params: Box<RawValue>,
}

#[derive(Deserialize)]
struct Reply {
    action: String,
    #[serde(default)]
    blocked_reason: Option<String>,
    #[serde(default)]
    texts: Option<Vec<String>>,
}

impl Generic {
    /// The service of `s`. The error says what is wrong with the URL or key.
    pub(crate) fn build(s: &ExternalSettings) -> Result<Self, String> {
        let uri: Uri = format!("{}{PATH}", s.api_base)
            .parse()
            .map_err(|e| format!("api_base is not a URL: {e}"))?;
        let auth = match &s.api_key {
            None => None,
            Some(k) => Some(super::bearer(k)?),
        };
        let params = RawValue::from_string(s.params.clone())
            .map_err(|e| format!("additional_provider_specific_params: {e}"))?;
        Ok(Self { uri, auth, params })
    }

    /// The body of a question about `texts`.
    pub(crate) fn question(
        &self,
        texts: &[&str],
        tools: Option<&Value>,
        input_type: &str,
        record: &RequestRecord,
    ) -> Result<Payload, String> {
        let key = record.key.as_deref();
        let body = serde_json::json!({
            "texts": texts,
            "tools": tools,
            "request_data": {
                "user_api_key_hash": key.map(|k| &*k.hash),
                "user_api_key_alias": key.and_then(|k| k.alias.as_deref()),
                "user_api_key_user_id": key.and_then(|k| k.user_id.as_deref()),
                "user_api_key_team_id": key.and_then(|k| k.team_id.as_deref()),
                "user_api_key_end_user_id": record.end_user.as_deref(),
            },
            "input_type": input_type,
            "litellm_call_id": record.request_id.to_str().unwrap_or_default(),
            "additional_provider_specific_params": &self.params,
        });
        Payload::json(&body)
    }

    /// Send the question about `sent` texts and read the verdict.
    pub(crate) async fn ask(
        &self,
        call: &Call<'_>,
        question: Question,
        sent: usize,
    ) -> Result<Verdict, String> {
        let body = question.into_body("Generic Guardrail API")?;
        let mut headers = HeaderMap::new();
        if let Some(a) = &self.auth {
            headers.insert(AUTHORIZATION, a.clone());
        }
        let bytes = call.post(&self.uri, headers, body).await?;
        verdict(&bytes, sent)
    }
}

/// The verdict of a reply about `sent` texts.
fn verdict(bytes: &[u8], sent: usize) -> Result<Verdict, String> {
    let reply: Reply = serde_json::from_slice(bytes).map_err(|e| not_json("the contract", &e))?;
    match reply.action.as_str() {
        "NONE" => Ok(Verdict::Pass),
        "BLOCKED" => {
            Ok(Verdict::Block(reply.blocked_reason.unwrap_or_else(|| {
                "blocked by the guardrail service".into()
            })))
        }
        "GUARDRAIL_INTERVENED" => match reply.texts {
            Some(t) if t.len() == sent => Ok(Verdict::Replace(t)),
            Some(t) => Err(format!(
                "the service gave back {} texts for {sent} sent",
                t.len()
            )),
            None => Ok(Verdict::Pass),
        },
        other => Err(format!("unknown action {other:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_action_is_read() {
        assert_eq!(verdict(br#"{"action":"NONE"}"#, 1), Ok(Verdict::Pass));
        assert_eq!(
            verdict(br#"{"action":"BLOCKED","blocked_reason":"no"}"#, 1),
            Ok(Verdict::Block("no".into()))
        );
        assert_eq!(
            verdict(br#"{"action":"GUARDRAIL_INTERVENED","texts":["a","b"]}"#, 2),
            Ok(Verdict::Replace(vec!["a".into(), "b".into()]))
        );
        assert!(
            verdict(br#"{"action":"GUARDRAIL_INTERVENED","texts":["a"]}"#, 2)
                .unwrap_err()
                .contains("1 texts for 2")
        );
        assert!(verdict(br#"{"action":"MAYBE"}"#, 1).is_err());
        let e = verdict(br#"{"action": 7, "secret": "4111"}"#, 1).unwrap_err();
        assert!(!e.contains("4111") && e.contains("line 1"), "{e}");
    }
}
