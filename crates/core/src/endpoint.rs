//! The inference operations sluice proxies. One enum, so that every layer (routes, providers,
//! the mock, usage accounting) has to decide what it does for each of them.

/// An OpenAI-style inference endpoint. The route table maps paths onto it and providers map it
/// onto their upstream paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Endpoint {
    /// `POST /v1/chat/completions`
    ChatCompletions,
    /// `POST /v1/completions` (legacy text completions)
    Completions,
    /// `POST /v1/embeddings`
    Embeddings,
    /// `POST /v1/responses`
    Responses,
    /// `POST /v1/messages` (Anthropic's Messages API)
    Messages,
    /// `POST /v1/messages/count_tokens` (Anthropic's token counter)
    CountTokens,
}

/// The wire format a client speaks, decided by the endpoint it calls. A deployment whose
/// provider speaks another one is reached through `translate`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// OpenAI's API (and every OpenAI-compatible server).
    OpenAi,
    /// Anthropic's Messages API.
    Anthropic,
}

impl Endpoint {
    /// Every endpoint, in declaration order (the order of [`Endpoint::index`]).
    pub const ALL: [Endpoint; 6] = [
        Self::ChatCompletions,
        Self::Completions,
        Self::Embeddings,
        Self::Responses,
        Self::Messages,
        Self::CountTokens,
    ];

    /// Position in [`Endpoint::ALL`], for tables with one entry per endpoint.
    pub const fn index(self) -> usize {
        match self {
            Self::ChatCompletions => 0,
            Self::Completions => 1,
            Self::Embeddings => 2,
            Self::Responses => 3,
            Self::Messages => 4,
            Self::CountTokens => 5,
        }
    }

    /// Path below an OpenAI-compatible base URL (which already ends in `/v1` or similar).
    pub const fn path(self) -> &'static str {
        match self {
            Self::ChatCompletions => "/chat/completions",
            Self::Completions => "/completions",
            Self::Embeddings => "/embeddings",
            Self::Responses => "/responses",
            Self::Messages => "/messages",
            Self::CountTokens => "/messages/count_tokens",
        }
    }

    /// The wire format of this endpoint's requests and answers.
    pub const fn dialect(self) -> Dialect {
        match self {
            Self::ChatCompletions | Self::Completions | Self::Embeddings | Self::Responses => {
                Dialect::OpenAi
            }
            Self::Messages | Self::CountTokens => Dialect::Anthropic,
        }
    }

    /// Short stable name for logs and metrics labels.
    pub const fn name(self) -> &'static str {
        match self {
            Self::ChatCompletions => "chat_completions",
            Self::Completions => "completions",
            Self::Embeddings => "embeddings",
            Self::Responses => "responses",
            Self::Messages => "messages",
            Self::CountTokens => "count_tokens",
        }
    }

    /// A chat turn in either dialect (what the translators carry).
    pub const fn is_chat(self) -> bool {
        matches!(self, Self::ChatCompletions | Self::Messages)
    }

    /// Whether a request to this endpoint may ask for a server-sent-event stream.
    pub const fn can_stream(self) -> bool {
        !matches!(self, Self::Embeddings | Self::CountTokens)
    }

    /// Match a request path (with or without the `/v1` prefix) to an endpoint.
    pub fn from_path(path: &str) -> Option<Self> {
        let path = path.strip_prefix("/v1").unwrap_or(path);
        match path {
            "/chat/completions" => Some(Self::ChatCompletions),
            "/completions" => Some(Self::Completions),
            "/embeddings" => Some(Self::Embeddings),
            "/responses" => Some(Self::Responses),
            "/messages" => Some(Self::Messages),
            "/messages/count_tokens" => Some(Self::CountTokens),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_with_and_without_v1() {
        assert_eq!(
            Endpoint::from_path("/v1/chat/completions"),
            Some(Endpoint::ChatCompletions)
        );
        assert_eq!(
            Endpoint::from_path("/chat/completions"),
            Some(Endpoint::ChatCompletions)
        );
        assert_eq!(
            Endpoint::from_path("/v1/responses"),
            Some(Endpoint::Responses)
        );
        assert_eq!(
            Endpoint::from_path("/embeddings"),
            Some(Endpoint::Embeddings)
        );
        assert_eq!(
            Endpoint::from_path("/v1/completions"),
            Some(Endpoint::Completions)
        );
        assert_eq!(
            Endpoint::from_path("/v1/messages"),
            Some(Endpoint::Messages)
        );
        assert_eq!(
            Endpoint::from_path("/messages/count_tokens"),
            Some(Endpoint::CountTokens)
        );
        assert_eq!(Endpoint::Messages.dialect(), Dialect::Anthropic);
        assert!(!Endpoint::CountTokens.can_stream());
        assert_eq!(Endpoint::from_path("/v2/chat/completions"), None);
        for (i, e) in Endpoint::ALL.into_iter().enumerate() {
            assert_eq!(e.index(), i);
        }
    }
}
