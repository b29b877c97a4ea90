//! OpenAI's `/v1/images/generations` on upstreams with their own image APIs (Imagen, Bedrock's
//! Titan, Nova Canvas and Stability models): the request's few fields read, and the images an
//! upstream made written back as OpenAI's answer. Native image APIs return bytes, not URLs, so
//! the answer is always `b64_json`.

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
    /// OpenAI's `quality` (`standard`, `hd`, `low`, `medium`, `high`, `auto`), when given.
    pub quality: Option<String>,
    /// What the image should not show: `negative_prompt` (Stability's name, which LiteLLM
    /// passes through), for the models that take one.
    pub negative_prompt: Option<String>,
    /// `seed`, for the models that take one.
    pub seed: Option<u64>,
}

#[derive(Deserialize)]
struct RawRequest {
    #[serde(default)]
    prompt: Option<String>,
    #[serde(default)]
    n: Option<u32>,
    #[serde(default)]
    size: Option<String>,
    #[serde(default)]
    quality: Option<String>,
    #[serde(default)]
    negative_prompt: Option<String>,
    #[serde(default)]
    seed: Option<u64>,
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
        quality: raw.quality,
        negative_prompt: raw.negative_prompt.filter(|p| !p.is_empty()),
        seed: raw.seed,
    })
}

/// Width and height of an OpenAI `size` (`"1024x1792"`); `None` for `auto` or anything
/// unreadable.
pub fn dimensions(size: &str) -> Option<(u32, u32)> {
    let (w, h) = size.split_once('x')?;
    let (w, h) = (w.trim().parse::<u32>().ok()?, h.trim().parse::<u32>().ok()?);
    (w > 0 && h > 0).then_some((w, h))
}

/// The aspect ratios Imagen takes.
pub const IMAGEN_RATIOS: &[&str] = &["1:1", "3:4", "4:3", "9:16", "16:9"];

/// The aspect ratios Stability's SD3 and Stable Image models take.
pub const STABILITY_RATIOS: &[&str] = &[
    "1:1", "16:9", "21:9", "2:3", "3:2", "4:5", "5:4", "9:16", "9:21",
];

/// The sizes Stable Diffusion XL 1.0 draws (AWS refuses others).
pub const SDXL_SIZES: [(u32, u32); 9] = [
    (1024, 1024),
    (1152, 896),
    (1216, 832),
    (1344, 768),
    (1536, 640),
    (640, 1536),
    (768, 1344),
    (832, 1216),
    (896, 1152),
];

/// The aspect ratio (`"w:h"`, one of `ratios`) closest to `width`/`height`.
pub fn nearest_ratio(ratios: &[&'static str], width: u32, height: u32) -> &'static str {
    let value = |r: &str| {
        r.split_once(':')
            .and_then(|(a, b)| Some(a.parse::<f64>().ok()? / b.parse::<f64>().ok()?))
            .unwrap_or(1.0)
    };
    let want = f64::from(width) / f64::from(height);
    ratios
        .iter()
        .min_by(|a, b| (value(a) - want).abs().total_cmp(&(value(b) - want).abs()))
        .copied()
        .unwrap_or("1:1")
}

/// The aspect ratio closest to an OpenAI `size`, among those Imagen takes (`1:1` without one).
pub fn aspect_ratio(size: Option<&str>) -> &'static str {
    size.and_then(dimensions)
        .map_or("1:1", |(w, h)| nearest_ratio(IMAGEN_RATIOS, w, h))
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
        assert_eq!(nearest_ratio(STABILITY_RATIOS, 1792, 1024), "16:9");
        assert_eq!(nearest_ratio(STABILITY_RATIOS, 1024, 1536), "2:3");
        assert_eq!(nearest_ratio(STABILITY_RATIOS, 640, 1536), "9:21");
        assert_eq!(nearest_ratio(STABILITY_RATIOS, 1024, 1280), "4:5");
        assert_eq!(dimensions("1024 x 768"), Some((1024, 768)));
        assert_eq!(dimensions("0x5"), None);
        let r = parse_request(
            br#"{"model":"m","prompt":"p","quality":"hd","negative_prompt":"","seed":7}"#,
        )
        .unwrap();
        assert_eq!(
            (r.quality.as_deref(), r.negative_prompt, r.seed),
            (Some("hd"), None, Some(7))
        );
        let out: Value = serde_json::from_slice(&write_response(7, &["AA".into()])).unwrap();
        assert_eq!(out["data"][0]["b64_json"], "AA");
        assert_eq!(out["created"], 7);
    }
}
