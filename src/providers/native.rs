//! Upstreams whose URL names the model and the mode (Gemini's `models/{m}:generateContent`,
//! Bedrock's `/model/{id}/converse-stream`, Vertex AI's project-scoped Gemini paths): their
//! URLs prebuilt per deployment, and their per-request credentials — a SigV4 signature
//! (Bedrock) or a cached OAuth token (Vertex AI). Only the signature is per-request work.

use std::sync::Arc;
use std::time::SystemTime;

use http::header::AUTHORIZATION;
use http::{HeaderMap, Uri};

use super::client::UpstreamClient;
use super::google_auth::TokenSource;
use super::kind::Wire;
use super::sigv4::{uri_encode, Credentials, Signer};
use crate::config::Deployment;
use crate::translate::Format;
use sluice_core::error::ApiError;

/// What a native call does, which decides its URL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NativeCall {
    /// A whole chat answer.
    Chat,
    /// A streamed chat answer.
    Stream,
    /// Embeddings.
    Embed,
}

/// A native upstream's prebuilt URLs and signer.
#[derive(Debug)]
pub struct Native {
    wire: Wire,
    /// The deployment's base URL, for wildcard models whose URL is built per request.
    base: Box<str>,
    chat: Uri,
    stream: Uri,
    embed: Uri,
    /// SigV4 signer (Bedrock with credentials).
    pub signer: Option<Signer>,
    /// OAuth tokens (Vertex AI with a service account).
    pub tokens: Option<Arc<TokenSource>>,
}

/// A URL for `model` on `wire` below `base`.
pub fn url(wire: Wire, base: &str, model: &str, call: NativeCall) -> String {
    match wire {
        Wire::Bedrock => {
            // Model ids and ARNs hold `:` and `/`: one path segment, encoded.
            let id = uri_encode(model, false);
            let op = match call {
                NativeCall::Chat => "converse",
                NativeCall::Stream => "converse-stream",
                NativeCall::Embed => "invoke",
            };
            format!("{base}/model/{id}/{op}")
        }
        // Vertex AI: Anthropic's models under the `anthropic` publisher, Gemini's under `google`.
        Wire::Vertex if is_claude(model) => {
            let op = match call {
                NativeCall::Chat => ":rawPredict",
                NativeCall::Stream => ":streamRawPredict",
                NativeCall::Embed => ":predict",
            };
            // Vertex writes the version after `@` literally (`claude-sonnet-4@20250514`).
            let id = uri_encode(model, false).replace("%40", "@");
            format!("{base}/publishers/anthropic/models/{id}{op}")
        }
        Wire::Vertex => url(
            Wire::Gemini,
            &format!("{base}/publishers/google"),
            model,
            call,
        ),
        Wire::Gemini
        | Wire::OpenAiCompatible
        | Wire::Azure
        | Wire::Anthropic
        | Wire::Mock
        | Wire::NotYetSupported => {
            let name = if model.contains('/') {
                uri_encode(model, true)
            } else {
                format!("models/{}", uri_encode(model, false))
            };
            let op = match call {
                NativeCall::Chat => ":generateContent",
                NativeCall::Stream => ":streamGenerateContent?alt=sse",
                NativeCall::Embed => ":batchEmbedContents",
            };
            format!("{base}/{name}{op}")
        }
    }
}

/// A Claude model id (`claude-sonnet-4@20250514`), served on Vertex AI by Anthropic.
fn is_claude(model: &str) -> bool {
    model.starts_with("claude")
}

impl Native {
    /// The wire format calls for `model` take: Anthropic's Messages for Claude on Vertex AI,
    /// else the wire's.
    pub fn format(&self, model: &str) -> Format {
        if self.wire == Wire::Vertex && is_claude(model) {
            Format::VertexAnthropic
        } else {
            self.wire.format()
        }
    }

