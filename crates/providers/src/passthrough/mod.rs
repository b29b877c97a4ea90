//! LiteLLM's provider pass-through routes (`/openai/*`, `/anthropic/*`, `/gemini/*`,
//! `/vertex_ai/*`, `/bedrock/*`, `/azure/*`, `/cohere/*`, `/mistral/*`): the client speaks the
//! provider's own API, and sluice sends the request to that provider unchanged but for the
//! credentials, which are sluice's (a key header, a SigV4 signature, a Google OAuth token),
//! never the client's.
//!
//! This module knows the provider side: which routes exist and what their paths name
//! ([`Route`], [`path`]), where a route's upstream and credentials come from ([`upstream`]),
//! the call itself ([`Target::send`]: URL below the provider's base, headers filtered, auth
//! added) and the usage in the provider's answer ([`usage`]). Authentication, budgets and
//! recording are the gateway's (`src/passthrough/`).

pub mod path;
mod target;
pub mod usage;

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::Deserialize;
use sluice_core::settings::{Env, Params, Problems, Scalar};
use sluice_core::Secret;

pub use target::{
    allows, answer_headers, connection_listed, never_forwarded, Outgoing, Target, Targets,
};
pub use usage::{Framing, Shape, Tap};

use crate::registry::Provider;
use crate::settings::{self, ApiKey, Given, UpstreamConfig};

/// A provider route, served under its own path prefix as LiteLLM serves it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Route {
    /// `/openai/*` (also `/openai_passthrough/*`): OpenAI's API.
    OpenAi,
    /// `/anthropic/*`: Anthropic's API.
    Anthropic,
    /// `/gemini/*`: Google AI Studio.
    Gemini,
    /// `/vertex_ai/*` (also `/vertex-ai/*`): Vertex AI.
    Vertex,
    /// `/bedrock/*`: Amazon Bedrock's runtime.
    Bedrock,
    /// `/azure/*`: Azure OpenAI.
    Azure,
    /// `/cohere/*`: Cohere's API.
    Cohere,
    /// `/mistral/*`: Mistral's API.
    Mistral,
}

/// What sets a route apart: its prefixes, the provider whose settings it reads, and the
/// environment variables LiteLLM's pass-through reads beyond the provider's own.
#[derive(Debug)]
struct Spec {
    /// Path prefixes, the canonical one first.
    prefixes: &'static [&'static str],
    /// Route label for logs and metrics.
    label: &'static str,
    /// The provider's name in records.
    name: &'static str,
    /// The LiteLLM prefix whose deployments may serve it (`use_in_pass_through`).
    deployments: Option<&'static str>,
    /// The LiteLLM prefix its settings are read as.
    reads_as: &'static str,
    /// Base URL variables read before the provider's own.
    base_env: &'static [&'static str],
    /// Key variables read before the provider's own.
    key_env: &'static [&'static str],
    /// Base URL when no variable names one and the provider has no default.
    default_base: Option<&'static str>,
    /// Provider keys taken from these variables (LiteLLM's pass-through names).
    params: &'static [(&'static str, &'static [&'static str])],
}

impl Spec {
    const fn of(
        prefixes: &'static [&'static str],
        label: &'static str,
        name: &'static str,
    ) -> Self {
        Self {
            prefixes,
            label,
            name,
            deployments: Some(name),
            reads_as: name,
            base_env: &[],
            key_env: &[],
            default_base: None,
            params: &[],
        }
    }
}

static SPECS: [Spec; 8] = [
    Spec::of(&["openai", "openai_passthrough"], "/openai/*", "openai"),
    Spec::of(&["anthropic"], "/anthropic/*", "anthropic"),
    Spec::of(&["gemini"], "/gemini/*", "gemini"),
    Spec {
        params: &[
            ("vertex_project", &["DEFAULT_VERTEXAI_PROJECT"]),
            ("vertex_location", &["DEFAULT_VERTEXAI_LOCATION"]),
            (
                "vertex_credentials",
                &["DEFAULT_GOOGLE_APPLICATION_CREDENTIALS"],
            ),
        ],
        ..Spec::of(&["vertex_ai", "vertex-ai"], "/vertex_ai/*", "vertex_ai")
    },
    Spec {
        params: &[("aws_region_name", &["AWS_REGION_NAME"])],
        ..Spec::of(&["bedrock"], "/bedrock/*", "bedrock")
    },
    Spec::of(&["azure"], "/azure/*", "azure"),
    // Cohere's native API is no sluice provider: its settings are read as an
    // OpenAI-compatible server's, from Cohere's variables.
    Spec {
        deployments: None,
        reads_as: "custom_openai",
        base_env: &["COHERE_API_BASE"],
        key_env: &["COHERE_API_KEY", "CO_API_KEY"],
        default_base: Some("https://api.cohere.com"),
        ..Spec::of(&["cohere"], "/cohere/*", "cohere")
    },
    Spec {
        base_env: &["MISTRAL_API_BASE"],
        ..Spec::of(&["mistral"], "/mistral/*", "mistral")
    },
];

