//! OpenAI's `/v1/images/generations` on Bedrock through `InvokeModel`, in each model family's
//! own body: Amazon Titan Image Generator and Nova Canvas (`TEXT_IMAGE` task, `images` back),
//! Stability's SD3 and Stable Image models (`prompt` and `aspect_ratio`, `images` back with a
//! filter reason each) and the legacy Stable Diffusion XL (`text_prompts`, `artifacts` back).

use serde::Deserialize;
use serde_json::{json, Map, Value};
use sluice_translate::images::{
    dimensions, nearest_ratio, ImageRequest, SDXL_SIZES, STABILITY_RATIOS,
};
use sluice_translate::{to_json, TranslateError};

use crate::exchange::ImageApi;

/// Which Bedrock image body a model id takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Images {
    /// `amazon.titan-image-generator-*` and `amazon.nova-canvas-*`: one body shape.
    Titan,
    /// `stability.sd3-*` and `stability.stable-image-*`: one image a call.
    Stability,
    /// `stability.stable-diffusion-xl-*`: `text_prompts`, one image a call.
    Sdxl,
}

impl Images {
    /// The family of a model id (inference-profile prefixes such as `us.` and ARNs allowed);
    /// `None` for a model that does not draw.
    pub fn of(model: &str) -> Option<Self> {
        let bare = model.rsplit('/').next().unwrap_or(model);
        if bare.contains("amazon.titan-image") || bare.contains("amazon.nova-canvas") {
            Some(Self::Titan)
        } else if bare.contains("stability.stable-diffusion-xl") {
            Some(Self::Sdxl)
        } else if bare.contains("stability.sd3") || bare.contains("stability.stable-image") {
            Some(Self::Stability)
        } else {
            None
        }
    }
}

/// The request's size, refused by name when it is neither readable nor `auto`.
fn size(req: &ImageRequest) -> Result<Option<(u32, u32)>, TranslateError> {
    match req.size.as_deref() {
        None | Some("auto") => Ok(None),
        Some(s) => dimensions(s)
            .map(Some)
            .ok_or_else(|| TranslateError::invalid("size", "expected WIDTHxHEIGHT, such as 1024x1024")),
    }
}

/// Stability's models draw one image a call.
fn one_image(req: &ImageRequest) -> Result<(), TranslateError> {
    if req.n > 1 {
        return Err(TranslateError::invalid(
            "n",
            "Stability models on Bedrock draw one image per request",
        ));
    }
    Ok(())
}

/// Titan's and Nova Canvas's `quality`: `premium` for OpenAI's `hd` and `high`, `standard` for
/// `standard`, `medium` and `low` (LiteLLM's mapping); `auto` leaves the model's default.
fn titan_quality(quality: Option<&str>) -> Option<&'static str> {
    match quality? {
        "hd" | "high" | "premium" => Some("premium"),
        "standard" | "medium" | "low" => Some("standard"),
        _ => None,
    }
}

/// The SDXL size with the aspect ratio nearest to the request's (1024×1024 without one).
fn sdxl_size(size: Option<(u32, u32)>) -> (u32, u32) {
    let Some((w, h)) = size else {
        return (1024, 1024);
    };
    let want = f64::from(w) / f64::from(h);
    let ratio = |(a, b): &(u32, u32)| (f64::from(*a) / f64::from(*b) - want).abs();
    SDXL_SIZES
        .iter()
        .min_by(|a, b| ratio(a).total_cmp(&ratio(b)))
        .copied()
        .unwrap_or((1024, 1024))
}

