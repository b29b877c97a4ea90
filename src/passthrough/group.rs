//! LiteLLM's model-group names on the pass-through routes: a request whose path (Bedrock,
//! Google's, Azure) or body (Anthropic) names a `model_list` group with deployments of the
//! route's provider goes to one of them, picked by the router's strategy, with that
//! deployment's model id, base and credentials; any other name is passed as written.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use sluice_config::Deployment;
use sluice_core::error::ApiError;
use sluice_net::ClientRegistry;
use sluice_providers::passthrough::{Route, Target};
use sluice_routing::{now_ms, Group, InFlight, Member, ModelTable, RouteError, Strategy};

/// Each deployment of a pass-through route's provider, made ready to be called through that
/// route (by deployment id). Built per config snapshot, like the deployments themselves.
#[derive(Debug, Default)]
pub struct DeploymentRoutes(HashMap<Arc<str>, Target>);

impl DeploymentRoutes {
    /// Make ready every deployment a route can reach by its group's name; one that cannot be
    /// (no credentials of its own) is left out with a warning, and its group's name then
    /// passes as written.
    pub fn build(deployments: &[Deployment], clients: &ClientRegistry) -> Self {
        let mut ready = HashMap::new();
        for d in deployments {
            let Some(route) = Route::of_provider(d.provider()).filter(|r| r.group_in().is_some())
            else {
                continue;
            };
            if d.upstream.model.contains('*') {
                continue;
            }
            match Target::build(route, &d.upstream, clients, d.timeouts()) {
                Ok(t) => {
                    ready.insert(Arc::from(d.id.as_str()), t);
                }
                Err(why) => tracing::warn!(
                    deployment = %d.id,
                    group = %d.model_name,
                    route = route.label(),
                    "deployment not usable on its pass-through route: {why}"
                ),
            }
        }
        Self(ready)
    }
}

/// A request sent to a group's deployment.
#[derive(Debug)]
pub struct Routed<'s> {
    /// The deployment picked.
    pub member: &'s Member,
    /// Its attempt, in flight.
    pub guard: InFlight,
    /// How to call it through the route.
    pub target: &'s Target,
}

/// How `member` is called through `route`, when it is a deployment of the route's provider
/// made ready for it.
fn serving<'s>(routes: &'s DeploymentRoutes, route: Route, member: &Member) -> Option<&'s Target> {
    (Some(member.target.provider) == route.provider())
        .then(|| routes.0.get(&member.target.info.id))
        .flatten()
}

/// The group `name` stands for on `route`: a group of that exact name with a deployment of
/// the route's provider. `None`: the name is passed as written.
pub fn find<'s>(
    models: &'s ModelTable,
    routes: &DeploymentRoutes,
    route: Route,
    name: &str,
) -> Option<&'s Group> {
    models.group(name).filter(|g| {
        g.members()
            .iter()
            .any(|m| serving(routes, route, m).is_some())
    })
}

/// One of `group`'s deployments of the route's provider, by the router's strategy; refused
/// as the router refuses when all of them are cooling down or at their limits.
pub fn pick<'s>(
    group: &'s Group,
    strategy: Strategy,
    routes: &'s DeploymentRoutes,
    route: Route,
) -> Result<Routed<'s>, ApiError> {
    let chosen = group
        .pick_serving(strategy, now_ms(), |m| serving(routes, route, m))
        .chosen(group)
        .map_err(ApiError::NoDeployment)?;
    let (member, guard, target) = chosen.ok_or(ApiError::NoDeployment(RouteError::Cooling {
        group: group.name.clone(),
        retry_in: Duration::ZERO,
    }))?;
    Ok(Routed {
        member,
        guard,
        target,
    })
}
