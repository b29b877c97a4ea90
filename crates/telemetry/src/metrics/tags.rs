//! Requests, spend and tokens by request tag (LiteLLM's spend by tag, as metrics). A request
//! counts under each of its tags. Tags come from clients as well as from the config, so the
//! label is bounded: the first [`MAX_TAGS`] tags seen get a series each, later ones count
//! under `tag="other"`.

use std::collections::HashSet;
use std::sync::atomic::AtomicU64;
use std::sync::Mutex;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use sluice_core::limits::dollars;
use sluice_core::record::RequestRecord;

/// Most tags with a series of their own.
pub const MAX_TAGS: usize = 500;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TagLabels {
    tag: String,
}

/// The tag families.
#[derive(Debug, Default)]
pub struct TagMetrics {
    requests: Family<TagLabels, Counter>,
    spend: Family<TagLabels, Counter<f64, AtomicU64>>,
    tokens: Family<TagLabels, Counter>,
    seen: Mutex<HashSet<String>>,
}

impl TagMetrics {
    /// The families, registered in `registry`.
    pub fn register(registry: &mut Registry) -> Self {
        let m = Self::default();
        registry.register(
            "sluice_tag_requests",
            "Requests by request tag (each of a request's tags; `other` past the first 500 tags)",
            m.requests.clone(),
        );
        registry.register(
            "sluice_tag_spend_usd",
            "Spend in USD by request tag",
            m.spend.clone(),
        );
        registry.register(
            "sluice_tag_tokens",
            "Input and output tokens by request tag",
            m.tokens.clone(),
        );
        m
    }

    /// Count one finished request under each of its tags (on the recorder task).
    pub fn observe(&self, r: &RequestRecord) {
        let Some(tags) = r.tags.as_deref().filter(|t| !t.is_empty()) else {
            return;
        };
        let spend = r.cost.map_or(0.0, dollars);
        let tokens = r
            .usage
            .as_ref()
            .map_or(0, |u| u.prompt_tokens + u.completion_tokens);
        for tag in tags {
            let labels = TagLabels {
                tag: self.label(tag),
            };
            self.requests.get_or_create(&labels).inc();
            if spend > 0.0 {
                self.spend.get_or_create(&labels).inc_by(spend);
            }
            if tokens > 0 {
                self.tokens.get_or_create(&labels).inc_by(tokens);
            }
        }
    }

    /// The tag's label: itself while there is room, else `other`.
    fn label(&self, tag: &str) -> String {
        let mut seen = sluice_core::lock::lock(&self.seen);
        if seen.contains(tag) {
            return tag.to_owned();
        }
        if seen.len() < MAX_TAGS {
            seen.insert(tag.to_owned());
            return tag.to_owned();
        }
        "other".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use sluice_core::usage::Usage;

    fn text(registry: &Registry) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, registry).unwrap();
        out
    }

    #[test]
    fn each_tag_counts_and_the_label_set_is_bounded() {
        let mut registry = Registry::default();
        let m = TagMetrics::register(&mut registry);
        let mut r = RequestRecord::sample("r1");
        r.tags = Some(Arc::from([Arc::from("team-a"), Arc::from("prod")]));
        r.cost = Some(sluice_core::limits::nanos(0.5));
        r.usage = Some(Usage {
            prompt_tokens: 10,
            completion_tokens: 5,
            ..Usage::default()
        });
        m.observe(&r);
        m.observe(&r);
        let t = text(&registry);
        assert!(
            t.contains(r#"sluice_tag_requests_total{tag="prod"} 2"#),
            "{t}"
        );
        assert!(
            t.contains(r#"sluice_tag_spend_usd_total{tag="team-a"} 1.0"#),
            "{t}"
        );
        assert!(
            t.contains(r#"sluice_tag_tokens_total{tag="prod"} 30"#),
            "{t}"
        );
        for i in 0..MAX_TAGS + 10 {
            let mut r = RequestRecord::sample("x");
            r.tags = Some(Arc::from([Arc::from(format!("t{i}").as_str())]));
            m.observe(&r);
        }
        let t = text(&registry);
        assert!(
            t.contains(r#"sluice_tag_requests_total{tag="other"} 12"#),
            "{t}"
        );
    }
}
