//! The fuzz target over the providers' own stream formats (fuzz/README.md): Gemini's SSE
//! chunks and Bedrock's ConverseStream events into either client dialect, checked by the
//! same rules as the dialects' own streams (`sluice_translate::fuzz::check_translator`).

use sluice_translate::fuzz::{check_translator, client_dialect, event_stream};

use crate::bedrock::codec::EventReader;
use crate::gemini::codec::ChunkReader;

/// Byte 0: bit 0 the upstream (Gemini, Bedrock), bit 1 the client's dialect, bit 2 for
/// Bedrock whether the rest is raw bytes or records built into valid frames
/// (`event_frames`), the rest the framing; then the upstream's stream.
pub fn stream_providers(data: &[u8]) {
    let Some((&mode, stream)) = data.split_first() else {
        return;
    };
    let to = client_dialect(mode);
    let seed = mode >> 3;
    if mode & 1 == 0 {
        check_translator(ChunkReader::default, to, stream, seed);
        return;
    }
    let stream = &*event_stream(mode & 4 == 4, stream);
    let reader = || EventReader::new("msg-1".into(), "amazon.nova-lite-v1:0".into());
    check_translator(reader, to, stream, seed);
}

#[cfg(test)]
mod tests {
    #[test]
    fn stream_providers_corpus() {
        sluice_core::fuzz::replay(
            env!("CARGO_MANIFEST_DIR"),
            "stream_providers",
            super::stream_providers,
        );
    }
}
