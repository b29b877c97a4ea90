//! What a deployment's tokens cost: USD per kind of token, and the cost of one request's usage.
//! Resolved once per deployment at config load (from LiteLLM's price map); a request's cost is
//! then five multiplications. Image models priced by quality and size (DALL·E) also carry the
//! map's entries for each ([`ImagePrices`]), one of which a request picks.

use std::sync::Arc;

use serde_json::{Map, Value};

use crate::usage::{RequestUnits, Usage};

/// USD per token for each kind of token a request uses. Cache reads, cache writes and reasoning
/// default to the plain input and output prices where a model does not price them apart.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Price {
    /// Input tokens read neither from nor into the prompt cache.
    pub input: f64,
    /// Output tokens (reasoning ones priced by `reasoning`).
    pub output: f64,
    /// Input tokens read from the prompt cache (`cache_read_input_token_cost`).
    pub cache_read: f64,
    /// Input tokens written to the prompt cache (`cache_creation_input_token_cost`).
    pub cache_write: f64,
    /// Hidden reasoning tokens (`output_cost_per_reasoning_token`).
    pub reasoning: f64,
    /// Each image generated (`output_cost_per_image`).
    pub per_image: f64,
    /// Each pixel of the images generated (`input_cost_per_pixel`, DALL·E's entries).
    pub per_pixel: f64,
    /// Each second of audio transcribed (`input_cost_per_second` plus
    /// `output_cost_per_second`: LiteLLM's map puts Whisper's rate in the latter), or of
    /// video generated (`output_cost_per_video_per_second`).
    pub per_second: f64,
    /// Each character spoken (`input_cost_per_character`).
    pub per_character: f64,
    /// Each rerank search unit, web search or vector store search (`input_cost_per_query`).
    pub per_query: f64,
    /// Each call, whatever it holds (a custom pass-through route's `cost_per_request`).
    pub per_request: f64,
    /// Each document page read (`ocr_cost_per_page`).
    pub per_page: f64,
    /// Input tokens written to the cache for an hour
    /// (`cache_creation_input_token_cost_above_1hr`; the 5-minute price when not given).
    pub cache_write_1h: f64,
    /// Dearer rates for a long prompt (`input_cost_per_token_above_200k_tokens`, …), highest
    /// threshold first: a request whose prompt is longer than a tier's threshold is priced at
    /// that tier's rates throughout, as the providers bill it.
    pub tiers: [Option<Tier>; 2],
    /// Every token's price times this when the answer was served in fast mode
    /// (`provider_specific_entry.fast`, Anthropic's `speed: "fast"`).
    pub fast: Option<f64>,
    /// Every token's price times this when the answer was computed in the US only
    /// (`provider_specific_entry.us`, Anthropic's `inference_geo: "us"`).
    pub us_only: Option<f64>,
}

/// The rates of one long-prompt tier.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Tier {
    /// Prompt tokens above which the tier applies.
    pub above: u64,
    /// Plain input tokens.
    pub input: f64,
    /// Output tokens.
    pub output: f64,
    /// Input tokens read from the cache.
    pub cache_read: f64,
    /// Input tokens written to the cache.
    pub cache_write: f64,
}

/// The long-prompt thresholds LiteLLM's map prices, in thousands of tokens, highest first.
const TIER_THRESHOLDS: [u64; 7] = [512, 272, 256, 200, 128, 100, 32];

