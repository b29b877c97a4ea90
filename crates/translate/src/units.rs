//! The units a request states for itself, for endpoints priced per unit: the characters of
//! text to speak, the size and quality of each image asked for. Read only for those
//! endpoints; the token-priced ones never come here.

use serde::Deserialize;

use sluice_core::endpoint::{BodyFormat, Endpoint};
use sluice_core::price::ImageQuality;
use sluice_core::usage::RequestUnits;

use crate::images::dimensions;
use crate::multipart::{self, Part};

#[derive(Deserialize)]
struct Stated<'a> {
    #[serde(default, borrow)]
    input: Option<std::borrow::Cow<'a, str>>,
    #[serde(default, borrow)]
    size: Option<&'a str>,
    #[serde(default, borrow)]
    quality: Option<&'a str>,
}

/// What `body` (a request to `endpoint`, already validated by its envelope) states about its
/// units. `form` is its parts, for multipart bodies (`multipart::head`).
pub fn request_units(endpoint: Endpoint, body: &[u8], form: Option<&[Part<'_>]>) -> RequestUnits {
    let priced_by_request = matches!(
        endpoint,
        Endpoint::AudioSpeech
            | Endpoint::ImageGenerations
            | Endpoint::ImageEdits
            | Endpoint::ImageVariations
    );
    if !priced_by_request {
        return RequestUnits::default();
    }
    let (input, size, quality) = match (endpoint.body_format(), form) {
        (BodyFormat::Json, _) => match serde_json::from_slice::<Stated<'_>>(body) {
            Ok(s) => (
                s.input.map(|i| i.chars().count() as u64),
                s.size.map(dimensions),
                s.quality.map(ImageQuality::parse),
            ),
            Err(_) => (None, None, None),
        },
        (BodyFormat::Multipart, Some(parts)) => {
            let field =
                |name: &str| multipart::field(parts, name).and_then(|p| multipart::text(body, p));
            (
                None,
                field("size").map(dimensions),
                field("quality").map(ImageQuality::parse),
            )
        }
        (BodyFormat::Multipart, None) => (None, None, None),
    };
    let images = matches!(
        endpoint,
        Endpoint::ImageGenerations | Endpoint::ImageEdits | Endpoint::ImageVariations
    );
    RequestUnits {
        characters: input.unwrap_or(0),
        // OpenAI's default size when none is stated; `auto` or an unreadable size: none.
        image_size: if images {
            size.unwrap_or(Some((1024, 1024)))
        } else {
            None
        },
        image_quality: quality,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn speech_characters_and_image_sizes() {
        let speech = br#"{"model":"tts-1","input":"h\u00e9llo","voice":"alloy"}"#;
        assert_eq!(
            request_units(Endpoint::AudioSpeech, speech, None).characters,
            5
        );
        let img = br#"{"model":"dall-e-3","prompt":"p","size":"1024x1792"}"#;
        assert_eq!(
            request_units(Endpoint::ImageGenerations, img, None).pixels_per_image(),
            1024 * 1792
        );
        let hd = br#"{"model":"dall-e-3","prompt":"p","size":"1792x1024","quality":"hd"}"#;
        let u = request_units(Endpoint::ImageGenerations, hd, None);
        assert_eq!(
            (u.image_size, u.image_quality),
            (Some((1792, 1024)), Some(ImageQuality::Hd))
        );
        let unsized_ = br#"{"model":"dall-e-2","prompt":"p"}"#;
        assert_eq!(
            request_units(Endpoint::ImageGenerations, unsized_, None).pixels_per_image(),
            1024 * 1024
        );
        let auto = br#"{"model":"gpt-image-1","prompt":"p","size":"auto"}"#;
        assert_eq!(
            request_units(Endpoint::ImageGenerations, auto, None).pixels_per_image(),
            0
        );
        let form = b"--b\r\nContent-Disposition: form-data; name=\"size\"\r\n\r\n256x256\r\n--b\r\nContent-Disposition: form-data; name=\"quality\"\r\n\r\nhigh\r\n--b--";
        let parts = multipart::parts(form, "b").unwrap();
        let u = request_units(Endpoint::ImageEdits, form, Some(&parts));
        assert_eq!(
            (u.pixels_per_image(), u.image_quality),
            (256 * 256, Some(ImageQuality::High))
        );
        let chat = br#"{"model":"m","input":"not counted"}"#;
        assert_eq!(
            request_units(Endpoint::Responses, chat, None),
            RequestUnits::default()
        );
    }
}
