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

/// The most parts a form may have. OpenAI's largest forms (an image edit with its 16 images
/// and a dozen fields, a transcription with repeated `timestamp_granularities[]`) have a few
/// dozen; a form of 200,000 one-byte fields would cost a worker a quarter of a second to read
/// and is refused at its 1,001st part instead.
pub const MAX_PARTS: usize = 1000;

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
    let mut scanner = Scanner::new(boundary);
    match scanner.advance(body)? {
        Progress::Done => Ok(scanner.parts(body)),
        Progress::NeedMore | Progress::InFile => Err(scanner.unfinished()),
    }
}

/// The complete parts at the start of a form that may go on beyond `head` (an upload whose
/// file is still arriving): what a request's fields say before its file is read.
pub fn head<'a>(head: &'a [u8], boundary: &str) -> Result<Vec<Part<'a>>, ApiError> {
    let mut scanner = Scanner::new(boundary);
    scanner.advance(head)?;
    Ok(scanner.parts(head))
}

/// How far a [`Scanner`] got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// The form goes on beyond the bytes seen, in a field or a part's headers.
    NeedMore,
    /// The bytes seen end inside a file part (the fields before it are read:
    /// [`Scanner::has_field`]).
    InFile,
    /// The closing boundary was read.
    Done,
}

/// A part found by the scanner, as byte ranges of the body.
#[derive(Debug, Clone)]
struct Found {
    name: Range<usize>,
    filename: Option<Range<usize>>,
    content_type: Option<Range<usize>>,
    value: Range<usize>,
}

/// A form read as it arrives: [`Scanner::advance`] is given the body so far, a longer prefix
/// each time, and resumes where it stopped, so a body is scanned once however it is split.
#[derive(Debug)]
pub struct Scanner {
    /// `\r\n--boundary`.
    delimiter: Vec<u8>,
    /// Where the next unread thing starts: the first boundary, a part's headers, a value.
    pos: usize,
    state: State,
    found: Vec<Found>,
}

#[derive(Debug, Clone)]
enum State {
    /// Before the first boundary.
    Start,
    /// Right after a boundary: `--` (the end) or a line break and a part's headers.
    AfterBoundary,
    /// In a part's value, whose delimiter is searched for from `pos`.
    Value(Found),
    Done,
}

impl Scanner {
    /// A scanner for a form with this boundary.
    pub fn new(boundary: &str) -> Self {
        Self {
            delimiter: [b"\r\n--", boundary.as_bytes()].concat(),
            pos: 0,
            state: State::Start,
            found: Vec::new(),
        }
    }

    /// Read on through `body` (the whole body so far: what an earlier call saw, and more).
    pub fn advance(&mut self, body: &[u8]) -> Result<Progress, ApiError> {
        loop {
            match &mut self.state {
                State::Done => return Ok(Progress::Done),
                State::Start => {
                    // The first boundary may start the body without the leading CRLF.
                    let first = &self.delimiter[2..];
                    if body.len() < first.len() && first.starts_with(body) {
                        return Ok(Progress::NeedMore);
                    }
                    if body.starts_with(first) {
                        self.pos = first.len();
                    } else {
                        match memmem::find(&body[self.pos..], &self.delimiter) {
                            Some(at) => self.pos += at + self.delimiter.len(),
                            None => {
                                self.pos = body.len().saturating_sub(self.delimiter.len());
                                return Ok(Progress::NeedMore);
                            }
                        }
                    }
                    self.state = State::AfterBoundary;
                }
                State::AfterBoundary => {
                    let rest = &body[self.pos..];
                    if rest.len() < 2 {
                        return Ok(Progress::NeedMore);
                    }
                    if rest.starts_with(b"--") {
                        self.state = State::Done;
                        continue;
                    }
                    let Some(rest) = rest.strip_prefix(b"\r\n") else {
                        return Err(bad("a boundary is not followed by a line break"));
                    };
                    if self.found.len() >= MAX_PARTS {
                        return Err(ApiError::InvalidParam {
                            param: "body",
                            message: format!(
                                "the multipart/form-data body has more than {MAX_PARTS} parts, \
                                 the most sluice reads"
                            ),
                        });
                    }
                    let at = self.pos + 2;
                    let mut headers = [httparse::EMPTY_HEADER; MAX_PART_HEADERS];
                    let (used, headers) = match httparse::parse_headers(rest, &mut headers) {
                        Ok(httparse::Status::Complete(done)) => done,
                        Ok(httparse::Status::Partial) => return Ok(Progress::NeedMore),
                        Err(e) => return Err(bad(&format!("a part's headers: {e}"))),
                    };
                    let part = found_part(body, headers, at + used)?;
                    self.pos = at + used;
                    self.state = State::Value(part);
                }
                State::Value(part) => {
                    let Some(at) = memmem::find(&body[self.pos..], &self.delimiter) else {
                        // The delimiter may straddle what has arrived and what has not.
                        let keep = self.delimiter.len() - 1;
                        self.pos = body.len().saturating_sub(keep).max(part.value.start);
                        return Ok(if part.filename.is_some() {
                            Progress::InFile
                        } else {
                            Progress::NeedMore
                        });
                    };
                    let end = self.pos + at;
                    part.value.end = end;
                    self.found.push(part.clone());
                    self.pos = end + self.delimiter.len();
                    self.state = State::AfterBoundary;
                }
            }
        }
    }

