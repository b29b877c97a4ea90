//! What every HTTP provider shares: the pooled client, the header sets (one per API key, with
//! the weighted choice among them), the upstream model name encoded once, the pass-through of
//! a same-dialect call (the client's buffer with `model` spliced in) and the POST of a body
//! sluice wrote. Providers add their URLs and their credentials around these.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue, AUTHORIZATION, CONTENT_TYPE, USER_AGENT};
use http::{HeaderMap, Request, Response, Uri};
use sluice_core::endpoint::{BodyFormat, Endpoint};
use sluice_core::error::ApiError;
use sluice_core::rules::{ModelRules, RuleBook};
use sluice_core::Secret;
use sluice_net::client::error_chain;
use sluice_net::{SegmentsBody, UpstreamClient};
use sluice_translate::envelope::{splice, Edits, Segments};
use sluice_translate::fit;

use crate::body::UpstreamBody;
use crate::call::Call;
use crate::exchange::DroppedParams;
use crate::target::{Prepared, TargetError, MAX_CONNECT_TIMEOUT};

/// How an upstream expects its API key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyHeader {
    /// `Authorization: Bearer <key>` (OpenAI and nearly every compatible server).
    Bearer,
    /// The key as the value of a header of the provider's own (`api-key`, `x-api-key`,
    /// `x-goog-api-key`: kept out of the URL, so out of logs).
    Named(&'static str),
    /// No key header: each request carries per-request credentials (a SigV4 signature, a
    /// Google OAuth token).
    Signed,
}

/// Where a same-dialect call goes: the vendor's own API, or a platform that hosts it with a
/// body of its own, whose changes the provider's module gives (Claude on Vertex AI and Bedrock:
/// `anthropic::platform_edits` and Bedrock's own).
#[derive(Debug)]
pub enum Host {
    /// The vendor's API: the model is spliced in.
    Vendor,
    /// A platform: the model is in its URL, and these edits make the body the platform's.
    Platform(Edits),
}

/// The HTTP side of a deployment: everything but its URLs and per-request credentials.
#[derive(Debug)]
pub struct HttpTarget {
    /// The provider's prefix, for errors that name it.
    pub provider: &'static str,
    /// Pooled client (one pool per server worker thread).
    pub client: UpstreamClient,
    /// `drop_params`: parameters the provider cannot take are dropped, not refused.
    pub drop_params: bool,
    /// What the upstream model accepts (resolved at config load).
    pub rules: ModelRules,
    /// A wildcard deployment's rules of each model it is asked for.
    rule_book: Option<RuleBook>,
    /// Headers sent on every request (auth, extra headers), one set per key.
    pub headers: KeyRing,
    /// The upstream model name encoded as a JSON string, spliced into the body.
    pub model_json: Bytes,
    /// Upstream TLS other than the defaults, for connections made outside the pooled client
    /// (Realtime WebSockets).
    pub tls: Option<Arc<sluice_net::tls::UpstreamTls>>,
    /// `upstream_model` contains `*`: the client's model fills it in per request.
    pub wildcard: Option<Box<str>>,
}

impl HttpTarget {
    /// The HTTP side of `d`: its keys presented as `key`, `fixed` headers on every request.
    pub fn build(
        d: &Prepared<'_>,
        key: KeyHeader,
        fixed: &[(HeaderName, HeaderValue)],
    ) -> Result<Self, TargetError> {
        let u = d.upstream;
        let headers = if u.api_keys.is_empty() {
            KeyRing::new(vec![(headers(d, key, None, fixed)?, 1.0)])
        } else {
            let mut sets = Vec::with_capacity(u.api_keys.len());
            for k in &u.api_keys {
                sets.push((headers(d, key, Some(&k.key), fixed)?, k.weight));
            }
            KeyRing::new(sets)
        };
        let client = d
            .clients
            .get_for(d.timeouts.total.min(MAX_CONNECT_TIMEOUT), &u.connect);
        Ok(Self {
            provider: d.info.provider,
            client,
            drop_params: d.drop_params,
            rules: d.rules,
            rule_book: d.rule_book.clone(),
            headers,
            model_json: encode_model(&u.model),
            tls: u.connect.tls.clone(),
            wildcard: u.model.contains('*').then(|| u.model.clone().into()),
        })
    }

    /// The upstream model name for this call, encoded as a JSON string: the deployment's, or
    /// a wildcard's fill-in.
    pub fn model_json(&self, call: &Call<'_>) -> Bytes {
        match (&self.wildcard, call.capture) {
            (Some(_), _) => encode_model(&self.model_for(call.capture, &call.envelope.model)),
            (None, _) => self.model_json.clone(),
        }
    }

