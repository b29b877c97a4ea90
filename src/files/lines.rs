//! A batch input file's lines, bound to the model the caller was admitted for.
//!
//! A batch runs every line of its input file on the account of the deployment that holds the
//! file, so an access rule that sees only the group named in the upload's form would let a key
//! allowed one cheap group run any model on that account. As LiteLLM's managed files do, each
//! line's `body.model` is rewritten to the deployment's own upstream model (the name
//! `DeploymentTarget` splices into the requests it sends, [`DeploymentTarget::batch_model`]);
//! for a virtual key a line may name only that group or that upstream model, and only an
//! endpoint batches serve ([`BATCH_URLS`]). The master key and an open gateway may name any
//! model; their lines that name the group are still rewritten.
//!
//! The file is read as a stream, one line at a time ([`Lines`]): the part of it in the
//! upload's head, then the rest as it arrives ([`Form::send`]), each line at most [`MAX_LINE`]
//! bytes. What follows the file in the form is held back until the body ends and checked (no
//! second file, no second `purpose`), so an upstream never receives a complete request before
//! every line passed; a refused line breaks the upstream request off (its body ends in an
//! error) and the client gets a 400 naming the line. A rewritten file changes length, so its
//! upload is sent chunked; any other streamed upload passes through [`Lines`] unread (only the
//! end of its file is looked for) and keeps its `Content-Length`.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::ops::Range;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{ready, Context, Poll};

use bytes::{Bytes, BytesMut};
use http_body::{Body, Frame, SizeHint};
use serde::Deserialize;
use serde_json::value::RawValue;

use sluice_core::error::ApiError;
use sluice_net::{SegmentsBody, Upload, UploadError};
use sluice_providers::DeploymentTarget;
use sluice_translate::multipart;

/// The endpoints a batch line may call (OpenAI's batch endpoints that sluice's deployments
/// serve).
pub(crate) const BATCH_URLS: [&str; 4] = [
    "/v1/chat/completions",
    "/v1/embeddings",
    "/v1/completions",
    "/v1/responses",
];

/// The longest line of a batch file sluice reads (one request with its images inlined fits):
/// the one line held in memory per upload.
pub(crate) const MAX_LINE: usize = 16 * 1024 * 1024;

/// The most form bytes after a batch file that are held back and checked (the closing
/// boundary, a few small fields).
const MAX_TRAILER: usize = 64 * 1024;

/// The longest model name or URL quoted back in an error.
const QUOTED: usize = 256;

/// Why a batch upload is refused: its line (1-based) and what is wrong with it, or its form.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum LineError {
    /// The line is not a JSON object with the fields a batch line has.
    #[error("line {line}: not a batch request line ({why})")]
    NotJson {
        /// The line.
        line: usize,
        /// serde_json's reason.
        why: String,
    },
    /// The line has no `body.model` (or it is not a string).
    #[error("line {line}: body.model is missing or not a string")]
    NoModel {
        /// The line.
        line: usize,
    },
    /// The line names a model other than the group the key was admitted for.
    #[error("line {line}: body.model {model:?} is not the model group {group:?}")]
    OtherModel {
        /// The line.
        line: usize,
        /// What it names (cut to [`QUOTED`] characters).
        model: String,
        /// The group.
        group: String,
    },
    /// The line's `url` is missing or not an endpoint batches serve.
    #[error("line {line}: url {url:?} is not one of the batch endpoints ({})", BATCH_URLS.join(", "))]
    Url {
        /// The line.
        line: usize,
        /// What it names (cut to [`QUOTED`] characters).
        url: String,
    },
    /// The line has no `url` (or it is not a string).
    #[error("line {line}: url is missing or not a string")]
    NoUrl {
        /// The line.
        line: usize,
    },
    /// The line is longer than [`MAX_LINE`].
    #[error("line {line}: longer than {} bytes", MAX_LINE)]
    TooLong {
        /// The line.
        line: usize,
    },
    /// The deployment takes its model from each request (a wildcard), so lines cannot be bound
    /// to one model.
    #[error("the model group {group:?} has no single model to bind batch lines to")]
    NoSingleModel {
        /// The group.
        group: String,
    },
    /// The form around the file is not one sluice can vouch for.
    #[error("a batch upload's form has one file part and one `purpose` ({why})")]
    Form {
        /// What is wrong.
        why: &'static str,
    },
}

