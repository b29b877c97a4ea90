//! Requests whose model is named outside their body, as LiteLLM serves them: an Azure
//! client's `/openai/deployments/{deployment}/chat/completions` names it in the path, and a
//! `/moderations` body may name none (OpenAI's default model answers it). The model is
//! spliced into the body once, here, so the request path after this is the usual one.

use bytes::{Bytes, BytesMut};

use sluice_core::error::ApiError;
use sluice_core::Endpoint;
use sluice_translate::envelope::Envelope;

/// The model a `/moderations` request without one is sent to (OpenAI's default).
pub const MODERATION_DEFAULT: &str = "omni-moderation-latest";

/// An Azure OpenAI path: the endpoint and the deployment it names
/// (`/openai/deployments/{deployment}/{endpoint}`). `None` for any other path.
pub fn azure_deployment(path: &str) -> Option<(Endpoint, &str)> {
    let rest = path.strip_prefix("/openai/deployments/")?;
    let slash = rest.find('/')?;
    let (deployment, endpoint) = rest.split_at(slash);
    if deployment.is_empty() {
        return None;
    }
    Some((Endpoint::from_path(endpoint)?, deployment))
}

/// `body` with `"model": model` added when the JSON object names no model; `None` when it
/// names one already (the body's own wins, as the Azure SDK sends the deployment there too)
/// or is not a JSON object (the usual parse then reports what is wrong).
pub fn with_model(body: &[u8], model: &str) -> Option<Bytes> {
    match Envelope::parse(body) {
        Err(ApiError::MissingParam("model")) => {}
        _ => return None,
    }
    let open = body.iter().position(|b| !b.is_ascii_whitespace())?;
    if body[open] != b'{' {
        return None;
    }
    let empty = body[open + 1..]
        .iter()
        .find(|b| !b.is_ascii_whitespace())
        .is_some_and(|b| *b == b'}');
    let name = serde_json::to_string(model).ok()?;
    let mut out = BytesMut::with_capacity(body.len() + name.len() + 10);
    out.extend_from_slice(&body[..=open]);
    out.extend_from_slice(b"\"model\":");
    out.extend_from_slice(name.as_bytes());
    if !empty {
        out.extend_from_slice(b",");
    }
    out.extend_from_slice(&body[open + 1..]);
    Some(out.freeze())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn azure_paths_name_endpoint_and_deployment() {
        assert_eq!(
            azure_deployment("/openai/deployments/gpt-4/chat/completions"),
            Some((Endpoint::ChatCompletions, "gpt-4"))
        );
        assert_eq!(
            azure_deployment("/openai/deployments/emb/embeddings"),
            Some((Endpoint::Embeddings, "emb"))
        );
        assert_eq!(azure_deployment("/openai/deployments/x/unknown"), None);
        assert_eq!(
            azure_deployment("/openai/deployments//chat/completions"),
            None
        );
        assert_eq!(azure_deployment("/openai/files"), None);
    }

    #[test]
    fn the_model_is_added_only_when_missing() {
        let added = with_model(br#"{"input": "hi"}"#, "m").unwrap();
        let v: serde_json::Value = serde_json::from_slice(&added).unwrap();
        assert_eq!(v["model"], "m");
        assert_eq!(v["input"], "hi");
        let empty = with_model(b" { } ", "m\"x").unwrap();
        let v: serde_json::Value = serde_json::from_slice(&empty).unwrap();
        assert_eq!(v["model"], "m\"x");
        assert!(with_model(br#"{"model": "own", "input": "hi"}"#, "m").is_none());
        assert!(with_model(b"[1]", "m").is_none());
    }
}
