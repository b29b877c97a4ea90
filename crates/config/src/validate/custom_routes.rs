//! `general_settings.pass_through_endpoints`: LiteLLM's routes of the operator's own, each a
//! path on the gateway forwarded to a target URL with the headers the config gives (an API
//! key from the environment), behind virtual keys, charged a cost per request.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;
use serde_yaml_ng::Value;

use sluice_core::settings::read::{boolean, number, seconds, text};
use sluice_core::settings::{Env, Problems, Scalar};
use sluice_core::Secret;

use crate::model::CustomRoute;

/// The methods a route may name.
const METHODS: [&str; 7] = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"];

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRoute {
    path: Option<Scalar>,
    target: Option<Scalar>,
    #[serde(default)]
    headers: BTreeMap<String, Scalar>,
    forward_headers: Option<Scalar>,
    include_subpath: Option<Scalar>,
    #[serde(default)]
    default_query_params: BTreeMap<String, Scalar>,
    merge_query_params: Option<Scalar>,
    cost_per_request: Option<Scalar>,
    timeout: Option<Scalar>,
    auth: Option<Scalar>,
    methods: Option<Vec<Scalar>>,
    // LiteLLM's own bookkeeping and per-route guardrails: read, not acted on.
    #[allow(dead_code)]
    id: Option<Scalar>,
    #[allow(dead_code)]
    is_from_config: Option<Scalar>,
    guardrails: Option<Value>,
}

/// `os.environ/NAME` anywhere in a header value (LiteLLM's `Bearer os.environ/COHERE_API_KEY`),
/// replaced by the variable; `Err(name)` when it is not set.
fn embedded_env(value: &str, env: &dyn Env) -> Result<String, String> {
    const MARK: &str = "os.environ/";
    let Some(at) = value.find(MARK) else {
        return Ok(value.to_owned());
    };
    let rest = &value[at + MARK.len()..];
    let len = rest
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(rest.len());
    let name = &rest[..len];
    let var = env.var(name).ok_or_else(|| name.to_owned())?;
    Ok(format!("{}{var}{}", &value[..at], &rest[len..]))
}

/// Read the list; each problem names its entry and field.
pub(super) fn custom_routes(
    raw: Option<Value>,
    env: &dyn Env,
    p: &mut Problems,
) -> Vec<CustomRoute> {
    super::entries(
        raw,
        (
            "general_settings.pass_through_endpoints",
            "{path, target, ...}",
        ),
        p,
        |r: RawRoute, at, p| one(r, at, env, p),
        ("path", |r: &CustomRoute| r.path.as_str()),
    )
}