#[derive(Deserialize)]
struct RawAnswer {
    /// Titan, Nova Canvas, SD3 and Stable Image (a filtered image may be `null`).
    #[serde(default)]
    images: Vec<Option<String>>,
    /// SD3 and Stable Image: `null` for each image drawn, else why it was filtered.
    #[serde(default)]
    finish_reasons: Vec<Option<String>>,
    /// Titan: why it drew nothing.
    #[serde(default)]
    error: Option<String>,
    /// SDXL.
    #[serde(default)]
    artifacts: Vec<RawArtifact>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawArtifact {
    #[serde(default)]
    base64: Option<String>,
    #[serde(default)]
    finish_reason: Option<String>,
}

impl ImageApi for Images {
    fn write(&self, _model: &str, req: &ImageRequest) -> Result<Vec<u8>, TranslateError> {
        let size = size(req)?;
        let body = match self {
            Self::Titan => {
                let mut text = Map::new();
                text.insert("text".into(), req.prompt.as_str().into());
                if let Some(neg) = &req.negative_prompt {
                    text.insert("negativeText".into(), neg.as_str().into());
                }
                let mut config = Map::new();
                config.insert("numberOfImages".into(), req.n.into());
                if let Some((w, h)) = size {
                    config.insert("width".into(), w.into());
                    config.insert("height".into(), h.into());
                }
                if let Some(q) = titan_quality(req.quality.as_deref()) {
                    config.insert("quality".into(), q.into());
                }
                if let Some(seed) = req.seed {
                    config.insert("seed".into(), seed.into());
                }
                json!({
                    "taskType": "TEXT_IMAGE",
                    "textToImageParams": text,
                    "imageGenerationConfig": config,
                })
            }
            Self::Stability => {
                one_image(req)?;
                let mut body = Map::new();
                body.insert("prompt".into(), req.prompt.as_str().into());
                if let Some((w, h)) = size {
                    body.insert(
                        "aspect_ratio".into(),
                        nearest_ratio(STABILITY_RATIOS, w, h).into(),
                    );
                }
                if let Some(neg) = &req.negative_prompt {
                    body.insert("negative_prompt".into(), neg.as_str().into());
                }
                if let Some(seed) = req.seed {
                    body.insert("seed".into(), seed.into());
                }
                Value::Object(body)
            }
            Self::Sdxl => {
                one_image(req)?;
                let mut prompts = vec![json!({"text": req.prompt, "weight": 1.0})];
                if let Some(neg) = &req.negative_prompt {
                    prompts.push(json!({"text": neg, "weight": -1.0}));
                }
                let (w, h) = sdxl_size(size);
                let mut body = json!({"text_prompts": prompts, "width": w, "height": h});
                if let Some(seed) = req.seed {
                    body["seed"] = seed.into();
                }
                body
            }
        };
        Ok(to_json(&body))
    }

