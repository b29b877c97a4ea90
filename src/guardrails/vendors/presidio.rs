//! Microsoft Presidio (`guardrail: presidio`): each text goes to the analyzer,
//! `POST {presidio_analyzer_api_base}/analyze` `{"text", "language", "entities"?}`, which
//! answers its findings `[{"entity_type", "start", "end", "score"}]` with offsets in
//! characters (Python string indices, not bytes). Findings under
//! `presidio_score_thresholds` are dropped; an entity configured `BLOCK` refuses (naming the
//! entity, never the value); the rest are masked: by the anonymizer,
//! `POST {presidio_anonymizer_api_base}/anonymize` `{"text", "analyzer_results"}` →
//! `{"text", "items"}`, or, with `output_parse_pii`, by sluice with numbered placeholders it
//! keeps so the answer can be given its values back (as LiteLLM does).

use bytes::Bytes;
use http::{HeaderMap, Uri};
use serde::{Deserialize, Serialize};
use sluice_guardrails::{Action, ExternalSettings, PresidioSettings};

use crate::guardrails::external::{not_json, Call, Payload, Question, Verdict};

/// A Presidio analyzer and anonymizer pair.
#[derive(Debug)]
pub(crate) struct Presidio {
    analyze: Uri,
    anonymize: Uri,
    language: String,
    entities: Vec<(String, Action)>,
    thresholds: Vec<(String, f64)>,
    restore: bool,
}

/// One analyzer finding (offsets in characters). Other members (`analysis_explanation`,
/// `recognition_metadata`) are not read, nor sent back.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
struct Finding {
    entity_type: String,
    start: usize,
    end: usize,
    #[serde(default)]
    score: f64,
}

#[derive(Deserialize)]
struct Anonymized {
    text: String,
}

/// What one text needs after the analyzer: nothing, a refusal, or these findings masked.
#[derive(Debug, PartialEq)]
enum Judged {
    Clean,
    Block(String),
    Mask(Vec<Finding>),
}

impl Presidio {
    /// The servers of `s`. The error says which URL is wrong.
    pub(crate) fn build(s: &ExternalSettings, p: &PresidioSettings) -> Result<Self, String> {
        Ok(Self {
            analyze: format!("{}/analyze", s.api_base)
                .parse()
                .map_err(|e| format!("presidio_analyzer_api_base is not a URL: {e}"))?,
            anonymize: format!("{}/anonymize", p.anonymizer_base)
                .parse()
                .map_err(|e| format!("presidio_anonymizer_api_base is not a URL: {e}"))?,
            language: p.language.clone(),
            entities: p.entities.clone(),
            thresholds: p.score_thresholds.clone(),
            restore: p.restore,
        })
    }

    /// Analyze each text (and anonymize those with findings to mask), in order; the first
    /// refusal ends the check.
    pub(crate) async fn ask(&self, call: &Call<'_>, question: Question) -> Result<Verdict, String> {
        let Payload::Texts(texts) = question.payload else {
            return Err("not a Presidio question".into());
        };
        let mut replaced: Vec<Option<String>> = vec![None; texts.len()];
        let mut spans: Vec<Vec<(usize, usize, String)>> = vec![Vec::new(); texts.len()];
        for (i, text) in texts.iter().enumerate() {
            if text.trim().is_empty() {
                continue;
            }
            let body = self.analyze_body(text)?;
            let reply = call.post(&self.analyze, HeaderMap::new(), body).await?;
            match self.judge(&reply)? {
                Judged::Clean => {}
                Judged::Block(entity) => return Ok(Verdict::Block(entity)),
                Judged::Mask(found) if self.restore => spans[i] = byte_spans(text, &found),
                Judged::Mask(found) => {
                    let body = serde_json::to_vec(&serde_json::json!({
                        "text": text,
                        "analyzer_results": found,
                    }))
                    .map_err(|e| e.to_string())?;
                    let reply = call
                        .post(&self.anonymize, HeaderMap::new(), Bytes::from(body))
                        .await?;
                    let a: Anonymized = serde_json::from_slice(&reply)
                        .map_err(|e| not_json("Presidio's anonymizer", &e))?;
                    replaced[i] = Some(a.text);
                }
            }
        }
        if spans.iter().any(|s| !s.is_empty()) {
            return Ok(Verdict::Mask(spans));
        }
        if replaced.iter().all(Option::is_none) {
            return Ok(Verdict::Pass);
        }
        Ok(Verdict::Replace(
            replaced
                .into_iter()
                .zip(texts)
                .map(|(r, t)| r.unwrap_or(t))
                .collect(),
        ))
    }