impl From<LineError> for ApiError {
    fn from(e: LineError) -> Self {
        Self::InvalidParam {
            param: "file",
            message: e.to_string(),
        }
    }
}

/// What a batch file's lines are checked against and rewritten to.
#[derive(Debug, Clone)]
pub(crate) struct Rule {
    /// The model group the upload was admitted for.
    group: String,
    /// The deployment's upstream model.
    model: String,
    /// The same, encoded as a JSON string: what is spliced into a line.
    model_json: Bytes,
    /// A virtual key: lines may name only the group or its model, and only [`BATCH_URLS`].
    strict: bool,
}

impl Rule {
    /// The rule for a batch file uploaded to `target`; `strict` for a virtual key. `None`:
    /// nothing to rewrite (a wildcard deployment, for the master key or an open gateway).
    pub(crate) fn of(target: &DeploymentTarget, strict: bool) -> Result<Option<Self>, LineError> {
        let group = target.info.model_name.to_string();
        let Some(model_json) = target.batch_model() else {
            return match strict {
                true => Err(LineError::NoSingleModel { group }),
                false => Ok(None),
            };
        };
        let model = serde_json::from_slice(&model_json).map_err(|_| LineError::NoSingleModel {
            group: group.clone(),
        })?;
        Ok(Some(Self {
            group,
            model,
            model_json,
            strict,
        }))
    }

    /// One line (its line break included) checked: `Some` with the line rewritten, `None` when
    /// it goes as it is.
    fn line(&self, n: usize, line: &[u8]) -> Result<Option<Bytes>, LineError> {
        if line.iter().all(u8::is_ascii_whitespace) {
            return Ok(None);
        }
        let read = || -> Result<Option<&RawValue>, LineError> {
            let head: LineHead<'_> =
                serde_json::from_slice(line).map_err(|e| LineError::NotJson {
                    line: n,
                    why: e.to_string(),
                })?;
            if self.strict {
                match head.url.as_deref() {
                    Some(url) if BATCH_URLS.contains(&url) => {}
                    Some(url) => {
                        return Err(LineError::Url {
                            line: n,
                            url: url.chars().take(QUOTED).collect(),
                        })
                    }
                    None => return Err(LineError::NoUrl { line: n }),
                }
            }
            let Some(body) = head.body else {
                return Ok(None);
            };
            let body: BodyHead<'_> =
                serde_json::from_str(body.get()).map_err(|e| LineError::NotJson {
                    line: n,
                    why: format!("body: {e}"),
                })?;
            Ok(body.model)
        };
        let model = match read() {
            Ok(m) => m,
            Err(e) if self.strict => return Err(e),
            // The master key's lines go as they are when sluice cannot read them.
            Err(_) => return Ok(None),
        };
        let named = model.and_then(|m| serde_json::from_str::<Cow<'_, str>>(m.get()).ok());
        let (Some(raw), Some(named)) = (model, named) else {
            return match self.strict {
                true => Err(LineError::NoModel { line: n }),
                false => Ok(None),
            };
        };
        if *named == *self.model {
            return Ok(None);
        }
        if *named != *self.group {
            return match self.strict {
                true => Err(LineError::OtherModel {
                    line: n,
                    model: named.chars().take(QUOTED).collect(),
                    group: self.group.clone(),
                }),
                false => Ok(None),
            };
        }
        // The model's bytes in the line: `raw` borrows from it.
        let start = (raw.get().as_ptr() as usize).wrapping_sub(line.as_ptr() as usize);
        let end = start + raw.get().len();
        let (Some(before), Some(after)) = (line.get(..start), line.get(end..)) else {
            return Ok(None);
        };
        Ok(Some(Bytes::from(
            [before, &self.model_json[..], after].concat(),
        )))
    }
}

/// The fields of a batch line sluice reads, borrowed from it (a repeated field is an error).
#[derive(Deserialize)]
struct LineHead<'a> {
    #[serde(borrow, default)]
    url: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    body: Option<&'a RawValue>,
}

/// The field of a line's `body` sluice reads.
#[derive(Deserialize)]
struct BodyHead<'a> {
    #[serde(borrow, default)]
    model: Option<&'a RawValue>,
}

