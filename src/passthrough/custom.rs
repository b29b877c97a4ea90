//! The operator's own pass-through routes (`general_settings.pass_through_endpoints`): a path
//! forwarded to a target URL, with the config's headers (its key) and, when asked, the
//! client's (never its credentials, nor hop-by-hop ones). The joined URL stays on the target's
//! host, as on the provider routes.

use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue, CONTENT_LENGTH, HOST};
use http::{HeaderMap, Method, Request, Response, Uri};
use http_body::Body;

use sluice_config::CustomRoute;
use sluice_core::error::ApiError;
use sluice_core::limits;
use sluice_core::price::Price;
use sluice_core::record::RequestRecord;
use sluice_core::usage::Usage;
use sluice_net::{ClientRegistry, SegmentsBody, UpstreamClient};
use sluice_providers::http::client_error;
use sluice_providers::passthrough::{answer_headers, Framing, Shape, Tap};
use sluice_providers::passthrough::{connection_listed, never_forwarded, path};
use sluice_providers::UpstreamBody;

use super::PassRelay;
use crate::auth::Caller;
use crate::http::{collect_upstream, read_body, ResponseBody};
use crate::server::steps::{self, Admitted, Authenticated, Presented};
use crate::server::{AppState, Snapshot};

/// How long connecting to a custom route's target may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A custom route made ready to call.
#[derive(Debug)]
pub struct CustomTarget {
    /// The route as the config declared it.
    pub route: CustomRoute,
    headers: HeaderMap,
    methods: Vec<Method>,
    client: UpstreamClient,
}

impl CustomTarget {
    /// Make a route ready: its headers (marked sensitive, so they are never logged) and client.
    pub fn build(route: &CustomRoute, clients: &ClientRegistry) -> Self {
        let mut headers = HeaderMap::new();
        for (name, value) in &route.headers {
            let (Ok(n), Ok(mut v)) = (
                HeaderName::from_bytes(name.as_bytes()),
                HeaderValue::from_str(value.expose()),
            ) else {
                continue;
            };
            v.set_sensitive(true);
            headers.insert(n, v);
        }
        Self {
            route: route.clone(),
            headers,
            methods: route
                .methods
                .iter()
                .filter_map(|m| Method::from_bytes(m.as_bytes()).ok())
                .collect(),
            client: clients.get(CONNECT_TIMEOUT),
        }
    }

