//! The units a request states for itself, for endpoints priced per unit: the characters of
//! text to speak, the size of each image asked for. Read only for those endpoints; the
//! token-priced ones never come here.

use serde::Deserialize;

use sluice_core::endpoint::{BodyFormat, Endpoint};
use sluice_core::usage::RequestUnits;

use crate::multipart;

#[derive(Deserialize)]
struct Stated<'a> {
    #[serde(default, borrow)]
    input: Option<std::borrow::Cow<'a, str>>,
    #[serde(default, borrow)]
    size: Option<&'a str>,
}

/// What `body` (a request to `endpoint`, already validated by its envelope) states about its
/// units. `boundary` is the form's, for multipart bodies.
pub fn request_units(endpoint: Endpoint, body: &[u8], boundary: Option<&str>) -> RequestUnits {
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
    let (input, size) = match (endpoint.body_format(), boundary) {
        (BodyFormat::Json, _) => match serde_json::from_slice::<Stated<'_>>(body) {
            Ok(s) => (
                s.input.map(|i| i.chars().count() as u64),
                s.size.map(pixels),
            ),
            Err(_) => (None, None),
        },
        (BodyFormat::Multipart, Some(b)) => {
            let size = multipart::head(body, b).ok().and_then(|parts| {
                parts
                    .iter()
                    .find(|p| p.name == "size" && p.filename.is_none())
                    .and_then(|p| multipart::text(body, p))
                    .map(pixels)
            });
            (None, size)
        }
        (BodyFormat::Multipart, None) => (None, None),
    };
    // DALL·E's default size when none is stated; `auto` (gpt-image-1) is priced by tokens.
    let default_size = matches!(
        endpoint,
        Endpoint::ImageGenerations | Endpoint::ImageEdits | Endpoint::ImageVariations
    )
    .then_some(1024 * 1024);
    RequestUnits {
        characters: input.unwrap_or(0),
        pixels_per_image: size.or(default_size).unwrap_or(0),
    }
}

/// Pixels of an OpenAI `size` (`"1024x1792"`); 0 for `auto` or anything unreadable.
fn pixels(size: &str) -> u64 {
    size.split_once('x')
        .and_then(|(w, h)| Some(w.trim().parse::<u64>().ok()? * h.trim().parse::<u64>().ok()?))
        .unwrap_or(0)
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
            request_units(Endpoint::ImageGenerations, img, None).pixels_per_image,
            1024 * 1792
        );
        let unsized_ = br#"{"model":"dall-e-2","prompt":"p"}"#;
        assert_eq!(
            request_units(Endpoint::ImageGenerations, unsized_, None).pixels_per_image,
            1024 * 1024
        );
        let auto = br#"{"model":"gpt-image-1","prompt":"p","size":"auto"}"#;
        assert_eq!(
            request_units(Endpoint::ImageGenerations, auto, None).pixels_per_image,
            0
        );
        let form = b"--b\r\nContent-Disposition: form-data; name=\"size\"\r\n\r\n256x256\r\n--b--";
        assert_eq!(
            request_units(Endpoint::ImageEdits, form, Some("b")).pixels_per_image,
            256 * 256
        );
        let chat = br#"{"model":"m","input":"not counted"}"#;
        assert_eq!(
            request_units(Endpoint::Responses, chat, None),
            RequestUnits::default()
        );
    }
}