/// A form's file read as it passes, from the start of its content to the end of the body:
/// with a [`Rule`], line by line, each checked and rewritten; without, unread, only its end
/// looked for. Either way what follows the file is held back and checked when the body ends
/// (no second `purpose`; with a rule, no second file).
#[derive(Debug)]
pub(crate) struct Lines {
    rule: Option<Rule>,
    /// `--boundary`: a line that starts with it after a CRLF ends the file.
    dash_boundary: Vec<u8>,
    boundary: String,
    /// The unfinished line (with a rule), or the bytes that may begin the file's end.
    pending: BytesMut,
    /// How far `pending` was searched for a line break.
    scanned: usize,
    /// Lines finished.
    line: usize,
    /// The last byte passed on was the end of a CRLF.
    crlf: bool,
    /// What follows the file, once it ended.
    trailer: Option<BytesMut>,
}

impl Lines {
    /// The file of a form with this boundary, read by `rule` (`None`: unread).
    pub(crate) fn new(rule: Option<Rule>, boundary: &str) -> Self {
        Self {
            rule,
            dash_boundary: [b"--", boundary.as_bytes()].concat(),
            boundary: boundary.to_owned(),
            pending: BytesMut::new(),
            scanned: 0,
            line: 0,
            crlf: false,
            trailer: None,
        }
    }

    /// More of the body: what may be passed on now goes to `out`.
    pub(crate) fn feed(&mut self, data: &[u8], out: &mut VecDeque<Bytes>) -> Result<(), LineError> {
        if let Some(trailer) = self.trailer.as_mut() {
            if trailer.len() + data.len() > MAX_TRAILER {
                return Err(LineError::Form {
                    why: "too much follows the file",
                });
            }
            trailer.extend_from_slice(data);
            return Ok(());
        }
        self.pending.extend_from_slice(data);
        match self.rule.is_some() {
            true => self.lines(out),
            false => self.unread(out),
        }
    }

    /// The body ended: the last line, then what followed the file, checked.
    pub(crate) fn finish(&mut self, out: &mut VecDeque<Bytes>) -> Result<(), LineError> {
        if self.trailer.is_none() && !self.pending.is_empty() {
            let last = self.pending.split().freeze();
            self.scanned = 0;
            match self.rule.is_some() {
                true => self.finished(last, out)?,
                false => self.unread_end(last, out),
            }
        }
        let Some(trailer) = self.trailer.take() else {
            return Ok(());
        };
        let parts = multipart::parts(&trailer, &self.boundary).map_err(|_| LineError::Form {
            why: "what follows the file is not a form",
        })?;
        // A second file matters only when the first was read by line.
        let file = |p: &multipart::Part<'_>| p.filename.is_some() || p.name == "file";
        if self.rule.is_some() && parts.iter().any(file) {
            return Err(LineError::Form {
                why: "a second file",
            });
        }
        if parts.iter().any(|p| p.name == "purpose") {
            return Err(LineError::Form {
                why: "`purpose` after the file",
            });
        }
        out.push_back(trailer.freeze());
        Ok(())
    }

    /// With a rule: every finished line checked and passed on.
    fn lines(&mut self, out: &mut VecDeque<Bytes>) -> Result<(), LineError> {
        while self.trailer.is_none() {
            let Some(at) = memchr::memchr(b'\n', &self.pending[self.scanned..]) else {
                self.scanned = self.pending.len();
                if self.pending.len() > MAX_LINE {
                    return Err(LineError::TooLong {
                        line: self.line + 1,
                    });
                }
                return Ok(());
            };
            let line = self.pending.split_to(self.scanned + at + 1).freeze();
            self.scanned = 0;
            if line.len() > MAX_LINE {
                return Err(LineError::TooLong {
                    line: self.line + 1,
                });
            }
            self.finished(line, out)?;
        }
        // The file ended: the rest is the trailer's.
        let rest = self.pending.split();
        self.feed(&rest, out)
    }

    /// One finished line: the file's end, or a line checked and passed on.
    fn finished(&mut self, line: Bytes, out: &mut VecDeque<Bytes>) -> Result<(), LineError> {
        if self.crlf && line.starts_with(&self.dash_boundary) {
            self.trailer = Some(BytesMut::from(&line[..]));
            return Ok(());
        }
        self.line += 1;
        self.crlf = line.ends_with(b"\r\n");
        let sent = match &self.rule {
            Some(rule) => rule.line(self.line, &line)?.unwrap_or(line),
            None => line,
        };
        out.push_back(sent);
        Ok(())
    }

