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
    /// `POST /v1/images/generations`
    ImageGenerations,
    /// `POST /v1/images/edits` (multipart)
    ImageEdits,
    /// `POST /v1/images/variations` (multipart)
    ImageVariations,
    /// `POST /v1/audio/transcriptions` (multipart)
    AudioTranscriptions,
    /// `POST /v1/audio/translations` (multipart)
    AudioTranslations,
    /// `POST /v1/audio/speech` (the answer is audio bytes, streamed as they arrive)
    AudioSpeech,
    /// `POST /v1/moderations`
    Moderations,
    /// `POST /v1/rerank` and `/v2/rerank` (Cohere's shape, as LiteLLM serves it)
    Rerank,
    /// `POST /v1beta/models/{model}:generateContent` and `:streamGenerateContent` (Google's
    /// Gemini API): the model and whether it streams are in the path.
    GenerateContent,
    /// `POST /model/{modelId}/converse` and `/converse-stream` (Bedrock's Converse API): the
    /// model and whether it streams are in the path.
    Converse,
    /// `POST /v1/ocr` (Mistral's document OCR, as LiteLLM serves it)
    Ocr,
}

/// How a request body is encoded, decided by the endpoint: sluice reads the envelope of each
/// its own way and splices the model into it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyFormat {
    /// A JSON object.
    Json,
    /// `multipart/form-data` (file uploads: images to edit, audio to transcribe).
    Multipart,
}

/// The wire format a client speaks, decided by the endpoint it calls. A deployment whose
/// provider speaks another one is reached through `translate`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// OpenAI's API (and every OpenAI-compatible server).
    OpenAi,
    /// Anthropic's Messages API.
    Anthropic,
    /// Google's Gemini API (`generateContent`), as the google-genai SDK and Gemini CLI speak it.
    Gemini,
    /// Bedrock's Converse API, as boto3 speaks it.
    Converse,
}