impl Price {
    /// Cost in USD of one request. `prompt_tokens` includes cached and cache-write tokens and
    /// `completion_tokens` includes reasoning tokens (the normalised [`Usage`]), so each part is
    /// taken out of its total and priced at its own rate.
    pub fn cost(&self, usage: &Usage) -> f64 {
        let uncached = usage.uncached_input_tokens();
        let read = usage.cached_tokens.min(usage.prompt_tokens);
        let written = usage
            .cache_creation_tokens
            .min(usage.prompt_tokens.saturating_sub(read));
        let written_1h = usage.cache_creation_1h_tokens.min(written);
        let reasoning = usage.reasoning_tokens.min(usage.completion_tokens);
        let output = usage.completion_tokens - reasoning;
        let (input, out, cache_read, cache_write, cache_write_1h, reasoning_rate) =
            match self.tier_for(usage.prompt_tokens) {
                // A tier's output rate prices reasoning too (the map gives no tiered reasoning
                // rate); an hour's cache write keeps its premium over the 5-minute one.
                Some(t) => (
                    t.input,
                    t.output,
                    t.cache_read,
                    t.cache_write,
                    t.cache_write + (self.cache_write_1h - self.cache_write).max(0.0),
                    t.output,
                ),
                None => (
                    self.input,
                    self.output,
                    self.cache_read,
                    self.cache_write,
                    self.cache_write_1h,
                    self.reasoning,
                ),
            };
        let uplift = match (usage.fast, usage.us_only) {
            (false, false) => 1.0,
            (fast, us) => {
                (if fast { self.fast.unwrap_or(1.0) } else { 1.0 })
                    * (if us { self.us_only.unwrap_or(1.0) } else { 1.0 })
            }
        };
        (tokens(uncached) * input
            + tokens(read) * cache_read
            + tokens(written - written_1h) * cache_write
            + tokens(written_1h) * cache_write_1h
            + tokens(output) * out
            + tokens(reasoning) * reasoning_rate)
            * uplift
            + tokens(usage.images) * self.per_image
            + tokens(usage.pixels) * self.per_pixel
            + (tokens(usage.audio_ms) / 1000.0 + f64::from(usage.video_seconds)) * self.per_second
            + tokens(usage.characters) * self.per_character
            + tokens(usage.search_units) * self.per_query
            + f64::from(usage.requests) * self.per_request
            + f64::from(usage.pages) * self.per_page
    }

    /// The long-prompt tier a prompt of this many tokens is priced at, if any.
    fn tier_for(&self, prompt_tokens: u64) -> Option<&Tier> {
        self.tiers
            .iter()
            .flatten()
            .find(|t| prompt_tokens > t.above)
    }

    /// Every rate times `factor` (a regional endpoint's uplift).
    pub fn scaled(mut self, factor: f64) -> Self {
        for rate in [
            &mut self.input,
            &mut self.output,
            &mut self.cache_read,
            &mut self.cache_write,
            &mut self.reasoning,
            &mut self.per_image,
            &mut self.per_pixel,
            &mut self.per_second,
            &mut self.per_character,
            &mut self.per_query,
            &mut self.per_request,
            &mut self.per_page,
            &mut self.cache_write_1h,
        ] {
            *rate *= factor;
        }
        for t in self.tiers.iter_mut().flatten() {
            for rate in [
                &mut t.input,
                &mut t.output,
                &mut t.cache_read,
                &mut t.cache_write,
            ] {
                *rate *= factor;
            }
        }
        self
    }