    /// Without a rule: everything but what may begin `\r\n--boundary` passed on at once.
    fn unread(&mut self, out: &mut VecDeque<Bytes>) -> Result<(), LineError> {
        let delimiter = [b"\r\n", &self.dash_boundary[..]].concat();
        let from = self.scanned.saturating_sub(delimiter.len() - 1);
        match memchr::memmem::find(&self.pending[from..], &delimiter) {
            Some(at) => {
                let file = self.pending.split_to(from + at + 2).freeze();
                out.push_back(file);
                let rest = self.pending.split();
                self.scanned = 0;
                self.trailer = Some(BytesMut::new());
                self.feed(&rest, out)
            }
            None => {
                let keep = (delimiter.len() - 1).min(self.pending.len());
                let pass = self.pending.len() - keep;
                if pass > 0 {
                    out.push_back(self.pending.split_to(pass).freeze());
                }
                self.scanned = self.pending.len();
                Ok(())
            }
        }
    }

    /// Without a rule, at the end: what was held back (a form cut short).
    fn unread_end(&mut self, last: Bytes, out: &mut VecDeque<Bytes>) {
        out.push_back(last);
    }
}

/// The rest of a client's upload with its file read by `lines`: a request body that takes the
/// upload's rest at its first poll (counted against the body limit as it passes, so the
/// upload's own errors stay the client's) and yields what `lines` passes on. A refused line
/// is kept in `refused` and ends the body in an error.
#[derive(Debug)]
struct Relayed {
    rest: SegmentsBody,
    lines: Lines,
    ready: VecDeque<Bytes>,
    ended: bool,
    refused: Arc<OnceLock<LineError>>,
}

