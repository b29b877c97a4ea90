//! OpenAI's `/v1/images/generations` on Imagen (Google AI Studio and Vertex AI): one `:predict`
//! call with the prompt as an instance and `sampleCount` / `aspectRatio` as parameters.

use serde::Deserialize;
use serde_json::json;
use sluice_translate::images::{aspect_ratio, ImageRequest};
use sluice_translate::{to_json, TranslateError};

use crate::exchange::ImageApi;

/// Imagen's `:predict`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Imagen;

#[derive(Deserialize)]
struct RawAnswer {
    #[serde(default)]
    predictions: Vec<RawPrediction>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawPrediction {
    #[serde(default)]
    bytes_base64_encoded: Option<String>,
}

impl ImageApi for Imagen {
    fn write(&self, _model: &str, req: &ImageRequest) -> Result<Vec<u8>, TranslateError> {
        Ok(to_json(&json!({
            "instances": [{ "prompt": req.prompt }],
            "parameters": {
                "sampleCount": req.n,
                "aspectRatio": aspect_ratio(req.size.as_deref()),
            },
        })))
    }

    fn read(&self, body: &[u8]) -> Result<Vec<String>, TranslateError> {
        let raw: RawAnswer = serde_json::from_slice(body).map_err(TranslateError::bad_answer)?;
        // Imagen leaves out the images its safety filters removed.
        let images: Vec<String> = raw
            .predictions
            .into_iter()
            .filter_map(|p| p.bytes_base64_encoded)
            .collect();
        if images.is_empty() {
            return Err(TranslateError::BadAnswer(
                "Imagen returned no image (all were filtered, or the answer was empty)".into(),
            ));
        }
        Ok(images)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;
    use sluice_translate::images::parse_request;

    #[test]
    fn imagen_both_ways() {
        let req = parse_request(br#"{"model":"i","prompt":"a fox","n":2,"size":"1024x1792"}"#)
            .unwrap();
        let body: Value = serde_json::from_slice(&Imagen.write("imagen-3", &req).unwrap()).unwrap();
        assert_eq!(body["instances"][0]["prompt"], "a fox");
        assert_eq!(body["parameters"]["sampleCount"], 2);
        assert_eq!(body["parameters"]["aspectRatio"], "9:16");
        let got = Imagen
            .read(br#"{"predictions":[{"bytesBase64Encoded":"QQ==","mimeType":"image/png"},{"raiFilteredReason":"x"}]}"#)
            .unwrap();
        assert_eq!(got, vec!["QQ==".to_owned()]);
        assert!(Imagen.read(br#"{"predictions":[]}"#).is_err());
    }
}
