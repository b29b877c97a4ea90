//! What a deployment's tokens cost, resolved once when the config loads, so that a request's
//! cost is a few multiplications.

use crate::limits::{nanos, Nanos};

use super::Usage;

/// USD per token of each kind. Cache reads and writes and reasoning tokens have their own
/// rates where the provider bills them apart; otherwise they cost what their parent kind does.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Price {
    /// Uncached input.
    pub input: f64,
    /// Output (reasoning included unless `reasoning` is set).
    pub output: f64,
    /// Input read from the prompt cache.
    pub cache_read: Option<f64>,
    /// Input written to the prompt cache.
    pub cache_write: Option<f64>,
    /// Reasoning output, when billed apart.
    pub reasoning: Option<f64>,
}

impl Price {
    /// The cost of `u`. `prompt_tokens` includes cached and cache-write tokens; each part is
    /// priced at its own rate.
    pub fn cost(&self, u: &Usage) -> Nanos {
        let cache_read = u.cached_tokens as f64 * self.cache_read.unwrap_or(self.input);
        let cache_write = u.cache_creation_tokens as f64 * self.cache_write.unwrap_or(self.input);
        let input = u.uncached_input_tokens() as f64 * self.input;
        let output = match self.reasoning {
            Some(r) => {
                let reasoning = u.reasoning_tokens.min(u.completion_tokens);
                (u.completion_tokens - reasoning) as f64 * self.output + reasoning as f64 * r
            }
            None => u.completion_tokens as f64 * self.output,
        };
        nanos(input + cache_read + cache_write + output)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cached_tokens_at_their_own_rate() {
        // Claude-like: $3/M in, $15/M out, cache read $0.30/M, cache write $3.75/M.
        let p = Price {
            input: 3e-6,
            output: 15e-6,
            cache_read: Some(0.3e-6),
            cache_write: Some(3.75e-6),
            reasoning: None,
        };
        let u = Usage {
            prompt_tokens: 1_000_000 + 2_000_000 + 1_000_000,
            completion_tokens: 100_000,
            cached_tokens: 2_000_000,
            cache_creation_tokens: 1_000_000,
            reasoning_tokens: 0,
        };
        // 3 + 0.6 + 3.75 + 1.5 = 8.85 USD
        assert_eq!(p.cost(&u), nanos(8.85));
        let plain = Price {
            cache_read: None,
            cache_write: None,
            ..p
        };
        // Without cache rates every input token costs the input rate: 4M × 3 + 1.5.
        assert_eq!(plain.cost(&u), nanos(13.5));
    }
}
