//! OpenAI moderation (`guardrail: openai_moderation`): the texts go to `/v1/moderations` of the
//! `model_list` group `model` names, through sluice's own routing (its deployments' keys,
//! health, retries and fallbacks), as `{"model", "input": [texts]}`; a result that is
//! `flagged` — or, with `categories`, flags one of them — refuses, naming the categories.

use serde::Deserialize;
use sluice_guardrails::ModerationSettings;

use crate::guardrails::external::{not_json, Call, Payload, Question, Verdict};

/// A moderation model group.
#[derive(Debug)]
pub(crate) struct Moderation {
    model: String,
    categories: Vec<String>,
}

#[derive(Deserialize)]
struct Reply {
    results: Vec<Outcome>,
}

#[derive(Deserialize)]
struct Outcome {
    #[serde(default)]
    flagged: bool,
    #[serde(default)]
    categories: serde_json::Map<String, serde_json::Value>,
}

impl Moderation {
    /// The group of `m`.
    pub(crate) fn build(m: &ModerationSettings) -> Self {
        Self {
            model: m.model.clone(),
            categories: m.categories.clone(),
        }
    }

    /// The body of a question about `texts`.
    pub(crate) fn question(&self, texts: &[&str]) -> Result<Payload, String> {
        let body = serde_json::json!({"model": self.model, "input": texts});
        Payload::json(&body)
    }

    /// Send the question through the router and read the verdict.
    pub(crate) async fn ask(
        &self,
        call: &Call<'_>,
        question: Question,
        sent: usize,
    ) -> Result<Verdict, String> {
        let body = question.into_body("moderation")?;
        let reply = call.route(body).await?;
        verdict(&reply, sent, &self.categories)
    }
}

/// The verdict of a reply about `sent` texts: refused when a result is flagged (in one of
/// `only`, when given), naming the flagged categories.
fn verdict(bytes: &[u8], sent: usize, only: &[String]) -> Result<Verdict, String> {
    let reply: Reply =
        serde_json::from_slice(bytes).map_err(|e| not_json("OpenAI moderation", &e))?;
    if reply.results.len() != sent {
        return Err(format!(
            "the moderation answered {} results for {sent} texts",
            reply.results.len()
        ));
    }
    let mut flagged: Vec<&str> = Vec::new();
    let mut any = false;
    for r in &reply.results {
        let on: Vec<&str> = r
            .categories
            .iter()
            .filter(|(_, v)| v.as_bool() == Some(true))
            .map(|(k, _)| k.as_str())
            .filter(|k| only.is_empty() || only.iter().any(|o| o == k))
            .collect();
        any |= if only.is_empty() {
            r.flagged
        } else {
            !on.is_empty()
        };
        for c in on {
            if !flagged.contains(&c) {
                flagged.push(c);
            }
        }
    }
    if !any {
        return Ok(Verdict::Pass);
    }
    Ok(Verdict::Block(if flagged.is_empty() {
        "flagged by the moderation model".into()
    } else {
        format!("flagged by the moderation model: {}", flagged.join(", "))
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TWO: &str = r#"{"id":"m","model":"omni","results":[
        {"flagged":false,"categories":{"violence":false,"hate":false}},
        {"flagged":true,"categories":{"violence":true,"hate":false,"harassment":true}}]}"#;

    #[test]
    fn a_flagged_result_refuses_naming_its_categories() {
        assert_eq!(
            verdict(TWO.as_bytes(), 2, &[]).unwrap(),
            Verdict::Block("flagged by the moderation model: harassment, violence".into())
        );
        let clean = r#"{"results":[{"flagged":false,"categories":{"violence":false}}]}"#;
        assert_eq!(verdict(clean.as_bytes(), 1, &[]).unwrap(), Verdict::Pass);
    }

    #[test]
    fn categories_narrow_what_refuses() {
        assert_eq!(
            verdict(TWO.as_bytes(), 2, &["hate".into()]).unwrap(),
            Verdict::Pass
        );
        assert_eq!(
            verdict(TWO.as_bytes(), 2, &["violence".into()]).unwrap(),
            Verdict::Block("flagged by the moderation model: violence".into())
        );
    }

    #[test]
    fn a_reply_that_is_not_the_shape_is_an_error_without_its_text() {
        let e = verdict(b"{\"results\": \"my secret text\"}", 1, &[]).unwrap_err();
        assert!(!e.contains("secret"), "{e}");
        assert!(
            verdict(TWO.as_bytes(), 3, &[]).is_err(),
            "a count that does not match"
        );
    }
}