    /// The path below the route this request path asks for (`""` for the route itself);
    /// `None` when it is not this route's (a subpath without `include_subpath`).
    pub fn rest<'p>(&self, request_path: &'p str) -> Option<&'p str> {
        let rest = request_path.strip_prefix(self.route.path.as_str())?;
        match rest {
            "" | "/" => Some(""),
            r if r.starts_with('/') && self.route.include_subpath => Some(r),
            _ => None,
        }
    }

    /// Whether the route serves this method.
    pub fn serves(&self, m: &Method) -> bool {
        self.methods.is_empty() || self.methods.contains(m)
    }

    /// Send a request: `rest` below the target (checked here), the client's query with the
    /// route's defaults, the route's headers and (with `forward_headers`) the client's.
    pub async fn send(
        &self,
        method: &Method,
        rest: &str,
        query: Option<&str>,
        client_headers: &HeaderMap,
        body: Bytes,
    ) -> Result<Response<UpstreamBody>, ApiError> {
        path::check(rest)?;
        let uri = self.uri(rest, query)?;
        let mut headers = HeaderMap::new();
        if self.route.forward_headers {
            let listed = connection_listed(client_headers);
            for (name, value) in client_headers {
                let skip = never_forwarded(name)
                    || listed.iter().any(|l| l == name.as_str())
                    || *name == HOST
                    || *name == CONTENT_LENGTH;
                if !skip {
                    headers.append(name.clone(), value.clone());
                }
            }
        } else if let Some(ct) = client_headers.get(http::header::CONTENT_TYPE) {
            headers.insert(http::header::CONTENT_TYPE, ct.clone());
        }
        for (name, value) in &self.headers {
            headers.insert(name.clone(), value.clone());
        }
        let mut req = Request::builder()
            .method(method.clone())
            .uri(uri)
            .body(SegmentsBody::new(vec![body]))
            .map_err(|e| ApiError::UpstreamInvalid(e.to_string()))?;
        *req.headers_mut() = headers;
        let resp = self.client.send(req).await.map_err(client_error)?;
        Ok(resp.map(UpstreamBody::Http))
    }

    /// The target URL of `rest` with its query: the target's own parameters (with
    /// `merge_query_params`), the route's defaults the client did not give, the client's.
    fn uri(&self, rest: &str, query: Option<&str>) -> Result<Uri, ApiError> {
        let (base, own) = match self.route.target.split_once('?') {
            Some((b, q)) => (b, Some(q)),
            None => (self.route.target.as_str(), None),
        };
        // Appended as written (LiteLLM's `include_subpath`), no version folded.
        let mut url = format!("{base}{rest}");
        let client: Vec<(String, String)> =
            form_urlencoded::parse(query.unwrap_or_default().as_bytes())
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect();
        let mut q = form_urlencoded::Serializer::new(String::new());
        if self.route.merge_query_params || own.is_some() {
            for (k, v) in form_urlencoded::parse(own.unwrap_or_default().as_bytes()) {
                if !client.iter().any(|(c, _)| *c == k) {
                    q.append_pair(&k, &v);
                }
            }
        }
        for (k, v) in &self.route.default_query {
            if !client.iter().any(|(c, _)| c == k) {
                q.append_pair(k, v);
            }
        }
        for (k, v) in &client {
            q.append_pair(k, v);
        }
        let q = q.finish();
        if !q.is_empty() {
            url.push('?');
            url.push_str(&q);
        }
        path::on_host(&url, base)
    }
}

/// The custom routes of one config snapshot.
#[derive(Debug, Default)]
pub struct CustomRoutes(Vec<CustomTarget>);

impl CustomRoutes {
    /// Make every declared route ready.
    pub fn build(routes: &[CustomRoute], clients: &ClientRegistry) -> Self {
        Self(
            routes
                .iter()
                .map(|r| CustomTarget::build(r, clients))
                .collect(),
        )
    }

    /// The route a request path is (the longest declared path it falls under), by index.
    pub fn find(&self, path: &str) -> Option<usize> {
        if self.0.is_empty() {
            return None;
        }
        self.0
            .iter()
            .enumerate()
            .filter(|(_, t)| t.rest(path).is_some())
            .max_by_key(|(_, t)| t.route.path.len())
            .map(|(i, _)| i)
    }
}