    /// A price from one entry of a LiteLLM price map; `None` when the entry prices nothing
    /// sluice counts (neither tokens nor images, pixels, seconds, characters, queries, calls
    /// nor pages).
    pub fn from_entry(entry: &Map<String, Value>) -> Option<Self> {
        let get = |k: &str| entry.get(k).and_then(Value::as_f64).filter(|v| *v >= 0.0);
        let unit = |k: &str| get(k).unwrap_or(0.0);
        let input = get("input_cost_per_token");
        let per_unit = [
            "output_cost_per_image",
            "input_cost_per_pixel",
            "input_cost_per_second",
            "output_cost_per_second",
            "output_cost_per_video_per_second",
            "input_cost_per_character",
            "input_cost_per_query",
            "input_cost_per_request",
            "ocr_cost_per_page",
        ];
        // A per-query price in tiers by result count (Exa's, Firecrawl's): the first tier, the
        // price of a search for the fewest results.
        let first_tier_query = entry
            .get("tiered_pricing")
            .and_then(Value::as_array)
            .and_then(|t| t.first())
            .and_then(|t| t.get("input_cost_per_query"))
            .and_then(Value::as_f64)
            .filter(|v| *v >= 0.0);
        if input.is_none()
            && per_unit.iter().all(|k| get(k).is_none())
            && first_tier_query.is_none()
        {
            return None;
        }
        let input = input.unwrap_or(0.0);
        // An image model's output tokens are image tokens (`gpt-image-*`).
        let output = get("output_cost_per_token")
            .or_else(|| get("output_cost_per_image_token"))
            .unwrap_or(0.0);
        let cache_read = get("cache_read_input_token_cost").unwrap_or(input);
        let cache_write = get("cache_creation_input_token_cost").unwrap_or(input);
        let mut tiers = [None; 2];
        let mut found = TIER_THRESHOLDS.iter().filter_map(|k| {
            let rate = |name: &str| get(&format!("{name}_above_{k}k_tokens"));
            let tier_input = rate("input_cost_per_token")?;
            Some(Tier {
                above: k * 1000,
                input: tier_input,
                output: rate("output_cost_per_token").unwrap_or(output),
                cache_read: get(&format!("cache_read_input_token_cost_above_{k}k_tokens"))
                    .unwrap_or(cache_read),
                cache_write: get(&format!(
                    "cache_creation_input_token_cost_above_{k}k_tokens"
                ))
                .unwrap_or(cache_write),
            })
        });
        for slot in &mut tiers {
            *slot = found.next();
        }
        // Seconds of audio: LiteLLM charges the output rate when there is one, else the input
        // rate (never both: Whisper's entry carries the same rate under each name).
        // A video model's rate is per second of video made.
        let per_second = get("output_cost_per_second")
            .filter(|v| *v > 0.0)
            .or_else(|| get("output_cost_per_video_per_second"))
            .unwrap_or_else(|| unit("input_cost_per_second"));
        Some(Self {
            input,
            output,
            cache_read,
            cache_write,
            reasoning: get("output_cost_per_reasoning_token").unwrap_or(output),
            per_image: unit("output_cost_per_image"),
            per_pixel: unit("input_cost_per_pixel"),
            per_second,
            per_character: unit("input_cost_per_character"),
            per_query: get("input_cost_per_query")
                .or(first_tier_query)
                .unwrap_or(0.0),
            per_request: unit("input_cost_per_request"),
            per_page: unit("ocr_cost_per_page"),
            cache_write_1h: get("cache_creation_input_token_cost_above_1hr").unwrap_or(cache_write),
            tiers,
            fast: multiplier(entry, "fast"),
            us_only: multiplier(entry, "us"),
        })
    }
}

/// An image request's `quality`, as LiteLLM's price keys spell it (`hd/1024-x-1792/dall-e-3`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageQuality {
    /// `standard` (DALL·E's default, and LiteLLM's when none is given).
    Standard,
    /// `hd` (DALL·E 3).
    Hd,
    /// `low` (`gpt-image-*`).
    Low,
    /// `medium` (`gpt-image-*`).
    Medium,
    /// `high` (`gpt-image-*`).
    High,
    /// Anything else (`auto`, …): no price key names it.
    Other,
}

impl ImageQuality {
    /// The quality a request or a price key names.
    pub fn parse(s: &str) -> Self {
        match s {
            "standard" => Self::Standard,
            "hd" => Self::Hd,
            "low" => Self::Low,
            "medium" => Self::Medium,
            "high" => Self::High,
            _ => Self::Other,
        }
    }
}

/// One price-map entry for an image model at one size (and quality, when the key names one).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ImagePrice {
    /// The key's quality (`hd/…`), or `None` for a key without one (`1024-x-1024/dall-e-2`).
    pub quality: Option<ImageQuality>,
    /// The key names the deployment's provider (`azure/hd/1024-x-1024/dall-e-3`).
    pub provider_keyed: bool,
    /// Width and height of the key's size.
    pub size: (u32, u32),
    /// The entry's price.
    pub price: Price,
}

/// A deployment's price-map entries by image quality and size, empty for models priced
/// otherwise. Cheap to clone.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ImagePrices(Option<Arc<[ImagePrice]>>);

impl ImagePrices {
    /// The entries of one model.
    pub fn new(entries: Vec<ImagePrice>) -> Self {
        Self((!entries.is_empty()).then(|| entries.into()))
    }

