//! Helpers the provider modules' codec tests share.

use sluice_core::endpoint::Dialect;
use sluice_translate::ir::ChatRequest;
use sluice_translate::stream::{StreamRead, Translator};
use sluice_translate::testing::{fixture, strict};
use sluice_translate::{openai, Codec};

/// The full OpenAI request fixture, read.
pub fn openai_full() -> ChatRequest {
    openai::parse_request(
        fixture("openai/request_full.json").as_bytes(),
        &mut strict(),
    )
    .unwrap()
}

/// Run a stream through a translator, cutting the input into frames of `cut` bytes.
pub fn run<R: StreamRead>(mut t: Translator<R>, input: &[u8], cut: usize) -> String {
    let mut out = Vec::new();
    for chunk in input.chunks(cut.max(1)) {
        out.extend(t.feed(chunk));
    }
    out.extend(t.finish());
    String::from_utf8(out).unwrap()
}

/// A translator from `codec`'s stream to the `to` dialect (answer id `id-1`, model `model-1`).
pub fn translator<C: Codec>(codec: C, to: Dialect) -> Translator<C::Reader> {
    Translator::new(codec.reader("id-1", "model-1"), to)
}
