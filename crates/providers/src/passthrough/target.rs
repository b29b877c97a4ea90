//! A route made ready to call ([`Target`]): its upstream's base, client and headers, and the
//! credentials each request gets (key header, SigV4 signature, OAuth token); the call itself,
//! with the URL built below the provider's base and the caller's headers filtered (its
//! credentials and hop-by-hop headers never go upstream).

use std::borrow::Cow;
use std::ops::Range;
use std::sync::Arc;
use std::time::SystemTime;

use bytes::{Bytes, BytesMut};
use http::header::{HeaderName, HeaderValue, AUTHORIZATION, CONNECTION, CONTENT_TYPE, USER_AGENT};
use http::{HeaderMap, Method, Request, Response, Uri};
use sluice_core::error::ApiError;
use sluice_core::record::DeploymentInfo;
use sluice_net::google_auth::TokenSource;
use sluice_net::sigv4::{uri_decode, uri_encode, Credentials, Signer};
use sluice_net::{ClientRegistry, SegmentsBody};

use super::{path, Route, Unavailable};
use crate::body::UpstreamBody;
use crate::http::{client_error, HttpTarget, KeyHeader};
use crate::settings::UpstreamConfig;
use crate::target::{Prepared, Timeouts};
use crate::ProviderConfig;

/// How a route's requests are authenticated upstream, beyond the key headers.
enum Auth {
    /// The key is in the prebuilt headers.
    Keyed,
    /// Each request is signed (Bedrock).
    SigV4(Signer),
    /// Each request carries the service account's OAuth token (Vertex AI).
    Google(Arc<TokenSource>),
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Keyed => "Keyed",
            Self::SigV4(_) => "SigV4",
            Self::Google(_) => "Google",
        })
    }
}

/// Where Vertex AI's paths live: the project and location paths without them are put below,
/// and whether the host follows the location a path names.
#[derive(Debug)]
struct VertexPlace {
    project: String,
    location: String,
    /// The base is Google's default for the configured location (not one given), so a path
    /// naming another location goes to that location's host.
    default_host: bool,
}

/// A route ready to call: its upstream's base, its client and headers, its credentials.
#[derive(Debug)]
pub struct Target {
    route: Route,
    http: HttpTarget,
    base: Box<str>,
    /// The upstream's model (a deployment's; `pass-through` for a route's own upstream).
    model: Box<str>,
    auth: Auth,
    vertex: Option<VertexPlace>,
    /// How long a call may take: `first_chunk` to the answer's head, `total` for a whole one.
    pub timeouts: Timeouts,
}

/// One pass-through request as the gateway hands it over.
#[derive(Debug)]
pub struct Outgoing<'a> {
    /// The client's method.
    pub method: &'a Method,
    /// The path below the route's prefix, already checked ([`path::check`]).
    pub rest: &'a str,
    /// The client's query string.
    pub query: Option<&'a str>,
    /// The client's headers (filtered here before they go upstream).
    pub headers: &'a HeaderMap,
    /// The body to send, as segments of the client's buffer.
    pub body: Vec<Bytes>,
    /// W3C trace context for the call, when tracing is on.
    pub trace: Option<HeaderValue>,
}