    /// True when the model has no entries by quality and size.
    pub fn is_empty(&self) -> bool {
        self.0.is_none()
    }

    /// The entry LiteLLM prices a request of `quality` (default `standard`) and `size`
    /// (default 1024×1024; `None` for `auto`) at: `{provider}/{quality}/{size}/{model}`,
    /// `{quality}/{size}/{model}`, `{size}/{model}`, `high/{size}/{model}`. (LiteLLM tries the
    /// bare quality key before the provider's; its map never holds both, sluice's embedded
    /// table does for Azure's DALL·E 3, whose own prices are the right ones.)
    pub fn pick(
        &self,
        quality: Option<ImageQuality>,
        size: Option<(u32, u32)>,
    ) -> Option<&ImagePrice> {
        let entries = self.0.as_deref()?;
        let size = size?;
        let quality = quality.unwrap_or(ImageQuality::Standard);
        let find = |q: Option<ImageQuality>, provider_keyed: bool| {
            entries
                .iter()
                .find(|e| e.size == size && e.quality == q && e.provider_keyed == provider_keyed)
        };
        find(Some(quality), true)
            .or_else(|| find(Some(quality), false))
            .or_else(|| find(None, false))
            .or_else(|| find(Some(ImageQuality::High), false))
    }

    /// The price of a request: the entry for its quality and size, else `base`.
    pub fn price(&self, base: Price, units: &RequestUnits) -> Price {
        self.pick(units.image_quality, units.image_size)
            .map_or(base, |e| e.price)
    }
}

/// A multiplier of the entry's `provider_specific_entry` (`{"fast": 2.0, "us": 1.1}`).
fn multiplier(entry: &Map<String, Value>, key: &str) -> Option<f64> {
    entry
        .get("provider_specific_entry")?
        .get(key)?
        .as_f64()
        .filter(|m| m.is_finite() && *m > 0.0)
}

