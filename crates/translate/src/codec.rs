//! An upstream's chat wire format as one trait: how a request is written in it and its whole
//! answers, streams and errors are read. The exchange of a translated call (in the providers
//! crate) is generic over it, so each format's code is compiled into its own call path with
//! no dispatch at run time.

use crate::ir::{ChatRequest, ChatResponse};
use crate::stream::StreamRead;
use crate::{anthropic, openai, Params, TranslateError};

/// A chat wire format sluice can write requests in and read answers from. The client
/// dialects implement it here ([`OpenAiChat`], [`AnthropicMessages`]); providers with formats
/// of their own implement it in their modules.
pub trait Codec: Sync {
    /// Reads the format's stream.
    type Reader: StreamRead + Unpin;

    /// The request body, in this format. Settings the format has no place for are noted in
    /// `params` (hints), or refused by it (what the answer depends on).
    fn write_request(
        &self,
        req: &ChatRequest,
        params: &mut Params,
    ) -> Result<Vec<u8>, TranslateError>;

    /// A whole answer.
    fn parse_response(&self, body: &[u8]) -> Result<ChatResponse, TranslateError>;

    /// A reader for one stream; `id` and `model` name the answer for formats whose events do
    /// not (Bedrock).
    fn reader(&self, id: &str, model: &str) -> Self::Reader;

    /// An error answer's type and message, when it has this format's error shape.
    fn parse_error(&self, body: &[u8]) -> Option<(String, String)>;

    /// The answer's id from its response headers, for formats whose answers carry none in the
    /// body (Bedrock's request id); other answers get a fresh one.
    fn answer_id<'h>(&self, _headers: &'h http::HeaderMap) -> Option<&'h str> {
        None
    }
}

/// OpenAI's Chat Completions, as an upstream format.
#[derive(Debug, Clone, Copy, Default)]
pub struct OpenAiChat;

impl Codec for OpenAiChat {
    type Reader = openai::ChunkReader;

    fn write_request(
        &self,
        req: &ChatRequest,
        params: &mut Params,
    ) -> Result<Vec<u8>, TranslateError> {
        openai::write_request(req, params)
    }

    fn parse_response(&self, body: &[u8]) -> Result<ChatResponse, TranslateError> {
        openai::parse_response(body)
    }

    fn reader(&self, _id: &str, _model: &str) -> Self::Reader {
        openai::ChunkReader::default()
    }

    fn parse_error(&self, body: &[u8]) -> Option<(String, String)> {
        openai::parse_error(body)
    }
}

/// Anthropic's Messages API, as an upstream format. On Vertex AI (`rawPredict`) the request has
/// no `model` (the URL names it) and carries Vertex's `anthropic_version`; answers, streams and
/// errors are the same.
#[derive(Debug, Clone, Copy, Default)]
pub struct AnthropicMessages {
    /// Write requests for Vertex AI.
    pub vertex: bool,
}

impl AnthropicMessages {
    /// Anthropic's own API.
    pub const DIRECT: Self = Self { vertex: false };
    /// Claude models on Vertex AI.
    pub const VERTEX: Self = Self { vertex: true };
}

impl Codec for AnthropicMessages {
    type Reader = anthropic::EventReader;

    fn write_request(
        &self,
        req: &ChatRequest,
        params: &mut Params,
    ) -> Result<Vec<u8>, TranslateError> {
        if self.vertex {
            anthropic::write_vertex_request(req, params)
        } else {
            anthropic::write_request(req, params)
        }
    }

    fn parse_response(&self, body: &[u8]) -> Result<ChatResponse, TranslateError> {
        anthropic::parse_response(body)
    }

    fn reader(&self, _id: &str, _model: &str) -> Self::Reader {
        anthropic::EventReader
    }

    fn parse_error(&self, body: &[u8]) -> Option<(String, String)> {
        anthropic::parse_error(body)
    }
}
