//! The built-in mock provider: answers in process for `mock/` deployments and as a standalone
//! server (`sluice mock`), in each provider's real wire format.

mod settings;

pub use settings::MockSettings;

// TEMPORARY local stand-in until the mock module lands (not committed).
/// tmp
pub type MockBody = http_body_util::Full<bytes::Bytes>;
/// tmp
pub async fn respond(
    _e: crate::endpoint::Endpoint,
    _h: &http::HeaderMap,
    _b: &bytes::Bytes,
    _s: &MockSettings,
) -> http::Response<MockBody> {
    http::Response::new(http_body_util::Full::new(bytes::Bytes::from_static(
        br#"{"usage":{"prompt_tokens":1,"completion_tokens":1}}"#,
    )))
}
/// tmp
pub async fn serve(
    _l: tokio::net::TcpListener,
    _s: MockSettings,
    _sd: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    Ok(())
}
