//! Where a pass-through request goes: the path below the route's prefix, checked so that it
//! cannot leave the provider's base (no dot segments, raw or percent-encoded; no backslashes;
//! no empty segments), joined to the upstream's base, and what the path names (the model and
//! the operation), and the same path naming another model (a group's deployment's).

use std::borrow::Cow;
use std::ops::Range;

use sluice_core::error::ApiError;
use sluice_net::sigv4::{uri_decode, uri_encode};

/// Why a pass-through path is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    /// A `.` or `..` segment, written as such or percent-encoded.
    #[error("the path may not contain `.` or `..` segments")]
    DotSegment,
    /// A backslash, or an empty segment (`//`).
    #[error("the path may not contain backslashes or empty segments")]
    Malformed,
}

impl From<PathError> for ApiError {
    fn from(e: PathError) -> Self {
        ApiError::InvalidParam {
            param: "path",
            message: e.to_string(),
        }
    }
}

/// Check the path below a route's prefix (`""` or `/…`): every segment, decoded, must be a
/// plain name, so that the upstream (which may normalise `%2e%2e` or `\`) cannot be walked out
/// of the provider's base.
pub fn check(rest: &str) -> Result<(), PathError> {
    let Some(segments) = rest.strip_prefix('/') else {
        return if rest.is_empty() {
            Ok(())
        } else {
            Err(PathError::Malformed)
        };
    };
    let mut segments = segments.split('/').peekable();
    while let Some(seg) = segments.next() {
        if seg.is_empty() && segments.peek().is_some() {
            return Err(PathError::Malformed);
        }
        let decoded = uri_decode(seg);
        if seg.contains('\\') || decoded.contains('\\') {
            return Err(PathError::Malformed);
        }
        if decoded.split('/').any(|c| c == "." || c == "..") {
            return Err(PathError::DotSegment);
        }
    }
    Ok(())
}

/// A version segment (`v1`, `v1beta`, `v2`): a path that starts with one is below the host's
/// root, not below a base that already ends in a version.
fn is_version(seg: &str) -> bool {
    let b = seg.as_bytes();
    b.len() >= 2 && b[0] == b'v' && b[1].is_ascii_digit() && b.iter().all(u8::is_ascii_alphanumeric)
}

/// The URL of `rest` below `base`: a path that starts with a version (`/v1/messages`, as the
/// providers' SDKs send it) replaces the version `base` ends with; any other path is appended
/// to `base` (`/chat/completions` below `https://api.openai.com/v1`).
pub fn join(base: &str, rest: &str) -> String {
    let versioned = rest
        .strip_prefix('/')
        .and_then(|r| r.split('/').next())
        .is_some_and(is_version);
    let root = match base.rsplit_once('/') {
        Some((head, last)) if versioned && is_version(last) && !head.ends_with('/') => head,
        _ => base,
    };
    format!("{root}{rest}")
}

/// `url` parsed, and still on `base`'s host: a path joined below an upstream cannot leave it.
pub fn on_host(url: &str, base: &str) -> Result<http::Uri, ApiError> {
    let uri: http::Uri =
        url.parse()
            .map_err(|e: http::uri::InvalidUri| ApiError::InvalidParam {
                param: "path",
                message: e.to_string(),
            })?;
    let expected: Option<http::Uri> = base.parse().ok();
    if uri.authority() != expected.as_ref().and_then(http::Uri::authority) {
        return Err(ApiError::InvalidParam {
            param: "path",
            message: "the path must stay below the upstream's base URL".into(),
        });
    }
    Ok(uri)
}

/// What a path names: the model (decoded), when the provider puts it in the path, and the
/// operation (the last segment, or the method after `:` on Google's APIs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Named<'a> {
    /// The model (or Azure deployment) the path names.
    pub model: Option<Cow<'a, str>>,
    /// The operation: `converse-stream`, `generateContent`, `completions`, ...
    pub op: &'a str,
    /// Where the model is written in the path (as written, encoded), for naming another.
    pub span: Option<Range<usize>>,
}

impl<'a> Named<'a> {
    fn at(rest: &'a str, span: Option<Range<usize>>, op: &'a str) -> Self {
        let span = span.filter(|s| !s.is_empty());
        Named {
            model: span.clone().map(|s| decode(&rest[s])),
            op,
            span,
        }
    }
}

