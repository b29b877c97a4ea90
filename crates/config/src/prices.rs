//! The model registry: prices per token and per unit (image, pixel, audio second, character,
//! rerank query) and the capability flags translations read, in LiteLLM's
//! `model_prices_and_context_window.json` format. Built in: LiteLLM's whole file (`data/`, from
//! the `litellm` package; docs/store.md says which release and how to update it), plus the
//! entries of models it has since dropped (`data/retired_prices.json`), optionally overlaid by a
//! whole file of that format named by `LITELLM_MODEL_COST_MAP_URL` (a local path or `file://`
//! URL; sluice never fetches prices over the network at startup).
//!
//! A deployment's [`Price`] and [`ModelRules`] are resolved once, at config load; the
//! per-request cost is then a few multiplications ([`Price::cost`]). The map's entries for an
//! image model by quality and size (`hd/1024-x-1792/dall-e-3`, `1024-x-1024/dall-e-2`) are
//! gathered for it at load too ([`ImagePrices`]); each request picks one by its `quality` and
//! `size`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock};

use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::model::Deployment;
use crate::rules::{self, Capabilities};
use sluice_core::price::{ImagePrice, ImagePrices, ImageQuality, Price};
use sluice_core::rules::ModelRules;

/// The environment variable LiteLLM reads for its price map's location.
pub const COST_MAP_ENV: &str = "LITELLM_MODEL_COST_MAP_URL";

/// Where a deployment's price came from, for the config check's warning and the docs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PriceSource {
    /// An entry of the price map, by its name.
    Table(String),
    /// `input_cost_per_token` / `output_cost_per_token` in the deployment (over a table entry
    /// when one matched).
    Override,
    /// Nothing known: the deployment's requests cost 0.
    Unknown,
}

/// Why a price map file was refused.
#[derive(Debug, thiserror::Error)]
pub enum PriceError {
    /// The location is an http(s) URL; sluice reads only local files.
    #[error("{COST_MAP_ENV} must name a local file (a path or file:// URL); sluice does not download price maps: fetch the JSON once and point to the file")]
    Remote,
    /// The file could not be read.
    #[error("cannot read the price map {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not a JSON object of model entries.
    #[error(
        "price map {path} is not LiteLLM's model_prices_and_context_window.json format: {why}"
    )]
    Parse {
        /// The file.
        path: PathBuf,
        /// Why.
        why: String,
    },
}

/// Model name → price. Cheap to clone.
#[derive(Debug, Clone)]
pub struct PriceTable {
    prices: Arc<HashMap<String, Price>>,
    /// Each priced model's `litellm_provider`.
    providers: Arc<HashMap<String, String>>,
    /// What each entry says of its model's capabilities.
    caps: Arc<HashMap<String, Capabilities>>,
    /// Vertex AI's premium for a regional (not global) endpoint, by entry
    /// (`regional_endpoint_uplift_multiplier`).
    uplifts: Arc<HashMap<String, f64>>,
    /// The entries keyed by image size, by the model their key ends in.
    images: Arc<HashMap<String, Vec<SizedEntry>>>,
}

/// A price-map key for one image size of a model: `[provider/][quality/]W-x-H/[50-steps/]model`
/// (LiteLLM's DALL·E and `gpt-image-1` keys, and Bedrock SDXL's by steps).
#[derive(Debug, Clone)]
struct SizedEntry {
    /// The whole key.
    key: String,
    /// The provider the key names (`azure/…`), if any.
    provider: Option<String>,
    quality: Option<ImageQuality>,
    size: (u32, u32),
    price: Price,
}

/// The parts of a sized key.
#[derive(Debug, PartialEq)]
struct SizedKey<'a> {
    provider: Option<&'a str>,
    quality: Option<ImageQuality>,
    size: (u32, u32),
    model: &'a str,
}

/// The parts of a sized key: `None` for any other key, and for steps above 50 (sluice never
/// asks for more than the models' default steps).
fn sized_key(key: &str) -> Option<SizedKey<'_>> {
    let parts: Vec<&str> = key.splitn(5, '/').collect();
    let at = parts.iter().position(|p| {
        p.split_once("-x-").is_some_and(|(w, h)| {
            w.parse::<u32>().is_ok_and(|w| w > 0) && h.parse::<u32>().is_ok_and(|h| h > 0)
        })
    })?;
    let (w, h) = parts[at].split_once("-x-")?;
    let size = (w.parse().ok()?, h.parse().ok()?);
    let quality = |p: &str| Some(ImageQuality::parse(p)).filter(|q| *q != ImageQuality::Other);
    let (provider, quality) = match parts[..at] {
        [] => (None, None),
        [one] => match quality(one) {
            Some(q) => (None, Some(q)),
            None => (Some(one), None),
        },
        [provider, q] => (Some(provider), Some(quality(q)?)),
        _ => return None,
    };
    let rest = key.splitn(at + 2, '/').nth(at + 1)?;
    let model = match rest.split_once('/') {
        Some((steps, model)) if steps.ends_with("-steps") => {
            (steps == "50-steps").then_some(model)?
        }
        _ => rest,
    };
    Some(SizedKey {
        provider,
        quality,
        size,
        model,
    })
}