/// Why a relayed upload stopped.
#[derive(Debug, thiserror::Error)]
enum RelayError {
    /// The client's upload failed (too large, the connection broke).
    #[error(transparent)]
    Upload(#[from] UploadError),
    /// A line or the form was refused.
    #[error(transparent)]
    Refused(#[from] LineError),
}

impl Relayed {
    fn refuse(&self, e: LineError) -> RelayError {
        let _ = self.refused.set(e.clone());
        RelayError::Refused(e)
    }
}

impl Body for Relayed {
    type Data = Bytes;
    type Error = RelayError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, RelayError>>> {
        loop {
            if let Some(e) = self.refused.get() {
                return Poll::Ready(Some(Err(RelayError::Refused(e.clone()))));
            }
            if let Some(b) = self.ready.pop_front() {
                return Poll::Ready(Some(Ok(Frame::data(b))));
            }
            if self.ended {
                return Poll::Ready(None);
            }
            let this = &mut *self;
            let step = match ready!(Pin::new(&mut this.rest).poll_frame(cx)) {
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => this.lines.feed(&data, &mut this.ready),
                    Err(_) => Ok(()),
                },
                Some(Err(e)) => return Poll::Ready(Some(Err(e.into()))),
                None => {
                    this.ended = true;
                    this.lines.finish(&mut this.ready)
                }
            };
            if let Err(e) = step {
                this.ready.clear();
                return Poll::Ready(Some(Err(this.refuse(e))));
            }
        }
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::new()
    }
}

/// An upload's form as sluice sends it on, decided after admission: the head's segments (own
/// fields taken out, a batch file's lines rewritten), the rest of the upload read by
/// [`Lines`], and where a refused line of that rest is kept.
#[derive(Debug)]
pub(crate) struct Sent {
    /// The head, as segments.
    pub(crate) body: Vec<Bytes>,
    /// The rest, relayed through [`Lines`].
    pub(crate) upload: Option<Arc<Upload>>,
    /// Set when a line of the rest was refused.
    pub(crate) refused: Arc<OnceLock<LineError>>,
}

/// What [`plan`](super::plan) read of an upload's form, for after admission.
#[derive(Debug)]
pub(crate) struct Form {
    /// The boundary.
    pub(crate) boundary: String,
    /// The values of sluice's own fields, taken out.
    pub(crate) strip: Vec<Range<usize>>,
    /// `purpose` is `batch`.
    pub(crate) batch: bool,
    /// The complete file parts' values (a part with a file name, or named `file`).
    pub(crate) files: Vec<Range<usize>>,
}

impl Form {
    /// The form to send: `head` is the body read so far, `rest` the upload's rest if the head
    /// is not the whole body, `declared` the client's `Content-Length`.
    pub(crate) fn send(
        &self,
        head: &Bytes,
        rest: Option<&Arc<Upload>>,
        rule: Option<Rule>,
        declared: Option<usize>,
    ) -> Result<Sent, LineError> {
        let refused = Arc::new(OnceLock::new());
        let rule = rule.filter(|_| self.batch);
        let Some(rest) = rest else {
            // The whole form is here: its one file read now.
            let body = match (&rule, self.files.as_slice()) {
                (Some(_), [_, _, ..]) => {
                    return Err(LineError::Form {
                        why: "more than one file",
                    })
                }
                (Some(_), [file]) => {
                    let mut lines = Lines::new(rule, &self.boundary);
                    let mut out = VecDeque::new();
                    lines.feed(&head[file.clone()], &mut out)?;
                    lines.finish(&mut out)?;
                    let new: Vec<u8> = Vec::from(out).concat();
                    let body =
                        Bytes::from([&head[..file.start], &new[..], &head[file.end..]].concat());
                    // Field values after the file moved with its new length.
                    let shift = |r: &Range<usize>| match r.start >= file.end {
                        true => r.start + new.len() - file.len()..r.end + new.len() - file.len(),
                        false => r.clone(),
                    };
                    let strip: Vec<_> = self.strip.iter().map(shift).collect();
                    super::without_fields(&body, &self.boundary, &strip)
                }
                (_, _) => super::without_fields(head, &self.boundary, &self.strip),
            };
            return Ok(Sent {
                body,
                upload: None,
                refused,
            });
        };
        // The head ends inside a file, the rest follows.
        if rule.is_some() && !self.files.is_empty() {
            return Err(LineError::Form {
                why: "more than one file",
            });
        }
        let start = open_file(head, &self.boundary).ok_or(LineError::Form {
            why: "the file part's headers are not complete",
        })?;
        let keeps_length = rule.is_none();
        let mut lines = Lines::new(rule, &self.boundary);
        let mut out = VecDeque::new();
        lines.feed(&head[start..], &mut out)?;
        let mut body = super::without_fields(&head.slice(..start), &self.boundary, &self.strip);
        body.extend(out);
        let relayed = Relayed {
            rest: SegmentsBody::with_upload(Vec::new(), rest),
            lines,
            ready: VecDeque::new(),
            ended: false,
            refused: Arc::clone(&refused),
        };
        // Unread, the file keeps its length, so the client's length still holds.
        let length = declared
            .filter(|_| keeps_length)
            .map(|d| d.saturating_sub(head.len()));
        let upload = Upload::new(relayed, 0, length, usize::MAX);
        Ok(Sent {
            body,
            upload: Some(upload),
            refused,
        })
    }
}

/// Where the content of the file part the head ends in starts: past the headers of the part
/// that follows the head's last complete part.
fn open_file(head: &[u8], boundary: &str) -> Option<usize> {
    let parts = multipart::head(head, boundary).ok()?;
    let from = match parts.last() {
        Some(p) => p.value.end,
        None => memchr::memmem::find(head, format!("--{boundary}").as_bytes())?,
    };
    let at = memchr::memmem::find(head.get(from..)?, b"\r\n\r\n")?;
    Some(from + at + 4)
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;
    use serde_json::{json, Value};

    fn rule(strict: bool) -> Rule {
        Rule {
            group: "cheap".into(),
            model: "gpt-4o-mini".into(),
            model_json: Bytes::from_static(b"\"gpt-4o-mini\""),
            strict,
        }
    }

    fn line(model: Value, url: &str) -> String {
        format!(
            "{}\n",
            json!({"custom_id": "r", "method": "POST", "url": url,
                   "body": {"model": model, "messages": [{"role": "user", "content": "hi"}]}})
        )
    }

    #[test]
    fn a_line_naming_the_group_is_rewritten_to_the_deployment_model() {
        let l = line(json!("cheap"), "/v1/chat/completions");
        let out = rule(true).line(1, l.as_bytes()).unwrap().unwrap();
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["body"]["model"], "gpt-4o-mini");
        assert_eq!(out.len(), l.len() + "gpt-4o-mini".len() - "cheap".len());
        assert!(out.ends_with(b"}\n"), "the rest of the line as it was");
        // The upstream model itself, and blank lines, go as they are.
        let l = line(json!("gpt-4o-mini"), "/v1/embeddings");
        assert_eq!(rule(true).line(2, l.as_bytes()), Ok(None));
        assert_eq!(rule(true).line(3, b"  \r\n"), Ok(None));
    }

