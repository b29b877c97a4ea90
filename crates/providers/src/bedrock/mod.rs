//! Amazon Bedrock's Converse API: every request is translated (`codec`), the model id and the
//! operation are in the URL, each request is signed with SigV4 (`sluice_net::sigv4`), streams
//! arrive as AWS event-stream frames; embeddings through `InvokeModel` for Titan and Cohere
//! models (`embed`), image generation through `InvokeModel` for Titan, Nova Canvas and
//! Stability models (`image`).

pub mod codec;
mod embed;
mod image;
#[cfg(test)]
mod tests;

use std::time::SystemTime;

use bytes::Bytes;
use http::header::{HeaderValue, CONTENT_LENGTH, CONTENT_TYPE};
use http::Response;
use sluice_core::endpoint::{Dialect, Endpoint};
use sluice_core::error::ApiError;
use sluice_core::Secret;
use sluice_net::sigv4::{uri_encode, Credentials, Signer};
use sluice_translate::anthropic::platform_edits;
use sluice_translate::envelope::{Edits, Tunable};
use sluice_translate::invoke_sse::{InvokeSse, InvokeSseBody};

pub use codec::Converse;
pub use embed::Embeddings;
pub use image::Images;

use crate::body::UpstreamBody;
use crate::call::Call;
use crate::exchange;
use crate::http::{Host, HttpTarget, KeyHeader, ModelUrls, Op};
use crate::registry::{Base, ProviderSpec, Upstream};
use crate::Family;
use crate::settings::Reading;
use crate::target::{Prepared, TargetError};

/// `bedrock/`
pub const SPECS: &[ProviderSpec] = &[ProviderSpec {
    base_env: &["AWS_BEDROCK_RUNTIME_ENDPOINT"],
    // The default endpoint depends on the region (`Bedrock::base`).
    ..ProviderSpec::new("bedrock", Family::Bedrock, None, &[])
}];

/// How a Bedrock deployment signs its requests.
#[derive(Debug, Clone)]
pub struct AwsSettings {
    /// `aws_access_key_id` (or `AWS_ACCESS_KEY_ID`).
    pub access_key_id: Secret,
    /// `aws_secret_access_key` (or `AWS_SECRET_ACCESS_KEY`).
    pub secret_access_key: Secret,
    /// `aws_session_token` (or `AWS_SESSION_TOKEN`), for temporary credentials.
    pub session_token: Option<Secret>,
}

/// What a Bedrock deployment reads beyond the common keys.
#[derive(Debug, Clone)]
pub struct Config {
    /// `aws_region_name` (or `AWS_REGION`, `AWS_DEFAULT_REGION`; default `us-east-1`).
    pub region: String,
    /// Its credentials; without them requests go unsigned (AWS answers 403).
    pub aws: Option<AwsSettings>,
    /// `aws_bedrock_runtime_endpoint`: the runtime endpoint, as `api_base`.
    pub endpoint: Option<String>,
}

/// A Bedrock deployment.
#[derive(Debug)]
pub struct Target {
    http: HttpTarget,
    urls: ModelUrls,
    /// The runtime's base URL (InvokeModel's URLs are built per Claude call).
    base: Box<str>,
    signer: Option<Signer>,
}

/// Amazon Bedrock.
#[derive(Debug)]
pub struct Bedrock;

