//! OpenAI's `/v1/images/generations` on upstreams with their own image APIs (Imagen): the
//! request's few fields read, and the images an upstream made written back as OpenAI's answer.
//! Native image APIs return bytes, not URLs, so the answer is always `b64_json`.

use serde::Deserialize;
use serde_json::{json, Value};

use crate::TranslateError;

/// What an image-generation request asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageRequest {
    /// The text to draw.
    pub prompt: String,
    /// How many images (1 when not given).
    pub n: u32,
    /// OpenAI's `size` (`1024x1792`), when given.
    pub size: Option<String>,
}

#[derive(Deserialize)]
struct RawRequest {
    #[serde(default)]
    prompt: Option<String>,
    #[serde(default)]
    n: Option<u32>,
    #[serde(default)]
    size: Option<String>,
}

/// Read an OpenAI image-generation request.
pub fn parse_request(body: &[u8]) -> Result<ImageRequest, TranslateError> {
    let raw: RawRequest = serde_json::from_slice(body).map_err(TranslateError::bad_request)?;
    let prompt = raw
        .prompt
        .filter(|p| !p.is_empty())
        .ok_or_else(|| TranslateError::invalid("prompt", "a prompt is required"))?;
    Ok(ImageRequest {
        prompt,
        n: raw.n.unwrap_or(1).max(1),
        size: raw.size,
    })
}

/// The aspect ratio closest to an OpenAI `size`, among those Imagen takes.
pub fn aspect_ratio(size: Option<&str>) -> &'static str {
    const RATIOS: [(&str, f64); 5] = [
        ("1:1", 1.0),
        ("3:4", 0.75),
        ("4:3", 4.0 / 3.0),
        ("9:16", 9.0 / 16.0),
        ("16:9", 16.0 / 9.0),
    ];
    let Some((w, h)) = size
        .and_then(|s| s.split_once('x'))
        .and_then(|(w, h)| Some((w.trim().parse::<f64>().ok()?, h.trim().parse::<f64>().ok()?)))
        .filter(|(w, h)| *w > 0.0 && *h > 0.0)
    else {
        return "1:1";
    };
    let r = w / h;
    RATIOS
        .iter()
        .min_by(|a, b| (a.1 - r).abs().total_cmp(&(b.1 - r).abs()))
        .map_or("1:1", |(name, _)| name)
}

/// OpenAI's answer for base64-encoded images.
pub fn write_response(created: u64, images: &[String]) -> Vec<u8> {
    let data: Vec<Value> = images.iter().map(|b| json!({ "b64_json": b })).collect();
    crate::to_json(&json!({ "created": created, "data": data }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_and_ratios() {
        let r =
            parse_request(br#"{"model":"m","prompt":"a fox","n":2,"size":"1792x1024"}"#).unwrap();
        assert_eq!((r.n, r.size.as_deref()), (2, Some("1792x1024")));
        assert_eq!(aspect_ratio(r.size.as_deref()), "16:9");
        assert_eq!(aspect_ratio(Some("1024x1792")), "9:16");
        assert_eq!(aspect_ratio(Some("auto")), "1:1");
        assert_eq!(aspect_ratio(None), "1:1");
        assert!(parse_request(br#"{"model":"m"}"#).is_err());
        let out: Value = serde_json::from_slice(&write_response(7, &["AA".into()])).unwrap();
        assert_eq!(out["data"][0]["b64_json"], "AA");
        assert_eq!(out["created"], 7);
    }
}