    /// The rules of the model this call goes to: the deployment's, or for a wildcard
    /// deployment the asked model's (looked up per call).
    pub fn rules_for(&self, call: &Call<'_>) -> ModelRules {
        match (&self.rule_book, &self.wildcard) {
            (Some(book), Some(_)) => book.of(&self.model_for(call.capture, &call.envelope.model)),
            _ => self.rules,
        }
    }

    /// The upstream model name as text, for a caller who asked for `requested` (`capture`:
    /// what a wildcard group's `*` matched). Realtime sessions name it in their URL.
    pub fn model_for(&self, capture: Option<&str>, requested: &str) -> String {
        match (&self.wildcard, capture) {
            (Some(pattern), Some(capture)) => pattern.replacen('*', capture, 1),
            (Some(_), None) => requested.to_owned(),
            (None, _) => serde_json::from_slice(&self.model_json).unwrap_or_default(),
        }
    }

    /// The upstream model name for this call, as text.
    pub fn model(&self, call: &Call<'_>) -> Result<String, ApiError> {
        serde_json::from_slice(&self.model_json(call))
            .map_err(|e| ApiError::UpstreamInvalid(e.to_string()))
    }

    /// The model a wildcard deployment builds its URL for (`None`: the prebuilt URL).
    pub fn wildcard_model<'m>(&self, model: &'m str) -> Option<&'m str> {
        self.wildcard.is_some().then_some(model)
    }

    /// The headers of one request: the next key's set, and the call's trace context.
    pub fn request_headers(&self, call: &Call<'_>) -> HeaderMap {
        let mut h = self.headers.next().clone();
        call.trace_headers(&mut h);
        h
    }

    /// A same-dialect call passed through to `url`: the client's body with the upstream
    /// model spliced in (and sluice's own fields taken out), `extra` client headers copied.
    /// A multipart form keeps the client's content type (its boundary).
    pub async fn pass_through(
        &self,
        url: &Uri,
        call: &Call<'_>,
        extra: &[HeaderName],
    ) -> Result<Response<UpstreamBody>, ApiError> {
        self.relay(url, call, extra, self.request_headers(call), Host::Vendor)
            .await
    }

    /// A same-dialect call relayed to `url` with `headers` (the provider's credentials in
    /// them), its body reshaped for `host`.
    pub async fn relay(
        &self,
        url: &Uri,
        call: &Call<'_>,
        extra: &[HeaderName],
        headers: HeaderMap,
        host: Host,
    ) -> Result<Response<UpstreamBody>, ApiError> {
        let multipart = call.envelope.format == BodyFormat::Multipart;
        let (segments, dropped) = self.relayed_body(call, host)?;
        let body = match call.upload {
            Some(upload) => SegmentsBody::with_upload(segments, upload),
            None => SegmentsBody::new(segments),
        };
        let mut req = Request::post(url.clone())
            .body(body)
            .map_err(|e| ApiError::UpstreamInvalid(e.to_string()))?;
        *req.headers_mut() = headers;
        if multipart {
            // The form's boundary is the client's.
            if let Some(ct) = call.client_headers.get(CONTENT_TYPE) {
                req.headers_mut().insert(CONTENT_TYPE, ct.clone());
            }
        }
        for name in extra {
            if let Some(v) = call.client_headers.get(name) {
                req.headers_mut().insert(name.clone(), v.clone());
            }
        }
        let resp = self.client.send(req).await.map_err(client_error)?;
        let mut resp = resp.map(UpstreamBody::Http);
        if let Some(names) = dropped {
            resp.extensions_mut().insert(names);
        }
        Ok(resp)
    }

    /// A same-dialect call's body as `host` takes it: the client's buffer with the upstream
    /// model (or, on a platform, the platform's fields) spliced in, sluice's own fields taken
    /// out and the model's rules applied; and what the rules dropped, for the answer.
    pub fn relayed_body(
        &self,
        call: &Call<'_>,
        host: Host,
    ) -> Result<(Segments, Option<DroppedParams>), ApiError> {
        let multipart = call.envelope.format == BodyFormat::Multipart;
        let model = if multipart {
            // A form field holds the model as plain text.
            Bytes::from(self.model(call)?)
        } else {
            self.model_json(call)
        };
        let unchanged = call.body.get(call.envelope.model_range.clone()) == Some(&model[..]);
        let mut fitted = match call.endpoint {
            Endpoint::ChatCompletions | Endpoint::Messages => fit::pass_through(
                call.body,
                &call.envelope.tunables,
                call.endpoint.dialect(),
                &self.rules_for(call),
            )?,
            _ => None,
        };
        let new_model = match host {
            Host::Vendor => (!unchanged).then_some(&model),
            Host::Platform(platform) => {
                fitted.get_or_insert_with(Default::default).0.add(platform);
                None
            }
        };
        let segments = splice(
            call.body,
            call.envelope,
            new_model,
            call.force_usage,
            fitted.as_ref().map(|(edits, _)| edits),
        )?;
        let dropped = fitted
            .filter(|(_, d)| !d.is_empty())
            .and_then(|(_, d)| HeaderValue::from_str(&d.join(",")).ok())
            .map(DroppedParams);
        Ok((segments, dropped))
    }

    /// GET `uri` with the next key's headers: a provider's model list, the cheap probe of an
    /// active health check (a call that proves the endpoint and the key without buying tokens).
    pub async fn get(&self, uri: Uri) -> Result<Response<UpstreamBody>, ApiError> {
        let mut up = Request::get(uri)
            .body(SegmentsBody::new(Vec::new()))
            .map_err(|e| ApiError::UpstreamInvalid(e.to_string()))?;
        *up.headers_mut() = self.headers.next().clone();
        up.headers_mut().remove(CONTENT_TYPE);
        let resp = self.client.send(up).await.map_err(client_error)?;
        Ok(resp.map(UpstreamBody::Http))
    }

    /// POST a body sluice wrote, with `headers` (the provider has added its credentials).
    pub async fn post(
        &self,
        uri: Uri,
        headers: HeaderMap,
        body: Bytes,
    ) -> Result<Response<UpstreamBody>, ApiError> {
        let mut up = Request::post(uri)
            .body(SegmentsBody::new(vec![body]))
            .map_err(|e| ApiError::UpstreamInvalid(e.to_string()))?;
        *up.headers_mut() = headers;
        let resp = self.client.send(up).await.map_err(client_error)?;
        Ok(resp.map(UpstreamBody::Http))
    }
}

