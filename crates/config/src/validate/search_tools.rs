//! `search_tools`: LiteLLM's web search APIs, each served at `/v1/search/{search_tool_name}`
//! with the provider, key and base its `litellm_params` give, charged per query.

use std::time::Duration;

use serde::Deserialize;
use serde_yaml_ng::Value;

use sluice_core::settings::read::{number, seconds, text};
use sluice_core::settings::{Env, Problems, Scalar};
use sluice_core::Secret;
use sluice_providers::search::SearchProvider;

use crate::model::SearchTool;
use crate::prices::PriceTable;

/// How long a search may take unless the tool says.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTool {
    search_tool_name: Option<Scalar>,
    litellm_params: Option<RawParams>,
    // Shown by LiteLLM's UI; nothing to act on.
    #[allow(dead_code)]
    search_tool_info: Option<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawParams {
    search_provider: Option<Scalar>,
    api_key: Option<Scalar>,
    api_base: Option<Scalar>,
    input_cost_per_query: Option<Scalar>,
    timeout: Option<Scalar>,
}

/// Read the list; each problem names its entry and field.
pub(super) fn search_tools(
    raw: Option<Value>,
    prices: &PriceTable,
    env: &dyn Env,
    p: &mut Problems,
) -> Vec<SearchTool> {
    super::entries(
        raw,
        ("search_tools", "{search_tool_name, litellm_params}"),
        p,
        |r: RawTool, at, p| one(r, at, prices, env, p),
        ("search_tool_name", |t: &SearchTool| t.name.as_str()),
    )
}

fn one(
    r: RawTool,
    at: &str,
    prices: &PriceTable,
    env: &dyn Env,
    p: &mut Problems,
) -> Option<SearchTool> {
    let name = text(r.search_tool_name).map(|s| s.trim().to_owned());
    let Some(name) = name.filter(|n| {
        !n.is_empty()
            && n.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
    }) else {
        p.error(
            format!("{at}.search_tool_name"),
            "expected a name of letters, digits, `-`, `_` or `.` (the path's last segment)",
        );
        return None;
    };
    let Some(params) = r.litellm_params else {
        p.error(
            format!("{at}.litellm_params"),
            "expected {search_provider, api_key, ...}",
        );
        return None;
    };
    let given = text(params.search_provider).unwrap_or_default();
    let Some(provider) = SearchProvider::of(&given) else {
        p.error(
            format!("{at}.litellm_params.search_provider"),
            format!(
                "{given:?} is not a search provider sluice speaks: one of {}",
                SearchProvider::NAMES.join(", ")
            ),
        );
        return None;
    };
    let key_at = format!("{at}.litellm_params.api_key");
    let api_key = match text(params.api_key) {
        Some(k) => match k.strip_prefix("os.environ/") {
            Some(var) => {
                let v = env.var(var);
                if v.is_none() {
                    p.warn(
                        &key_at,
                        format!("environment variable {var} is not set; searches go without a key"),
                    );
                }
                v
            }
            None => Some(k),
        },
        None => provider.key_env().iter().find_map(|v| env.var(v)),
    };
    if api_key.is_none() {
        p.warn(
            &key_at,
            format!(
                "no key (set it, or {}); the provider will refuse the searches",
                provider.key_env().join(" or ")
            ),
        );
    }
    let base_at = format!("{at}.litellm_params.api_base");
    let api_base = text(params.api_base)
        .or_else(|| env.var(provider.base_env()))
        .unwrap_or_else(|| provider.default_base().to_owned());
    let api_base = api_base.trim().trim_end_matches('/').to_owned();
    let valid = (api_base.starts_with("http://") || api_base.starts_with("https://"))
        && api_base
            .parse::<http::Uri>()
            .is_ok_and(|u| u.authority().is_some());
    if !valid {
        p.error(base_at, "expected an http:// or https:// URL with a host");
        return None;
    }
    let cost_per_query = number(
        &format!("{at}.litellm_params.input_cost_per_query"),
        params.input_cost_per_query,
        false,
        p,
    )
    .or_else(|| {
        prices
            .get(&format!("{}/search", provider.name()))
            .map(|price| price.per_query)
    })
    .unwrap_or(0.0);
    Some(SearchTool {
        name,
        provider,
        api_key: api_key.map(Secret::new),
        api_base,
        cost_per_query,
        timeout: seconds(&format!("{at}.litellm_params.timeout"), params.timeout, p)
            .unwrap_or(DEFAULT_TIMEOUT),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn read(yaml: &str, env: &[(&str, &str)]) -> (Vec<SearchTool>, Problems) {
        let env: HashMap<String, String> = env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let mut p = Problems::default();
        let v: Value = serde_yaml_ng::from_str(yaml).unwrap();
        let prices = PriceTable::embedded();
        (search_tools(Some(v), &prices, &env, &mut p), p)
    }

    #[test]
    fn tools_read_with_keys_bases_and_prices() {
        let (tools, p) = read(
            r#"
- search_tool_name: web
  litellm_params: {search_provider: perplexity, api_key: os.environ/PPLX}
- search_tool_name: tav
  litellm_params: {search_provider: tavily, api_base: "http://127.0.0.1:9/tavily/", input_cost_per_query: 0.5}
- search_tool_name: exa
  litellm_params: {search_provider: exa_ai}
"#,
            &[("PPLX", "pplx-1"), ("EXA_API_KEY", "exa-1")],
        );
        assert!(p.errors.is_empty(), "{p:?}");
        assert_eq!(tools.len(), 3);
        assert_eq!(tools[0].api_key.as_ref().unwrap().expose(), "pplx-1");
        assert_eq!(tools[0].api_base, "https://api.perplexity.ai");
        assert!(
            tools[0].cost_per_query > 0.0,
            "the price map's perplexity/search"
        );
        assert_eq!(tools[1].api_base, "http://127.0.0.1:9/tavily");
        assert_eq!(tools[1].cost_per_query, 0.5);
        assert_eq!(tools[2].provider, SearchProvider::Exa);
        assert_eq!(tools[2].api_key.as_ref().unwrap().expose(), "exa-1");
    }

    #[test]
    fn problems_name_the_entry_and_field() {
        let (tools, p) = read(
            r#"
- search_tool_name: "a b"
  litellm_params: {search_provider: tavily}
- search_tool_name: x
  litellm_params: {search_provider: bing}
- search_tool_name: y
  litellm_params: {search_provider: tavily, api_base: "ftp://h"}
- search_tool_name: z
  litellm_params: {search_provider: tavily, tools: 1}
"#,
            &[],
        );
        assert!(tools.is_empty());
        let text: String = p.errors.iter().map(|e| format!("{e}\n")).collect();
        for field in [
            "search_tools[0].search_tool_name",
            "search_tools[1].litellm_params.search_provider",
            "search_tools[2].litellm_params.api_base",
            "search_tools[3]",
        ] {
            assert!(text.contains(field), "{field} in {text}");
        }
    }
}