    /// The complete parts found so far, in order.
    pub fn parts<'a>(&self, body: &'a [u8]) -> Vec<Part<'a>> {
        let text = |r: &Range<usize>| std::str::from_utf8(&body[r.clone()]).unwrap_or("");
        self.found
            .iter()
            .map(|f| Part {
                name: text(&f.name),
                filename: f.filename.as_ref().map(text),
                content_type: f.content_type.as_ref().map(text),
                value: f.value.clone(),
            })
            .collect()
    }

    /// Whether a complete field (not a file) called `name` was read.
    pub fn has_field(&self, body: &[u8], name: &str) -> bool {
        self.found
            .iter()
            .any(|f| f.filename.is_none() && body.get(f.name.clone()) == Some(name.as_bytes()))
    }

    /// Why a body that ended before the scanner was done is not a form.
    fn unfinished(&self) -> ApiError {
        match self.state {
            State::Start => bad("the boundary never appears"),
            State::AfterBoundary => bad("a part's headers never end"),
            State::Value(_) | State::Done => bad("the closing boundary is missing"),
        }
    }
}

/// A malformed form, as the 400 that names what is wrong.
fn bad(why: &str) -> ApiError {
    ApiError::InvalidParam {
        param: "body",
        message: format!("malformed multipart/form-data body: {why}"),
    }
}

/// A part from its parsed headers; its value starts at `value_start`.
fn found_part(
    body: &[u8],
    headers: &[httparse::Header<'_>],
    value_start: usize,
) -> Result<Found, ApiError> {
    // Ranges of the body from slices of it (httparse's header values borrow the body).
    let base = body.as_ptr() as usize;
    let range = |s: &str| {
        let start = s.as_ptr() as usize - base;
        start..start + s.len()
    };
    let mut name = None;
    let mut part = Found {
        name: 0..0,
        filename: None,
        content_type: None,
        value: value_start..value_start,
    };
    for h in headers {
        let value = std::str::from_utf8(h.value).map_err(|_| bad("a header is not UTF-8"))?;
        if h.name.eq_ignore_ascii_case("content-disposition") {
            name = disposition_param(value, "name").filter(|n| !n.is_empty());
            part.filename = disposition_param(value, "filename").map(range);
        } else if h.name.eq_ignore_ascii_case("content-type") {
            part.content_type = Some(range(value));
        }
    }
    part.name = range(name.ok_or_else(|| bad("a part has no name"))?);
    Ok(part)
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

/// The field `name` among `parts` (a text field, not a file).
pub fn field<'p, 'a>(parts: &'p [Part<'a>], name: &str) -> Option<&'p Part<'a>> {
    parts
        .iter()
        .find(|p| p.name == name && p.filename.is_none())
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

    #[test]
    fn a_form_read_as_it_arrives_is_read_once_and_the_same() {
        let whole = parts(FORM, "XyZ").unwrap();
        // Every way of cutting the body in two, and one byte at a time.
        for cut in 0..FORM.len() {
            let mut s = Scanner::new("XyZ");
            let first = s.advance(&FORM[..cut]).unwrap();
            // Done once the closing `--` is in (the final line break is not needed).
            assert_eq!(
                first == Progress::Done,
                cut >= FORM.len() - 2,
                "cut at {cut}"
            );
            assert_eq!(s.advance(FORM).unwrap(), Progress::Done, "cut at {cut}");
            assert_eq!(s.parts(FORM), whole, "cut at {cut}");
        }
        let mut s = Scanner::new("XyZ");
        for end in 1..=FORM.len() {
            s.advance(&FORM[..end]).unwrap();
        }
        assert_eq!(s.parts(FORM), whole);
    }

    #[test]
    fn the_head_of_an_upload_ends_in_its_file_with_the_fields_before_it() {
        // `model` first (the openai SDK's order): the file's first bytes are enough.
        let at = FORM.windows(4).position(|w| w == b"RIFF").unwrap() + 2;
        let mut s = Scanner::new("XyZ");
        assert_eq!(s.advance(&FORM[..at]).unwrap(), Progress::InFile);
        assert!(s.has_field(FORM, "model"));
        let head = head(&FORM[..at], "XyZ").unwrap();
        assert_eq!(head.len(), 1);
        assert_eq!(text(FORM, &head[0]), Some("whisper-1"));
        // The file first: nothing is known until the model arrives after it.
        let late = b"--B\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a\"\r\n\r\n\
0123456789\r\n--B\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nm\r\n--B--\r\n";
        let mut s = Scanner::new("B");
        assert_eq!(s.advance(&late[..80]).unwrap(), Progress::InFile);
        assert!(!s.has_field(late, "model"));
        assert_eq!(s.advance(late).unwrap(), Progress::Done);
        assert!(s.has_field(late, "model") && !s.has_field(late, "file"));
        assert_eq!(s.parts(late)[1].name, "model");
    }

    fn fields(n: usize) -> Vec<u8> {
        let mut body = Vec::new();
        for _ in 0..n {
            body.extend_from_slice(
                b"--B\r\nContent-Disposition: form-data; name=\"f\"\r\n\r\nx\r\n",
            );
        }
        body.extend_from_slice(b"--B--\r\n");
        body
    }

    #[test]
    fn a_form_past_the_part_limit_is_refused_at_its_first_part_too_many() {
        assert_eq!(parts(&fields(MAX_PARTS), "B").unwrap().len(), MAX_PARTS);
        let body = fields(200_000);
        let refused = parts(&body, "B").unwrap_err();
        assert_eq!(refused.status(), http::StatusCode::BAD_REQUEST);
        assert!(
            refused.to_string().contains("more than 1000 parts"),
            "{refused}"
        );
        // Read as it arrives, the scanner stops there: the rest is never looked at.
        let mut s = Scanner::new("B");
        let one = fields(1).len() - b"--B--\r\n".len();
        assert!(s.advance(&body[..one * MAX_PARTS + 10]).is_err());
        assert!(head(&body, "B").is_err());
    }
}
