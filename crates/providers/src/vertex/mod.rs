//! Vertex AI: Gemini models (Google's `generateContent`, `crate::gemini`'s codec) and Claude
//! models (Anthropic's Messages with Vertex's `anthropic_version` and no `model` in the body:
//! an Anthropic client's request relayed with only those changes, an OpenAI client's written
//! by `AnthropicMessages::VERTEX`),
//! below a project and location, with OAuth tokens from a service account
//! (`sluice_net::google_auth`), cached and refreshed off the request path.

use std::sync::Arc;

use http::header::AUTHORIZATION;
use bytes::Bytes;
use http::header::HeaderName;
use http::{HeaderMap, Response, Uri};
use sluice_core::endpoint::Endpoint;
use sluice_core::error::ApiError;
use sluice_core::Secret;
use sluice_net::google_auth::{read_key_file, TokenSource};
use sluice_net::sigv4::uri_encode;
use sluice_translate::anthropic::{platform_edits, VERTEX_VERSION};
use sluice_translate::envelope::Edits;
use sluice_translate::codec::AnthropicMessages;
use sluice_translate::Codec;

use crate::body::UpstreamBody;
use crate::call::Call;
use crate::exchange;
use crate::gemini::{GenerateContent, Imagen};
use crate::http::{Host, HttpTarget, KeyHeader, ModelUrls, Op};
use crate::registry::{Base, ProviderSpec, Upstream};
use crate::Family;
use crate::settings::Reading;
use crate::target::{Prepared, TargetError};

/// `vertex_ai/`
pub const SPECS: &[ProviderSpec] = &[ProviderSpec {
    aliases: &["vertex_ai_beta"],
    base_env: &["VERTEXAI_API_BASE"],
    // The default endpoint depends on the location (`Vertex::base`).
    ..ProviderSpec::new("vertex_ai", Family::Vertex, None, &[])
}];

/// Where a Vertex AI deployment's models live and how it gets its tokens.
#[derive(Debug, Clone)]
pub struct Config {
    /// `vertex_project` (or `VERTEXAI_PROJECT`, or the key file's `project_id`).
    pub project: String,
    /// `vertex_location` (or `VERTEXAI_LOCATION`; default `us-central1`).
    pub location: String,
    /// The service-account key file's JSON (`vertex_credentials`: a path or the JSON itself,
    /// or `GOOGLE_APPLICATION_CREDENTIALS`); without it requests go unauthenticated.
    pub credentials: Option<Secret>,
}

/// A Vertex AI deployment: URLs for Google's and Anthropic's models below its project and
/// location, and its token source.
#[derive(Debug)]
pub struct Target {
    http: HttpTarget,
    google: ModelUrls,
    anthropic: ModelUrls,
    tokens: Option<Arc<TokenSource>>,
}

/// Vertex AI.
#[derive(Debug)]
pub struct Vertex;

impl Upstream for Vertex {
    type Config = Config;
    type Target = Target;
    const SPECS: &'static [ProviderSpec] = SPECS;
    const KEYS: &'static [&'static str] =
        &["vertex_project", "vertex_location", "vertex_credentials"];

    fn config(cx: &mut Reading<'_>) -> Option<Config> {
        let (params, env) = (cx.params, cx.env);
        let pick = |key: &str, vars: &[&str]| {
            params.text(key).or_else(|| {
                vars.iter()
                    .find_map(|v| env.var(v).filter(|s| !s.is_empty()))
            })
        };
        let path = params.path("vertex_credentials");
        let mut key = serde_json::Value::Null;
        let credentials = match pick("vertex_credentials", &["GOOGLE_APPLICATION_CREDENTIALS"]) {
            None => {
                cx.problems.warn(
                    &path,
                    "not set and neither is GOOGLE_APPLICATION_CREDENTIALS; requests will go \
                     without a token (application-default credentials are not read)",
                );
                None
            }
            Some(given) => {
                let (json, parsed) = read_key_file(&path, &given, cx.problems)?;
                key = parsed;
                Some(json)
            }
        };
        let project = pick(
            "vertex_project",
            &["VERTEXAI_PROJECT", "GOOGLE_CLOUD_PROJECT"],
        )
        .or_else(|| key["project_id"].as_str().map(str::to_owned));
        let Some(project) = project else {
            cx.problems.error(
                params.path("vertex_project"),
                "required (or set VERTEXAI_PROJECT)",
            );
            return None;
        };
        let location = pick("vertex_location", &["VERTEXAI_LOCATION"])
            .unwrap_or_else(|| "us-central1".to_owned());
        let safe = |s: &str| s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
        if !safe(&project) || !safe(&location) {
            cx.problems.error(
                params.path("vertex_project"),
                "project and location must be plain names",
            );
            return None;
        }
        Some(Config {
            project,
            location,
            credentials,
        })
    }

    fn base(c: &Config) -> Base {
        Base {
            given: None,
            default: Some(match c.location.as_str() {
                "global" => "https://aiplatform.googleapis.com".to_owned(),
                l => format!("https://{l}-aiplatform.googleapis.com"),
            }),
        }
    }

    fn target(d: &Prepared<'_>, c: &Config) -> Result<Target, TargetError> {
        let base = d.upstream.api_base.as_deref().unwrap_or_default();
        // Vertex AI serves its publishers' models below a project and location.
        let base = format!("{base}/v1/projects/{}/locations/{}", c.project, c.location);
        let http = HttpTarget::build(d, KeyHeader::Signed, &[])?;
        let tokens = match &c.credentials {
            Some(k) => Some(Arc::new(
                TokenSource::new(k.expose(), http.client.clone())
                    .map_err(|e| d.bad_credentials(e))?,
            )),
            None => None,
        };
        Ok(Target {
            google: ModelUrls::build(d, format!("{base}/publishers/google"), crate::gemini::url)?,
            anthropic: ModelUrls::build(d, format!("{base}/publishers/anthropic"), claude_url)?,
            http,
            tokens,
        })
    }

    async fn send(t: &Target, call: &Call<'_>) -> Result<Response<UpstreamBody>, ApiError> {
        let http = &t.http;
        match call.endpoint {
            // A Gemini client's body goes to Google's models as it came (the same format).
            Endpoint::GenerateContent if !is_claude(&http.model(call)?) => {
                Box::pin(relay_gemini(t, call)).await
            }
            Endpoint::ChatCompletions
            | Endpoint::Messages
            | Endpoint::Responses
            | Endpoint::GenerateContent
            | Endpoint::Converse => {
                let model = http.model(call)?;
                if !is_claude(&model) {
                    return chat(t, call, &GenerateContent, &t.google, model).await;
                }
                if call.endpoint != Endpoint::Messages {
                    return chat(t, call, &AnthropicMessages::VERTEX, &t.anthropic, model).await;
                }
                // An Anthropic client's body as rawPredict takes it: only the platform's
                // changes (no `model`, Vertex's `anthropic_version`), nothing lost in between.
                let op = Op::chat(call.envelope.stream);
                let uri = t.anthropic.get(op, http.wildcard_model(&model))?;
                let headers = headers(t, call).await?;
                let host = Host::Platform(platform_edits(call.envelope, VERTEX_VERSION));
                http.relay(&uri, call, &CLIENT_HEADERS, headers, host).await
            }
            Endpoint::ImageGenerations => {
                exchange::images(
                    http.provider,
                    &Imagen,
                    &GenerateContent,
                    call,
                    http.model(call)?,
                    |model, body| {
                        let uri = t.google.get(Op::Predict, http.wildcard_model(model));
                        post(t, call, uri, body)
                    },
                )
                .await
            }
            Endpoint::CountTokens => exchange::count_locally(http.provider, call.body),
            // Vertex AI embeds through `:predict`, which sluice does not speak yet.
            Endpoint::Embeddings | Endpoint::Completions
            | Endpoint::ImageEdits
            | Endpoint::ImageVariations
            | Endpoint::AudioTranscriptions
            | Endpoint::AudioTranslations
            | Endpoint::AudioSpeech
            | Endpoint::Moderations
            | Endpoint::Rerank
            | Endpoint::Ocr => exchange::not_served(http.provider, call),
        }
    }
}