/// The sized entries of a table, by model.
fn index(prices: &HashMap<String, Price>) -> HashMap<String, Vec<SizedEntry>> {
    let mut out: HashMap<String, Vec<SizedEntry>> = HashMap::new();
    for (key, price) in prices {
        if let Some(k) = sized_key(key) {
            out.entry(k.model.to_owned()).or_default().push(SizedEntry {
                key: key.clone(),
                provider: k.provider.map(str::to_owned),
                quality: k.quality,
                size: k.size,
                price: *price,
            });
        }
    }
    // One order whatever the map's: lookups stay deterministic.
    for entries in out.values_mut() {
        entries.sort_by(|a, b| a.key.cmp(&b.key));
    }
    out
}

/// A deployment's prices, resolved at load.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    /// What its tokens and units cost.
    pub price: Price,
    /// Its image prices by quality and size (empty for most models).
    pub images: ImagePrices,
    /// Where the price came from.
    pub source: PriceSource,
    /// What its upstream model accepts.
    pub rules: ModelRules,
}

/// LiteLLM's registry as built in, deflated by the build script (`build.rs`).
const REGISTRY_DEFLATED: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/model_prices.json.deflate"));

/// The built-in registry's JSON text (empty if it cannot be inflated, which a unit test rules
/// out: the build deflated it a moment before).
fn registry() -> String {
    miniz_oxide::inflate::decompress_to_vec(REGISTRY_DEFLATED)
        .ok()
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .unwrap_or_default()
}
/// Entries of models LiteLLM's registry has dropped (retired by their providers, still served
/// by some deployments).
const RETIRED: &str = include_str!("../data/retired_prices.json");

static EMBEDDED: LazyLock<PriceTable> = LazyLock::new(|| {
    // The embedded files are checked by a unit test; a broken one would only price nothing.
    let mut parsed = parse(&registry()).unwrap_or_default();
    if let Ok(retired) = parse(RETIRED) {
        parsed.add_missing(retired);
    }
    PriceTable::new(parsed)
});

/// A parsed registry: model → price, model → `litellm_provider`, model → capabilities.
#[derive(Debug, Default)]
struct Parsed {
    prices: HashMap<String, Price>,
    providers: HashMap<String, String>,
    caps: HashMap<String, Capabilities>,
    uplifts: HashMap<String, f64>,
}

impl Parsed {
    /// `other`'s entries laid over these (`other` wins for models in both).
    fn overlay(&mut self, other: Parsed) {
        self.prices.extend(other.prices);
        self.providers.extend(other.providers);
        self.caps.extend(other.caps);
        self.uplifts.extend(other.uplifts);
    }

    /// `other`'s entries for models these lack.
    fn add_missing(&mut self, other: Parsed) {
        for (k, v) in other.prices {
            self.prices.entry(k).or_insert(v);
        }
        for (k, v) in other.providers {
            self.providers.entry(k).or_insert(v);
        }
        for (k, v) in other.caps {
            self.caps.entry(k).or_insert(v);
        }
        for (k, v) in other.uplifts {
            self.uplifts.entry(k).or_insert(v);
        }
    }
}

/// Entries of a registry that sluice can use: each one's price, `litellm_provider` and
/// capabilities.
fn parse(text: &str) -> Result<Parsed, String> {
    // Entries stay raw text until each is read, so only one entry is ever a tree of values (the
    // whole 3.5 MB map as one tree would be ~20 MB at startup, kept by the allocator).
    let map: HashMap<String, &RawValue> = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let mut out = Parsed::default();
    for (name, raw) in &map {
        let Ok(entry) = serde_json::from_str::<Map<String, Value>>(raw.get()) else {
            continue;
        };
        let entry = &entry;
        if let Some(c) = Capabilities::from_entry(entry) {
            out.caps.insert(name.clone(), c);
        }
        if let Some(u) = entry
            .get("regional_endpoint_uplift_multiplier")
            .and_then(Value::as_f64)
            .filter(|u| u.is_finite() && *u > 0.0)
        {
            out.uplifts.insert(name.clone(), u);
        }
        let Some(price) = Price::from_entry(entry) else {
            continue;
        };
        out.prices.insert(name.clone(), price);
        if let Some(p) = entry.get("litellm_provider").and_then(Value::as_str) {
            out.providers.insert(name.clone(), p.to_owned());
        }
    }
    Ok(out)
}

