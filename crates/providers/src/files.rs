//! OpenAI's Files and Batches APIs on a deployment's upstream: no model in the body, no
//! translation, so one call shape for every provider that has them. OpenAI-compatible
//! deployments are called at `{api_base}/files...`, Azure at
//! `{api_base}/openai/files...?api-version=...`, the mock in process; every other provider
//! answers 501 naming the pair.

use bytes::Bytes;
use http::header::{HeaderValue, CONTENT_TYPE};
use http::{Method, Request, Response, Uri};
use sluice_core::endpoint::Endpoint;
use sluice_core::error::ApiError;
use std::sync::Arc;

use sluice_net::{SegmentsBody, Upload};

use crate::body::UpstreamBody;
use crate::http::client_error;
use crate::target::DeploymentTarget;
use crate::{openai_compatible, UpstreamTarget};

/// One Files or Batches call, as sluice forwards it.
#[derive(Debug)]
pub struct FilesCall<'a> {
    /// The client's method.
    pub method: &'a Method,
    /// The path in OpenAI's spelling without `/v1` (`/files/file-abc/content`), ids already
    /// the upstream's.
    pub path: &'a str,
    /// The client's query string (`limit`, `after`, `purpose`), passed on.
    pub query: Option<&'a str>,
    /// The client's content type (a multipart upload's boundary is the client's).
    pub content_type: Option<&'a HeaderValue>,
    /// The body to send, as segments of the client's buffer (none for GET and DELETE); for an
    /// upload relayed as it arrives, its head.
    pub body: Vec<Bytes>,
    /// The rest of an upload, after `body`.
    pub upload: Option<&'a Arc<Upload>>,
    /// `"files"` or `"batches"`: what a provider without them is refused for.
    pub api: &'static str,
}

impl DeploymentTarget {
    /// Whether this deployment's provider has the Files and Batches APIs (so it may hold
    /// uploads when the client names no model group).
    pub fn serves_files(&self) -> bool {
        match &self.upstream {
            UpstreamTarget::OpenAiCompatible(_) | UpstreamTarget::Azure(_) => true,
            #[cfg(feature = "mock")]
            UpstreamTarget::Mock(_) => true,
            _ => false,
        }
    }

    /// The model name this deployment splices into the requests it sends, encoded as a JSON
    /// string: what a batch input file's lines are rewritten to, so that the upstream runs
    /// the model the caller was admitted for. `None` for a wildcard deployment (its model
    /// comes from each request) and for providers without the Files API.
    pub fn batch_model(&self) -> Option<Bytes> {
        match &self.upstream {
            UpstreamTarget::OpenAiCompatible(t) | UpstreamTarget::Azure(t) => {
                t.http.wildcard.is_none().then(|| t.http.model_json.clone())
            }
            #[cfg(feature = "mock")]
            UpstreamTarget::Mock(_) => Some(crate::http::encode_model(&self.info.upstream_model)),
            _ => None,
        }
    }

    /// Send a Files or Batches call to this deployment's upstream; resolves with the answer's
    /// head, its body still streaming.
    pub async fn files(&self, call: FilesCall<'_>) -> Result<Response<UpstreamBody>, ApiError> {
        match &self.upstream {
            UpstreamTarget::OpenAiCompatible(t) | UpstreamTarget::Azure(t) => send(t, call).await,
            #[cfg(feature = "mock")]
            UpstreamTarget::Mock(t) => {
                let mut headers = http::HeaderMap::new();
                if let Some(ct) = call.content_type {
                    headers.insert(CONTENT_TYPE, ct.clone());
                }
                let mut body = call.body.concat();
                if let Some(upload) = call.upload {
                    body.extend_from_slice(&upload.collect().await?);
                }
                let body = Bytes::from(body);
                let resp = sluice_mock::account_objects(
                    call.method,
                    call.path,
                    call.query,
                    &headers,
                    &body,
                    &t.settings,
                )
                .await;
                Ok(resp.map(UpstreamBody::in_process))
            }
            _ => Err(ApiError::EndpointNotSupported {
                provider: self.info.provider,
                endpoint: call.api,
            }),
        }
    }
}

/// The call on OpenAI's wire, below the base the deployment's Responses URL is built on
/// (`{base}/responses` for OpenAI-compatible servers, `{base}/openai/responses?api-version=`
/// for Azure): the same base, and Azure's `api-version`, serve the Files and Batches APIs.
async fn send(
    t: &openai_compatible::Target,
    call: FilesCall<'_>,
) -> Result<Response<UpstreamBody>, ApiError> {
    let uri = url(
        &t.urls.get(Endpoint::Responses).to_string(),
        call.path,
        call.query,
    )?;
    let mut req = Request::builder()
        .method(call.method.clone())
        .uri(uri)
        .body(match call.upload {
            Some(upload) => SegmentsBody::with_upload(call.body.clone(), upload),
            None => SegmentsBody::new(call.body.clone()),
        })
        .map_err(|e| ApiError::UpstreamInvalid(e.to_string()))?;
    let mut headers = t.http.headers.next().clone();
    let empty = call.body.iter().all(Bytes::is_empty);
    match call.content_type.filter(|_| !empty) {
        Some(ct) => {
            headers.insert(CONTENT_TYPE, ct.clone());
        }
        None if empty => {
            headers.remove(CONTENT_TYPE);
        }
        None => {}
    }
    *req.headers_mut() = headers;
    let resp = t.http.client.send(req).await.map_err(client_error)?;
    Ok(resp.map(UpstreamBody::Http))
}

/// The upstream URL of a Files or Batches path, from the deployment's Responses URL.
fn url(responses: &str, path: &str, query: Option<&str>) -> Result<Uri, ApiError> {
    let (base, fixed) = responses.split_once('?').unwrap_or((responses, ""));
    let base = base.strip_suffix("/responses").unwrap_or(base);
    let query: Vec<&str> = [fixed, query.unwrap_or_default()]
        .into_iter()
        .filter(|q| !q.is_empty())
        .collect();
    let url = if query.is_empty() {
        format!("{base}{path}")
    } else {
        format!("{base}{path}?{}", query.join("&"))
    };
    url.parse()
        .map_err(|e: http::uri::InvalidUri| ApiError::UpstreamInvalid(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_follow_the_responses_base() {
        assert_eq!(
            url(
                "https://api.openai.com/v1/responses",
                "/files/f1/content",
                None
            )
            .unwrap()
            .to_string(),
            "https://api.openai.com/v1/files/f1/content"
        );
        assert_eq!(
            url(
                "https://r.openai.azure.com/openai/responses?api-version=2024-10-21",
                "/batches",
                Some("limit=2")
            )
            .unwrap()
            .to_string(),
            "https://r.openai.azure.com/openai/batches?api-version=2024-10-21&limit=2"
        );
    }
}