fn one(r: RawRoute, at: &str, env: &dyn Env, p: &mut Problems) -> Option<CustomRoute> {
    let path = text(r.path).map(|s| s.trim().trim_end_matches('/').to_owned());
    let Some(path) = path.filter(|s| s.starts_with('/') && s.len() > 1) else {
        p.error(
            format!("{at}.path"),
            "expected a path starting with /, e.g. /bria",
        );
        return None;
    };
    if path.split('/').any(|s| s == ".." || s == ".") || path.contains(['?', '#', ' ']) {
        p.error(
            format!("{at}.path"),
            "a path may not hold `.`, `..`, `?`, `#` or spaces",
        );
        return None;
    }
    let target = text(r.target).map(|s| s.trim().trim_end_matches('/').to_owned());
    let Some(target) = target.filter(|t| {
        (t.starts_with("http://") || t.starts_with("https://"))
            && t.parse::<http::Uri>()
                .is_ok_and(|u| u.authority().is_some())
    }) else {
        p.error(
            format!("{at}.target"),
            "expected an http:// or https:// URL with a host",
        );
        return None;
    };
    let mut headers = Vec::new();
    for (name, value) in r.headers {
        let hp = format!("{at}.headers.{name}");
        if http::HeaderName::from_bytes(name.as_bytes()).is_err() {
            p.error(&hp, "not a valid header name");
            continue;
        }
        match embedded_env(&value.text(), env) {
            Ok(v) if http::HeaderValue::from_str(&v).is_ok() => {
                headers.push((name.to_ascii_lowercase(), Secret::new(v)));
            }
            Ok(_) => p.error(&hp, "not a valid header value"),
            Err(var) => p.warn(
                &hp,
                format!("environment variable {var} is not set; the header is left out"),
            ),
        }
    }
    let mut methods = Vec::new();
    for m in r.methods.unwrap_or_default() {
        let m = m.text().trim().to_ascii_uppercase();
        if METHODS.contains(&m.as_str()) {
            methods.push(m);
        } else {
            p.error(
                format!("{at}.methods"),
                format!("{m:?} is not one of {}", METHODS.join(", ")),
            );
        }
    }
    let auth = boolean(&format!("{at}.auth"), r.auth, p).unwrap_or(true);
    if !auth {
        p.warn(
            format!("{at}.auth"),
            format!("{path} is open to anyone who can reach the gateway (auth: false)"),
        );
    }
    if r.guardrails.is_some_and(|g| !g.is_null()) {
        p.warn(
            format!("{at}.guardrails"),
            "per-route guardrails are not applied on custom routes; the key's and the \
             default_on guardrails refuse requests they apply to",
        );
    }
    Some(CustomRoute {
        path,
        target,
        headers,
        forward_headers: boolean(&format!("{at}.forward_headers"), r.forward_headers, p)
            .unwrap_or(false),
        include_subpath: boolean(&format!("{at}.include_subpath"), r.include_subpath, p)
            .unwrap_or(false),
        default_query: r
            .default_query_params
            .into_iter()
            .map(|(k, v)| (k, v.text()))
            .collect(),
        merge_query_params: boolean(&format!("{at}.merge_query_params"), r.merge_query_params, p)
            .unwrap_or(false),
        cost_per_request: number(
            &format!("{at}.cost_per_request"),
            r.cost_per_request,
            false,
            p,
        )
        .unwrap_or(0.0),
        timeout: seconds(&format!("{at}.timeout"), r.timeout, p)
            .unwrap_or(Duration::from_secs(600)),
        auth,
        methods,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn read(yaml: &str, env: &[(&str, &str)]) -> (Vec<CustomRoute>, Problems) {
        let env: HashMap<String, String> = env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let mut p = Problems::default();
        let v: Value = serde_yaml_ng::from_str(yaml).unwrap();
        (custom_routes(Some(v), &env, &mut p), p)
    }

    #[test]
    fn litellm_routes_are_read() {
        let (routes, p) = read(
            r#"
- path: /bria/
  target: https://engine.prod.bria-api.com/
  headers: {Authorization: "Bearer os.environ/BRIA_KEY", content-type: application/json}
  include_subpath: true
  cost_per_request: 0.05
  default_query_params: {api_version: "2024"}
  methods: [post, GET]
- {path: /ocr, target: "http://127.0.0.1:9/v1/ocr", auth: false, forward_headers: true}
"#,
            &[("BRIA_KEY", "b-123")],
        );
        assert!(p.errors.is_empty(), "{p:?}");
        assert_eq!(routes.len(), 2);
        let bria = &routes[0];
        assert_eq!(bria.path, "/bria");
        assert_eq!(bria.target, "https://engine.prod.bria-api.com");
        assert_eq!(bria.headers[0].0, "authorization");
        assert_eq!(bria.headers[0].1.expose(), "Bearer b-123");
        assert!(bria.include_subpath && bria.auth && !bria.forward_headers);
        assert_eq!(bria.methods, ["POST", "GET"]);
        assert_eq!(bria.cost_per_request, 0.05);
        assert_eq!(
            bria.default_query,
            [("api_version".to_owned(), "2024".to_owned())]
        );
        assert!(!routes[1].auth && routes[1].forward_headers);
        assert!(
            p.warnings.iter().any(|w| w.message.contains("auth: false")),
            "{p:?}"
        );
    }

    #[test]
    fn bad_routes_name_their_field() {
        let (routes, p) = read(
            r#"
- {path: bria, target: https://x}
- {path: /a, target: "ftp://x"}
- {path: /a/../b, target: https://x}
- {path: /c, target: https://x, methods: [FETCH]}
- {path: /c, target: https://y}
- {path: /d, target: https://x, colour: red}
"#,
            &[],
        );
        let text: String = p.errors.iter().map(|e| format!("{e}\n")).collect();
        for field in [
            "pass_through_endpoints[0].path",
            "pass_through_endpoints[1].target",
            "pass_through_endpoints[2].path",
            "pass_through_endpoints[3].methods",
            "pass_through_endpoints[4].path",
            "pass_through_endpoints[5]",
        ] {
            assert!(text.contains(field), "{field} in {text}");
        }
        assert_eq!(routes.len(), 1, "only /c (first) is kept: {routes:?}");
    }
}