/// The first of `names` found in `map`, each tried as `provider/name` (LiteLLM's key for most
/// non-OpenAI providers), as given, and without its own first `prefix/`.
fn lookup_in<T: Copy>(
    map: &HashMap<String, T>,
    prefix: &str,
    names: &[&str],
) -> Option<(String, T)> {
    for name in names {
        let prefixed = format!("{prefix}/{name}");
        let bare = name.split_once('/').map(|(_, rest)| rest);
        for candidate in [Some(prefixed.as_str()), Some(*name), bare]
            .into_iter()
            .flatten()
        {
            if let Some(found) = map.get(candidate) {
                return Some((candidate.to_owned(), *found));
            }
        }
    }
    None
}

impl PriceTable {
    fn new(parsed: Parsed) -> Self {
        Self {
            images: Arc::new(index(&parsed.prices)),
            prices: Arc::new(parsed.prices),
            providers: Arc::new(parsed.providers),
            caps: Arc::new(parsed.caps),
            uplifts: Arc::new(parsed.uplifts),
        }
    }

    /// The rules of a model a deployment with provider `prefix` calls (a wildcard deployment's
    /// model is known only per request).
    pub fn rules_for(&self, prefix: &str, model: &str) -> ModelRules {
        let caps = lookup_in(&self.caps, prefix, &[model]).map(|(_, c)| c);
        rules::resolve(prefix, model, caps.as_ref())
    }

    /// The models the table knows for one provider (its `litellm_provider`), in name order:
    /// what a wildcard group (`anthropic/*`) serves, as `/model_group/info` lists it.
    pub fn models_of(&self, provider: &str) -> Vec<&str> {
        let mut names: Vec<&str> = self
            .providers
            .iter()
            .filter(|(_, p)| *p == provider)
            .map(|(name, _)| name.as_str())
            .collect();
        names.sort_unstable();
        names
    }

    /// The table built into the binary.
    pub fn embedded() -> Self {
        EMBEDDED.clone()
    }

    /// The embedded table with every entry of a LiteLLM-format file laid over it (the file
    /// wins for models in both).
    pub fn with_file(path: &Path) -> Result<Self, PriceError> {
        let text = std::fs::read_to_string(path).map_err(|source| PriceError::Read {
            path: path.to_owned(),
            source,
        })?;
        let file = parse(&text).map_err(|why| PriceError::Parse {
            path: path.to_owned(),
            why,
        })?;
        let mut parsed = Parsed {
            prices: (*EMBEDDED.prices).clone(),
            providers: (*EMBEDDED.providers).clone(),
            caps: (*EMBEDDED.caps).clone(),
            uplifts: (*EMBEDDED.uplifts).clone(),
        };
        parsed.overlay(file);
        Ok(Self::new(parsed))
    }

    /// The table for a `LITELLM_MODEL_COST_MAP_URL` value: unset or empty means the embedded
    /// table alone.
    pub fn from_location(location: Option<&str>) -> Result<Self, PriceError> {
        let Some(location) = location.map(str::trim).filter(|l| !l.is_empty()) else {
            return Ok(Self::embedded());
        };
        if location.starts_with("http://") || location.starts_with("https://") {
            return Err(PriceError::Remote);
        }
        let path = location.strip_prefix("file://").unwrap_or(location);
        Self::with_file(Path::new(path))
    }

    /// The price of one model name, exactly as the map spells it.
    pub fn get(&self, name: &str) -> Option<Price> {
        self.prices.get(name).copied()
    }

    /// How many models are priced.
    pub fn len(&self) -> usize {
        self.prices.len()
    }

    /// True for an empty table.
    pub fn is_empty(&self) -> bool {
        self.prices.is_empty()
    }

    /// The first entry found for `model_info.base_model`, then the upstream model, each tried
    /// as `provider/name` (LiteLLM's key for most non-OpenAI providers), as given, and without
    /// its own first `prefix/`.
    fn lookup(&self, prefix: &str, names: &[&str]) -> Option<(String, Price)> {
        lookup_in(&self.prices, prefix, names)
    }