    #[test]
    fn a_virtual_key_s_lines_name_only_its_model_and_batch_endpoints() {
        let strict = rule(true);
        let l = line(json!("gpt-4o"), "/v1/chat/completions");
        let e = strict.line(3, l.as_bytes()).unwrap_err();
        assert_eq!(
            e.to_string(),
            r#"line 3: body.model "gpt-4o" is not the model group "cheap""#
        );
        let l = line(json!("cheap"), "/v1/images/generations");
        assert!(matches!(
            strict.line(4, l.as_bytes()),
            Err(LineError::Url { line: 4, .. })
        ));
        let no_model = r#"{"url":"/v1/chat/completions","body":{"messages":[]}}"#;
        assert_eq!(
            strict.line(5, no_model.as_bytes()),
            Err(LineError::NoModel { line: 5 })
        );
        let not_string = line(json!(["cheap"]), "/v1/chat/completions");
        assert_eq!(
            strict.line(6, not_string.as_bytes()),
            Err(LineError::NoModel { line: 6 })
        );
        assert!(matches!(
            strict.line(7, b"not json\n"),
            Err(LineError::NotJson { line: 7, .. })
        ));
        // A repeated model cannot hide a second name behind the first.
        let twice = r#"{"url":"/v1/chat/completions","body":{"model":"cheap","model":"gpt-4o"}}"#;
        assert!(matches!(
            strict.line(8, twice.as_bytes()),
            Err(LineError::NotJson { line: 8, .. })
        ));
        // An escaped name is the name it spells.
        let escaped = r#"{"url":"/v1/chat/completions","body":{"model":"ch\u0065ap"}}"#;
        let out = strict.line(9, escaped.as_bytes()).unwrap().unwrap();
        assert_eq!(
            &out[..],
            br#"{"url":"/v1/chat/completions","body":{"model":"gpt-4o-mini"}}"#
        );
    }

    #[test]
    fn the_master_key_s_lines_are_rewritten_only_when_they_name_the_group() {
        let lenient = rule(false);
        let l = line(json!("o1-pro"), "/v1/anything");
        assert_eq!(lenient.line(1, l.as_bytes()), Ok(None));
        assert_eq!(lenient.line(2, b"\x00\x01 binary\n"), Ok(None));
        let l = line(json!("cheap"), "/v1/chat/completions");
        assert!(lenient.line(3, l.as_bytes()).unwrap().is_some());
    }

    const B: &str = "XX";

    fn form(file: &[u8], after: &str) -> Vec<u8> {
        let mut out = b"--XX\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n--XX\r\nContent-Disposition: form-data; name=\"file\"; filename=\"in.jsonl\"\r\n\r\n".to_vec();
        out.extend_from_slice(file);
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(after.as_bytes());
        out.extend_from_slice(b"--XX--\r\n");
        out
    }

    /// `body` fed to a rule's [`Lines`] in `frame`-byte pieces from its file on, then ended.
    fn stream(body: &[u8], frame: usize, rule: Option<Rule>) -> Result<Vec<u8>, LineError> {
        let start = open_file(&body[..body.len().min(200)], B).unwrap();
        let mut lines = Lines::new(rule, B);
        let mut out = VecDeque::new();
        for piece in body[start..].chunks(frame) {
            lines.feed(piece, &mut out)?;
        }
        lines.finish(&mut out)?;
        Ok([&body[..start], &Vec::from(out).concat()[..]].concat())
    }