impl Target {
    /// Make a route's upstream ready: client, headers with the key, signer or token source.
    /// Fails when the route has no credentials to add.
    pub fn build(
        route: Route,
        u: &UpstreamConfig,
        clients: &ClientRegistry,
        timeouts: Timeouts,
    ) -> Result<Self, Unavailable> {
        let info = DeploymentInfo {
            id: Arc::from(format!("pass-through-{}", route.name())),
            model_name: Arc::from(route.label()),
            upstream_model: Arc::from("*"),
            provider: route.name(),
            region: u.region_name.as_deref().map(Arc::from),
        };
        let d = Prepared {
            info: &info,
            upstream: u,
            clients,
            timeouts,
            drop_params: false,
            rules: sluice_core::rules::ModelRules::default(),
            rule_book: None,
        };
        let missing_key = || {
            let spec = route.spec();
            let vars: Vec<&str> = spec
                .key_env
                .iter()
                .chain(u.provider.spec().key_env)
                .copied()
                .collect();
            Unavailable(format!(
                "no upstream key: set {}{}",
                vars.join(" or "),
                flag_hint(route)
            ))
        };
        let key_header = match route {
            Route::OpenAi | Route::Mistral | Route::Cohere => Some(KeyHeader::Bearer),
            Route::Anthropic => Some(KeyHeader::Named("x-api-key")),
            Route::Gemini => Some(KeyHeader::Named("x-goog-api-key")),
            Route::Azure => Some(KeyHeader::Named("api-key")),
            Route::Bedrock | Route::Vertex => None,
        };
        if key_header.is_some() && u.api_keys.is_empty() {
            return Err(missing_key());
        }
        let http = HttpTarget::build(&d, key_header.unwrap_or(KeyHeader::Signed), &[])
            .map_err(|e| Unavailable(e.to_string()))?;
        let (auth, vertex) = match (&u.specific, key_header) {
            (_, Some(_)) => (Auth::Keyed, None),
            (ProviderConfig::Bedrock(c), None) => {
                let Some(aws) = &c.aws else {
                    return Err(Unavailable(format!(
                        "no AWS credentials: set AWS_ACCESS_KEY_ID and \
                         AWS_SECRET_ACCESS_KEY (and AWS_REGION_NAME or AWS_REGION){}",
                        flag_hint(route)
                    )));
                };
                let creds = Credentials {
                    access_key_id: aws.access_key_id.clone(),
                    secret_access_key: aws.secret_access_key.clone(),
                    session_token: aws.session_token.clone(),
                };
                let signer = Signer::new(creds, c.region.clone(), "bedrock");
                (Auth::SigV4(signer), None)
            }
            (ProviderConfig::Vertex(c), None) => {
                let Some(key) = &c.credentials else {
                    return Err(Unavailable(format!(
                        "no service account: set \
                         DEFAULT_GOOGLE_APPLICATION_CREDENTIALS or GOOGLE_APPLICATION_CREDENTIALS{}",
                        flag_hint(route)
                    )));
                };
                let tokens = TokenSource::new(key.expose(), http.client.clone())
                    .map_err(|e| Unavailable(format!("service account: {e}")))?;
                let default_host = u.api_base == u.specific.base().default;
                let place = VertexPlace {
                    project: c.project.clone(),
                    location: c.location.clone(),
                    default_host,
                };
                (Auth::Google(Arc::new(tokens)), Some(place))
            }
            (_, None) => {
                return Err(Unavailable(format!(
                    "the marked deployment is not a {} deployment",
                    route.name()
                )))
            }
        };
        Ok(Self {
            route,
            base: u.api_base.clone().unwrap_or_default().into(),
            model: u.model.as_str().into(),
            http,
            auth,
            vertex,
            timeouts,
        })
    }

    /// `rest` naming this target's model (a group's deployment's) where `span` named the
    /// group; on Vertex AI, with this deployment's project and location too.
    pub fn routed_path(&self, rest: &str, span: Range<usize>) -> String {
        let named = path::with_model(rest, span, &self.model);
        match &self.vertex {
            Some(p) => path::with_place(&named, &p.project, &p.location).unwrap_or(named),
            None => named,
        }
    }

    /// This target's model as a JSON string, to splice into a body's `model`.
    pub fn model_json(&self) -> &Bytes {
        &self.http.model_json
    }

    /// Send one request to the route's upstream; resolves when the answer's head arrives.
    pub async fn send(&self, call: Outgoing<'_>) -> Result<Response<UpstreamBody>, ApiError> {
        let method = method_name(call.method)?;
        let uri = self.uri(call.rest, call.query)?;
        let mut headers = self.headers(call.headers, !call.body.iter().all(Bytes::is_empty));
        if let Some(parent) = call.trace {
            headers.insert(sluice_core::trace_context::TRACEPARENT.clone(), parent);
        }
        let segments = call.body;
        match &self.auth {
            Auth::Keyed => {}
            Auth::SigV4(signer) => {
                let whole = join_segments(&segments);
                signer.sign_method(method, &uri, &mut headers, &whole, SystemTime::now());
            }
            Auth::Google(tokens) => {
                let h = tokens
                    .header()
                    .await
                    .map_err(|e| ApiError::UpstreamUnreachable(e.to_string()))?;
                headers.insert(AUTHORIZATION, h);
            }
        }
        let mut req = Request::builder()
            .method(call.method.clone())
            .uri(uri)
            .body(SegmentsBody::new(segments))
            .map_err(|e| ApiError::UpstreamInvalid(e.to_string()))?;
        *req.headers_mut() = headers;
        let resp = self.http.client.send(req).await.map_err(client_error)?;
        Ok(resp.map(UpstreamBody::Http))
    }