impl Route {
    /// Every route, in the order of [`Route::index`].
    pub const ALL: [Route; 8] = [
        Self::OpenAi,
        Self::Anthropic,
        Self::Gemini,
        Self::Vertex,
        Self::Bedrock,
        Self::Azure,
        Self::Cohere,
        Self::Mistral,
    ];

    /// Position in [`Route::ALL`], for tables with one entry per route.
    pub const fn index(self) -> usize {
        match self {
            Self::OpenAi => 0,
            Self::Anthropic => 1,
            Self::Gemini => 2,
            Self::Vertex => 3,
            Self::Bedrock => 4,
            Self::Azure => 5,
            Self::Cohere => 6,
            Self::Mistral => 7,
        }
    }

    fn spec(self) -> &'static Spec {
        &SPECS[self.index()]
    }

    /// Stable label for logs and metrics (`/anthropic/*`), never the raw path.
    pub fn label(self) -> &'static str {
        self.spec().label
    }

    /// The provider's name in records and errors (`anthropic`, `vertex_ai`, `cohere`).
    pub fn name(self) -> &'static str {
        self.spec().name
    }

    /// The LiteLLM provider whose deployments may lend this route their upstream.
    pub fn provider(self) -> Option<Provider> {
        self.spec().deployments.and_then(Provider::from_prefix)
    }

    /// The route a request path belongs to, and the path below its prefix (`""` or `/…`).
    pub fn of(path: &str) -> Option<(Route, &str)> {
        let rest = path.strip_prefix('/')?;
        Self::ALL.into_iter().find_map(|route| {
            route.spec().prefixes.iter().find_map(|p| {
                let below = rest.strip_prefix(p)?;
                (below.is_empty() || below.starts_with('/')).then_some((route, below))
            })
        })
    }

    /// What the path below the prefix names: the model (where the provider puts it in the
    /// path) and the operation.
    pub fn named(self, rest: &str) -> path::Named<'_> {
        match self {
            Self::Bedrock => path::bedrock(rest),
            Self::Gemini | Self::Vertex => path::google(rest),
            Self::Azure => path::azure(rest),
            Self::OpenAi | Self::Anthropic | Self::Cohere | Self::Mistral => path::plain(rest),
        }
    }

    /// Where this route's requests name a model that may be a `model_list` group, as LiteLLM
    /// resolves group names on its pass-through routes: the path on Bedrock's, Google's and
    /// Azure's routes, the body's `model` on Anthropic's. `None`: names are passed as written
    /// (OpenAI's, Mistral's and Cohere's routes).
    pub fn group_in(self) -> Option<NamedIn> {
        match self {
            Self::Bedrock | Self::Gemini | Self::Vertex | Self::Azure => Some(NamedIn::Path),
            Self::Anthropic => Some(NamedIn::Body),
            Self::OpenAi | Self::Cohere | Self::Mistral => None,
        }
    }

    /// The route serving a provider's own API, when one does.
    pub fn of_provider(provider: Provider) -> Option<Route> {
        Self::ALL
            .into_iter()
            .find(|r| r.provider() == Some(provider))
    }

    /// How usage is spelt in this route's answers to `rest`.
    pub fn shape(self, rest: &str) -> Shape {
        match self {
            Self::OpenAi | Self::Azure | Self::Mistral | Self::Anthropic => Shape::Common,
            Self::Gemini => Shape::Gemini,
            Self::Vertex if rest.contains("/publishers/anthropic/") => Shape::Common,
            Self::Vertex => Shape::Gemini,
            Self::Bedrock => match path::bedrock(rest).op {
                "converse" | "converse-stream" => Shape::Converse,
                // InvokeModel answers in the model's own format (Anthropic's for Claude).
                "invoke" | "invoke-with-response-stream" => Shape::Invoke,
                _ => Shape::Unknown,
            },
            Self::Cohere => Shape::Cohere,
        }
    }

    /// Whether a streamed call to `rest` is an OpenAI (chat) completion, whose usage chunk
    /// sluice may ask for on the client's behalf.
    pub fn openai_completion(self, rest: &str) -> bool {
        matches!(self, Self::OpenAi | Self::Azure | Self::Mistral)
            && (rest.ends_with("/chat/completions") || rest.ends_with("/completions"))
    }
}

/// Where a request names its model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NamedIn {
    /// In the path (`/model/{id}/…`, `…/models/{model}:…`, `/openai/deployments/{name}/…`).
    Path,
    /// In the JSON body's `model`.
    Body,
}

/// What a JSON request body says about the call; anything else in it is skipped unparsed, and a
/// body that is not JSON says nothing.
#[derive(Debug, Default, Deserialize)]
pub struct BodyFacts<'a> {
    /// `model`.
    #[serde(borrow, default)]
    pub model: Option<Cow<'a, str>>,
    /// `stream`.
    #[serde(default)]
    pub stream: Option<bool>,
    /// `user` (OpenAI's end user).
    #[serde(borrow, default)]
    pub user: Option<Cow<'a, str>>,
}

