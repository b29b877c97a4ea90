//! A request's tags, gathered once for tag routing and spend by tag: the body's (`tags`, else
//! `metadata.tags`), LiteLLM's `x-litellm-tags` header (comma-separated), and those of the
//! caller's key and team (`metadata.tags`), in that order, each once. A request with none of
//! them, the usual one, allocates nothing.

use std::sync::Arc;

use http::{HeaderMap, HeaderName};

use crate::auth::{Directory, KeyEntry};

/// LiteLLM's request header for tags, named once (a `&str` name is parsed at each lookup).
static X_LITELLM_TAGS: HeaderName = HeaderName::from_static("x-litellm-tags");

/// The request's tags, or `None` when it has none.
pub(crate) fn gather(
    body: Option<&[Arc<str>]>,
    headers: &HeaderMap,
    key: Option<&KeyEntry>,
    dir: &Directory,
) -> Option<Arc<[Arc<str>]>> {
    let header = headers
        .get(&X_LITELLM_TAGS)
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.trim().is_empty());
    let key_tags = key.map(|k| &*k.tags).filter(|t| !t.is_empty());
    let team_tags = key.and_then(|k| dir.team_tags(k));
    if body.is_none() && header.is_none() && key_tags.is_none() && team_tags.is_none() {
        return None;
    }
    let mut out: Vec<Arc<str>> = Vec::new();
    let mut add = |t: &str| {
        let t = t.trim();
        if !t.is_empty()
            && out.len() < sluice_translate::envelope::MAX_TAGS
            && !out.iter().any(|o| &**o == t)
        {
            out.push(t.into());
        }
    };
    body.into_iter().flatten().for_each(|t| add(t));
    header
        .into_iter()
        .flat_map(|h| h.split(','))
        .for_each(&mut add);
    key_tags.into_iter().flatten().for_each(|t| add(t));
    team_tags.iter().flat_map(|t| t.iter()).for_each(|t| add(t));
    (!out.is_empty()).then(|| out.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_body_the_header_and_the_key_each_once_in_order() {
        let dir = Directory::default();
        let mut h = HeaderMap::new();
        assert!(
            gather(None, &h, None, &dir).is_none(),
            "none: nothing built"
        );
        h.insert("x-litellm-tags", " paid , eu,paid".parse().unwrap());
        let body: Vec<Arc<str>> = vec!["eu".into(), "batch".into()];
        let got = gather(Some(&body), &h, None, &dir).unwrap();
        let got: Vec<&str> = got.iter().map(|t| &**t).collect();
        assert_eq!(got, ["eu", "batch", "paid"]);
    }
}