    /// The upstream URL of a path below the route (checked by the caller) and its query.
    fn uri(&self, rest: &str, query: Option<&str>) -> Result<Uri, ApiError> {
        let (base, rest) = match self.route {
            Route::Vertex => self.vertex_path(rest),
            Route::Bedrock => (Cow::Borrowed(&*self.base), Cow::Owned(canonical_path(rest))),
            _ => (Cow::Borrowed(&*self.base), Cow::Borrowed(rest)),
        };
        let mut url = path::join(&base, &rest);
        let query = match (self.route, query) {
            // The Gemini SDKs put the (sluice) key in `?key=`; sluice's goes in a header.
            (Route::Gemini, Some(q)) => Some(without_key(q)),
            (_, q) => q.map(Cow::Borrowed),
        };
        if let Some(q) = query.filter(|q| !q.is_empty()) {
            url.push('?');
            url.push_str(&q);
        }
        path::on_host(&url, &base)
    }

    /// Vertex AI: paths without a project and location get the configured ones; with the
    /// default base, the host follows the location the path names.
    fn vertex_path<'a>(&'a self, rest: &'a str) -> (Cow<'a, str>, Cow<'a, str>) {
        let Some(place) = &self.vertex else {
            return (Cow::Borrowed(&*self.base), Cow::Borrowed(rest));
        };
        let (version, below) = match rest.strip_prefix('/').and_then(|r| r.split_once('/')) {
            Some((v, below))
                if v.starts_with('v') && v[1..].starts_with(|c: char| c.is_ascii_digit()) =>
            {
                (v, below)
            }
            _ => ("v1", rest.trim_start_matches('/')),
        };
        let rest = if below.starts_with("publishers/") {
            Cow::Owned(format!(
                "/{version}/projects/{}/locations/{}/{below}",
                place.project, place.location
            ))
        } else {
            Cow::Borrowed(rest)
        };
        let named = rest
            .split_once("/locations/")
            .and_then(|(_, r)| r.split('/').next())
            .filter(|l| !l.is_empty() && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'));
        let base = match named {
            Some(l) if place.default_host && l != place.location => Cow::Owned(match l {
                "global" => "https://aiplatform.googleapis.com".to_owned(),
                l => format!("https://{l}-aiplatform.googleapis.com"),
            }),
            _ => Cow::Borrowed(&*self.base),
        };
        (base, rest)
    }

    /// The headers sent upstream: sluice's (credentials, `extra_headers`), then the client's
    /// except its credentials, hop-by-hop headers and those sluice sets itself. The client's
    /// `Content-Type` and `User-Agent` win over sluice's defaults.
    fn headers(&self, client: &HeaderMap, has_body: bool) -> HeaderMap {
        let mut h = self.http.headers.next().clone();
        if !has_body {
            h.remove(CONTENT_TYPE);
        }
        for name in [CONTENT_TYPE, USER_AGENT] {
            if client.contains_key(&name) {
                h.remove(&name);
            }
        }
        let own: Vec<HeaderName> = h.keys().cloned().collect();
        let listed = connection_listed(client);
        for (name, value) in client {
            let skip = never_forwarded(name)
                || listed.iter().any(|l| l == name.as_str())
                || own.contains(name);
            if !skip {
                h.append(name.clone(), value.clone());
            }
        }
        if self.route == Route::Anthropic && !h.contains_key(ANTHROPIC_VERSION.as_str()) {
            h.insert(
                ANTHROPIC_VERSION.clone(),
                HeaderValue::from_static(sluice_translate::anthropic::API_VERSION),
            );
        }
        h
    }
}

static ANTHROPIC_VERSION: HeaderName = HeaderName::from_static("anthropic-version");

/// Client request headers that never reach the upstream: the client's credentials (sluice
/// keys in every header a provider SDK uses, and an AWS SDK's own signature), hop-by-hop
/// headers, and what sluice sets itself (`Host`, `Content-Length`, no compression so that
/// usage can be read).
const NEVER_FORWARDED: [&str; 21] = [
    "authorization",
    "x-api-key",
    "api-key",
    "x-goog-api-key",
    "x-litellm-api-key",
    "cookie",
    "x-amz-date",
    "x-amz-security-token",
    "x-amz-content-sha256",
    "host",
    "content-length",
    "accept-encoding",
    "connection",
    "keep-alive",
    "proxy-authorization",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "expect",
];

/// Whether a client header never reaches an upstream (its credentials, hop-by-hop headers,
/// what sluice sets itself).
pub fn never_forwarded(name: &HeaderName) -> bool {
    NEVER_FORWARDED.contains(&name.as_str())
}