/// A Gemini client's call to one of Google's models: its body as it came (the same format),
/// the deployment's model in the URL, its token in the headers.
async fn relay_gemini(t: &Target, call: &Call<'_>) -> Result<Response<UpstreamBody>, ApiError> {
    let http = &t.http;
    let model = http.model(call)?;
    let uri = t
        .google
        .get(Op::chat(call.envelope.stream), http.wildcard_model(&model))?;
    let headers = headers(t, call).await?;
    let host = Host::Platform(Edits::default());
    http.relay(&uri, call, &[], headers, host).await
}

/// A chat call in `codec`'s format to the model's URL in `urls`, with the deployment's token.
async fn chat<C: Codec>(
    t: &Target,
    call: &Call<'_>,
    codec: &C,
    urls: &ModelUrls,
    model: String,
) -> Result<Response<UpstreamBody>, ApiError> {
    let http = &t.http;
    exchange::chat(http.provider, codec, call, model, (http.drop_params, http.rules_for(call)), |stream, model, body| {
        let uri = urls.get(Op::chat(stream), http.wildcard_model(model));
        post(t, call, uri, body)
    })
    .await
}

/// POST `body` to `uri` (built before the call, so no borrow of the model name is held), with
/// the deployment's OAuth token.
async fn post(
    t: &Target,
    call: &Call<'_>,
    uri: Result<Uri, ApiError>,
    body: Bytes,
) -> Result<Response<UpstreamBody>, ApiError> {
    let uri = uri?;
    let headers = headers(t, call).await?;
    t.http.post(uri, headers, body).await
}

/// The headers of one request: the deployment's, its OAuth token, the call's trace context.
async fn headers(t: &Target, call: &Call<'_>) -> Result<HeaderMap, ApiError> {
    let mut headers = t.http.headers.next().clone();
    if let Some(tokens) = &t.tokens {
        let h = tokens
            .header()
            .await
            .map_err(|e| ApiError::UpstreamUnreachable(e.to_string()))?;
        headers.insert(AUTHORIZATION, h);
    }
    call.trace_headers(&mut headers);
    Ok(headers)
}

/// The Anthropic beta features a Claude client asks for, passed to Vertex AI as Anthropic
/// takes them.
static CLIENT_HEADERS: [HeaderName; 1] = [HeaderName::from_static("anthropic-beta")];

/// A Claude model id (`claude-sonnet-4@20250514`), served on Vertex AI by Anthropic.
fn is_claude(model: &str) -> bool {
    model.starts_with("claude")
}

/// The URL of an operation on a Claude model below the `anthropic` publisher.
fn claude_url(base: &str, model: &str, op: Op) -> String {
    let method = match op {
        Op::Chat => ":rawPredict",
        Op::Stream => ":streamRawPredict",
        Op::Embed | Op::Predict => ":predict",
    };
    // Vertex writes the version after `@` literally (`claude-sonnet-4@20250514`).
    let id = uri_encode(model, false).replace("%40", "@");
    format!("{base}/models/{id}{method}")
}