    /// The price of a model a request names (the pass-through routes, where no deployment
    /// was priced at load): `prefix/model`, `model`, or `model` without its own first
    /// `prefix/`.
    pub fn find(&self, prefix: &str, model: &str) -> Option<Price> {
        self.lookup(prefix, &[model]).map(|(_, price)| price)
    }

    /// The price of a model a wildcard deployment serves, found when it is asked for
    /// (`openai/*` asked for `dall-e-3`): the table's entry for the model, and its image
    /// entries by quality and size; `None` when the table prices it neither way. Without this
    /// a wildcard deployment's every answer would cost 0.
    pub fn for_model(&self, prefix: &str, model: &str) -> Option<(Price, ImagePrices)> {
        let names = [model];
        let sized = self.sized(prefix, &names);
        let images = ImagePrices::new(sized.iter().map(|(_, e)| *e).collect());
        let price = match self.lookup(prefix, &names) {
            Some((_, price)) => price,
            None => images.pick(None, Some((1024, 1024)))?.price,
        };
        Some((price, images))
    }

    /// A deployment's sized image entries (for its provider, or naming none), from the first
    /// of `names` that has any, each tried as `provider/name`, as given and without its own
    /// first `prefix/`; with the keys they came from.
    fn sized(&self, prefix: &str, names: &[&str]) -> Vec<(String, ImagePrice)> {
        for name in names {
            let prefixed = format!("{prefix}/{name}");
            let bare = name.split_once('/').map(|(_, rest)| rest);
            for candidate in [Some(*name), Some(prefixed.as_str()), bare]
                .into_iter()
                .flatten()
            {
                let found: Vec<(String, ImagePrice)> = self
                    .images
                    .get(candidate)
                    .into_iter()
                    .flatten()
                    .filter(|e| e.provider.as_deref().is_none_or(|p| p == prefix))
                    .map(|e| {
                        let price = ImagePrice {
                            quality: e.quality,
                            provider_keyed: e.provider.is_some(),
                            size: e.size,
                            price: e.price,
                        };
                        (e.key.clone(), price)
                    })
                    .collect();
                if !found.is_empty() {
                    return found;
                }
            }
        }
        Vec::new()
    }

    /// A deployment's price: the table's entry, with the deployment's own
    /// `input_cost_per_token` / `output_cost_per_token` over it. Without an entry, cache and
    /// reasoning tokens are priced like plain input and output. An image model the map prices
    /// by quality and size also gets those entries, unless its tokens are priced (the tokens
    /// its answers report are charged, as LiteLLM charges `gpt-image-*`) or the deployment
    /// prices its images itself; one with no entry of its own is priced at its default
    /// request's (standard, 1024×1024, as LiteLLM defaults them).
    pub fn resolve(&self, d: &Deployment) -> Resolved {
        let mut names: Vec<&str> = Vec::with_capacity(2);
        names.extend(d.model_info.base_model.as_deref());
        names.push(&d.upstream.model);
        let prefix = d.provider().name();
        let found = self.lookup(prefix, &names);
        let sized = self.sized(prefix, &names);
        let images = ImagePrices::new(sized.iter().map(|(_, e)| *e).collect());
        let default_request = images
            .pick(None, Some((1024, 1024)))
            .and_then(|picked| sized.iter().find(|(_, e)| e == picked));
        let (mut price, mut source) = match (found, default_request) {
            // Google prices a regional endpoint above the global one, by the same factor for
            // every kind of token.
            (Some((name, price)), _) => match (self.uplifts.get(&name), vertex_location(d)) {
                (Some(uplift), Some(location)) if location != "global" => {
                    (price.scaled(*uplift), PriceSource::Table(name))
                }
                _ => (price, PriceSource::Table(name)),
            },
            (None, Some((key, e))) => (e.price, PriceSource::Table(key.clone())),
            (None, None) => (Price::default(), PriceSource::Unknown),
        };
        let unpriced = source == PriceSource::Unknown;
        if let Some(input) = d.input_cost_per_token {
            if unpriced {
                price.cache_read = input;
                price.cache_write = input;
            }
            price.input = input;
            source = PriceSource::Override;
        }
        if let Some(output) = d.output_cost_per_token {
            if unpriced {
                price.reasoning = output;
            }
            price.output = output;
            source = PriceSource::Override;
        }
        let u = d.unit_costs;
        for (given, rate) in [
            (u.per_image, &mut price.per_image),
            (u.per_pixel, &mut price.per_pixel),
            (u.per_second, &mut price.per_second),
            (u.per_character, &mut price.per_character),
            (u.per_query, &mut price.per_query),
            (u.per_page, &mut price.per_page),
        ] {
            if let Some(v) = given {
                *rate = v;
                source = PriceSource::Override;
            }
        }
        let own_image_price = u.per_image.is_some() || u.per_pixel.is_some();
        let token_priced = price.input > 0.0 || price.output > 0.0;
        let caps = lookup_in(&self.caps, prefix, &names).map(|(_, c)| c);
        Resolved {
            rules: rules::resolve(prefix, &d.upstream.model, caps.as_ref()),
            price,
            images: if own_image_price || token_priced {
                ImagePrices::default()
            } else {
                images
            },
            source,
        }
    }
}