/// Headers the `Connection` header names as hop-by-hop.
pub fn connection_listed(h: &HeaderMap) -> Vec<String> {
    h.get_all(CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|n| n.trim().to_ascii_lowercase())
        .filter(|n| !n.is_empty())
        .collect()
}

/// Upstream answer headers that do not go back to the client: hop-by-hop headers, the length
/// (hyper sets the one it sends), cookies of the provider's domain.
const NOT_RETURNED: [&str; 10] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "trailer",
    "upgrade",
    "te",
    "content-length",
    "set-cookie",
    "alt-svc",
];

/// Copy an upstream answer's headers for the client, but for hop-by-hop ones.
pub fn answer_headers(upstream: &HeaderMap, out: &mut HeaderMap) {
    let listed = connection_listed(upstream);
    for (name, value) in upstream {
        if NOT_RETURNED.contains(&name.as_str()) || listed.iter().any(|l| l == name.as_str()) {
            continue;
        }
        out.append(name.clone(), value.clone());
    }
}

/// "… or mark a deployment": how else a route gets its upstream.
fn flag_hint(route: Route) -> String {
    match route.spec().deployments {
        Some(p) => {
            format!(", or mark a {p}/ deployment in model_list with `use_in_pass_through: true`")
        }
        None => String::new(),
    }
}

/// The methods pass-through routes take (LiteLLM's), as static names for signing.
fn method_name(m: &Method) -> Result<&'static str, ApiError> {
    Ok(match *m {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        _ => return Err(ApiError::MethodNotAllowed(m.to_string())),
    })
}

/// Whether a pass-through route takes this method.
pub fn allows(m: &Method) -> bool {
    method_name(m).is_ok()
}

/// Bedrock's path with every segment encoded the one way SigV4 signs it (a model id's `:` as
/// `%3A`), however the client encoded it.
fn canonical_path(rest: &str) -> String {
    rest.split('/')
        .map(|seg| uri_encode(&uri_decode(seg), false))
        .collect::<Vec<_>>()
        .join("/")
}

/// A query without its `key=` pairs.
fn without_key(q: &str) -> Cow<'_, str> {
    if !q.split('&').any(|p| p == "key" || p.starts_with("key=")) {
        return Cow::Borrowed(q);
    }
    Cow::Owned(
        q.split('&')
            .filter(|p| !(p.is_empty() || *p == "key" || p.starts_with("key=")))
            .collect::<Vec<_>>()
            .join("&"),
    )
}

fn join_segments(segments: &[Bytes]) -> Bytes {
    match segments {
        [] => Bytes::new(),
        [one] => one.clone(),
        many => {
            let mut buf = BytesMut::with_capacity(many.iter().map(Bytes::len).sum());
            for s in many {
                buf.extend_from_slice(s);
            }
            buf.freeze()
        }
    }
}

/// Every route's target, or why it has none.
#[derive(Debug)]
pub struct Targets(Vec<Result<Target, Unavailable>>);

impl Targets {
    /// Make each route's upstream ready (`upstreams` in [`Route::ALL`] order; a route missing
    /// from it is unavailable).
    pub fn build(
        upstreams: &[(Route, Result<UpstreamConfig, Unavailable>)],
        clients: &ClientRegistry,
        timeouts: Timeouts,
    ) -> Self {
        let targets = Route::ALL
            .iter()
            .map(|route| {
                let found = upstreams.iter().find(|(r, _)| r == route);
                match found {
                    Some((_, Ok(u))) => Target::build(*route, u, clients, timeouts),
                    Some((_, Err(e))) => Err(e.clone()),
                    None => Err(Unavailable("no upstream settings".to_owned())),
                }
            })
            .collect();
        Self(targets)
    }

    /// A route's target, or why it cannot be called.
    pub fn get(&self, route: Route) -> Result<&Target, &Unavailable> {
        match self.0.get(route.index()) {
            Some(Ok(t)) => Ok(t),
            Some(Err(e)) => Err(e),
            None => Err(&UNCONFIGURED),
        }
    }
}

static UNCONFIGURED: Unavailable = Unavailable(String::new());

#[cfg(test)]
mod tests {
    use super::*;
    use crate::passthrough::upstream;
    use std::collections::HashMap;

