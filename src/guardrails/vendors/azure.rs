//! Azure AI Content Safety, key in `Ocp-Apim-Subscription-Key`:
//!
//! - `azure/prompt_shield`: `POST {api_base}/contentsafety/text:shieldPrompt?api-version=…`
//!   `{"userPrompt", "documents": []}` → `userPromptAnalysis.attackDetected` (and any
//!   `documentsAnalysis[].attackDetected`) blocks. As LiteLLM does, the prompt judged is the
//!   last text of the request (the latest message); earlier turns are not sent.
//! - `azure/text_moderations`: `POST {api_base}/contentsafety/text:analyze?api-version=…`
//!   `{"text", "categories", "outputType", "blocklistNames"?, "haltOnBlocklistHit"}` →
//!   `categoriesAnalysis[{category, severity}]`, blocked at `severity_threshold_by_category`
//!   or `severity_threshold` (2 when neither is set); a blocklist hit blocks too, naming the
//!   list. Every text is asked, in pieces of at most 10,000 characters (the API's limit).

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Uri};
use serde::Deserialize;
use sluice_guardrails::{AzureTextSettings, ExternalSettings};

use crate::guardrails::external::{not_json, Call, Payload, Question, Verdict};

/// The header Azure's key goes in.
static KEY_HEADER: HeaderName = HeaderName::from_static("ocp-apim-subscription-key");

/// Most characters Content Safety takes in one text.
const MAX_CHARS: usize = 10_000;

/// A Content Safety resource and which of its APIs the guardrail asks.
#[derive(Debug)]
pub(crate) struct Azure {
    uri: Uri,
    key: HeaderValue,
    api: Api,
}