impl<'a> BodyFacts<'a> {
    /// Read what a body says (nothing when it is not a JSON object of the expected types).
    pub fn read(body: &'a [u8]) -> Self {
        serde_json::from_slice(body).unwrap_or_default()
    }
}

/// Why a route cannot be called, in words a client may see (names of settings and variables,
/// never their values).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Unavailable(String);

/// A route's upstream: `flagged` (the first deployment of its provider marked
/// `use_in_pass_through: true`) when there is one, else the provider's environment variables
/// (LiteLLM's pass-through names first) and defaults, read and checked as a deployment's
/// would be. Problems are the route's own, not the config's: a route nobody configured is
/// simply unavailable.
pub fn upstream(
    route: Route,
    flagged: Option<&UpstreamConfig>,
    env: &dyn Env,
) -> Result<UpstreamConfig, Unavailable> {
    if let Some(u) = flagged {
        return Ok(u.clone());
    }
    let spec = route.spec();
    let var = |names: &[&str]| {
        names
            .iter()
            .find_map(|v| env.var(v).filter(|s| !s.trim().is_empty()))
    };
    let values: BTreeMap<String, Scalar> = spec
        .params
        .iter()
        .filter_map(|(key, vars)| Some(((*key).to_owned(), Scalar::Str(var(vars)?))))
        .collect();
    let given = Given {
        model: Some(format!("{}/pass-through", spec.reads_as)),
        api_base: var(spec.base_env).or(spec.default_base.map(str::to_owned)),
        api_keys: var(spec.key_env)
            .map(|k| ApiKey {
                key: Secret::new(k),
                weight: 1.0,
            })
            .into_iter()
            .collect(),
        ..Given::default()
    };
    let mut problems = Problems::default();
    let params = Params::new(format!("pass-through {}", spec.label), values);
    let read = settings::read(spec.label, given, &params, env, &mut problems);
    match (read, problems.errors.first()) {
        (Some(u), None) => Ok(u),
        (_, Some(e)) => {
            let key = e.path.rsplit('.').next().unwrap_or_default();
            Err(Unavailable(format!("{key}: {}", e.message)))
        }
        (None, None) => Err(Unavailable("no usable upstream settings".to_owned())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Timeouts;
    use sluice_net::ClientRegistry;
    use std::collections::HashMap;

    #[test]
    fn routes_by_prefix() {
        assert_eq!(
            Route::of("/anthropic/v1/messages"),
            Some((Route::Anthropic, "/v1/messages"))
        );
        assert_eq!(Route::of("/vertex-ai/v1/x"), Some((Route::Vertex, "/v1/x")));
        assert_eq!(Route::of("/openai"), Some((Route::OpenAi, "")));
        assert_eq!(
            Route::of("/openai_passthrough/v1/responses"),
            Some((Route::OpenAi, "/v1/responses"))
        );
        assert_eq!(Route::of("/openaix/v1"), None);
        assert_eq!(Route::of("/v1/chat/completions"), None);
        for r in Route::ALL {
            assert_eq!(Route::ALL[r.index()], r);
            assert!(Route::of(&r.label().replace('*', "x")).is_some());
        }
    }

    #[test]
    fn upstreams_from_environment_variables() {
        let env: HashMap<String, String> = HashMap::from([
            ("ANTHROPIC_API_KEY".into(), "sk-ant".into()),
            ("ANTHROPIC_API_BASE".into(), "http://127.0.0.1:9".into()),
            ("COHERE_API_KEY".into(), "co".into()),
            ("AWS_REGION_NAME".into(), "eu-west-3".into()),
        ]);
        let a = upstream(Route::Anthropic, None, &env).unwrap();
        // The provider's path suffix is added as for a deployment; `path::join` puts the
        // client's `/v1/...` in its place.
        assert_eq!(a.api_base.as_deref(), Some("http://127.0.0.1:9/v1"));
        assert_eq!(a.api_keys[0].key.expose(), "sk-ant");
        let c = upstream(Route::Cohere, None, &env).unwrap();
        assert_eq!(c.api_base.as_deref(), Some("https://api.cohere.com"));
        let b = upstream(Route::Bedrock, None, &env).unwrap();
        assert_eq!(
            b.api_base.as_deref(),
            Some("https://bedrock-runtime.eu-west-3.amazonaws.com")
        );
        let e = upstream(Route::Azure, None, &env).unwrap_err();
        assert!(e.to_string().contains("AZURE_API_BASE"), "{e}");
        // A route without a key builds no target, and says which variable to set.
        let clients = ClientRegistry::new(0);
        let o = upstream(Route::OpenAi, None, &env).unwrap();
        let e = Target::build(Route::OpenAi, &o, &clients, Timeouts::default()).unwrap_err();
        assert!(e.to_string().contains("OPENAI_API_KEY"), "{e}");
        let e = Target::build(Route::Bedrock, &b, &clients, Timeouts::default()).unwrap_err();
        assert!(e.to_string().contains("AWS_ACCESS_KEY_ID"), "{e}");
    }
}
