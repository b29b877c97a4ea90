//! Lakera Guard (`guardrail: lakera_v2`): `POST {api_base}/v2/guard` with
//! `Authorization: Bearer <api_key>` and `{"messages": [{"role", "content"}], "project_id"?,
//! "breakdown", "metadata"?, "dev_info"}`; the reply's `flagged` decides. With `breakdown` the
//! detectors that fired (`breakdown[].detector_type` where `detected`) name the refusal.
//! `on_flagged: monitor` lets a flagged text pass, recorded as such.
//!
//! The texts are sent as messages in order, a request's as `user`, an answer's as
//! `assistant`: the guardrails step reads texts, not roles, so a system prompt is sent as a
//! user message. Lakera's PII masking (its `payload`) is not used.

use http::header::AUTHORIZATION;
use http::{HeaderMap, HeaderValue, Uri};
use serde::Deserialize;
use serde_json::value::RawValue;
use sluice_guardrails::{ExternalSettings, LakeraSettings};

use crate::guardrails::external::{not_json, Call, Direction, Payload, Question, Verdict};

/// A Lakera Guard project.
#[derive(Debug)]
pub(crate) struct Lakera {
    uri: Uri,
    auth: HeaderValue,
    project_id: Option<String>,
    breakdown: bool,
    metadata: Option<Box<RawValue>>,
    dev_info: bool,
    monitor: bool,
}

#[derive(Deserialize)]
struct Reply {
    flagged: bool,
    #[serde(default)]
    breakdown: Vec<Detector>,
}

#[derive(Deserialize)]
struct Detector {
    #[serde(default)]
    detector_type: String,
    #[serde(default)]
    detected: bool,
}

impl Lakera {
    /// The service of `s`. The error names the key that is wrong.
    pub(crate) fn build(s: &ExternalSettings, l: &LakeraSettings) -> Result<Self, String> {
        let key = s.api_key.as_ref().ok_or("api_key is required")?;
        let metadata = match &l.metadata {
            None => None,
            Some(m) => {
                Some(RawValue::from_string(m.clone()).map_err(|e| format!("metadata: {e}"))?)
            }
        };
        Ok(Self {
            uri: format!("{}/v2/guard", s.api_base)
                .parse()
                .map_err(|e| format!("api_base is not a URL: {e}"))?,
            auth: super::bearer(key)?,
            project_id: l.project_id.clone(),
            breakdown: l.breakdown,
            metadata,
            dev_info: l.dev_info,
            monitor: l.monitor,
        })
    }

    /// The body of a question about `texts`.
    pub(crate) fn question(&self, texts: &[&str], direction: Direction) -> Result<Payload, String> {
        let role = match direction {
            Direction::Request => "user",
            Direction::Answer => "assistant",
        };
        let messages: Vec<serde_json::Value> = texts
            .iter()
            .map(|t| serde_json::json!({"role": role, "content": t}))
            .collect();
        let mut body = serde_json::json!({
            "messages": messages,
            "breakdown": self.breakdown,
            "dev_info": self.dev_info,
            "payload": false,
        });
        if let Some(p) = &self.project_id {
            body["project_id"] = p.as_str().into();
        }
        if let Some(m) = &self.metadata {
            body["metadata"] = serde_json::from_str(m.get()).map_err(|e| e.to_string())?;
        }
        Payload::json(&body)
    }

    /// Send the question and read the verdict.
    pub(crate) async fn ask(&self, call: &Call<'_>, question: Question) -> Result<Verdict, String> {
        let body = question.into_body("Lakera")?;
        let mut headers = HeaderMap::new();
        headers.insert(AUTHORIZATION, self.auth.clone());
        let bytes = call.post(&self.uri, headers, body).await?;
        verdict(&bytes, self.monitor)
    }
}

/// The verdict of a reply: flagged blocks (or, monitoring, is only recorded).
fn verdict(bytes: &[u8], monitor: bool) -> Result<Verdict, String> {
    let reply: Reply = serde_json::from_slice(bytes).map_err(|e| not_json("Lakera", &e))?;
    if !reply.flagged {
        return Ok(Verdict::Pass);
    }
    let mut detected: Vec<&str> = reply
        .breakdown
        .iter()
        .filter(|d| d.detected && !d.detector_type.is_empty())
        .map(|d| d.detector_type.as_str())
        .collect();
    detected.dedup();
    let reason = if detected.is_empty() {
        "flagged by Lakera Guard".to_owned()
    } else {
        format!("flagged by Lakera Guard: {}", detected.join(", "))
    };
    Ok(if monitor {
        Verdict::Flagged(reason)
    } else {
        Verdict::Block(reason)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn lakera(project: Option<&str>, monitor: bool) -> Lakera {
        let s = ExternalSettings {
            api_base: "https://api.lakera.ai".into(),
            api_key: Some(sluice_core::Secret::new("lk-secret")),
            params: "{}".into(),
            timeout: Duration::from_secs(1),
            on_error: sluice_guardrails::OnError::Block,
            vendor: sluice_guardrails::Vendor::Generic,
        };
        let l = LakeraSettings {
            project_id: project.map(Into::into),
            breakdown: true,
            metadata: Some(r#"{"team":"a"}"#.into()),
            dev_info: false,
            monitor,
        };
        Lakera::build(&s, &l).unwrap()
    }

    #[test]
    fn the_question_carries_the_texts_as_messages_and_the_project() {
        let l = lakera(Some("project-1"), false);
        assert_eq!(l.uri.to_string(), "https://api.lakera.ai/v2/guard");
        assert_eq!(l.auth.to_str().unwrap(), "Bearer lk-secret");
        assert!(l.auth.is_sensitive());
        assert!(!format!("{l:?}").contains("lk-secret"), "no key in Debug");
        let Payload::Body(b) = l.question(&["hi", "there"], Direction::Request).unwrap() else {
            panic!("a body");
        };
        let body: serde_json::Value = serde_json::from_slice(&b).unwrap();
        assert_eq!(
            body,
            serde_json::json!({
                "messages": [{"role": "user", "content": "hi"}, {"role": "user", "content": "there"}],
                "project_id": "project-1",
                "breakdown": true,
                "dev_info": false,
                "payload": false,
                "metadata": {"team": "a"},
            })
        );
        let Payload::Body(b) = lakera(None, false)
            .question(&["ok"], Direction::Answer)
            .unwrap()
        else {
            panic!("a body");
        };
        let body: serde_json::Value = serde_json::from_slice(&b).unwrap();
        assert_eq!(body["messages"][0]["role"], "assistant");
        assert!(body.get("project_id").is_none());
    }

    #[test]
    fn flagged_blocks_or_is_monitored_and_names_the_detectors() {
        assert_eq!(verdict(br#"{"flagged":false}"#, false), Ok(Verdict::Pass));
        let flagged = br#"{"flagged":true,"breakdown":[
            {"detector_type":"prompt_attack","detected":true},
            {"detector_type":"moderated_content/hate","detected":false}]}"#;
        assert_eq!(
            verdict(flagged, false),
            Ok(Verdict::Block(
                "flagged by Lakera Guard: prompt_attack".into()
            ))
        );
        assert_eq!(
            verdict(flagged, true),
            Ok(Verdict::Flagged(
                "flagged by Lakera Guard: prompt_attack".into()
            ))
        );
        assert_eq!(
            verdict(br#"{"flagged":true}"#, false),
            Ok(Verdict::Block("flagged by Lakera Guard".into()))
        );
        assert!(verdict(br#"{"flagged":"yes"}"#, false).is_err());
        assert!(verdict(b"<html>", false).is_err());
    }
}
