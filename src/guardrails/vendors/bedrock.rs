//! AWS Bedrock Guardrails (`guardrail: bedrock`): `ApplyGuardrail`,
//! `POST {runtime endpoint}/guardrail/{guardrailIdentifier}/version/{guardrailVersion}/apply`
//! with `{"source": "INPUT" | "OUTPUT", "content": [{"text": {"text"}}]}`, SigV4-signed for
//! the `bedrock` service (the signer Bedrock deployments use, signing when sent so the date is
//! fresh). The reply's `action` is `NONE` or `GUARDRAIL_INTERVENED`; an intervention is read
//! from its `assessments`: a policy that `BLOCKED` refuses, named by its kind and its topic,
//! filter or entity type (never the matched text); one where every policy only `ANONYMIZED`
//! replaces the texts with `outputs` when `mask_request_content` / `mask_response_content`
//! allows it for that direction, and refuses otherwise.

use std::time::SystemTime;

use http::header::CONTENT_TYPE;
use http::{HeaderMap, HeaderValue, Uri};
use serde::Deserialize;
use serde_json::Value;
use sluice_guardrails::{BedrockSettings, ExternalSettings};
use sluice_net::sigv4::{uri_encode, Credentials, Signer};

use crate::guardrails::external::{not_json, Call, Direction, Payload, Question, Verdict};

/// One Bedrock guardrail version in one region.
#[derive(Debug)]
pub(crate) struct Bedrock {
    uri: Uri,
    signer: Signer,
    mask_request: bool,
    mask_response: bool,
}

#[derive(Deserialize)]
struct Reply {
    action: String,
    #[serde(default)]
    outputs: Vec<Output>,
    #[serde(default)]
    assessments: Vec<Value>,
}

#[derive(Deserialize)]
struct Output {
    text: String,
}

impl Bedrock {
    /// The guardrail of `b` at the runtime endpoint of `s`.
    pub(crate) fn build(s: &ExternalSettings, b: &BedrockSettings) -> Result<Self, String> {
        // Ids and ARNs hold `:` and `/`: one path segment each, encoded.
        let uri = format!(
            "{}/guardrail/{}/version/{}/apply",
            s.api_base,
            uri_encode(&b.identifier, false),
            uri_encode(&b.version, false)
        )
        .parse()
        .map_err(|e| format!("api_base is not a URL: {e}"))?;
        Ok(Self {
            uri,
            signer: Signer::new(
                Credentials {
                    access_key_id: b.access_key_id.clone(),
                    secret_access_key: b.secret_access_key.clone(),
                    session_token: b.session_token.clone(),
                },
                b.region.clone(),
                "bedrock",
            ),
            mask_request: b.mask_request,
            mask_response: b.mask_response,
        })
    }

    /// The body of a question about `texts`.
    pub(crate) fn question(&self, texts: &[&str], direction: Direction) -> Result<Payload, String> {
        let source = match direction {
            Direction::Request => "INPUT",
            Direction::Answer => "OUTPUT",
        };
        let content: Vec<Value> = texts
            .iter()
            .map(|t| serde_json::json!({"text": {"text": t}}))
            .collect();
        Payload::json(&serde_json::json!({"source": source, "content": content}))
    }

    /// Sign and send the question about `sent` texts, and read the verdict.
    pub(crate) async fn ask(
        &self,
        call: &Call<'_>,
        question: Question,
        sent: usize,
    ) -> Result<Verdict, String> {
        let mask = match question.direction {
            Direction::Request => self.mask_request,
            Direction::Answer => self.mask_response,
        };
        let body = question.into_body("Bedrock")?;
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        self.signer
            .sign(&self.uri, &mut headers, &body, SystemTime::now());
        let reply = call.post(&self.uri, headers, body).await?;
        verdict(&reply, sent, mask)
    }
}

/// The verdict of an `ApplyGuardrail` reply about `sent` texts (`mask`: an anonymizing-only
/// intervention may replace them).
fn verdict(bytes: &[u8], sent: usize, mask: bool) -> Result<Verdict, String> {
    let reply: Reply = serde_json::from_slice(bytes).map_err(|e| not_json("Bedrock", &e))?;
    match reply.action.as_str() {
        "NONE" => return Ok(Verdict::Pass),
        "GUARDRAIL_INTERVENED" => {}
        other => return Err(format!("unknown action {other:?}")),
    }
    let mut found = Vec::new();
    for a in &reply.assessments {
        policies(a, "", &mut found);
    }
    let blocked: Vec<&str> = found
        .iter()
        .filter(|(action, _)| action != "ANONYMIZED" && action != "NONE")
        .map(|(_, label)| label.as_str())
        .collect();
    let anonymized_only = blocked.is_empty() && !found.is_empty();
    if anonymized_only && mask {
        if reply.outputs.len() != sent {
            return Err(format!(
                "the guardrail gave back {} texts for {sent} sent",
                reply.outputs.len()
            ));
        }
        return Ok(Verdict::Replace(
            reply.outputs.into_iter().map(|o| o.text).collect(),
        ));
    }
    let mut names: Vec<&str> = if blocked.is_empty() {
        found.iter().map(|(_, l)| l.as_str()).collect()
    } else {
        blocked
    };
    names.dedup();
    Ok(Verdict::Block(if names.is_empty() {
        "blocked by the Bedrock guardrail".to_owned()
    } else {
        format!("blocked by the Bedrock guardrail: {}", names.join(", "))
    }))
}

