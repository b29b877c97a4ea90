//! A request body that names its own upstream or credentials (LiteLLM's client-side
//! credentials: `api_base` / `base_url`, `api_key`, `extra_headers`, ...). Refused (400
//! naming the field) unless `general_settings.allow_client_side_credentials` is on: a caller
//! who picks the upstream could send the prompt, and the gateway's provider keys, anywhere
//! (LiteLLM's SSRF advisories). Even when allowed, an `api_base` whose host is, or resolves to,
//! an internal address is refused unless `client_side_api_base_allowlist` lets it through
//! (`sluice_net::ssrf`), both when the request is read (a clear 400) and again on the
//! addresses the connection is opened to (`sluice_net::Connect::guard`), so a name that
//! resolves differently the second time cannot reach an internal address. Only requests that
//! carry such fields come here; the envelope read found them for free.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::value::RawValue;
use sluice_config::{Config, Deployment};
use sluice_core::error::ApiError;
use sluice_core::Secret;
use sluice_net::ssrf::{self, Allowlist};
use sluice_net::ClientRegistry;
use sluice_providers::settings::client_api_base;
use sluice_providers::{ApiKey, DeploymentSpec, DeploymentTarget};
use sluice_translate::envelope::ClientSide;

/// What the snapshot keeps to honour client-side credentials; `None` when they are refused.
#[derive(Debug)]
pub struct ClientSideSettings {
    /// Shared with the connections opened for a request's own base, which check every
    /// address they resolve against it (no DNS rebinding between check and connect).
    allowlist: Arc<Allowlist>,
    drop_params: bool,
    /// Each deployment's configuration by id: a request's own target is its deployment's,
    /// with the request's base, key and headers.
    deployments: HashMap<Arc<str>, Deployment>,
}

impl ClientSideSettings {
    /// The settings of `config`, when it allows client-side credentials.
    pub fn of(config: &Config) -> Option<Self> {
        config.general.allow_client_side_credentials.then(|| Self {
            allowlist: Arc::new(config.general.client_side_api_base_allowlist.clone()),
            drop_params: config.litellm.drop_params,
            deployments: config
                .deployments
                .iter()
                .map(|d| (Arc::from(d.id.as_str()), d.clone()))
                .collect(),
        })
    }
}

/// A request's own upstream and credentials, checked.
#[derive(Debug)]
pub struct ClientTarget<'s> {
    settings: &'s ClientSideSettings,
    api_base: Option<(&'static str, String)>,
    api_key: Option<Secret>,
    extra_headers: Vec<(String, Secret)>,
}

fn refused(param: &'static str, message: impl Into<String>) -> ApiError {
    ApiError::InvalidParam {
        param,
        message: message.into(),
    }
}

fn text(param: &'static str, v: &RawValue) -> Result<String, ApiError> {
    serde_json::from_str(v.get()).map_err(|_| refused(param, "expected a string"))
}

/// Check what a request says about its upstream: refused unless allowed, and an `api_base`
/// only to a public address or an allow-listed one.
pub async fn check<'s>(
    settings: Option<&'s ClientSideSettings>,
    side: &ClientSide<'_>,
) -> Result<ClientTarget<'s>, ApiError> {
    let Some(settings) = settings else {
        let field = side.first_field();
        return Err(refused(
            field,
            format!(
                "{field} is not allowed in the request body: the gateway chooses the upstream \
                 and its credentials (general_settings.allow_client_side_credentials lets callers \
                 choose)"
            ),
        ));
    };
    if let Some(field) = side.unsupported {
        return Err(refused(
            field,
            format!("{field} in the request body is not supported; configure it on the deployment"),
        ));
    }
    let api_base = match side.api_base {
        None => None,
        Some((field, v)) => {
            let base = text(field, v)?;
            let authority = base
                .split_once("://")
                .map(|(_, r)| r.split(['/', '?', '#']));
            if authority
                .and_then(|mut a| a.next())
                .is_some_and(|a| a.contains('@'))
            {
                return Err(refused(field, "a URL with credentials is not accepted"));
            }
            let uri: http::Uri = base
                .trim()
                .parse()
                .map_err(|_| refused(field, "expected an http:// or https:// URL"))?;
            let https = match uri.scheme_str() {
                Some("https") => true,
                Some("http") => false,
                _ => return Err(refused(field, "expected an http:// or https:// URL")),
            };
            let authority = uri
                .authority()
                .ok_or_else(|| refused(field, "expected an http:// or https:// URL"))?;
            let port = authority.port_u16().unwrap_or(if https { 443 } else { 80 });
            ssrf::check_host(authority.host(), port, &settings.allowlist)
                .await
                .map_err(|e| refused(field, e.to_string()))?;
            Some((field, base))
        }
    };
    let api_key = match side.api_key {
        Some(v) => Some(Secret::new(text("api_key", v)?)),
        None => None,
    };
    let extra_headers = match side.extra_headers {
        None => Vec::new(),
        Some(v) => {
            let map: HashMap<String, String> = serde_json::from_str(v.get()).map_err(|_| {
                refused(
                    "extra_headers",
                    "expected an object of header names to strings",
                )
            })?;
            let mut list: Vec<(String, Secret)> = Vec::with_capacity(map.len());
            for (name, value) in map {
                // The request may add headers, never replace where it goes.
                if name.eq_ignore_ascii_case("host") {
                    return Err(refused("extra_headers", "a Host header is not accepted"));
                }
                list.push((name, Secret::new(value)));
            }
            list
        }
    };
    Ok(ClientTarget {
        settings,
        api_base,
        api_key,
        extra_headers,
    })
}

impl ClientTarget<'_> {
    /// `member`'s deployment with the request's base, key and headers, made ready for one
    /// attempt (built per attempt: this is the rare, opted-in path).
    pub fn target(
        &self,
        member: &DeploymentTarget,
        clients: &ClientRegistry,
    ) -> Result<Box<DeploymentTarget>, ApiError> {
        let d = self
            .settings
            .deployments
            .get(&member.info.id)
            .ok_or(ApiError::Internal("deployment of a client-side target"))?;
        let mut upstream = d.upstream.clone();
        if let Some((field, base)) = &self.api_base {
            upstream.api_base =
                Some(client_api_base(upstream.provider, base).map_err(|e| refused(field, e))?);
            // The check above resolved the name once; the connection resolves it again and
            // checks what it will connect to.
            upstream.connect.guard = Some(self.settings.allowlist.clone());
        }
        if let Some(key) = &self.api_key {
            upstream.api_keys = vec![ApiKey {
                key: key.clone(),
                weight: 1.0,
            }];
        }
        upstream
            .extra_headers
            .extend(self.extra_headers.iter().cloned());
        let spec = DeploymentSpec {
            upstream: &upstream,
            ..d.spec()
        };
        DeploymentTarget::build(spec, clients, self.settings.drop_params)
            .map(Box::new)
            .map_err(|e| refused(self.first_field(), e.to_string()))
    }

    fn first_field(&self) -> &'static str {
        match (&self.api_base, &self.api_key) {
            (Some((f, _)), _) => f,
            (None, Some(_)) => "api_key",
            (None, None) => "extra_headers",
        }
    }
}