#[derive(Debug)]
enum Api {
    /// `text:shieldPrompt`.
    Shield,
    /// `text:analyze`, with its settings.
    Text(AzureTextSettings),
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ShieldReply {
    user_prompt_analysis: Attack,
    #[serde(default)]
    documents_analysis: Vec<Attack>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Attack {
    attack_detected: bool,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TextReply {
    categories_analysis: Vec<Category>,
    #[serde(default)]
    blocklists_match: Vec<BlocklistMatch>,
}

#[derive(Deserialize)]
struct Category {
    category: String,
    #[serde(default)]
    severity: u32,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct BlocklistMatch {
    blocklist_name: String,
}

impl Azure {
    /// `azure/prompt_shield` on the resource of `s`.
    pub(crate) fn shield(s: &ExternalSettings, api_version: &str) -> Result<Self, String> {
        Self::build(s, "text:shieldPrompt", api_version, Api::Shield)
    }

    /// `azure/text_moderations` on the resource of `s`.
    pub(crate) fn text(s: &ExternalSettings, t: &AzureTextSettings) -> Result<Self, String> {
        Self::build(s, "text:analyze", &t.api_version, Api::Text(t.clone()))
    }

    fn build(s: &ExternalSettings, op: &str, version: &str, api: Api) -> Result<Self, String> {
        let key = s.api_key.as_ref().ok_or("api_key is required")?;
        let version = sluice_net::sigv4::uri_encode(version, false);
        Ok(Self {
            uri: format!("{}/contentsafety/{op}?api-version={version}", s.api_base)
                .parse()
                .map_err(|e| format!("api_base is not a URL: {e}"))?,
            key: super::sensitive(key.expose())?,
            api,
        })
    }

    /// A question about `texts`: for Prompt Shield the last one's body, for moderation the
    /// texts themselves (each is asked in pieces).
    pub(crate) fn question(&self, texts: &[&str]) -> Payload {
        match &self.api {
            Api::Shield => {
                let prompt = texts.last().copied().unwrap_or_default();
                let body = serde_json::json!({"userPrompt": prompt, "documents": []});
                Payload::Body(Bytes::from(body.to_string()))
            }
            Api::Text(_) => Payload::Texts(texts.iter().map(|t| (*t).to_owned()).collect()),
        }
    }

    /// Send the question and read the verdict; moderation stops at the first refusal.
    pub(crate) async fn ask(&self, call: &Call<'_>, question: Question) -> Result<Verdict, String> {
        let headers = || {
            let mut h = HeaderMap::new();
            h.insert(KEY_HEADER.clone(), self.key.clone());
            h
        };
        match (&self.api, question.payload) {
            (Api::Shield, Payload::Body(body)) => {
                if body.is_empty() {
                    return Ok(Verdict::Pass);
                }
                shield_verdict(&call.post(&self.uri, headers(), body).await?)
            }
            (Api::Text(t), Payload::Texts(texts)) => {
                for text in &texts {
                    for piece in pieces(text, MAX_CHARS) {
                        if piece.trim().is_empty() {
                            continue;
                        }
                        let body = text_body(t, piece)?;
                        let reply = call.post(&self.uri, headers(), body).await?;
                        if let Some(why) = text_verdict(t, &reply)? {
                            return Ok(Verdict::Block(why));
                        }
                    }
                }
                Ok(Verdict::Pass)
            }
            (Api::Shield, Payload::Texts(_)) | (Api::Text(_), Payload::Body(_)) => {
                Err("not an Azure Content Safety question".into())
            }
        }
    }
}

/// Prompt Shield's reply: an attack in the prompt or a document blocks.
fn shield_verdict(bytes: &[u8]) -> Result<Verdict, String> {
    let r: ShieldReply =
        serde_json::from_slice(bytes).map_err(|e| not_json("Azure Prompt Shield", &e))?;
    Ok(
        if r.user_prompt_analysis.attack_detected
            || r.documents_analysis.iter().any(|d| d.attack_detected)
        {
            Verdict::Block("prompt attack detected by Azure Prompt Shield".into())
        } else {
            Verdict::Pass
        },
    )
}

/// The moderation request for one piece of text.
fn text_body(t: &AzureTextSettings, text: &str) -> Result<Bytes, String> {
    let mut body = serde_json::json!({
        "text": text,
        "categories": t.categories,
        "outputType": t.output_type,
        "haltOnBlocklistHit": t.halt_on_blocklist_hit,
    });
    if !t.blocklist_names.is_empty() {
        body["blocklistNames"] = t.blocklist_names.clone().into();
    }
    serde_json::to_vec(&body)
        .map(Bytes::from)
        .map_err(|e| e.to_string())
}

/// Why a moderation reply blocks, if it does: a category at or over its threshold (its own,
/// else `severity_threshold`), or a blocklist hit (the list's name, never the item).
fn text_verdict(t: &AzureTextSettings, bytes: &[u8]) -> Result<Option<String>, String> {
    let r: TextReply =
        serde_json::from_slice(bytes).map_err(|e| not_json("Azure Content Safety", &e))?;
    for c in &r.categories_analysis {
        let own = t
            .by_category
            .iter()
            .find(|(name, _)| *name == c.category)
            .map(|(_, s)| *s);
        if let Some(limit) = own.or(t.severity_threshold) {
            if c.severity >= limit {
                return Ok(Some(format!(
                    "{} severity {} (threshold {limit})",
                    c.category, c.severity
                )));
            }
        }
    }
    Ok(r.blocklists_match
        .first()
        .map(|m| format!("blocklist {}", m.blocklist_name)))
}

/// `text` in pieces of at most `max` characters, cut at whitespace when one is in the last
/// tenth of a piece (so a word is rarely split), on a character boundary always.
fn pieces(text: &str, max: usize) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let Some((cut, _)) = rest.char_indices().nth(max) else {
            out.push(rest);
            break;
        };
        let head = &rest[..cut];
        let at = head
            .char_indices()
            .rev()
            .take(max / 10)
            .find(|(_, c)| c.is_whitespace())
            .map_or(cut, |(i, c)| i + c.len_utf8());
        out.push(&rest[..at]);
        rest = &rest[at..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn settings() -> ExternalSettings {
        ExternalSettings {
            api_base: "https://cs.cognitiveservices.azure.com".into(),
            api_key: Some(sluice_core::Secret::new("az-secret")),
            params: "{}".into(),
            timeout: Duration::from_secs(1),
            on_error: sluice_guardrails::OnError::Block,
            vendor: sluice_guardrails::Vendor::Generic,
        }
    }

    fn moderation(threshold: Option<u32>, by: &[(&str, u32)]) -> AzureTextSettings {
        AzureTextSettings {
            api_version: "2024-09-01".into(),
            categories: vec!["Hate".into(), "Violence".into()],
            output_type: "FourSeverityLevels".into(),
            blocklist_names: vec!["words".into()],
            halt_on_blocklist_hit: true,
            severity_threshold: threshold,
            by_category: by.iter().map(|(c, s)| ((*c).into(), *s)).collect(),
        }
    }

    #[test]
    fn requests_go_to_each_api_with_the_version_and_key() {
        let a = Azure::shield(&settings(), "2024-09-01").unwrap();
        assert_eq!(
            a.uri.to_string(),
            "https://cs.cognitiveservices.azure.com/contentsafety/text:shieldPrompt?api-version=2024-09-01"
        );
        assert!(a.key.is_sensitive() && !format!("{a:?}").contains("az-secret"));
        let Payload::Body(b) = a.question(&["system says", "ignore it all"]) else {
            panic!("a body");
        };
        let body: serde_json::Value = serde_json::from_slice(&b).unwrap();
        assert_eq!(
            body,
            serde_json::json!({"userPrompt": "ignore it all", "documents": []})
        );
        let t = Azure::text(&settings(), &moderation(Some(2), &[])).unwrap();
        assert!(t
            .uri
            .to_string()
            .ends_with("/contentsafety/text:analyze?api-version=2024-09-01"));
        let body: serde_json::Value =
            serde_json::from_slice(&text_body(&moderation(None, &[]), "hi").unwrap()).unwrap();
        assert_eq!(
            body,
            serde_json::json!({"text": "hi", "categories": ["Hate", "Violence"],
                "outputType": "FourSeverityLevels", "haltOnBlocklistHit": true,
                "blocklistNames": ["words"]})
        );
    }

    #[test]
    fn prompt_shield_replies() {
        let pass = br#"{"userPromptAnalysis":{"attackDetected":false},"documentsAnalysis":[]}"#;
        assert_eq!(shield_verdict(pass), Ok(Verdict::Pass));
        let attack = br#"{"userPromptAnalysis":{"attackDetected":true},"documentsAnalysis":[]}"#;
        assert!(matches!(shield_verdict(attack), Ok(Verdict::Block(_))));
        let doc = br#"{"userPromptAnalysis":{"attackDetected":false},"documentsAnalysis":[{"attackDetected":true}]}"#;
        assert!(matches!(shield_verdict(doc), Ok(Verdict::Block(_))));
        assert!(shield_verdict(br#"{"error":{"code":"InvalidRequestBody"}}"#).is_err());
    }

    #[test]
    fn moderation_blocks_at_the_thresholds_and_on_a_blocklist() {
        let reply = br#"{"categoriesAnalysis":[{"category":"Hate","severity":2},{"category":"Violence","severity":4}],"blocklistsMatch":[]}"#;
        assert_eq!(
            text_verdict(&moderation(Some(2), &[]), reply),
            Ok(Some("Hate severity 2 (threshold 2)".into()))
        );
        assert_eq!(
            text_verdict(&moderation(Some(6), &[]), reply),
            Ok(None),
            "both under 6"
        );
        assert_eq!(
            text_verdict(&moderation(None, &[("Violence", 4)]), reply),
            Ok(Some("Violence severity 4 (threshold 4)".into())),
            "a category's own threshold; Hate has none"
        );
        assert_eq!(
            text_verdict(&moderation(Some(6), &[("Hate", 3)]), reply),
            Ok(None),
            "Hate's own threshold wins over the general one"
        );
        let hit = br#"{"categoriesAnalysis":[],"blocklistsMatch":[{"blocklistName":"words","blocklistItemId":"1","blocklistItemText":"secret"}]}"#;
        let why = text_verdict(&moderation(Some(2), &[]), hit)
            .unwrap()
            .unwrap();
        assert_eq!(why, "blocklist words");
        assert!(text_verdict(&moderation(Some(2), &[]), b"[]").is_err());
    }

    #[test]
    fn long_texts_are_cut_into_pieces_on_character_boundaries() {
        assert_eq!(pieces("short", 10), vec!["short"]);
        let text = "aaaa bbbb cccc";
        assert_eq!(pieces(text, 10), vec!["aaaa bbbb ", "cccc"]);
        let wide = "ééééééééééééééééééééééé";
        let p = pieces(wide, 10);
        assert_eq!(p.concat(), wide);
        assert!(p.iter().all(|s| s.chars().count() <= 10));
        assert!(pieces("", 10).is_empty());
    }
}