    #[test]
    fn a_streamed_file_is_rewritten_line_by_line_whatever_its_frames() {
        let file: String = (0..50)
            .map(|i| {
                line(
                    json!(if i % 2 == 0 { "cheap" } else { "gpt-4o-mini" }),
                    "/v1/chat/completions",
                )
            })
            .collect();
        let body = form(file.as_bytes(), "");
        let expected = form(file.replace("\"cheap\"", "\"gpt-4o-mini\"").as_bytes(), "");
        for frame in [1, 7, 64, 4096, body.len()] {
            assert_eq!(
                stream(&body, frame, Some(rule(true))).unwrap(),
                expected,
                "{frame}"
            );
            // Unread, the form passes byte for byte.
            assert_eq!(stream(&body, frame, None).unwrap(), body, "{frame}");
        }
        // A bad line is named by its number, however it arrives.
        let bad = format!(
            "{}{}",
            line(json!("cheap"), "/v1/embeddings"),
            line(json!("gpt-4o"), "/v1/embeddings")
        );
        for frame in [3, 1000] {
            let e = stream(&form(bad.as_bytes(), ""), frame, Some(rule(true))).unwrap_err();
            assert!(matches!(e, LineError::OtherModel { line: 2, .. }), "{e}");
        }
        // The last line without a line break is read too.
        let last = line(json!("o1-pro"), "/v1/embeddings");
        let e = stream(&form(last.trim_end().as_bytes(), ""), 5, Some(rule(true))).unwrap_err();
        assert!(matches!(e, LineError::OtherModel { line: 1, .. }), "{e}");
    }

    #[test]
    fn what_follows_the_file_is_checked() {
        let file = line(json!("cheap"), "/v1/embeddings");
        let field = "--XX\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n";
        for r in [Some(rule(true)), None] {
            let e = stream(&form(file.as_bytes(), field), 9, r).unwrap_err();
            assert!(matches!(e, LineError::Form { .. }), "{e}");
        }
        let second =
            "--XX\r\nContent-Disposition: form-data; name=\"other\"; filename=\"b\"\r\n\r\nzz\r\n";
        assert!(matches!(
            stream(&form(file.as_bytes(), second), 9, Some(rule(true))),
            Err(LineError::Form { .. })
        ));
        let body = form(file.as_bytes(), second);
        assert_eq!(
            stream(&body, 9, None).unwrap(),
            body,
            "unread, only `purpose` matters"
        );
        let harmless = "--XX\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\ncheap\r\n";
        let body = form(file.as_bytes(), harmless);
        assert_eq!(stream(&body, 9, None).unwrap(), body);
    }

    #[test]
    fn a_line_longer_than_the_bound_is_refused() {
        let mut lines = Lines::new(Some(rule(true)), B);
        let mut out = VecDeque::new();
        let chunk = vec![b' '; 1024 * 1024];
        let mut refused = None;
        for _ in 0..=MAX_LINE / chunk.len() {
            if let Err(e) = lines.feed(&chunk, &mut out) {
                refused = Some(e);
                break;
            }
        }
        assert_eq!(refused, Some(LineError::TooLong { line: 1 }));
        assert!(
            lines.pending.len() <= MAX_LINE + chunk.len(),
            "one line held"
        );
    }

    #[tokio::test]
    async fn a_refused_line_ends_the_relayed_body_in_an_error() {
        let file = format!(
            "{}{}",
            line(json!("cheap"), "/v1/embeddings"),
            line(json!("gpt-4o"), "/v1/embeddings")
        );
        let body = form(file.as_bytes(), "");
        let split = 150;
        let (head, rest) = (
            Bytes::copy_from_slice(&body[..split]),
            body[split..].to_vec(),
        );
        let frames: Vec<Result<Frame<Bytes>, std::convert::Infallible>> = rest
            .chunks(10)
            .map(|c| Ok(Frame::data(Bytes::copy_from_slice(c))))
            .collect();
        let client = http_body_util::StreamBody::new(futures_util::stream::iter(frames));
        let upload = Upload::new(client, split, Some(body.len()), 1 << 20);
        let form = Form {
            boundary: B.into(),
            strip: Vec::new(),
            batch: true,
            files: Vec::new(),
        };
        let sent = form
            .send(&head, Some(&upload), Some(rule(true)), Some(body.len()))
            .unwrap();
        let relayed = sent.upload.unwrap();
        let whole = SegmentsBody::with_upload(sent.body, &relayed);
        assert_eq!(
            whole.size_hint().exact(),
            None,
            "a rewritten file goes chunked"
        );
        assert!(whole.collect().await.is_err());
        assert!(matches!(
            sent.refused.get(),
            Some(LineError::OtherModel { line: 2, .. })
        ));
        assert_eq!(upload.client_error(), None, "not the client's upload error");
    }
}