/// A deployment's header sets, one per API key, and the weighted choice among them
/// (several keys per deployment spread load over the provider's per-key limits).
#[derive(Debug)]
pub struct KeyRing {
    sets: Box<[HeaderMap]>,
    /// Cumulative weights, same length as `sets`.
    cumulative: Box<[f64]>,
    counter: AtomicU64,
}

impl KeyRing {
    fn new(sets: Vec<(HeaderMap, f64)>) -> Self {
        let mut total = 0.0;
        let cumulative = sets
            .iter()
            .map(|(_, w)| {
                total += w;
                total
            })
            .collect();
        Self {
            sets: sets.into_iter().map(|(h, _)| h).collect(),
            cumulative,
            counter: AtomicU64::new(0),
        }
    }

    /// The headers for the next request: weighted over the keys by a golden-ratio sequence
    /// (even spread, no random numbers); a single key costs nothing.
    pub fn next(&self) -> &HeaderMap {
        if self.sets.len() <= 1 {
            return &self.sets[0];
        }
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let total = self.cumulative.last().copied().unwrap_or(1.0);
        let x = ((n as f64) * 0.618_033_988_749_895).fract() * total;
        let i = self
            .cumulative
            .iter()
            .position(|c| x < *c)
            .unwrap_or(self.sets.len() - 1);
        &self.sets[i]
    }
}

/// One prebuilt URL per endpoint.
#[derive(Debug)]
pub struct EndpointUrls([Uri; Endpoint::ALL.len()]);

impl EndpointUrls {
    /// Build each endpoint's URL with `url`.
    pub fn build(d: &Prepared<'_>, url: impl Fn(Endpoint) -> String) -> Result<Self, TargetError> {
        let mut out = Vec::with_capacity(Endpoint::ALL.len());
        for e in Endpoint::ALL {
            out.push(uri(d, url(e))?);
        }
        let urls = out
            .try_into()
            .map_err(|_| d.bad_url("", "internal: endpoint count"))?;
        Ok(Self(urls))
    }

    /// The URL for one endpoint.
    pub fn get(&self, e: Endpoint) -> &Uri {
        &self.0[e.index()]
    }
}

/// What a call to an upstream that names the model and the operation in its path (Gemini,
/// Bedrock, Vertex AI) does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// A whole chat answer.
    Chat,
    /// A streamed chat answer.
    Stream,
    /// Embeddings.
    Embed,
    /// Images (Imagen's `:predict`, Bedrock's `invoke`).
    Predict,
}

impl Op {
    /// The chat operation of a request that streams or not.
    pub fn chat(stream: bool) -> Self {
        if stream {
            Self::Stream
        } else {
            Self::Chat
        }
    }
}

/// A URL for (base, model, operation).
pub type UrlFn = fn(&str, &str, Op) -> String;