    fn read(&self, body: &[u8]) -> Result<Vec<String>, TranslateError> {
        let raw: RawAnswer = serde_json::from_slice(body).map_err(TranslateError::bad_answer)?;
        let (images, filtered): (Vec<String>, Vec<String>) = match self {
            Self::Titan => (
                raw.images.into_iter().flatten().collect(),
                raw.error.into_iter().collect(),
            ),
            Self::Stability => {
                let mut reasons = raw.finish_reasons.into_iter();
                let mut filtered = Vec::new();
                let images = raw
                    .images
                    .into_iter()
                    .filter_map(|image| match reasons.next().flatten() {
                        Some(why) => {
                            filtered.push(why);
                            None
                        }
                        None => image,
                    })
                    .collect();
                (images, filtered)
            }
            Self::Sdxl => {
                let mut filtered = Vec::new();
                let images = raw
                    .artifacts
                    .into_iter()
                    .filter_map(|a| match a.finish_reason.as_deref() {
                        None | Some("SUCCESS") => a.base64,
                        Some(why) => {
                            filtered.push(why.to_owned());
                            None
                        }
                    })
                    .collect();
                (images, filtered)
            }
        };
        if images.is_empty() {
            let why = if filtered.is_empty() {
                "the answer held no image".to_owned()
            } else {
                filtered.join("; ")
            };
            return Err(TranslateError::BadAnswer(format!(
                "Bedrock returned no image: {why}"
            )));
        }
        Ok(images)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_translate::images::parse_request;

    fn body(api: Images, req: &str) -> Value {
        let req = parse_request(req.as_bytes()).unwrap();
        serde_json::from_slice(&api.write("m", &req).unwrap()).unwrap()
    }

    #[test]
    fn families_by_model_id() {
        for (id, want) in [
            ("amazon.titan-image-generator-v1", Some(Images::Titan)),
            ("amazon.titan-image-generator-v2:0", Some(Images::Titan)),
            ("us.amazon.nova-canvas-v1:0", Some(Images::Titan)),
            ("stability.sd3-large-v1:0", Some(Images::Stability)),
            ("stability.sd3-5-large-v1:0", Some(Images::Stability)),
            ("stability.stable-image-core-v1:1", Some(Images::Stability)),
            (
                "arn:aws:bedrock:us-west-2:1:inference-profile/us.stability.stable-image-ultra-v1:0",
                Some(Images::Stability),
            ),
            ("stability.stable-diffusion-xl-v1", Some(Images::Sdxl)),
            ("amazon.titan-embed-text-v2:0", None),
            ("anthropic.claude-3-5-sonnet-20240620-v1:0", None),
        ] {
            assert_eq!(Images::of(id), want, "{id}");
        }
    }

    #[test]
    fn titan_body() {
        let b = body(
            Images::Titan,
            r#"{"model":"t","prompt":"a fox","n":3,"size":"1024x768","quality":"hd","negative_prompt":"dogs","seed":5}"#,
        );
        assert_eq!(
            b,
            json!({
                "taskType": "TEXT_IMAGE",
                "textToImageParams": {"text": "a fox", "negativeText": "dogs"},
                "imageGenerationConfig": {
                    "numberOfImages": 3, "width": 1024, "height": 768,
                    "quality": "premium", "seed": 5,
                },
            })
        );
        let b = body(
            Images::Titan,
            r#"{"model":"t","prompt":"a fox","size":"auto","quality":"low"}"#,
        );
        assert_eq!(
            b["imageGenerationConfig"],
            json!({"numberOfImages": 1, "quality": "standard"})
        );
        let bad = parse_request(br#"{"model":"t","prompt":"p","size":"big"}"#).unwrap();
        assert!(matches!(
            Images::Titan.write("m", &bad),
            Err(TranslateError::Invalid { param: "size", .. })
        ));
    }

    #[test]
    fn stability_bodies() {
        let b = body(
            Images::Stability,
            r#"{"model":"s","prompt":"a fox","size":"1792x1024","quality":"hd","negative_prompt":"dogs"}"#,
        );
        assert_eq!(
            b,
            json!({"prompt": "a fox", "aspect_ratio": "16:9", "negative_prompt": "dogs"})
        );
        assert_eq!(
            body(Images::Stability, r#"{"model":"s","prompt":"p"}"#),
            json!({"prompt": "p"})
        );
        let two = parse_request(br#"{"model":"s","prompt":"p","n":2}"#).unwrap();
        for api in [Images::Stability, Images::Sdxl] {
            assert!(matches!(
                api.write("m", &two),
                Err(TranslateError::Invalid { param: "n", .. })
            ));
        }
        let b = body(
            Images::Sdxl,
            r#"{"model":"s","prompt":"a fox","size":"1792x1024","negative_prompt":"dogs","seed":9}"#,
        );
        assert_eq!(
            b,
            json!({
                "text_prompts": [{"text": "a fox", "weight": 1.0}, {"text": "dogs", "weight": -1.0}],
                "width": 1344, "height": 768, "seed": 9,
            })
        );
        assert_eq!(
            body(Images::Sdxl, r#"{"model":"s","prompt":"p"}"#)["width"],
            1024
        );
    }

    #[test]
    fn answers_and_filtered_images() {
        assert_eq!(
            Images::Titan
                .read(br#"{"images":["QQ==","Qg=="],"error":null}"#)
                .unwrap(),
            vec!["QQ==".to_owned(), "Qg==".to_owned()]
        );
        let err = Images::Titan
            .read(br#"{"images":[],"error":"blocked"}"#)
            .unwrap_err();
        assert!(err.to_string().contains("blocked"), "{err}");
        assert_eq!(
            Images::Stability
                .read(br#"{"seeds":[1],"finish_reasons":[null],"images":["QQ=="]}"#)
                .unwrap(),
            vec!["QQ==".to_owned()]
        );
        let err = Images::Stability
            .read(br#"{"seeds":[1],"finish_reasons":["Filter reason: prompt"],"images":[null]}"#)
            .unwrap_err();
        assert!(err.to_string().contains("Filter reason: prompt"), "{err}");
        assert_eq!(
            Images::Sdxl
                .read(br#"{"result":"success","artifacts":[{"seed":1,"base64":"QQ==","finishReason":"SUCCESS"},{"seed":2,"base64":"Qg==","finishReason":"CONTENT_FILTERED"}]}"#)
                .unwrap(),
            vec!["QQ==".to_owned()]
        );
        assert!(Images::Sdxl.read(br#"{"result":"success","artifacts":[]}"#).is_err());
        assert!(Images::Titan.read(b"not json").is_err());
    }
}