    /// The analyzer's request for `text`: the configured entities only, when some are.
    fn analyze_body(&self, text: &str) -> Result<Bytes, String> {
        let mut body = serde_json::json!({"text": text, "language": self.language});
        if !self.entities.is_empty() {
            body["entities"] = self.entities.iter().map(|(e, _)| e.as_str()).collect();
        }
        serde_json::to_vec(&body)
            .map(Bytes::from)
            .map_err(|e| e.to_string())
    }

    /// The least score a finding of `entity` needs: its own threshold, else `ALL`'s, else 0.
    fn threshold(&self, entity: &str) -> f64 {
        let of = |name: &str| {
            self.thresholds
                .iter()
                .find(|(e, _)| e == name)
                .map(|(_, t)| *t)
        };
        of(entity).or_else(|| of("ALL")).unwrap_or(0.0)
    }

    /// What the analyzer's reply means for its text.
    fn judge(&self, reply: &[u8]) -> Result<Judged, String> {
        let found: Vec<Finding> =
            serde_json::from_slice(reply).map_err(|e| not_json("Presidio's analyzer", &e))?;
        let found: Vec<Finding> = found
            .into_iter()
            .filter(|f| f.score >= self.threshold(&f.entity_type) && f.start < f.end)
            .collect();
        if let Some(f) = found.iter().find(|f| {
            self.entities
                .iter()
                .any(|(e, a)| *e == f.entity_type && *a == Action::Block)
        }) {
            return Ok(Judged::Block(f.entity_type.clone()));
        }
        Ok(if found.is_empty() {
            Judged::Clean
        } else {
            Judged::Mask(found)
        })
    }
}