/// Token counts as `f64`: exact below 2^53, far beyond any request.
fn tokens(n: u64) -> f64 {
    n as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cost_prices_each_kind_of_token_at_its_own_rate() {
        let p = Price {
            input: 3.0,
            output: 15.0,
            cache_read: 0.3,
            cache_write: 3.75,
            reasoning: 20.0,
            ..Price::default()
        };
        let u = Usage {
            prompt_tokens: 1_000,
            completion_tokens: 300,
            cached_tokens: 600,
            cache_creation_tokens: 100,
            reasoning_tokens: 50,
            ..Usage::default()
        };
        // 300 plain input, 600 read, 100 written; 250 plain output, 50 reasoning.
        let expect = 300.0 * 3.0 + 600.0 * 0.3 + 100.0 * 3.75 + 250.0 * 15.0 + 50.0 * 20.0;
        assert!((p.cost(&u) - expect).abs() < 1e-9, "{}", p.cost(&u));
        // Inconsistent counts from an upstream never make a negative share.
        let odd = Usage {
            prompt_tokens: 10,
            completion_tokens: 5,
            cached_tokens: 40,
            cache_creation_tokens: 7,
            reasoning_tokens: 9,
            ..Usage::default()
        };
        assert!((p.cost(&odd) - (10.0 * 0.3 + 5.0 * 20.0)).abs() < 1e-9);
        assert_eq!(p.cost(&Usage::default()), 0.0);
    }

    #[test]
    fn fast_mode_and_us_only_answers_cost_the_entrys_multipliers_more() {
        let entry = serde_json::json!({"input_cost_per_token": 1.0, "output_cost_per_token": 2.0,
            "provider_specific_entry": {"us": 1.1, "fast": 2.0}});
        let p = Price::from_entry(entry.as_object().unwrap()).unwrap();
        let u = Usage {
            prompt_tokens: 10,
            completion_tokens: 5,
            ..Usage::default()
        };
        let base = p.cost(&u);
        assert_eq!(base, 20.0);
        let fast = Usage { fast: true, ..u };
        assert!((p.cost(&fast) - 40.0).abs() < 1e-9);
        let both = Usage {
            fast: true,
            us_only: true,
            ..u
        };
        assert!((p.cost(&both) - 44.0).abs() < 1e-9);
        // An entry without multipliers charges the same either way.
        let plain = Price::from_entry(
            serde_json::json!({"input_cost_per_token": 1.0})
                .as_object()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(plain.cost(&both), plain.cost(&u));
    }

    #[test]
    fn per_unit_entries_price_images_audio_speech_and_queries() {
        let entry = |j: &str| Price::from_entry(serde_json::from_str(j).as_ref().unwrap());
        let whisper = entry(r#"{"mode":"audio_transcription","input_cost_per_second":0,"output_cost_per_second":0.0001}"#)
            .unwrap();
        let u = Usage {
            audio_ms: 60_000,
            ..Usage::default()
        };
        assert!((whisper.cost(&u) - 0.006).abs() < 1e-12);
        let dalle =
            entry(r#"{"input_cost_per_pixel":3.81469e-08,"output_cost_per_pixel":0.0}"#).unwrap();
        let u = Usage {
            images: 1,
            pixels: 1024 * 1024,
            ..Usage::default()
        };
        assert!((dalle.cost(&u) - 0.04).abs() < 1e-6);
        let tts = entry(r#"{"input_cost_per_character":1.5e-05}"#).unwrap();
        let chars = Usage {
            characters: 1000,
            ..Usage::default()
        };
        assert!((tts.cost(&chars) - 0.015).abs() < 1e-12);
        let rerank = entry(r#"{"input_cost_per_query":0.002}"#).unwrap();
        let q = Usage {
            search_units: 2,
            ..Usage::default()
        };
        assert!((rerank.cost(&q) - 0.004).abs() < 1e-12);
        assert_eq!(entry(r#"{"mode":"moderation"}"#), None);
    }

    #[test]
    fn image_entries_are_picked_by_quality_then_size_as_litellm_does() {
        let at = |rate: f64| Price {
            per_pixel: rate,
            ..Price::default()
        };
        let entry = |quality, provider_keyed, size, rate| ImagePrice {
            quality,
            provider_keyed,
            size,
            price: at(rate),
        };
        let hd = Some(ImageQuality::Hd);
        let std = Some(ImageQuality::Standard);
        let list = vec![
            entry(hd, false, (1024, 1792), 3.0),
            entry(std, false, (1024, 1792), 2.0),
            entry(std, false, (1024, 1024), 1.0),
            entry(hd, false, (1024, 1024), 8.0),
            entry(hd, true, (1024, 1024), 9.0),
            entry(None, false, (512, 512), 5.0),
            entry(Some(ImageQuality::High), false, (1536, 1024), 7.0),
        ];
        let prices = ImagePrices::new(list);
        let rate = |q, size| prices.pick(q, size).map(|e| e.price);
        assert_eq!(rate(hd, Some((1024, 1792))), Some(at(3.0)));
        // No quality: standard.
        assert_eq!(rate(None, Some((1024, 1792))), Some(at(2.0)));
        assert_eq!(rate(None, Some((1024, 1024))), Some(at(1.0)));
        // The provider's own key before the bare one.
        assert_eq!(rate(hd, Some((1024, 1024))), Some(at(9.0)));
        // A key without quality for any quality; `high` last.
        assert_eq!(rate(hd, Some((512, 512))), Some(at(5.0)));
        assert_eq!(rate(None, Some((1536, 1024))), Some(at(7.0)));
        // An unknown size or `auto`: nothing, so the deployment's base price.
        assert_eq!(rate(hd, Some((256, 256))), None);
        assert_eq!(rate(hd, None), None);
        let base = at(0.5);
        let units = RequestUnits {
            image_quality: Some(ImageQuality::Other),
            image_size: Some((1024, 1792)),
            ..RequestUnits::default()
        };
        assert_eq!(
            prices.price(base, &units),
            base,
            "an unknown quality names no key"
        );
        assert_eq!(ImagePrices::default().price(base, &units), base);
        assert!(ImagePrices::new(Vec::new()).is_empty());
        assert_eq!(ImageQuality::parse("hd"), ImageQuality::Hd);
        assert_eq!(ImageQuality::parse("auto"), ImageQuality::Other);
    }
}
