//! Read the request envelope (`model`, `stream`, `stream_options`) without building the body,
//! and splice the few bytes sluice changes into the original buffer without copying it.

use std::borrow::Cow;
use std::ops::Range;

use bytes::Bytes;
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::error::ApiError;

#[derive(Deserialize)]
struct RawEnvelope<'a> {
    #[serde(borrow, default)]
    model: Option<&'a RawValue>,
    #[serde(default)]
    stream: Option<bool>,
    #[serde(borrow, default)]
    stream_options: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct StreamOptions {
    #[serde(default)]
    include_usage: Option<bool>,
}

/// What sluice needs to know about a request body, with byte ranges into it for splicing.
#[derive(Debug)]
pub struct Envelope<'a> {
    /// The model the client asked for (borrowed unless it contained escapes).
    pub model: Cow<'a, str>,
    /// Byte range of the `model` value (quotes included) in the body.
    pub model_range: Range<usize>,
    /// `stream: true`.
    pub stream: bool,
    /// Whether the client asked for `stream_options.include_usage: true`.
    pub client_wants_usage: bool,
    /// Byte range of the `stream_options` value, if present.
    pub stream_options_range: Option<Range<usize>>,
    /// Offset just past the body's opening `{`.
    pub object_start: usize,
}

fn range_in(body: &[u8], raw: &RawValue) -> Result<Range<usize>, ApiError> {
    let start = (raw.get().as_ptr() as usize)
        .checked_sub(body.as_ptr() as usize)
        .filter(|s| s + raw.get().len() <= body.len())
        .ok_or_else(|| ApiError::InvalidJson("internal: value outside the body".into()))?;
    Ok(start..start + raw.get().len())
}

impl<'a> Envelope<'a> {
    /// Parse the envelope. Every byte is validated as JSON, but only these fields are built.
    pub fn parse(body: &'a [u8]) -> Result<Self, ApiError> {
        let raw: RawEnvelope<'a> =
            serde_json::from_slice(body).map_err(|e| ApiError::InvalidJson(e.to_string()))?;
        let model_raw = raw.model.ok_or(ApiError::MissingParam("model"))?;
        let model: Cow<'a, str> =
            serde_json::from_str(model_raw.get()).map_err(|_| ApiError::InvalidParam {
                param: "model",
                message: "expected a string".into(),
            })?;
        if model.is_empty() {
            return Err(ApiError::MissingParam("model"));
        }
        let model_range = range_in(body, model_raw)?;
        let (client_wants_usage, stream_options_range) = match raw.stream_options {
            Some(so) if so.get() != "null" => {
                let opts: StreamOptions =
                    serde_json::from_str(so.get()).map_err(|e| ApiError::InvalidParam {
                        param: "stream_options",
                        message: e.to_string(),
                    })?;
                (opts.include_usage == Some(true), Some(range_in(body, so)?))
            }
            _ => (false, None),
        };
        let object_start = body
            .iter()
            .position(|b| *b == b'{')
            .map(|p| p + 1)
            .ok_or_else(|| ApiError::InvalidJson("expected a JSON object".into()))?;
        Ok(Self {
            model,
            model_range,
            stream: raw.stream.unwrap_or(false),
            client_wants_usage,
            stream_options_range,
            object_start,
        })
    }
}

/// The body sent upstream: slices of the client's buffer with replacements between them.
/// At most a handful of segments, each a reference-counted view (no copy of the prompt).
pub type Segments = Vec<Bytes>;