    /// Prebuild a native deployment's URLs and credentials; `None` for wires that are not
    /// native.
    pub fn build(
        d: &Deployment,
        base: &str,
        client: &UpstreamClient,
    ) -> Result<Option<Self>, String> {
        let wire = d.provider.spec().wire;
        if !matches!(wire, Wire::Gemini | Wire::Bedrock | Wire::Vertex) {
            return Ok(None);
        }
        // Vertex AI serves its publishers' models below a project and location.
        let base = match &d.vertex {
            Some(v) if wire == Wire::Vertex => {
                format!("{base}/v1/projects/{}/locations/{}", v.project, v.location)
            }
            _ => base.to_owned(),
        };
        let base = base.as_str();
        let key = d
            .vertex
            .as_ref()
            .filter(|_| wire == Wire::Vertex)
            .and_then(|v| v.credentials.as_ref());
        let tokens = match key {
            Some(k) => Some(Arc::new(
                TokenSource::new(k.expose(), client.clone()).map_err(|e| e.to_string())?,
            )),
            None => None,
        };
        let parse = |call| -> Result<Uri, String> {
            let u = url(wire, base, &d.upstream_model, call);
            u.parse().map_err(|e: http::uri::InvalidUri| e.to_string())
        };
        let signer = d.aws.as_ref().map(|a| {
            Signer::new(
                Credentials {
                    access_key_id: a.access_key_id.clone(),
                    secret_access_key: a.secret_access_key.clone(),
                    session_token: a.session_token.clone(),
                },
                a.region.clone(),
                "bedrock",
            )
        });
        Ok(Some(Self {
            wire,
            base: base.into(),
            chat: parse(NativeCall::Chat)?,
            stream: parse(NativeCall::Stream)?,
            embed: parse(NativeCall::Embed)?,
            signer,
            tokens,
        }))
    }

    /// The URL of a call: prebuilt, or built for a wildcard deployment's model.
    pub fn url(&self, call: NativeCall, wildcard_model: Option<&str>) -> Result<Uri, String> {
        if let Some(m) = wildcard_model {
            return url(self.wire, &self.base, m, call)
                .parse()
                .map_err(|e: http::uri::InvalidUri| e.to_string());
        }
        Ok(match call {
            NativeCall::Chat => self.chat.clone(),
            NativeCall::Stream => self.stream.clone(),
            NativeCall::Embed => self.embed.clone(),
        })
    }

    /// Add the request's credentials: a SigV4 signature (Bedrock) or the cached OAuth token
    /// (Vertex AI).
    pub async fn authorize(
        &self,
        uri: &Uri,
        headers: &mut HeaderMap,
        body: &[u8],
    ) -> Result<(), ApiError> {
        if let Some(s) = &self.signer {
            s.sign(uri, headers, body, SystemTime::now());
        }
        if let Some(t) = &self.tokens {
            let h = t
                .header()
                .await
                .map_err(|e| ApiError::UpstreamUnreachable(e.to_string()))?;
            headers.insert(AUTHORIZATION, h);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_per_wire() {
        assert_eq!(
            url(
                Wire::Bedrock,
                "https://bedrock-runtime.us-east-1.amazonaws.com",
                "anthropic.claude-3-5-sonnet-20240620-v1:0",
                NativeCall::Stream
            ),
            "https://bedrock-runtime.us-east-1.amazonaws.com/model/anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse-stream"
        );
        assert_eq!(
            url(
                Wire::Bedrock,
                "http://h",
                "arn:aws:bedrock:us-east-1:1:inference-profile/us.x",
                NativeCall::Chat
            ),
            "http://h/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A1%3Ainference-profile%2Fus.x/converse"
        );
        assert_eq!(
            url(
                Wire::Gemini,
                "http://h/v1beta",
                "gemini-2.0-flash",
                NativeCall::Stream
            ),
            "http://h/v1beta/models/gemini-2.0-flash:streamGenerateContent?alt=sse"
        );
        assert_eq!(
            url(
                Wire::Gemini,
                "http://h/v1beta",
                "text-embedding-004",
                NativeCall::Embed
            ),
            "http://h/v1beta/models/text-embedding-004:batchEmbedContents"
        );
    }
}