/// The findings as byte ranges of `text` with their labels, ordered and apart: Presidio counts
/// characters, Rust slices bytes. Overlapping findings keep the earliest, then the longest; one
/// past the text's end is dropped.
fn byte_spans(text: &str, found: &[Finding]) -> Vec<(usize, usize, String)> {
    let mut found: Vec<&Finding> = found.iter().collect();
    found.sort_by(|a, b| a.start.cmp(&b.start).then(b.end.cmp(&a.end)));
    // Byte offset of every character boundary, the text's end included.
    let bounds: Vec<usize> = text
        .char_indices()
        .map(|(b, _)| b)
        .chain(std::iter::once(text.len()))
        .collect();
    let mut out: Vec<(usize, usize, String)> = Vec::with_capacity(found.len());
    let mut last_end = 0;
    for f in found {
        let (Some(&start), Some(&end)) = (bounds.get(f.start), bounds.get(f.end)) else {
            continue;
        };
        if !out.is_empty() && start < last_end {
            continue;
        }
        out.push((start, end, f.entity_type.clone()));
        last_end = end;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn presidio(entities: &[(&str, Action)], thresholds: &[(&str, f64)]) -> Presidio {
        let s = ExternalSettings {
            api_base: "http://127.0.0.1:1".into(),
            api_key: None,
            params: "{}".into(),
            timeout: Duration::from_secs(1),
            on_error: sluice_guardrails::OnError::Block,
            vendor: sluice_guardrails::Vendor::Generic,
        };
        let p = PresidioSettings {
            anonymizer_base: "http://127.0.0.1:2".into(),
            language: "de".into(),
            entities: entities.iter().map(|(e, a)| ((*e).into(), *a)).collect(),
            score_thresholds: thresholds.iter().map(|(e, t)| ((*e).into(), *t)).collect(),
            restore: false,
        };
        Presidio::build(&s, &p).unwrap()
    }

    #[test]
    fn the_analyzer_is_asked_for_the_configured_entities_in_the_language() {
        let p = presidio(&[("PERSON", Action::Mask), ("US_SSN", Action::Block)], &[]);
        let body: serde_json::Value =
            serde_json::from_slice(&p.analyze_body("hi Ann").unwrap()).unwrap();
        assert_eq!(
            body,
            serde_json::json!({"text": "hi Ann", "language": "de", "entities": ["PERSON", "US_SSN"]})
        );
        assert_eq!(p.analyze.to_string(), "http://127.0.0.1:1/analyze");
        assert_eq!(p.anonymize.to_string(), "http://127.0.0.1:2/anonymize");
        let all = presidio(&[], &[]);
        let body: serde_json::Value =
            serde_json::from_slice(&all.analyze_body("x").unwrap()).unwrap();
        assert!(body.get("entities").is_none(), "no entities: every one");
    }

    #[test]
    fn findings_block_mask_or_pass_by_entity_and_score() {
        let p = presidio(
            &[("PERSON", Action::Mask), ("US_SSN", Action::Block)],
            &[("PERSON", 0.6), ("ALL", 0.3)],
        );
        assert_eq!(p.judge(b"[]"), Ok(Judged::Clean));
        let low = br#"[{"entity_type":"PERSON","start":0,"end":3,"score":0.5}]"#;
        assert_eq!(
            p.judge(low),
            Ok(Judged::Clean),
            "under PERSON's own threshold"
        );
        let ssn = br#"[{"entity_type":"PERSON","start":0,"end":3,"score":0.9},
                      {"entity_type":"US_SSN","start":4,"end":15,"score":0.4}]"#;
        assert_eq!(p.judge(ssn), Ok(Judged::Block("US_SSN".into())));
        let under_all = br#"[{"entity_type":"US_SSN","start":4,"end":15,"score":0.2}]"#;
        assert_eq!(
            p.judge(under_all),
            Ok(Judged::Clean),
            "under ALL's threshold"
        );
        let person = br#"[{"entity_type":"PERSON","start":0,"end":3,"score":0.85,"analysis_explanation":null}]"#;
        assert_eq!(
            p.judge(person),
            Ok(Judged::Mask(vec![Finding {
                entity_type: "PERSON".into(),
                start: 0,
                end: 3,
                score: 0.85
            }]))
        );
        let e = p
            .judge(br#"{"error": "No text provided: Jane Doe"}"#)
            .unwrap_err();
        assert!(e.contains("analyzer") && !e.contains("Jane"), "{e}");
    }

    #[test]
    fn character_offsets_become_byte_ranges_in_non_ascii_text() {
        let text = "Grüße an José Müller, 📞 mail zoë@example.com";
        let chars = |w: &str| {
            let b = text.find(w).unwrap();
            let start = text[..b].chars().count();
            (start, start + w.chars().count())
        };
        let (js, je) = chars("José Müller");
        let (zs, ze) = chars("zoë@example.com");
        let found = vec![
            Finding {
                entity_type: "EMAIL_ADDRESS".into(),
                start: zs,
                end: ze,
                score: 1.0,
            },
            Finding {
                entity_type: "PERSON".into(),
                start: js,
                end: je,
                score: 0.85,
            },
            // Overlaps the name: the earlier, longer one wins.
            Finding {
                entity_type: "PERSON".into(),
                start: js + 5,
                end: je,
                score: 0.5,
            },
            // Past the end of the text: dropped, not a panic.
            Finding {
                entity_type: "PERSON".into(),
                start: 200,
                end: 210,
                score: 0.5,
            },
        ];
        let spans = byte_spans(text, &found);
        let cut: Vec<(&str, &str)> = spans
            .iter()
            .map(|(s, e, l)| (&text[*s..*e], l.as_str()))
            .collect();
        assert_eq!(
            cut,
            vec![
                ("José Müller", "PERSON"),
                ("zoë@example.com", "EMAIL_ADDRESS")
            ]
        );
    }
}