/// Build the upstream body: `model` replaced by `new_model_json` (an encoded JSON string) when
/// given, and `stream_options.include_usage` forced on when `force_usage` is set.
pub fn splice(
    body: &Bytes,
    env: &Envelope<'_>,
    new_model_json: Option<&Bytes>,
    force_usage: bool,
) -> Result<Segments, ApiError> {
    let mut edits: Vec<(Range<usize>, Bytes)> = Vec::with_capacity(2);
    if let Some(m) = new_model_json {
        edits.push((env.model_range.clone(), m.clone()));
    }
    if force_usage {
        match &env.stream_options_range {
            Some(range) => {
                let mut opts: serde_json::Map<String, serde_json::Value> =
                    serde_json::from_slice(&body[range.clone()]).map_err(|e| {
                        ApiError::InvalidParam {
                            param: "stream_options",
                            message: e.to_string(),
                        }
                    })?;
                opts.insert("include_usage".into(), serde_json::Value::Bool(true));
                let encoded = serde_json::to_vec(&opts).map_err(|e| ApiError::InvalidParam {
                    param: "stream_options",
                    message: e.to_string(),
                })?;
                edits.push((range.clone(), Bytes::from(encoded)));
            }
            None => edits.push((
                env.object_start..env.object_start,
                Bytes::from_static(br#""stream_options":{"include_usage":true},"#),
            )),
        }
    }
    edits.sort_by_key(|(r, _)| r.start);
    let mut out = Vec::with_capacity(edits.len() * 2 + 1);
    let mut pos = 0;
    for (range, replacement) in edits {
        if range.start > pos {
            out.push(body.slice(pos..range.start));
        }
        out.push(replacement);
        pos = range.end;
    }
    if pos < body.len() {
        out.push(body.slice(pos..));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn join(segs: &Segments) -> String {
        segs.iter()
            .map(|b| std::str::from_utf8(b).unwrap())
            .collect()
    }

    #[test]
    fn reads_envelope_and_ranges() {
        let body = br#"{"messages":[{"role":"user","content":"hi \"model\""}],"model":"gpt-4o","stream":true}"#;
        let env = Envelope::parse(body).unwrap();
        assert_eq!(env.model, "gpt-4o");
        assert_eq!(&body[env.model_range.clone()], br#""gpt-4o""#);
        assert!(env.stream);
        assert!(!env.client_wants_usage);
        assert_eq!(env.object_start, 1);
    }

    #[test]
    fn rewrites_model_leaving_every_other_byte() {
        let body = Bytes::from_static(br#"{ "model" : "a" , "x": [1, 2,   3], "y":"model"}"#);
        let env = Envelope::parse(&body).unwrap();
        let segs = splice(
            &body,
            &env,
            Some(&Bytes::from_static(br#""gpt-4o-mini""#)),
            false,
        )
        .unwrap();
        assert_eq!(
            join(&segs),
            r#"{ "model" : "gpt-4o-mini" , "x": [1, 2,   3], "y":"model"}"#
        );
    }

    #[test]
    fn escaped_model_names() {
        let body = br#"{"model":"a\/b"}"#;
        let env = Envelope::parse(body).unwrap();
        assert_eq!(env.model, "a/b");
    }

    #[test]
    fn injects_stream_options_when_absent() {
        let body = Bytes::from_static(br#"  {"model":"m","stream":true}"#);
        let env = Envelope::parse(&body).unwrap();
        let segs = splice(&body, &env, None, true).unwrap();
        let out = join(&segs);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["stream_options"]["include_usage"], true);
        assert_eq!(v["model"], "m");
    }

    #[test]
    fn merges_existing_stream_options() {
        let body = Bytes::from_static(
            br#"{"stream_options":{"include_usage":false,"other":1},"model":"m","stream":true}"#,
        );
        let env = Envelope::parse(&body).unwrap();
        assert!(!env.client_wants_usage);
        let segs = splice(&body, &env, Some(&Bytes::from_static(br#""n""#)), true).unwrap();
        let v: serde_json::Value = serde_json::from_str(&join(&segs)).unwrap();
        assert_eq!(v["stream_options"]["include_usage"], true);
        assert_eq!(v["stream_options"]["other"], 1);
        assert_eq!(v["model"], "n");
    }

    #[test]
    fn client_usage_request_is_seen() {
        let body = br#"{"model":"m","stream":true,"stream_options":{"include_usage":true}}"#;
        assert!(Envelope::parse(body).unwrap().client_wants_usage);
    }

    #[test]
    fn errors_name_the_problem() {
        let e = Envelope::parse(b"{\"model\": \"m\",\n  \"x\": }").unwrap_err();
        assert!(
            matches!(e, ApiError::InvalidJson(ref m) if m.contains("line 2")),
            "{e}"
        );
        assert!(matches!(
            Envelope::parse(b"{}"),
            Err(ApiError::MissingParam("model"))
        ));
        assert!(matches!(
            Envelope::parse(br#"{"model":5}"#),
            Err(ApiError::InvalidParam { param: "model", .. })
        ));
        assert!(matches!(
            Envelope::parse(br#"{"model":"m","stream":"yes"}"#),
            Err(ApiError::InvalidJson(_))
        ));
        assert!(Envelope::parse(b"[1,2]").is_err());
    }

    #[test]
    fn large_body_is_not_copied() {
        let prompt = "x".repeat(500_000);
        let body = Bytes::from(format!(
            r#"{{"model":"m","messages":[{{"content":"{prompt}"}}]}}"#
        ));
        let env = Envelope::parse(&body).unwrap();
        let segs = splice(&body, &env, Some(&Bytes::from_static(br#""other""#)), false).unwrap();
        // The big tail is a view into the original allocation, not a copy.
        let tail = segs.last().unwrap();
        assert!(tail.len() > 500_000);
        let base = body.as_ptr() as usize;
        let t = tail.as_ptr() as usize;
        assert!(t >= base && t < base + body.len());
    }
}
