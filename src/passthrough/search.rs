//! `POST /v1/search/{tool}` (LiteLLM's search API): a web search through one of the config's
//! `search_tools`. The request is Perplexity's Search API shape whatever the provider
//! (`sluice_providers::search` writes each provider's own and reads its answer back); the
//! steps are a pass-through call's: authenticate, read the body, guardrails that would apply
//! refuse, admit the key's limits and budgets and its access to the tool (named as a model),
//! one call, record, charge the tool's price per query.

use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::{HeaderValue, CONTENT_TYPE};
use http::{Method, Request, Response};
use http_body::Body;
use serde_json::{Map, Value};

use sluice_config::SearchTool;
use sluice_core::error::ApiError;
use sluice_core::price::Price;
use sluice_core::record::RequestRecord;
use sluice_core::usage::Usage;
use sluice_net::{ClientRegistry, SegmentsBody, UpstreamClient};
use sluice_providers::http::client_error;
use sluice_providers::passthrough::path;

use crate::http::{collect_upstream, read_body, ResponseBody};
use crate::server::steps::{self, Admitted, Authenticated, Presented};
use crate::server::{AppState, Snapshot};

/// How long connecting to a search provider may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A search tool made ready to call.
#[derive(Debug)]
pub struct SearchTarget {
    /// The tool as the config declared it.
    pub tool: SearchTool,
    url: http::Uri,
    headers: http::HeaderMap,
    client: UpstreamClient,
}

/// The search tools of one config snapshot.
#[derive(Debug, Default)]
pub struct SearchTools(Vec<SearchTarget>);

impl SearchTools {
    /// Make every declared tool ready (a URL that does not parse was refused by the config).
    pub fn build(tools: &[SearchTool], clients: &ClientRegistry) -> Self {
        Self(
            tools
                .iter()
                .filter_map(|t| {
                    let url = t.provider.url(&t.api_base);
                    let url = path::on_host(&url, &t.api_base).ok()?;
                    Some(SearchTarget {
                        url,
                        headers: t.provider.headers(t.api_key.as_ref().map(|k| k.expose())),
                        client: clients.get(CONNECT_TIMEOUT),
                        tool: t.clone(),
                    })
                })
                .collect(),
        )
    }

    /// The tool of this name.
    pub fn get(&self, name: &str) -> Option<&SearchTarget> {
        self.0.iter().find(|t| t.tool.name == name)
    }
}

/// The tool a path names (`/v1/search/{tool}`, `/search/{tool}`).
pub fn tool_of(path: &str) -> Option<&str> {
    let bare = path.strip_prefix("/v1").unwrap_or(path);
    bare.strip_prefix("/search/")
        .filter(|t| !t.is_empty() && !t.contains('/'))
}

/// Serve one search.
pub async fn handle<B>(
    state: &AppState,
    snap: &Snapshot,
    req: Request<B>,
    record: &mut RequestRecord,
) -> Result<Response<ResponseBody>, ApiError>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    if req.method() != Method::POST {
        return Err(ApiError::MethodNotAllowed(req.method().to_string()));
    }
    let Authenticated { caller, wall } =
        steps::authenticate(state, snap, Presented::by(&req)).await?;
    let (parts, body) = req.into_parts();
    let name =
        tool_of(parts.uri.path()).ok_or(ApiError::Internal("search route without its tool"))?;
    let target = snap
        .pass_through
        .search()
        .get(name)
        .ok_or_else(|| ApiError::NotFound {
            what: "search tool",
            id: name.chars().take(256).collect(),
        })?;
    let tool = &target.tool;
    let body = read_body(body, &parts.headers, snap.max_body, snap.body_timeout).await?;
    let unified: Map<String, Value> =
        serde_json::from_slice(&body).map_err(|e| ApiError::InvalidJson(e.to_string()))?;
    let sent = tool.provider.request(&unified)?;
    steps::unguardable(state, snap, &caller, &body, || {
        "sluice does not check web searches".to_owned()
    })?;
    let price = Price {
        per_query: tool.cost_per_query,
        ..Price::default()
    };
    let own = (tool.name.as_str(), tool.provider.name());
    let Admitted { key, mut charges } =
        steps::admit_own(state, caller, own, price, record, wall).await?;
    let before_send = record.start.elapsed();
    let sent = serde_json::to_vec(&sent).map_err(|_| ApiError::Internal("search body"))?;
    let mut upstream = Request::builder()
        .method(Method::POST)
        .uri(target.url.clone())
        .body(SegmentsBody::new(vec![Bytes::from(sent)]))
        .map_err(|e| ApiError::UpstreamInvalid(e.to_string()))?;
    *upstream.headers_mut() = target.headers.clone();
    let call = async {
        let resp = target.client.send(upstream).await.map_err(client_error)?;
        let (head, body) = resp.into_parts();
        Ok::<_, ApiError>((
            head,
            collect_upstream(sluice_providers::UpstreamBody::Http(body)).await?,
        ))
    };
    let (head, bytes) = tokio::time::timeout(tool.timeout, call)
        .await
        .unwrap_or(Err(ApiError::UpstreamTimeout(tool.timeout)))?;
    let arrived = Instant::now();
    record.status = head.status.as_u16();
    if !head.status.is_success() {
        // The provider's refusal, as it came (its shape is the provider's own).
        let mut out = Response::new(ResponseBody::full(bytes));
        *out.status_mut() = head.status;
        if let Some(ct) = head.headers.get(CONTENT_TYPE) {
            out.headers_mut().insert(CONTENT_TYPE, ct.clone());
        }
        record.overhead = before_send + arrived.elapsed();
        return Ok(out);
    }
    let answer: Value = serde_json::from_slice(&bytes)
        .map_err(|e| ApiError::UpstreamInvalid(format!("the search answer is not JSON: {e}")))?;
    let out_body = serde_json::to_vec(&tool.provider.answer(&answer))
        .map_err(|_| ApiError::Internal("search answer"))?;
    record.usage = Some(Usage {
        search_units: 1,
        ..Usage::default()
    });
    let cost = charges.settle(record);
    let mut out = Response::new(ResponseBody::full(out_body));
    out.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    steps::spend_headers(&charges, key.as_deref(), cost, out.headers_mut());
    record.overhead = before_send + arrived.elapsed();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_name_the_tool() {
        assert_eq!(tool_of("/v1/search/web"), Some("web"));
        assert_eq!(tool_of("/search/web"), Some("web"));
        assert_eq!(tool_of("/v1/search/"), None);
        assert_eq!(tool_of("/v1/search/a/b"), None);
        assert_eq!(tool_of("/v1/searches"), None);
    }
}