/// Bedrock: `/model/{modelId}/{operation}` (the id is one encoded segment, or several for an
/// unencoded inference-profile ARN).
pub fn bedrock(rest: &str) -> Named<'_> {
    const MODEL: &str = "/model/";
    let span = rest
        .strip_prefix(MODEL)
        .and_then(|r| r.rfind('/'))
        .map(|end| MODEL.len()..MODEL.len() + end);
    Named::at(rest, span, last_segment(rest))
}

/// Google (Gemini, Vertex AI): `…/models/{model}:{method}`.
pub fn google(rest: &str) -> Named<'_> {
    let last = last_segment(rest);
    let start = rest.len() - last.len();
    match last.split_once(':') {
        Some((model, method)) => Named::at(rest, Some(start..start + model.len()), method),
        None => Named::at(rest, None, last),
    }
}

/// Azure OpenAI: `/openai/deployments/{deployment}/…`.
pub fn azure(rest: &str) -> Named<'_> {
    const DEPLOYMENTS: &str = "/openai/deployments/";
    let span = rest.strip_prefix(DEPLOYMENTS).map(|r| {
        let len = r.find('/').unwrap_or(r.len());
        DEPLOYMENTS.len()..DEPLOYMENTS.len() + len
    });
    Named::at(rest, span, last_segment(rest))
}

/// Any other route: the operation is the last segment; the model, if any, is in the body.
pub fn plain(rest: &str) -> Named<'_> {
    Named::at(rest, None, last_segment(rest))
}

/// `rest` with the model at `span` replaced by `model`, encoded as one path segment (Vertex
/// AI writes a Claude version's `@` as is).
pub fn with_model(rest: &str, span: Range<usize>, model: &str) -> String {
    let encoded = uri_encode(model, false).replace("%40", "@");
    let mut out = String::with_capacity(rest.len() + encoded.len());
    out.push_str(&rest[..span.start]);
    out.push_str(&encoded);
    out.push_str(&rest[span.end..]);
    out
}

/// Vertex AI: `rest` with the project and location it names (`…/projects/{p}/locations/{l}/…`)
/// replaced, when it names them.
pub fn with_place(rest: &str, project: &str, location: &str) -> Option<String> {
    let (head, below) = rest.split_once("/projects/")?;
    let (_, below) = below.split_once("/locations/")?;
    let (_, tail) = below.split_once('/')?;
    Some(format!(
        "{head}/projects/{}/locations/{}/{tail}",
        uri_encode(project, false),
        uri_encode(location, false)
    ))
}

fn last_segment(rest: &str) -> &str {
    rest.rsplit('/').next().unwrap_or_default()
}

