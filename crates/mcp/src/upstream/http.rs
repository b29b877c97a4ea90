//! A streamable HTTP tool server: each message POSTed to its URL over sluice's pooled client
//! (the worker's own pool), with its credential headers and the session it gave sluice. An
//! answer comes back as one JSON message or as an SSE stream carrying it; either is read only
//! until sluice's response arrives, and never past the size bound. A session the server has
//! forgotten (404) is opened again once.

use std::sync::Arc;

use bytes::Bytes;
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request, StatusCode};
use http_body_util::BodyExt;
use sluice_net::client::error_chain;
use sluice_net::client::UpstreamClient;
use sluice_net::SegmentsBody;
use tokio::sync::Mutex;

use super::notes::{self, Notes};
use super::oauth::TokenSource;
use super::sse::Events;
use super::{initialize_params, negotiated_version, Reply, UpstreamError};
use crate::jsonrpc::{self, Message};
use crate::settings::{Credential, HttpServer};

const SESSION: HeaderName = HeaderName::from_static("mcp-session-id");
const VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");

/// The session a server gave sluice.
#[derive(Debug)]
struct Session {
    id: Option<HeaderValue>,
    version: HeaderValue,
}

/// sluice's link to one streamable HTTP server.
pub(super) struct HttpLink {
    url: http::Uri,
    headers: HeaderMap,
    client: UpstreamClient,
    /// The token source when the credential is `auth_type: oauth2`.
    oauth: Option<TokenSource>,
    max_bytes: usize,
    session: Mutex<Option<Arc<Session>>>,
}

impl std::fmt::Debug for HttpLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpLink").finish_non_exhaustive()
    }
}

impl HttpLink {
    pub(super) fn new(s: &HttpServer, client: UpstreamClient, max_bytes: usize) -> Self {
        let mut headers = HeaderMap::new();
        for (name, value) in &s.headers {
            headers.insert(name.clone(), value.0.clone());
        }
        let oauth = match &s.credential {
            Some(Credential::Header(name, value)) => {
                headers.insert(name.clone(), value.0.clone());
                None
            }
            Some(Credential::OAuth(c)) => Some(TokenSource::new((**c).clone(), client.clone())),
            None => None,
        };
        headers.insert(
            ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream"),
        );
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        Self {
            url: s.url.clone(),
            headers,
            client,
            oauth,
            max_bytes,
            session: Mutex::new(None),
        }
    }

    /// Send request `id` and read its answer (its notifications to `notes`); a forgotten
    /// session is opened again once.
    pub(super) async fn request(
        &self,
        id: u64,
        body: String,
        notes: Option<&Notes>,
    ) -> Result<Reply, UpstreamError> {
        let body = Bytes::from(body);
        let session = self.session().await?;
        match self
            .post(body.clone(), Some(&session), Some(id), notes)
            .await
        {
            Err(UpstreamError::Status(404)) if session.id.is_some() => {
                self.forget(&session).await;
                let session = self.session().await?;
                self.post(body, Some(&session), Some(id), notes).await?.1
            }
            other => other?.1,
        }
        .ok_or_else(|| UpstreamError::Protocol("no response to the request".into()))
    }

    /// Send a notification.
    pub(super) async fn notify(&self, body: String) -> Result<(), UpstreamError> {
        let session = self.session().await?;
        self.post(Bytes::from(body), Some(&session), None, None)
            .await?;
        Ok(())
    }

    /// The open session, opening one (`initialize`, then `notifications/initialized`) first.
    async fn session(&self) -> Result<Arc<Session>, UpstreamError> {
        let mut slot = self.session.lock().await;
        if let Some(s) = slot.as_ref() {
            return Ok(Arc::clone(s));
        }
        let body = jsonrpc::request(0, "initialize", Some(&initialize_params()));
        let (id, reply) = self.post(Bytes::from(body), None, Some(0), None).await?;
        let version = match reply {
            Some(Reply::Result(r)) => negotiated_version(&r)?,
            Some(Reply::Error(e)) => {
                return Err(UpstreamError::Protocol(format!(
                    "initialize refused: {}",
                    e.get()
                )))
            }
            None => return Err(UpstreamError::Protocol("no initialize result".into())),
        };
        let version = HeaderValue::from_str(&version)
            .map_err(|_| UpstreamError::Protocol("bad protocolVersion".into()))?;
        let session = Arc::new(Session { id, version });
        let done = jsonrpc::notification("notifications/initialized", None);
        self.post(Bytes::from(done), Some(&session), None, None)
            .await?;
        *slot = Some(Arc::clone(&session));
        Ok(session)
    }

    /// Drop `stale` if it is still the open session.
    async fn forget(&self, stale: &Arc<Session>) {
        let mut slot = self.session.lock().await;
        if slot.as_ref().is_some_and(|s| Arc::ptr_eq(s, stale)) {
            *slot = None;
        }
    }