/// The URLs of a deployment whose upstream names the model in the path: prebuilt for its
/// model, built per request for what a wildcard's `*` matched.
#[derive(Debug)]
pub struct ModelUrls {
    base: Box<str>,
    url: UrlFn,
    chat: Uri,
    stream: Uri,
    embed: Uri,
    predict: Uri,
}

impl ModelUrls {
    /// Prebuild `d`'s URLs below `base` with `url`.
    pub fn build(d: &Prepared<'_>, base: String, url: UrlFn) -> Result<Self, TargetError> {
        let model = &d.upstream.model;
        Ok(Self {
            chat: uri(d, url(&base, model, Op::Chat))?,
            stream: uri(d, url(&base, model, Op::Stream))?,
            embed: uri(d, url(&base, model, Op::Embed))?,
            predict: uri(d, url(&base, model, Op::Predict))?,
            base: base.into(),
            url,
        })
    }

    /// The URL of a call: prebuilt, or built for a wildcard deployment's model.
    pub fn get(&self, op: Op, wildcard_model: Option<&str>) -> Result<Uri, ApiError> {
        if let Some(m) = wildcard_model {
            return (self.url)(&self.base, m, op)
                .parse()
                .map_err(|e: http::uri::InvalidUri| ApiError::UpstreamInvalid(e.to_string()));
        }
        Ok(match op {
            Op::Chat => self.chat.clone(),
            Op::Stream => self.stream.clone(),
            Op::Embed => self.embed.clone(),
            Op::Predict => self.predict.clone(),
        })
    }
}

/// A model name as a JSON string literal.
pub fn encode_model(model: &str) -> Bytes {
    Bytes::from(serde_json::to_vec(model).unwrap_or_else(|_| b"\"\"".to_vec()))
}

/// A URL that must parse, for this deployment.
pub fn uri(d: &Prepared<'_>, url: String) -> Result<Uri, TargetError> {
    url.parse()
        .map_err(|e: http::uri::InvalidUri| d.bad_url(&url, e))
}

fn headers(
    d: &Prepared<'_>,
    key_header: KeyHeader,
    key: Option<&Secret>,
    fixed: &[(HeaderName, HeaderValue)],
) -> Result<HeaderMap, TargetError> {
    let u = d.upstream;
    let mut h = HeaderMap::with_capacity(4 + fixed.len() + u.extra_headers.len());
    h.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    h.insert(
        USER_AGENT,
        HeaderValue::from_static(concat!("sluice/", env!("CARGO_PKG_VERSION"))),
    );
    let header = key.and_then(|key| match key_header {
        KeyHeader::Bearer => Some((AUTHORIZATION, format!("Bearer {}", key.expose()))),
        KeyHeader::Named(name) => Some((HeaderName::from_static(name), key.expose().to_owned())),
        // Authenticated per request: a configured `api_key` is not sent.
        KeyHeader::Signed => None,
    });
    if let Some((name, value)) = header {
        let mut v = HeaderValue::from_str(&value).map_err(|_| d.bad_header(name.as_str()))?;
        v.set_sensitive(true);
        h.insert(name, v);
    }
    for (name, value) in fixed {
        h.insert(name.clone(), value.clone());
    }
    for (name, value) in &u.extra_headers {
        let n = HeaderName::from_bytes(name.as_bytes()).map_err(|_| d.bad_header(name))?;
        let mut v = HeaderValue::from_str(value.expose()).map_err(|_| d.bad_header(name))?;
        v.set_sensitive(true);
        h.insert(n, v);
    }
    Ok(h)
}

/// A transport failure as the client sees it: the chain of causes, no request details.
pub fn client_error(e: sluice_net::client::SendError) -> ApiError {
    let what = if e.is_connect() {
        "connection failed"
    } else {
        "request failed"
    };
    ApiError::UpstreamUnreachable(error_chain(what.to_owned(), &e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_ring_spreads_by_weight() {
        let set = |k: &'static str| {
            let mut h = HeaderMap::new();
            h.insert(AUTHORIZATION, HeaderValue::from_static(k));
            (h, 0.0)
        };
        let ring = KeyRing::new(vec![(set("a").0, 3.0), (set("b").0, 1.0)]);
        let a = (0..4000)
            .filter(|_| ring.next().get(AUTHORIZATION).unwrap() == "a")
            .count();
        assert!((2950..3050).contains(&a), "{a}");
        let one = KeyRing::new(vec![set("only")]);
        assert_eq!(one.next().get(AUTHORIZATION).unwrap(), "only");
    }

    #[test]
    fn model_encoding_escapes() {
        assert_eq!(&encode_model("a\"b")[..], br#""a\"b""#);
    }
}
