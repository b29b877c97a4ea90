//! The shape an answer is given in: whole, or a stream (with or without Chat Completions' usage
//! chunk). The cache key leaves `stream` and `stream_options` out, so that a stored answer
//! serves requests of either shape (told again by `sluice_translate::replay`); requests in
//! flight are collapsed only with requests of their own shape, because a follower reads the
//! leader's bytes as they come.

use crate::CacheKey;

/// How a request wants its answer, and how a stored answer is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Shape {
    /// One JSON document.
    Whole,
    /// Server-sent events; `usage`: with the usage chunk Chat Completions and Completions send
    /// only when asked (`stream_options.include_usage`), always true for other endpoints.
    Stream {
        /// The stream carries its usage.
        usage: bool,
    },
}

impl Shape {
    /// Whether the answer is a stream.
    pub fn is_stream(self) -> bool {
        matches!(self, Self::Stream { .. })
    }

    /// The content type an answer of this shape is sent with.
    pub fn content_type(self) -> http::HeaderValue {
        http::HeaderValue::from_static(if self.is_stream() {
            "text/event-stream"
        } else {
            "application/json"
        })
    }
}

impl CacheKey {
    /// The key requests in flight are collapsed under: this key, told apart per shape.
    pub fn flight(self, shape: Shape) -> Self {
        // Distinct odd constants keep the three shapes' flights apart; XOR keeps keys unique.
        let tweak: u128 = match shape {
            Shape::Whole => 0,
            Shape::Stream { usage: false } => 0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835,
            Shape::Stream { usage: true } => 0x6a09_e667_f3bc_c908_b2fb_1366_ea95_7d3f,
        };
        Self(self.0 ^ tweak)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_shape_flies_apart_and_whole_keeps_the_key() {
        let k = CacheKey(42);
        let shapes = [
            Shape::Whole,
            Shape::Stream { usage: false },
            Shape::Stream { usage: true },
        ];
        let flights: std::collections::HashSet<_> = shapes.iter().map(|s| k.flight(*s)).collect();
        assert_eq!(flights.len(), 3);
        assert_eq!(k.flight(Shape::Whole), k);
        assert_eq!(
            Shape::Stream { usage: true }.content_type(),
            "text/event-stream"
        );
    }
}