    /// POST one message; with `want` set, read the answer until the response with that id
    /// (the notifications before it about that request go to `notes`). Returns the session
    /// id the server named, if any.
    async fn post(
        &self,
        body: Bytes,
        session: Option<&Session>,
        want: Option<u64>,
        notes: Option<&Notes>,
    ) -> Result<(Option<HeaderValue>, Option<Reply>), UpstreamError> {
        let resp = self.send(body, session).await?;
        let status = resp.status();
        if !status.is_success() {
            return Err(UpstreamError::Status(status.as_u16()));
        }
        let id = resp.headers().get(SESSION).cloned();
        let Some(want) = want else {
            return Ok((id, None));
        };
        if status == StatusCode::ACCEPTED {
            return Err(UpstreamError::Protocol("202 Accepted for a request".into()));
        }
        let sse = resp
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        let mut body = resp.into_body();
        let mut seen = 0usize;
        let mut whole = Vec::new();
        let mut events = Events::default();
        while let Some(frame) = body.frame().await {
            let frame = frame
                .map_err(|e| UpstreamError::Unavailable(error_chain("answer cut".into(), &e)))?;
            let Ok(data) = frame.into_data() else {
                continue;
            };
            seen += data.len();
            if seen > self.max_bytes {
                return Err(UpstreamError::TooLarge(self.max_bytes));
            }
            if !sse {
                whole.extend_from_slice(&data);
                continue;
            }
            for event in events.feed(&data) {
                if let Some(reply) = response_to(event.as_bytes(), want, notes)? {
                    return Ok((id, Some(reply)));
                }
            }
        }
        if sse {
            return Err(UpstreamError::Protocol(
                "the event stream ended without the response".into(),
            ));
        }
        match response_to(&whole, want, None)? {
            Some(reply) => Ok((id, Some(reply))),
            None => Err(UpstreamError::Protocol(
                "the answer is not the response to the request".into(),
            )),
        }
    }
}

impl HttpLink {
    /// Send one message with sluice's credential; a token the server refuses (401) is
    /// replaced and the message sent once more.
    async fn send(
        &self,
        body: Bytes,
        session: Option<&Session>,
    ) -> Result<http::Response<hyper::body::Incoming>, UpstreamError> {
        let Some(oauth) = &self.oauth else {
            return self.send_once(body, session, None).await;
        };
        let token = oauth.header().await?;
        let resp = self.send_once(body.clone(), session, Some(&token)).await?;
        if resp.status() != StatusCode::UNAUTHORIZED {
            return Ok(resp);
        }
        drop(resp);
        let fresh = oauth.renew(&token).await?;
        self.send_once(body, session, Some(&fresh)).await
    }

    async fn send_once(
        &self,
        body: Bytes,
        session: Option<&Session>,
        token: Option<&HeaderValue>,
    ) -> Result<http::Response<hyper::body::Incoming>, UpstreamError> {
        let mut req = Request::builder()
            .method(Method::POST)
            .uri(self.url.clone())
            .body(SegmentsBody::new(vec![body]))
            .map_err(|e| UpstreamError::Unavailable(e.to_string()))?;
        *req.headers_mut() = self.headers.clone();
        if let Some(t) = token {
            req.headers_mut().insert(AUTHORIZATION, t.clone());
        }
        if let Some(s) = session {
            if let Some(id) = &s.id {
                req.headers_mut().insert(SESSION, id.clone());
            }
            req.headers_mut().insert(VERSION, s.version.clone());
        }
        self.client
            .request(req)
            .await
            .map_err(|e| UpstreamError::Unavailable(error_chain("connection failed".into(), &e)))
    }
}

/// The reply in `text` when it is the response to request `want`; a notification about
/// that request (its progress, a log message) goes to `notes`, other messages on a stream
/// are passed over.
fn response_to(
    text: &[u8],
    want: u64,
    notes: Option<&Notes>,
) -> Result<Option<Reply>, UpstreamError> {
    let Some(m) = Message::parse(text) else {
        return Err(UpstreamError::Protocol("not a JSON-RPC message".into()));
    };
    let ours = m.method.is_none() && m.id.is_some_and(|id| id.get() == want.to_string());
    if ours {
        return Reply::of(&m).map(Some);
    }
    if let Some(notes) = notes {
        if m.id.is_none() && notes::for_request(&m, want) {
            notes.offer(text);
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_our_response_is_taken() {
        let progress = br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{}}"#;
        assert!(response_to(progress, 3, None).unwrap().is_none());
        let other = br#"{"jsonrpc":"2.0","id":4,"result":{}}"#;
        assert!(response_to(other, 3, None).unwrap().is_none());
        let ours = br#"{"jsonrpc":"2.0","id":3,"error":{"code":1,"message":"m"}}"#;
        assert!(matches!(
            response_to(ours, 3, None).unwrap(),
            Some(Reply::Error(_))
        ));
        assert!(response_to(b"nope", 3, None).is_err());
    }

    #[tokio::test]
    async fn notes_about_the_request_are_handed_over() {
        let (notes, mut rx) = Notes::channel(4);
        let mine = br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":3,"progress":1}}"#;
        let theirs = br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":9,"progress":1}}"#;
        let log = br#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"hi"}}"#;
        for text in [&mine[..], &theirs[..], &log[..]] {
            assert!(response_to(text, 3, Some(&notes)).unwrap().is_none());
        }
        drop(notes);
        assert_eq!(rx.recv().await.unwrap().as_bytes(), mine);
        assert_eq!(rx.recv().await.unwrap().as_bytes(), log);
        assert!(rx.recv().await.is_none());
    }
}