/// A Vertex AI deployment's location.
fn vertex_location(d: &Deployment) -> Option<&str> {
    match &d.upstream.specific {
        sluice_providers::ProviderConfig::Vertex(c) => Some(&c.location),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{load_str, Config};
    use sluice_core::usage::RequestUnits;

    fn config(yaml: &str) -> Config {
        let env: HashMap<String, String> = HashMap::from([
            ("OPENAI_API_KEY".into(), "sk-x".into()),
            ("ANTHROPIC_API_KEY".into(), "sk-x".into()),
            ("AZURE_API_BASE".into(), "https://x.openai.azure.com".into()),
            ("AZURE_API_KEY".into(), "x".into()),
        ]);
        load_str(yaml, &env).unwrap().config
    }

    #[test]
    fn embedded_table_parses_and_covers_every_provider_family() {
        let t = PriceTable::embedded();
        let text = registry();
        assert_eq!(
            text.as_bytes(),
            include_bytes!("../data/model_prices_and_context_window.json"),
            "the embedded registry inflates to the file"
        );
        let raw: Map<String, Value> = serde_json::from_str(&text).unwrap();
        let retired: Map<String, Value> = serde_json::from_str(RETIRED).unwrap();
        assert!(
            retired.keys().all(|k| !raw.contains_key(k)),
            "retired entries are only those LiteLLM dropped"
        );
        // Every entry with a price is read (the rest are tools and search APIs priced per call).
        let priced = raw
            .values()
            .filter_map(Value::as_object)
            .filter(|e| Price::from_entry(e).is_some())
            .count();
        assert_eq!(t.len(), priced + retired.len());
        assert!(t.len() > 4000, "LiteLLM's whole registry: {}", t.len());
        assert!(
            t.get("dall-e-3").is_some(),
            "a retired model is still priced"
        );
        for name in [
            "gpt-4o",
            "claude-sonnet-4-5",
            "gemini/gemini-2.5-flash",
            "anthropic.claude-sonnet-4-20250514-v1:0",
            "mistral/mistral-large-latest",
            "groq/openai/gpt-oss-120b",
            "azure/gpt-4o",
        ] {
            assert!(t.get(name).is_some(), "{name}");
        }
        let sonnet = t.get("claude-sonnet-4-5").unwrap();
        assert_eq!(sonnet.cache_write, 3.75e-6);
        assert_eq!(sonnet.cache_read, 3e-7);
        // No reasoning price in the entry: reasoning costs what output costs.
        assert_eq!(sonnet.reasoning, sonnet.output);
        // No cache-write price: a write costs a plain input token.
        let gpt = t.get("gpt-4o").unwrap();
        assert_eq!(gpt.cache_write, gpt.input);
    }

    #[test]
    fn resolve_by_provider_model_base_model_and_overrides() {
        let cfg = config(
            "model_list:
  - model_name: a
    litellm_params: {model: openai/gpt-4o}
  - model_name: b
    litellm_params: {model: anthropic/claude-sonnet-4-5}
  - model_name: c
    litellm_params: {model: azure/my-deployment}
    model_info: {base_model: azure/gpt-4o}
  - model_name: d
    litellm_params: {model: openai/gpt-4o, input_cost_per_token: 0.5}
  - model_name: e
    litellm_params: {model: openai/house-model, input_cost_per_token: 1, output_cost_per_token: 2}
  - model_name: f
    litellm_params: {model: openai/house-model}
  - model_name: g
    litellm_params: {model: openai/whisper-1, output_cost_per_second: 0.0002, input_cost_per_second: 0.0001}
  - model_name: h
    litellm_params: {model: openai/my-images, output_cost_per_image: 0.03, input_cost_per_query: 0.001, input_cost_per_character: 0.00002}
",
        );
        let t = PriceTable::embedded();
        let r: Vec<(Price, PriceSource)> = cfg
            .deployments
            .iter()
            .map(|d| {
                let r = t.resolve(d);
                (r.price, r.source)
            })
            .collect();
        assert_eq!(r[0].1, PriceSource::Table("gpt-4o".into()));
        assert_eq!(r[0].0, t.get("gpt-4o").unwrap());
        assert_eq!(r[1].1, PriceSource::Table("claude-sonnet-4-5".into()));
        assert_eq!(r[2].1, PriceSource::Table("azure/gpt-4o".into()));
        // An input override keeps the table's cache and output prices.
        assert_eq!(r[3].1, PriceSource::Override);
        assert_eq!(r[3].0.input, 0.5);
        assert_eq!(r[3].0.cache_read, t.get("gpt-4o").unwrap().cache_read);
        assert_eq!(
            r[4].0,
            Price {
                input: 1.0,
                output: 2.0,
                cache_read: 1.0,
                cache_write: 1.0,
                reasoning: 2.0,
                ..Price::default()
            }
        );
        assert_eq!(r[5], (Price::default(), PriceSource::Unknown));
        // Per-unit overrides: seconds add both rates; the rest are taken as given.
        assert_eq!(r[6].1, PriceSource::Override);
        assert!((r[6].0.per_second - 0.0003).abs() < 1e-12);
        assert_eq!(
            (r[7].0.per_image, r[7].0.per_query, r[7].0.per_character),
            (0.03, 0.001, 0.00002)
        );
    }

    #[test]
    fn sized_image_keys() {
        let hd = Some(ImageQuality::Hd);
        let k = |provider, quality, size, model| {
            Some(SizedKey {
                provider,
                quality,
                size,
                model,
            })
        };
        for (key, want) in [
            (
                "hd/1024-x-1792/dall-e-3",
                k(None, hd, (1024, 1792), "dall-e-3"),
            ),
            (
                "1024-x-1024/dall-e-2",
                k(None, None, (1024, 1024), "dall-e-2"),
            ),
            (
                "azure/hd/1024-x-1024/dall-e-3",
                k(Some("azure"), hd, (1024, 1024), "dall-e-3"),
            ),
            (
                "1024-x-1024/50-steps/stability.stable-diffusion-xl-v1",
                k(None, None, (1024, 1024), "stability.stable-diffusion-xl-v1"),
            ),
            (
                "1024-x-1024/50-steps/bedrock/amazon.nova-canvas-v1:0",
                k(None, None, (1024, 1024), "bedrock/amazon.nova-canvas-v1:0"),
            ),
            (
                "1024-x-1024/max-steps/stability.stable-diffusion-xl-v1",
                None,
            ),
            ("max-x-max/50-steps/stability.stable-diffusion-xl-v0", None),
            ("azure/premium/1024-x-1024/x", None),
            ("a/b/c/1024-x-1024/x", None),
            ("gpt-4o", None),
            ("openai/gpt-4o", None),
        ] {
            assert_eq!(sized_key(key), want, "{key}");
        }
    }

    #[test]
    fn image_prices_by_quality_and_size() {
        let cfg = config(
            "model_list:
  - model_name: dalle3
    litellm_params: {model: openai/dall-e-3}
  - model_name: dalle2
    litellm_params: {model: openai/dall-e-2}
  - model_name: azure-dalle
    litellm_params: {model: azure/images, api_version: '2024-02-01'}
    model_info: {base_model: dall-e-3}
  - model_name: own-price
    litellm_params: {model: openai/dall-e-3, output_cost_per_image: 0.1}
  - model_name: sdxl
    litellm_params: {model: bedrock/stability.stable-diffusion-xl-v1, aws_access_key_id: k, aws_secret_access_key: s}
  - model_name: gpt-image
    litellm_params: {model: openai/gpt-image-1}
",
        );
        let t = PriceTable::embedded();
        let r: Vec<Resolved> = cfg.deployments.iter().map(|d| t.resolve(d)).collect();
        let units = |quality: Option<&str>, size: Option<(u32, u32)>| RequestUnits {
            image_quality: quality.map(ImageQuality::parse),
            image_size: size,
            ..RequestUnits::default()
        };
        let per_pixel = |r: &Resolved, u: RequestUnits| r.images.price(r.price, &u).per_pixel;
        let tall = Some((1024, 1792));
        // DALL·E 3: hd and standard at each size; no quality is standard.
        assert_eq!(per_pixel(&r[0], units(Some("hd"), tall)), 6.539e-8);
        assert_eq!(per_pixel(&r[0], units(None, tall)), 4.359e-8);
        assert_eq!(
            per_pixel(&r[0], units(Some("hd"), Some((1024, 1024)))),
            7.629e-8
        );
        // A size no key names (`auto`, 512×512): the model's own entry.
        assert_eq!(per_pixel(&r[0], units(Some("hd"), None)), 3.81469e-8);
        assert_eq!(per_pixel(&r[0], units(None, Some((512, 512)))), 3.81469e-8);
        // DALL·E 2: by size only, whatever the quality.
        assert_eq!(
            per_pixel(&r[1], units(Some("standard"), Some((256, 256)))),
            2.4414e-7
        );
        assert_eq!(per_pixel(&r[1], units(None, Some((512, 512)))), 6.86e-8);
        // Azure: its own keys.
        assert_eq!(per_pixel(&r[2], units(Some("hd"), tall)), 7.19343e-8);
        // A deployment that prices its images itself keeps its price.
        assert!(r[3].images.is_empty());
        assert_eq!(
            r[3].images
                .price(r[3].price, &units(Some("hd"), tall))
                .per_image,
            0.1
        );
        // SDXL has only sized keys: priced at its default request's, $0.04 an image.
        assert_eq!(
            r[4].source,
            PriceSource::Table("1024-x-1024/50-steps/stability.stable-diffusion-xl-v1".into())
        );
        assert_eq!(r[4].price.per_image, 0.04);
        assert_eq!(
            r[4].images
                .price(r[4].price, &units(None, Some((1344, 768))))
                .per_image,
            0.04
        );
        // gpt-image-1 is priced by the tokens its answers report.
        assert!(r[5].images.is_empty());
        assert!(r[5].price.output > 0.0);
    }

    #[test]
    fn config_load_resolves_prices_and_warns_about_unpriced_deployments() {
        let env: HashMap<String, String> = HashMap::from([("OPENAI_API_KEY".into(), "x".into())]);
        let loaded = load_str(
            "model_list:
  - model_name: known
    litellm_params: {model: openai/gpt-4o-mini}
  - model_name: unknown
    litellm_params: {model: openai/house-model}
  - model_name: mocked
    litellm_params: {model: mock/anything}
",
            &env,
        )
        .unwrap();
        let d = &loaded.config.deployments;
        assert_eq!(
            d[0].price,
            PriceTable::embedded().get("gpt-4o-mini").unwrap()
        );
        assert_eq!(d[1].price, Price::default());
        let warnings: Vec<String> = loaded.warnings.iter().map(|w| w.to_string()).collect();
        assert_eq!(
            warnings
                .iter()
                .filter(|w| w.contains("no price known"))
                .collect::<Vec<_>>()
                .len(),
            1,
            "{warnings:?}"
        );
        assert!(warnings
            .iter()
            .any(|w| w.contains("model_list[1]") && w.contains("openai/house-model")));

        let bad: HashMap<String, String> = HashMap::from([
            ("OPENAI_API_KEY".into(), "x".into()),
            (
                COST_MAP_ENV.into(),
                "https://example.com/prices.json".into(),
            ),
        ]);
        let err = load_str("model_list: []\n", &bad).unwrap_err().to_string();
        assert!(err.contains(COST_MAP_ENV), "{err}");
    }

    #[test]
    fn the_registry_prices_long_prompts_hour_long_cache_writes_and_image_tokens() {
        let t = PriceTable::embedded();
        let opus = t.get("claude-opus-4-7").unwrap();
        assert!(opus.cache_write_1h > opus.cache_write, "{opus:?}");
        let gemini = t.get("vertex_ai/gemini-3-pro-preview").unwrap();
        let tier = gemini.tiers[0].unwrap();
        assert_eq!(tier.above, 200_000);
        assert!(tier.input > gemini.input);
        let gpt_image = t.get("gpt-image-1").unwrap();
        assert!(gpt_image.output > 0.0, "image output tokens are priced");
        let whisper = t.get("whisper-1").unwrap();
        assert_eq!(whisper.per_second, 0.0001, "one rate per second, not two");
    }

    #[test]
    fn a_regional_vertex_endpoint_costs_the_registrys_uplift_more() {
        let c = config(
            "model_list:
  - model_name: regional
    litellm_params: {model: vertex_ai/gemini-3.5-flash, vertex_project: p, vertex_location: us-central1}
  - model_name: global
    litellm_params: {model: vertex_ai/gemini-3.5-flash, vertex_project: p, vertex_location: global}
",
        );
        let price = |name: &str| {
            c.deployments
                .iter()
                .find(|d| d.model_name == name)
                .map(|d| d.price)
                .unwrap()
        };
        let (regional, global) = (price("regional"), price("global"));
        assert!(global.input > 0.0);
        assert!(
            (regional.input / global.input - 1.1).abs() < 1e-9,
            "{regional:?} {global:?}"
        );
        assert!((regional.output / global.output - 1.1).abs() < 1e-9);
    }

    #[test]
    fn the_registry_gives_each_claude_and_openai_model_its_rules() {
        use sluice_core::rules::{OutputCap, Sampling, ThinkingStyle};
        let t = PriceTable::embedded();
        let opus47 = t.rules_for("anthropic", "claude-opus-4-7");
        assert_eq!(opus47.thinking, ThinkingStyle::Adaptive);
        assert_eq!(opus47.sampling, Sampling::Refused);
        let sonnet46 = t.rules_for("anthropic", "claude-sonnet-4-6");
        assert_eq!(sonnet46.thinking, ThinkingStyle::Either);
        let haiku45 = t.rules_for("anthropic", "claude-haiku-4-5");
        assert_eq!(haiku45.thinking, ThinkingStyle::Budget);
        assert_eq!(
            haiku45.sampling,
            Sampling::Refused,
            "the Messages API's types"
        );
        let converse = t.rules_for("bedrock", "anthropic.claude-haiku-4-5-20251001-v1:0");
        assert_eq!(converse.sampling, Sampling::OneOf);
        let bedrock = t.rules_for("bedrock", "us.anthropic.claude-opus-4-8");
        assert_eq!(bedrock.thinking, ThinkingStyle::Adaptive);
        let o3 = t.rules_for("openai", "o3");
        assert_eq!(o3.output_cap, OutputCap::MaxCompletionTokens);
        let gpt = t.rules_for("azure", "gpt-5.2");
        assert_eq!(gpt.output_cap, OutputCap::MaxCompletionTokens);
        assert_eq!(
            t.rules_for("openai", "gpt-4o").output_cap,
            OutputCap::MaxTokens
        );
    }

    #[test]
    fn a_litellm_format_file_overlays_the_embedded_table() {
        let dir =
            std::env::temp_dir().join(format!("sluice-prices-{}", sluice_core::random::uuid_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("model_prices_and_context_window.json");
        std::fs::write(
            &path,
            r#"{
  "sample_spec": {"max_tokens": "LEGACY parameter", "input_cost_per_token": 0.0, "output_cost_per_token": 0.0},
  "gpt-4o": {"litellm_provider": "openai", "input_cost_per_token": 9e-06, "output_cost_per_token": 1e-05},
  "house-model": {"litellm_provider": "openai", "input_cost_per_token": 1e-06, "output_cost_per_token": 2e-06, "cache_read_input_token_cost": 1e-07},
  "dall-e-3": {"litellm_provider": "openai", "mode": "image_generation", "output_cost_per_image": 0.04}
}"#,
        )
        .unwrap();
        let location = format!("file://{}", path.display());
        let t = PriceTable::from_location(Some(&location)).unwrap();
        assert_eq!(t.get("gpt-4o").unwrap().input, 9e-6);
        assert_eq!(t.get("house-model").unwrap().cache_read, 1e-7);
        // Per-unit entries are priced too; the file's entry replaces the embedded one.
        assert_eq!(t.get("dall-e-3").unwrap().per_image, 0.04);
        assert_eq!(t.get("dall-e-3").unwrap().per_pixel, 0.0);
        assert!(
            t.get("claude-sonnet-4-5").is_some(),
            "embedded entries stay"
        );
        // `house-model` is new; the rest replace embedded entries.
        assert_eq!(t.len(), PriceTable::embedded().len() + 1);

        assert!(matches!(
            PriceTable::from_location(Some("https://example.com/prices.json")),
            Err(PriceError::Remote)
        ));
        assert!(matches!(
            PriceTable::from_location(Some(dir.join("missing.json").to_str().unwrap())),
            Err(PriceError::Read { .. })
        ));
        std::fs::write(&path, "[1, 2]").unwrap();
        assert!(matches!(
            PriceTable::with_file(&path),
            Err(PriceError::Parse { .. })
        ));
        assert_eq!(
            PriceTable::from_location(None).unwrap().len(),
            PriceTable::embedded().len()
        );
        std::fs::remove_dir_all(dir).unwrap();
    }
}