/// Serve one request on a custom route: the steps of a pass-through call (authenticate unless
/// the route is open, read the body, guardrails that would apply refuse, admit the key's limits
/// and budgets and its access to the route's path, call, relay, charge `cost_per_request`).
pub async fn handle<B>(
    state: &AppState,
    snap: &Snapshot,
    index: usize,
    req: Request<B>,
    record: &mut RequestRecord,
) -> Result<Response<ResponseBody>, ApiError>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    let target = snap
        .pass_through
        .custom()
        .0
        .get(index)
        .ok_or(ApiError::Internal("custom route out of range"))?;
    let route = &target.route;
    if !target.serves(req.method()) {
        return Err(ApiError::MethodNotAllowed(req.method().to_string()));
    }
    let Authenticated { caller, wall } = if route.auth {
        steps::authenticate(state, snap, Presented::by(&req)).await?
    } else {
        Authenticated {
            caller: Caller::Open,
            wall: limits::wall_ms(),
        }
    };
    let (parts, body) = req.into_parts();
    let rest = target
        .rest(parts.uri.path())
        .ok_or(ApiError::Internal("custom route without its path"))?
        .to_owned();
    let body = read_body(body, &parts.headers, snap.max_body, snap.body_timeout).await?;
    steps::unguardable(state, snap, &caller, &body, || {
        format!("sluice cannot read the text of a call to {}", route.path)
    })?;
    let price = Price {
        per_request: route.cost_per_request,
        ..Price::default()
    };
    let own = (route.path.as_str(), "pass_through");
    let Admitted { key, mut charges } =
        steps::admit_own(state, caller, own, price, record, wall).await?;
    let before_send = record.start.elapsed();
    let sent = target.send(
        &parts.method,
        &rest,
        parts.uri.query(),
        &parts.headers,
        body,
    );
    let resp = tokio::time::timeout(route.timeout, sent)
        .await
        .unwrap_or(Err(ApiError::UpstreamTimeout(route.timeout)))?;
    let arrived = Instant::now();
    let (head, upstream) = resp.into_parts();
    record.status = head.status.as_u16();
    let mut out = Response::new(ResponseBody::full(Bytes::new()));
    *out.status_mut() = head.status;
    answer_headers(&head.headers, out.headers_mut());
    // Charged once the call succeeded, whatever it answered.
    if head.status.is_success() {
        record.usage = Some(Usage {
            requests: 1,
            ..Usage::default()
        });
    }
    let framing = head
        .headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map_or(Framing::Opaque, Framing::of);
    if framing == Framing::Json || !head.status.is_success() {
        let bytes = tokio::time::timeout(route.timeout, collect_upstream(upstream))
            .await
            .unwrap_or(Err(ApiError::UpstreamTimeout(route.timeout)))?;
        let cost = charges.settle(record);
        *out.body_mut() = ResponseBody::full(bytes);
        steps::spend_headers(&charges, key.as_deref(), cost, out.headers_mut());
        record.overhead = before_send + arrived.elapsed();
        return Ok(out);
    }
    steps::spend_headers(&charges, key.as_deref(), None, out.headers_mut());
    record.ttfb = Some(arrived - record.start);
    record.overhead = before_send + arrived.elapsed();
    let tap = Tap::new(Shape::Unknown, Framing::Opaque, false);
    let relay = PassRelay::new(
        upstream,
        tap,
        record.clone(),
        state.recorder().clone(),
        charges,
    );
    *out.body_mut() = ResponseBody::relay(relay);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_core::Secret;

    fn route(path: &str, target: &str, subpath: bool) -> CustomTarget {
        let r = CustomRoute {
            path: path.into(),
            target: target.into(),
            headers: vec![("authorization".into(), Secret::new("Bearer up".to_owned()))],
            forward_headers: false,
            include_subpath: subpath,
            default_query: vec![("v".into(), "1".into())],
            merge_query_params: false,
            cost_per_request: 0.0,
            timeout: Duration::from_secs(5),
            auth: true,
            methods: vec!["POST".into()],
        };
        CustomTarget::build(&r, &ClientRegistry::new(1))
    }

    #[test]
    fn paths_below_the_route_only_with_include_subpath() {
        let t = route("/bria", "https://x.test/api", true);
        assert_eq!(t.rest("/bria"), Some(""));
        assert_eq!(t.rest("/bria/v1/gen"), Some("/v1/gen"));
        assert_eq!(t.rest("/briax"), None);
        assert_eq!(
            route("/bria", "https://x.test", false).rest("/bria/v1"),
            None
        );
        assert!(t.serves(&Method::POST) && !t.serves(&Method::GET));
    }

    #[test]
    fn urls_keep_the_target_host_and_merge_queries() {
        let t = route("/bria", "https://x.test/api?tenant=a", true);
        assert_eq!(
            t.uri("/v1/gen", Some("v=2&q=z")).unwrap().to_string(),
            "https://x.test/api/v1/gen?tenant=a&v=2&q=z"
        );
        assert_eq!(
            t.uri("", None).unwrap().to_string(),
            "https://x.test/api?tenant=a&v=1"
        );
        assert!(t.uri("//evil.test/x", None).is_err() || path::check("//evil.test/x").is_err());
    }
}