impl Endpoint {
    /// Every endpoint, in declaration order (the order of [`Endpoint::index`]).
    pub const ALL: [Endpoint; 17] = [
        Self::ChatCompletions,
        Self::Completions,
        Self::Embeddings,
        Self::Responses,
        Self::Messages,
        Self::CountTokens,
        Self::ImageGenerations,
        Self::ImageEdits,
        Self::ImageVariations,
        Self::AudioTranscriptions,
        Self::AudioTranslations,
        Self::AudioSpeech,
        Self::Moderations,
        Self::Rerank,
        Self::GenerateContent,
        Self::Converse,
        Self::Ocr,
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
            Self::ImageGenerations => 6,
            Self::ImageEdits => 7,
            Self::ImageVariations => 8,
            Self::AudioTranscriptions => 9,
            Self::AudioTranslations => 10,
            Self::AudioSpeech => 11,
            Self::Moderations => 12,
            Self::Rerank => 13,
            Self::GenerateContent => 14,
            Self::Converse => 15,
            Self::Ocr => 16,
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
            Self::ImageGenerations => "/images/generations",
            Self::ImageEdits => "/images/edits",
            Self::ImageVariations => "/images/variations",
            Self::AudioTranscriptions => "/audio/transcriptions",
            Self::AudioTranslations => "/audio/translations",
            Self::AudioSpeech => "/audio/speech",
            Self::Moderations => "/moderations",
            Self::Rerank => "/rerank",
            Self::GenerateContent => "/models/{model}:generateContent",
            Self::Converse => "/model/{modelId}/converse",
            Self::Ocr => "/ocr",
        }
    }

    /// The wire format of this endpoint's requests and answers.
    pub const fn dialect(self) -> Dialect {
        match self {
            Self::Messages | Self::CountTokens => Dialect::Anthropic,
            Self::GenerateContent => Dialect::Gemini,
            Self::Converse => Dialect::Converse,
            Self::ChatCompletions
            | Self::Completions
            | Self::Embeddings
            | Self::Responses
            | Self::ImageGenerations
            | Self::ImageEdits
            | Self::ImageVariations
            | Self::AudioTranscriptions
            | Self::AudioTranslations
            | Self::AudioSpeech
            | Self::Moderations
            | Self::Rerank
            | Self::Ocr => Dialect::OpenAi,
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
            Self::ImageGenerations => "image_generations",
            Self::ImageEdits => "image_edits",
            Self::ImageVariations => "image_variations",
            Self::AudioTranscriptions => "audio_transcriptions",
            Self::AudioTranslations => "audio_translations",
            Self::AudioSpeech => "audio_speech",
            Self::Moderations => "moderations",
            Self::Rerank => "rerank",
            Self::GenerateContent => "generate_content",
            Self::Converse => "converse",
            Self::Ocr => "ocr",
        }
    }

    /// How the request body is encoded.
    pub const fn body_format(self) -> BodyFormat {
        match self {
            Self::ImageEdits
            | Self::ImageVariations
            | Self::AudioTranscriptions
            | Self::AudioTranslations => BodyFormat::Multipart,
            Self::ChatCompletions
            | Self::Completions
            | Self::Embeddings
            | Self::Responses
            | Self::Messages
            | Self::CountTokens
            | Self::ImageGenerations
            | Self::AudioSpeech
            | Self::Moderations
            | Self::Rerank
            | Self::GenerateContent
            | Self::Converse
            | Self::Ocr => BodyFormat::Json,
        }
    }

    /// The answer is audio bytes, relayed as they arrive whatever the request says
    /// (`/audio/speech`; with `stream_format: "sse"` it is an event stream instead).
    pub const fn answers_binary(self) -> bool {
        matches!(self, Self::AudioSpeech)
    }

    /// A chat turn in any dialect (what the translators carry).
    pub const fn is_chat(self) -> bool {
        matches!(
            self,
            Self::ChatCompletions | Self::Messages | Self::GenerateContent | Self::Converse
        )
    }

    /// The model and whether the request streams are in the path, not the body (Google's and
    /// Bedrock's APIs).
    pub const fn names_model_in_path(self) -> bool {
        matches!(self, Self::GenerateContent | Self::Converse)
    }

    /// Whether a request to this endpoint may ask for a server-sent-event stream.
    pub const fn can_stream(self) -> bool {
        matches!(
            self,
            Self::ChatCompletions
                | Self::Completions
                | Self::Responses
                | Self::Messages
                | Self::ImageGenerations
                | Self::ImageEdits
                | Self::AudioTranscriptions
                | Self::GenerateContent
                | Self::Converse
        )
    }

    /// Match a request path (with or without the `/v1` prefix) to an endpoint.
    pub fn from_path(path: &str) -> Option<Self> {
        if path == "/v2/rerank" {
            return Some(Self::Rerank);
        }
        let path = path.strip_prefix("/v1").unwrap_or(path);
        match path {
            "/chat/completions" => Some(Self::ChatCompletions),
            "/completions" => Some(Self::Completions),
            "/embeddings" => Some(Self::Embeddings),
            "/responses" => Some(Self::Responses),
            "/messages" => Some(Self::Messages),
            "/messages/count_tokens" => Some(Self::CountTokens),
            "/images/generations" => Some(Self::ImageGenerations),
            "/images/edits" => Some(Self::ImageEdits),
            "/images/variations" => Some(Self::ImageVariations),
            "/audio/transcriptions" => Some(Self::AudioTranscriptions),
            "/audio/translations" => Some(Self::AudioTranslations),
            "/audio/speech" => Some(Self::AudioSpeech),
            "/moderations" => Some(Self::Moderations),
            "/rerank" => Some(Self::Rerank),
            "/ocr" => Some(Self::Ocr),
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
        assert_eq!(Endpoint::from_path("/v2/rerank"), Some(Endpoint::Rerank));
        assert_eq!(Endpoint::from_path("/rerank"), Some(Endpoint::Rerank));
        assert_eq!(
            Endpoint::from_path("/v1/audio/transcriptions").map(Endpoint::body_format),
            Some(BodyFormat::Multipart)
        );
        for e in Endpoint::ALL {
            // Google's and Bedrock's paths name the model: the route table reads them.
            let expected = (!e.names_model_in_path()).then_some(e);
            assert_eq!(Endpoint::from_path(e.path()), expected, "{e:?}");
        }
        for (i, e) in Endpoint::ALL.into_iter().enumerate() {
            assert_eq!(e.index(), i);
        }
    }
}