impl Upstream for Bedrock {
    type Config = Config;
    type Target = Target;
    const SPECS: &'static [ProviderSpec] = SPECS;
    const KEYS: &'static [&'static str] = &[
        "aws_access_key_id",
        "aws_secret_access_key",
        "aws_session_token",
        "aws_region_name",
        "aws_bedrock_runtime_endpoint",
    ];

    fn config(cx: &mut Reading<'_>) -> Option<Config> {
        let region = cx
            .params
            .text("aws_region_name")
            .or_else(|| {
                ["AWS_REGION", "AWS_DEFAULT_REGION"]
                    .iter()
                    .find_map(|v| cx.env.var(v).filter(|s| !s.is_empty()))
            })
            .unwrap_or_else(|| "us-east-1".to_owned());
        Some(Config {
            aws: credentials(cx, &region),
            region,
            endpoint: cx.params.text("aws_bedrock_runtime_endpoint"),
        })
    }

    fn base(c: &Config) -> Base {
        Base {
            given: c.endpoint.clone(),
            default: Some(format!(
                "https://bedrock-runtime.{}.amazonaws.com",
                c.region
            )),
        }
    }

    fn target(d: &Prepared<'_>, c: &Config) -> Result<Target, TargetError> {
        let base = d.upstream.api_base.clone().unwrap_or_default();
        Ok(Target {
            http: HttpTarget::build(d, KeyHeader::Signed, &[])?,
            urls: ModelUrls::build(d, base.clone(), url)?,
            base: base.into(),
            signer: c.aws.as_ref().map(|a| {
                Signer::new(
                    Credentials {
                        access_key_id: a.access_key_id.clone(),
                        secret_access_key: a.secret_access_key.clone(),
                        session_token: a.session_token.clone(),
                    },
                    c.region.clone(),
                    "bedrock",
                )
            }),
        })
    }

    async fn send(t: &Target, call: &Call<'_>) -> Result<Response<UpstreamBody>, ApiError> {
        let http = &t.http;
        let post = |op: Op, model: &str, body: Bytes| {
            let uri = t.urls.get(op, http.wildcard_model(model));
            async move {
                let uri = uri?;
                let mut headers = http.headers.next().clone();
                if let Some(s) = &t.signer {
                    s.sign(&uri, &mut headers, &body, SystemTime::now());
                }
                call.trace_headers(&mut headers);
                http.post(uri, headers, body).await
            }
        };
        match call.endpoint {
            Endpoint::Messages if is_claude(&http.model(call)?) => invoke(t, call).await,
            // A Converse client's body goes to Converse as it came; the model is in the URL.
            Endpoint::Converse => {
                let model = http.model(call)?;
                post(Op::chat(call.envelope.stream), &model, call.body.clone()).await
            }
            Endpoint::ChatCompletions
            | Endpoint::Messages
            | Endpoint::Responses
            | Endpoint::GenerateContent => {
                exchange::chat(
                    http.provider,
                    &Converse,
                    call,
                    http.model(call)?,
                    (http.drop_params, http.rules_for(call)),
                    |stream, model, body| post(Op::chat(stream), model, body),
                )
                .await
            }
            Endpoint::Embeddings => {
                let model = http.model(call)?;
                let Some(api) = Embeddings::of(&model) else {
                    return exchange::not_served(http.provider, call);
                };
                exchange::embed(
                    http.provider,
                    &api,
                    &Converse,
                    call,
                    model,
                    |model, body| post(Op::Embed, model, body),
                )
                .await
            }
            Endpoint::ImageGenerations => {
                let model = http.model(call)?;
                let Some(api) = Images::of(&model) else {
                    return exchange::not_served(http.provider, call);
                };
                exchange::images(
                    http.provider,
                    &api,
                    &Converse,
                    call,
                    model,
                    |model, body| post(Op::Predict, model, body),
                )
                .await
            }
            Endpoint::CountTokens => exchange::count_locally(http.provider, call.body),
            Endpoint::Completions
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

/// AWS credentials for a Bedrock deployment: `litellm_params`, else the standard AWS
/// environment variables. Without a key pair requests would go unsigned: a warning, and
/// `None` (the deployment answers AWS's 403).
fn credentials(cx: &mut Reading<'_>, region: &str) -> Option<AwsSettings> {
    let params = cx.params;
    let env = cx.env;
    let pick = |key: &str, var: &str| {
        params
            .text(key)
            .or_else(|| env.var(var).filter(|s| !s.is_empty()))
    };
    if !region
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-')
    {
        cx.problems.error(
            params.path("aws_region_name"),
            format!("not an AWS region: {region:?}"),
        );
        return None;
    }
    let key = pick("aws_access_key_id", "AWS_ACCESS_KEY_ID");
    let secret = pick("aws_secret_access_key", "AWS_SECRET_ACCESS_KEY");
    let (Some(key), Some(secret)) = (key, secret) else {
        cx.problems.warn(
            params.path("aws_access_key_id"),
            "aws_access_key_id and aws_secret_access_key are not set and neither are \
             AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY; requests will go unsigned",
        );
        return None;
    };
    Some(AwsSettings {
        access_key_id: Secret::new(key),
        secret_access_key: Secret::new(secret),
        session_token: pick("aws_session_token", "AWS_SESSION_TOKEN").map(Secret::new),
    })
}

/// The `anthropic_version` Bedrock's InvokeModel takes for Claude.
const BEDROCK_VERSION: &str = "bedrock-2023-05-31";

/// A Claude model id or inference profile (`anthropic.claude-…`, `us.anthropic.claude-…`).
fn is_claude(model: &str) -> bool {
    model.contains("anthropic.claude") || model.starts_with("claude")
}

/// A Claude client's Messages call to Claude on Bedrock: its own body through InvokeModel
/// (`invoke`, or `invoke-with-response-stream` told back as Anthropic's SSE), with only what
/// the platform requires changed — nothing goes through the internal representation, so
/// documents, server tools, `output_config` and beta features all reach the model.
async fn invoke(t: &Target, call: &Call<'_>) -> Result<Response<UpstreamBody>, ApiError> {
    let http = &t.http;
    let model = http.model(call)?;
    let stream = call.envelope.stream;
    let op = if stream {
        "invoke-with-response-stream"
    } else {
        "invoke"
    };
    let uri: http::Uri = format!("{}/model/{}/{op}", t.base, uri_encode(&model, false))
        .parse()
        .map_err(|e: http::uri::InvalidUri| ApiError::UpstreamInvalid(e.to_string()))?;
    let (segments, dropped) = http.relayed_body(call, Host::Platform(invoke_edits(call)?))?;
    // SigV4 signs the whole payload: the one place a relayed body is copied into one buffer.
    let body = Bytes::from(segments.concat());
    let mut headers = http.headers.next().clone();
    if let Some(s) = &t.signer {
        s.sign(&uri, &mut headers, &body, SystemTime::now());
    }
    call.trace_headers(&mut headers);
    let resp = http.post(uri, headers, body).await?;
    let mut resp = if !resp.status().is_success() {
        exchange::error_answer(&Converse, Dialect::Anthropic, resp).await?
    } else if stream {
        let (mut parts, body) = resp.into_parts();
        parts.headers.remove(CONTENT_LENGTH);
        parts
            .headers
            .insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
        Response::from_parts(parts, UpstreamBody::made(InvokeSseBody::new(body, InvokeSse::default())))
    } else {
        resp
    };
    if let Some(d) = dropped {
        resp.extensions_mut().insert(d);
    }
    Ok(resp)
}

/// A Claude body as InvokeModel takes it: Anthropic's platform changes, no `stream` (the URL
/// says it), and the `anthropic-beta` header's features as the body's `anthropic_beta`.
fn invoke_edits(call: &Call<'_>) -> Result<Edits, ApiError> {
    let mut edits = platform_edits(call.envelope, BEDROCK_VERSION);
    if let Some(stream) = call.envelope.tunables.span(call.body, Tunable::Stream) {
        edits.remove.push(stream.range());
    }
    let betas: Vec<&str> = call
        .client_headers
        .get_all(exchange::ANTHROPIC_BETA)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|b| !b.is_empty())
        .collect();
    if !betas.is_empty() {
        let list = serde_json::to_string(&betas).map_err(|e| ApiError::InvalidParam {
            param: "anthropic-beta",
            message: e.to_string(),
        })?;
        edits
            .insert
            .push(Bytes::from(format!("\"anthropic_beta\":{list},")));
    }
    Ok(edits)
}

/// The URL of an operation on a model id (or ARN) below `base`.
pub(crate) fn url(base: &str, model: &str, op: Op) -> String {
    // Model ids and ARNs hold `:` and `/`: one path segment, encoded.
    let id = uri_encode(model, false);
    let op = match op {
        Op::Chat => "converse",
        Op::Stream => "converse-stream",
        Op::Embed | Op::Predict => "invoke",
    };
    format!("{base}/model/{id}/{op}")
}

#[cfg(test)]
mod url_tests {
    use super::*;

    #[test]
    fn urls_encode_model_ids_and_arns() {
        assert_eq!(
            url(
                "https://bedrock-runtime.us-east-1.amazonaws.com",
                "anthropic.claude-3-5-sonnet-20240620-v1:0",
                Op::Stream
            ),
            "https://bedrock-runtime.us-east-1.amazonaws.com/model/anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse-stream"
        );
        assert_eq!(
            url(
                "http://h",
                "arn:aws:bedrock:us-east-1:1:inference-profile/us.x",
                Op::Chat
            ),
            "http://h/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A1%3Ainference-profile%2Fus.x/converse"
        );
    }
}
