//! `multipart/form-data` bodies (file uploads: audio to transcribe, images to edit), read in
//! place: each part is a name, an optional file name and a byte range of the body, so sluice
//! finds `model` and splices the upstream's model into it without copying the file.
//!
//! Part headers are parsed by `httparse` (hyper's parser); boundaries are found with `memchr`.

use std::ops::Range;

use memchr::memmem;

use sluice_core::error::ApiError;

/// The most part headers one part may have (a browser sends two or three).
const MAX_PART_HEADERS: usize = 16;

/// One part of a form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part<'a> {
    /// The form field's name (`Content-Disposition: form-data; name="…"`).
    pub name: &'a str,
    /// The uploaded file's name, for file parts.
    pub filename: Option<&'a str>,
    /// The part's `Content-Type`, when given.
    pub content_type: Option<&'a str>,
    /// Where the part's value lies in the body.
    pub value: Range<usize>,
}

/// The boundary of a `multipart/form-data` content type, quoted or not.
pub fn boundary(content_type: &str) -> Option<&str> {
    let (kind, params) = content_type.split_once(';')?;
    if !kind.trim().eq_ignore_ascii_case("multipart/form-data") {
        return None;
    }
    params.split(';').find_map(|p| {
        let (k, v) = p.split_once('=')?;
        if !k.trim().eq_ignore_ascii_case("boundary") {
            return None;
        }
        let v = v.trim();
        let v = v
            .strip_prefix('"')
            .and_then(|v| v.strip_suffix('"'))
            .unwrap_or(v);
        (!v.is_empty() && v.len() <= 70).then_some(v)
    })
}

/// Every part of `body`, in order. A body that is not a well-formed form is a 400 naming
/// what is wrong with it.
pub fn parts<'a>(body: &'a [u8], boundary: &str) -> Result<Vec<Part<'a>>, ApiError> {
    let bad = |why: &str| ApiError::InvalidParam {
        param: "body",
        message: format!("malformed multipart/form-data body: {why}"),
    };
    let delimiter = [b"\r\n--", boundary.as_bytes()].concat();
    let finder = memmem::Finder::new(&delimiter);
    // The first boundary may start the body without the leading CRLF.
    let first = &delimiter[2..];
    let mut pos = if body.starts_with(first) {
        first.len()
    } else {
        let at = finder
            .find(body)
            .ok_or_else(|| bad("the boundary never appears"))?;
        at + delimiter.len()
    };
    let mut out = Vec::new();
    loop {
        let rest = &body[pos..];
        if rest.starts_with(b"--") {
            return Ok(out);
        }
        let rest = rest
            .strip_prefix(b"\r\n")
            .ok_or_else(|| bad("a boundary is not followed by a line break"))?;
        pos = body.len() - rest.len();
        let mut headers = [httparse::EMPTY_HEADER; MAX_PART_HEADERS];
        let (used, headers) = match httparse::parse_headers(rest, &mut headers) {
            Ok(httparse::Status::Complete((used, headers))) => (used, headers),
            Ok(httparse::Status::Partial) => return Err(bad("a part's headers never end")),
            Err(e) => return Err(bad(&format!("a part's headers: {e}"))),
        };
        let start = pos + used;
        let end = start
            + finder
                .find(&body[start..])
                .ok_or_else(|| bad("the closing boundary is missing"))?;
        let mut part = Part {
            name: "",
            filename: None,
            content_type: None,
            value: start..end,
        };
        for h in headers.iter() {
            let value = std::str::from_utf8(h.value).map_err(|_| bad("a header is not UTF-8"))?;
            if h.name.eq_ignore_ascii_case("content-disposition") {
                part.name = disposition_param(value, "name").unwrap_or("");
                part.filename = disposition_param(value, "filename");
            } else if h.name.eq_ignore_ascii_case("content-type") {
                part.content_type = Some(value);
            }
        }
        if part.name.is_empty() {
            return Err(bad("a part has no name"));
        }
        out.push(part);
        pos = end + delimiter.len();
    }
}

/// A parameter of a `Content-Disposition` value (`form-data; name="file"; filename="a.wav"`).
fn disposition_param<'a>(value: &'a str, key: &str) -> Option<&'a str> {
    let mut rest = value.split_once(';')?.1;
    loop {
        rest = rest.trim_start();
        let (k, after) = rest.split_once('=')?;
        let (v, tail) = match after.strip_prefix('"') {
            Some(quoted) => {
                let close = quoted.find('"')?;
                (&quoted[..close], &quoted[close + 1..])
            }
            None => match after.find(';') {
                Some(i) => (after[..i].trim_end(), &after[i..]),
                None => (after.trim_end(), ""),
            },
        };
        if k.trim().eq_ignore_ascii_case(key) {
            return Some(v);
        }
        rest = tail.trim_start().strip_prefix(';')?;
    }
}

/// The text of a part that is not a file.
pub fn text<'a>(body: &'a [u8], part: &Part<'_>) -> Option<&'a str> {
    std::str::from_utf8(body.get(part.value.clone())?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const FORM: &[u8] =
        b"--XyZ\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nwhisper-1\r\n\
--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a b.wav\"\r\n\
Content-Type: audio/wav\r\n\r\nRIFF\r\n--Xy\x00\xff\r\n--XyZ\r\n\
Content-Disposition: form-data; name=response_format\r\n\r\nverbose_json\r\n--XyZ--\r\n";

    #[test]
    fn finds_every_part_with_its_range() {
        let parts = parts(FORM, "XyZ").unwrap();
        let names: Vec<_> = parts.iter().map(|p| p.name).collect();
        assert_eq!(names, ["model", "file", "response_format"]);
        assert_eq!(text(FORM, &parts[0]), Some("whisper-1"));
        assert_eq!(parts[1].filename, Some("a b.wav"));
        assert_eq!(parts[1].content_type, Some("audio/wav"));
        // A file may hold anything, a near-boundary and invalid UTF-8 included.
        assert_eq!(&FORM[parts[1].value.clone()], b"RIFF\r\n--Xy\x00\xff");
        assert_eq!(text(FORM, &parts[2]), Some("verbose_json"));
    }

    #[test]
    fn boundaries_from_content_types() {
        assert_eq!(boundary("multipart/form-data; boundary=abc"), Some("abc"));
        assert_eq!(
            boundary("Multipart/Form-Data; charset=utf-8; boundary=\"a b\""),
            Some("a b")
        );
        assert_eq!(boundary("application/json"), None);
        assert_eq!(boundary("multipart/form-data"), None);
        assert_eq!(boundary("multipart/form-data; boundary="), None);
    }

    #[test]
    fn malformed_forms_are_refused() {
        for body in [
            &b"no boundary here"[..],
            b"--XyZ\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nunterminated",
            b"--XyZ\r\nContent-Disposition: form-data\r\n\r\nx\r\n--XyZ--",
            b"--XyZ\r\nbroken header line\r\n\r\nx\r\n--XyZ--",
        ] {
            assert!(
                parts(body, "XyZ").is_err(),
                "{:?}",
                String::from_utf8_lossy(body)
            );
        }
        assert_eq!(parts(b"--XyZ--\r\n", "XyZ").unwrap(), vec![]);
    }
}
