//! The provider pass-through routes (`/anthropic/*`, `/bedrock/*`, ...): each route's upstream
//! is the first deployment of its provider marked `use_in_pass_through: true`, else what the
//! provider's environment variables say (read by `sluice_providers::passthrough::upstream`);
//! their calls take the router's timeouts (`stream_idle_timeout` included) and are priced from
//! the deployments' price table.

use sluice_core::settings::{Env, Problems};
use sluice_providers::passthrough::{self, Route};
use sluice_providers::Timeouts;

use crate::model::{Deployment, LitellmSettings, PassThroughSettings, RouterSettings};
use crate::prices::{PriceTable, COST_MAP_ENV};

/// Every route's upstream, or why it has none (a route nobody configured is no problem of the
/// config's: its requests are refused with the reason).
pub(super) fn pass_through(
    deployments: &[Deployment],
    router: &RouterSettings,
    litellm: &LitellmSettings,
    env: &dyn Env,
    p: &mut Problems,
) -> PassThroughSettings {
    let upstreams = Route::ALL
        .iter()
        .map(|&route| {
            let flagged = route.provider().and_then(|provider| {
                deployments
                    .iter()
                    .find(|d| d.use_in_pass_through && d.provider() == provider)
            });
            let upstream = passthrough::upstream(route, flagged.map(|d| &d.upstream), env);
            (route, upstream)
        })
        .collect();
    for d in deployments.iter().filter(|d| d.use_in_pass_through) {
        if !Route::ALL
            .iter()
            .any(|r| r.provider() == Some(d.provider()))
        {
            p.warn(
                "model_list",
                format!(
                    "`use_in_pass_through` on \"{}\": no pass-through route serves {}/ models; ignored",
                    d.model_name,
                    d.provider().name()
                ),
            );
        }
    }
    // A bad price file was reported with the deployments; the embedded table stands in.
    let prices = PriceTable::from_location(env.var(COST_MAP_ENV).as_deref())
        .unwrap_or_else(|_| PriceTable::embedded());
    PassThroughSettings {
        upstreams,
        timeouts: Timeouts::new(
            router.timeout.or(litellm.request_timeout),
            router.stream_timeout,
            router.stream_idle_timeout,
        ),
        prices,
    }
}