/// Every finding in an assessment (any depth): its `action` and a label of the policy that
/// made it and its `name` or `type` (`topicPolicy Finance`, `sensitiveInformationPolicy
/// EMAIL`). `match` (the text itself) is never read.
fn policies(v: &Value, policy: &str, out: &mut Vec<(String, String)>) {
    match v {
        Value::Object(m) => {
            if let Some(action) = m.get("action").and_then(Value::as_str) {
                let what = m
                    .get("name")
                    .or_else(|| m.get("type"))
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let label = format!("{policy} {what}").trim().to_owned();
                out.push((action.to_owned(), label));
                return;
            }
            for (k, inner) in m {
                let p = if k.ends_with("Policy") {
                    k.as_str()
                } else {
                    policy
                };
                policies(inner, p, out);
            }
        }
        Value::Array(items) => {
            for i in items {
                policies(i, policy, out);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn bedrock() -> Bedrock {
        let s = ExternalSettings {
            api_base: "https://bedrock-runtime.eu-west-1.amazonaws.com".into(),
            api_key: None,
            params: "{}".into(),
            timeout: Duration::from_secs(1),
            on_error: sluice_guardrails::OnError::Block,
            vendor: sluice_guardrails::Vendor::Generic,
        };
        let b = BedrockSettings {
            identifier: "arn:aws:bedrock:eu-west-1:1:guardrail/abc".into(),
            version: "DRAFT".into(),
            region: "eu-west-1".into(),
            access_key_id: sluice_core::Secret::new("AKIDEXAMPLE"),
            secret_access_key: sluice_core::Secret::new("aws-secret"),
            session_token: None,
            mask_request: true,
            mask_response: false,
        };
        Bedrock::build(&s, &b).unwrap()
    }

    #[test]
    fn the_question_is_apply_guardrail_on_the_encoded_id() {
        let b = bedrock();
        assert_eq!(
            b.uri.to_string(),
            "https://bedrock-runtime.eu-west-1.amazonaws.com/guardrail/arn%3Aaws%3Abedrock%3Aeu-west-1%3A1%3Aguardrail%2Fabc/version/DRAFT/apply"
        );
        assert!(
            !format!("{b:?}").contains("aws-secret"),
            "no secret in Debug"
        );
        let Payload::Body(body) = b.question(&["a", "b"], Direction::Answer).unwrap() else {
            panic!("a body");
        };
        let v: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"source": "OUTPUT", "content": [{"text": {"text": "a"}}, {"text": {"text": "b"}}]})
        );
    }

    #[test]
    fn a_signed_question_verifies() {
        let b = bedrock();
        let body = b"{}";
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        b.signer.sign(&b.uri, &mut headers, body, SystemTime::now());
        assert_eq!(
            sluice_net::sigv4::verify(
                "AKIDEXAMPLE",
                "aws-secret",
                b.uri.path(),
                "",
                &headers,
                body
            ),
            Ok(())
        );
    }

    const BLOCKED: &str = r#"{"action":"GUARDRAIL_INTERVENED","outputs":[{"text":"Sorry."}],
        "assessments":[{"topicPolicy":{"topics":[{"name":"Finance","type":"DENY","action":"BLOCKED"}]},
        "sensitiveInformationPolicy":{"piiEntities":[{"match":"jane@x.io","type":"EMAIL","action":"ANONYMIZED"}]}}]}"#;
    const ANONYMIZED: &str = r#"{"action":"GUARDRAIL_INTERVENED","outputs":[{"text":"mail {EMAIL}"}],
        "assessments":[{"sensitiveInformationPolicy":{"piiEntities":[{"match":"jane@x.io","type":"EMAIL","action":"ANONYMIZED"}]}}]}"#;

    #[test]
    fn replies_pass_block_or_mask() {
        assert_eq!(
            verdict(
                br#"{"action":"NONE","outputs":[],"assessments":[{}]}"#,
                1,
                true
            ),
            Ok(Verdict::Pass)
        );
        let Ok(Verdict::Block(why)) = verdict(BLOCKED.as_bytes(), 1, true) else {
            panic!("blocked");
        };
        assert_eq!(why, "blocked by the Bedrock guardrail: topicPolicy Finance");
        assert_eq!(
            verdict(ANONYMIZED.as_bytes(), 1, true),
            Ok(Verdict::Replace(vec!["mail {EMAIL}".into()]))
        );
        let Ok(Verdict::Block(why)) = verdict(ANONYMIZED.as_bytes(), 1, false) else {
            panic!("masking not allowed: blocked");
        };
        assert_eq!(
            why,
            "blocked by the Bedrock guardrail: sensitiveInformationPolicy EMAIL"
        );
        assert!(!why.contains("jane"), "never the match");
        assert!(verdict(ANONYMIZED.as_bytes(), 2, true)
            .unwrap_err()
            .contains("1 texts for 2"));
        assert!(verdict(br#"{"action":"MAYBE"}"#, 1, true).is_err());
        assert!(verdict(br#"{"message":"The security token is invalid"}"#, 1, true).is_err());
    }
}
