//! Features that plug in: each feature builds its own runtime part from the config, per
//! snapshot, through [`Part`]; the snapshot's `Features` holds one optional part per feature.
//! Adding a feature is one line in the snapshot's `features!` list and a `Part` impl in the
//! feature's own module: the snapshot's building, its reload and its errors do not change.

use std::sync::Arc;

use sluice_config::Config;
use sluice_net::ClientRegistry;

/// A feature's runtime part, made from the config each time a snapshot is built.
pub trait Part: Sized {
    /// The part for `config`, or `None` when the config leaves the feature off. `before` is
    /// the running snapshot's part (none at start), for a part that keeps what it runs
    /// (processes, sessions, entries) over a reload that leaves its settings as they were.
    ///
    /// # Errors
    /// Why the config's settings for this feature cannot be put in service, naming the field.
    fn build(
        config: &Config,
        with: &Building<'_>,
        before: Option<&Arc<Self>>,
    ) -> Result<Option<Arc<Self>>, String>;
}

/// What a part may build over, beside the config.
#[derive(Debug, Clone, Copy)]
pub struct Building<'a> {
    /// The upstream connection pools (a part that calls out builds its targets over them).
    pub clients: &'a ClientRegistry,
}

/// Why a feature's part could not be built: which feature, and its own reason.
#[derive(Debug, thiserror::Error)]
#[error("{reason}")]
pub struct FeatureError {
    /// The feature (its field of [`Features`]).
    pub feature: &'static str,
    /// The part's own reason, which names the config field.
    pub reason: String,
}

/// The `Features` struct, from one line per feature (`name: part type,`): each an
/// `Option<Arc<part>>` built through [`Part`] in the order written. Invoked once, by the
/// snapshot (`server::state`), which is what names the features.
macro_rules! features {
    ($($(#[$doc:meta])* $name:ident: $part:ty,)*) => {
        /// Every feature's runtime part for one snapshot (`None`: off in its config).
        #[derive(Debug, Default)]
        pub struct Features {
            $($(#[$doc])* pub $name: Option<std::sync::Arc<$part>>,)*
        }

        impl Features {
            /// Build each part from `config`, handing each its part in `before`.
            fn build(
                config: &sluice_config::Config,
                with: &$crate::server::features::Building<'_>,
                before: Option<&Features>,
            ) -> Result<Self, $crate::server::features::FeatureError> {
                Ok(Self {
                    $($name: <$part as $crate::server::features::Part>::build(
                        config,
                        with,
                        before.and_then(|b| b.$name.as_ref()),
                    )
                    .map_err(|reason| $crate::server::features::FeatureError {
                        feature: stringify!($name),
                        reason,
                    })?,)*
                })
            }
        }
    };
}
pub(super) use features;

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Arc;

    use sluice_net::ClientRegistry;
    use sluice_routing::HealthRegistry;

    use crate::server::Snapshot;

    fn config(ttl: u32) -> sluice_config::Config {
        let yaml = format!(
            "model_list:\n  - model_name: m\n    litellm_params:\n      model: openai/m\n      api_key: k\n\
             litellm_settings:\n  cache: true\n  cache_params:\n    type: local\n    ttl: {ttl}\n"
        );
        sluice_config::load_str(&yaml, &HashMap::new())
            .expect("config")
            .config
    }

    #[tokio::test]
    async fn a_part_is_kept_over_a_reload_only_while_its_settings_stay() {
        let clients = ClientRegistry::new(0);
        let health = HealthRegistry::default();
        let first = Snapshot::build(&config(60), &clients, &health, None).expect("first");
        let same = Snapshot::build(&config(60), &clients, &health, Some(&first)).expect("same");
        let changed =
            Snapshot::build(&config(90), &clients, &health, Some(&same)).expect("changed");
        let (a, b, c) = (
            first.features.cache.as_ref().expect("cache on"),
            same.features.cache.as_ref().expect("cache on"),
            changed.features.cache.as_ref().expect("cache on"),
        );
        assert!(
            Arc::ptr_eq(a, b),
            "same settings: the running cache, with its entries"
        );
        assert!(!Arc::ptr_eq(b, c), "new settings: a new cache");
        assert!(first.features.mcp.is_none(), "no mcp_servers: off");
    }
}