    #[test]
    fn client_credentials_and_hop_by_hop_headers_stay_behind() {
        let env: HashMap<String, String> = HashMap::from([
            ("ANTHROPIC_API_KEY".into(), "sk-upstream".into()),
            ("GEMINI_API_KEY".into(), "g-upstream".into()),
        ]);
        let clients = ClientRegistry::new(0);
        let u = upstream(Route::Anthropic, None, &env).unwrap();
        let t = Target::build(Route::Anthropic, &u, &clients, Timeouts::default()).unwrap();
        let mut client = HeaderMap::new();
        for (k, v) in [
            ("x-api-key", "sk-virtual"),
            ("authorization", "Bearer sk-virtual"),
            ("x-litellm-api-key", "sk-virtual"),
            ("connection", "keep-alive, x-private"),
            ("x-private", "1"),
            ("accept-encoding", "gzip"),
            ("content-type", "application/json; charset=utf-8"),
            ("anthropic-beta", "tools-2024"),
        ] {
            client.insert(HeaderName::from_static(k), HeaderValue::from_static(v));
        }
        let h = t.headers(&client, true);
        assert_eq!(h.get("x-api-key").unwrap(), "sk-upstream");
        assert_eq!(h.get_all("x-api-key").iter().count(), 1);
        for gone in [
            "authorization",
            "x-litellm-api-key",
            "x-private",
            "accept-encoding",
            "connection",
        ] {
            assert!(h.get(gone).is_none(), "{gone}");
        }
        assert_eq!(
            h.get("content-type").unwrap(),
            "application/json; charset=utf-8"
        );
        assert_eq!(h.get("anthropic-beta").unwrap(), "tools-2024");
        assert!(h.get("anthropic-version").is_some());

        let g = upstream(Route::Gemini, None, &env).unwrap();
        let t = Target::build(Route::Gemini, &g, &clients, Timeouts::default()).unwrap();
        let uri = t
            .uri(
                "/v1beta/models/m:streamGenerateContent",
                Some("alt=sse&key=sk-virtual"),
            )
            .unwrap();
        assert_eq!(
            uri.to_string(),
            "https://generativelanguage.googleapis.com/v1beta/models/m:streamGenerateContent?alt=sse"
        );
        assert_eq!(without_key("key=a"), "");
        assert_eq!(without_key("a=1&key=b&c=2"), "a=1&c=2");
    }

    #[test]
    fn bedrock_paths_are_encoded_once_and_vertex_paths_get_their_project() {
        assert_eq!(
            canonical_path("/model/anthropic.claude-v1:0/converse"),
            "/model/anthropic.claude-v1%3A0/converse"
        );
        assert_eq!(
            canonical_path("/model/arn%3Aaws%3Ax%2Fy/invoke"),
            "/model/arn%3Aaws%3Ax%2Fy/invoke"
        );
        let key = include_str!("../../../../tests/fixtures/vertex/service_account.json");
        let env: HashMap<String, String> = HashMap::from([
            ("DEFAULT_VERTEXAI_PROJECT".into(), "proj".into()),
            ("DEFAULT_VERTEXAI_LOCATION".into(), "us-east5".into()),
            ("DEFAULT_GOOGLE_APPLICATION_CREDENTIALS".into(), key.into()),
        ]);
        let clients = ClientRegistry::new(0);
        let v = upstream(Route::Vertex, None, &env).unwrap();
        let t = Target::build(Route::Vertex, &v, &clients, Timeouts::default()).unwrap();
        let u = |rest| t.uri(rest, None).unwrap().to_string();
        assert_eq!(
            u("/publishers/google/models/g:generateContent"),
            "https://us-east5-aiplatform.googleapis.com/v1/projects/proj/locations/us-east5/publishers/google/models/g:generateContent"
        );
        assert_eq!(
            u("/v1beta1/publishers/google/models/g:generateContent"),
            "https://us-east5-aiplatform.googleapis.com/v1beta1/projects/proj/locations/us-east5/publishers/google/models/g:generateContent"
        );
        assert_eq!(
            u("/v1/projects/p2/locations/europe-west4/publishers/google/models/g:generateContent"),
            "https://europe-west4-aiplatform.googleapis.com/v1/projects/p2/locations/europe-west4/publishers/google/models/g:generateContent"
        );
        // A group's deployment: its model, and its project and location, whatever the path
        // named (the host follows).
        let rest =
            "/v1/projects/p2/locations/europe-west4/publishers/google/models/fast:generateContent";
        let routed = t.routed_path(rest, path::google(rest).span.unwrap());
        assert_eq!(
            u(&routed),
            "https://us-east5-aiplatform.googleapis.com/v1/projects/proj/locations/us-east5/publishers/google/models/pass-through:generateContent"
        );
    }
}