fn decode(s: &str) -> Cow<'_, str> {
    if s.contains('%') {
        Cow::Owned(uri_decode(s))
    } else {
        Cow::Borrowed(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traversal_is_refused_however_it_is_spelt() {
        for bad in [
            "/v1/../admin",
            "/..",
            "/v1/./x",
            "/v1/%2e%2e/x",
            "/v1/%2E%2e",
            "/model/a%2F..%2Fb/converse",
        ] {
            assert_eq!(check(bad), Err(PathError::DotSegment), "{bad}");
        }
        for bad in [
            "/v1//x",
            "//evil.example/x",
            "/v1\\x",
            "/v1/%5cx",
            "/v1/a%5c..",
            "x",
        ] {
            assert_eq!(check(bad), Err(PathError::Malformed), "{bad}");
        }
        for good in [
            "",
            "/",
            "/v1/messages",
            "/v1/models/",
            "/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A1%3Ainference-profile%2Fus.x/converse",
            "/v1beta/models/gemini-2.0-flash:streamGenerateContent",
            "/v1/files/file-abc.jsonl",
            "/v1/a..b",
        ] {
            assert_eq!(check(good), Ok(()), "{good}");
        }
    }

    #[test]
    fn versioned_paths_replace_the_base_version() {
        let j = join;
        assert_eq!(
            j("https://api.openai.com/v1", "/v1/chat/completions"),
            "https://api.openai.com/v1/chat/completions"
        );
        assert_eq!(
            j("https://api.openai.com/v1", "/chat/completions"),
            "https://api.openai.com/v1/chat/completions"
        );
        assert_eq!(
            j(
                "https://generativelanguage.googleapis.com/v1beta",
                "/v1/models"
            ),
            "https://generativelanguage.googleapis.com/v1/models"
        );
        assert_eq!(
            j("https://api.cohere.com", "/v2/chat"),
            "https://api.cohere.com/v2/chat"
        );
        assert_eq!(
            j("http://127.0.0.1:9/v1", "/v1/messages"),
            "http://127.0.0.1:9/v1/messages"
        );
        assert_eq!(
            j(
                "https://r.openai.azure.com",
                "/openai/deployments/d/chat/completions"
            ),
            "https://r.openai.azure.com/openai/deployments/d/chat/completions"
        );
        assert_eq!(j("http://h/v1", ""), "http://h/v1");
        assert!(!is_version("vertex") && !is_version("v") && is_version("v1beta1"));
    }

    #[test]
    fn models_and_operations_from_paths() {
        let n = bedrock("/model/anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse-stream");
        assert_eq!(
            n.model.as_deref(),
            Some("anthropic.claude-3-5-sonnet-20240620-v1:0")
        );
        assert_eq!(n.op, "converse-stream");
        assert_eq!(bedrock("/guardrail/x/version/1/apply").model, None);
        let n = google("/v1beta/models/gemini-2.0-flash:streamGenerateContent");
        assert_eq!(n.model.as_deref(), Some("gemini-2.0-flash"));
        assert_eq!(n.op, "streamGenerateContent");
        let n = google(
            "/v1/projects/p/locations/l/publishers/anthropic/models/claude-sonnet-4@20250514:rawPredict",
        );
        assert_eq!(n.model.as_deref(), Some("claude-sonnet-4@20250514"));
        assert_eq!(google("/v1beta/models").op, "models");
        let n = azure("/openai/deployments/gpt4o/chat/completions");
        assert_eq!((n.model.as_deref(), n.op), (Some("gpt4o"), "completions"));
        assert_eq!(plain("/v1/messages").op, "messages");
        assert_eq!(bedrock("/model//converse").model, None);
    }

    #[test]
    fn paths_name_another_model_in_the_same_place() {
        let rest = "/model/my%20group/invoke-with-response-stream";
        let n = bedrock(rest);
        assert_eq!(n.model.as_deref(), Some("my group"));
        let arn = "arn:aws:bedrock:us-east-1:1:inference-profile/us.anthropic.claude-x:0";
        let out = with_model(rest, n.span.unwrap(), arn);
        assert_eq!(
            out,
            "/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A1%3Ainference-profile%2Fus.anthropic.claude-x%3A0/invoke-with-response-stream"
        );
        // One segment still, which decodes back to the id.
        assert_eq!(bedrock(&out).model.as_deref(), Some(arn));
        let rest = "/v1/projects/p/locations/l/publishers/anthropic/models/fast:streamRawPredict";
        let out = with_model(rest, google(rest).span.unwrap(), "claude-sonnet-4@20250514");
        assert_eq!(
            out,
            "/v1/projects/p/locations/l/publishers/anthropic/models/claude-sonnet-4@20250514:streamRawPredict"
        );
        assert_eq!(
            with_place(&out, "prod", "us-east5").as_deref(),
            Some("/v1/projects/prod/locations/us-east5/publishers/anthropic/models/claude-sonnet-4@20250514:streamRawPredict")
        );
        assert_eq!(
            with_place("/v1/publishers/google/models/g:x", "p", "l"),
            None
        );
        let rest = "/openai/deployments/chat/chat/completions";
        let out = with_model(rest, azure(rest).span.unwrap(), "gpt-4o-prod");
        assert_eq!(out, "/openai/deployments/gpt-4o-prod/chat/completions");
        let rest = "/v1beta/models/fast:generateContent";
        assert_eq!(
            with_model(rest, google(rest).span.unwrap(), "gemini-2.5-flash"),
            "/v1beta/models/gemini-2.5-flash:generateContent"
        );
    }
}
