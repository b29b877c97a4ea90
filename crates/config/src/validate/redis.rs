//! The keys that name a Redis Cluster or a Redis Sentinel, read the same way in
//! `router_settings` (the fleet's Redis) and `litellm_settings.cache_params` (the cache's):
//! LiteLLM's `redis_startup_nodes`, `service_name`, `sentinel_nodes` and `sentinel_password`,
//! and its `REDIS_CLUSTER_NODES`, `REDIS_SENTINEL_NODES`, `REDIS_SERVICE_NAME` and
//! `REDIS_SENTINEL_PASSWORD` environment variables.

use sluice_core::settings::read::text;
use sluice_core::settings::{Env, Problems, Scalar};
use sluice_core::{NodeAddress, Secret};

use crate::model::RedisAddress;
use crate::raw::RawNode;

/// The Cluster and Sentinel keys of one section, as they came.
pub(super) struct RawHa {
    /// `redis_startup_nodes`.
    pub startup_nodes: Option<Vec<RawNode>>,
    /// `service_name`.
    pub service_name: Option<Scalar>,
    /// `sentinel_nodes`.
    pub sentinel_nodes: Option<Vec<RawNode>>,
    /// `sentinel_password`.
    pub sentinel_password: Option<Scalar>,
}

/// Fill `a` with the Cluster and Sentinel keys of `section`, then check that it names one
/// kind of Redis, whole. `single` is the section's key that names one server (`redis_url`
/// or `url`), for the message when both are given.
pub(super) fn read(
    section: &str,
    single: &str,
    raw: RawHa,
    a: &mut RedisAddress,
    p: &mut Problems,
) {
    a.startup_nodes = nodes(
        &format!("{section}.redis_startup_nodes"),
        raw.startup_nodes,
        p,
    );
    a.service_name = text(raw.service_name).map(|s| s.trim().to_owned());
    a.sentinel_nodes = nodes(&format!("{section}.sentinel_nodes"), raw.sentinel_nodes, p);
    a.sentinel_password = text(raw.sentinel_password).map(Secret::new);
    check(section, single, a, p);
}

/// The same keys from LiteLLM's environment variables, for the cache's Redis. A variable that
/// does not parse is an error at the key it stands for, naming the variable.
pub(super) fn from_env(section: &str, env: &dyn Env, a: &mut RedisAddress, p: &mut Problems) {
    let var = |name: &str| env.var(name).filter(|v| !v.trim().is_empty());
    if let Some(json) = var("REDIS_CLUSTER_NODES") {
        a.startup_nodes = env_nodes(
            "REDIS_CLUSTER_NODES",
            &format!("{section}.redis_startup_nodes"),
            &json,
            p,
        );
    }
    if let Some(json) = var("REDIS_SENTINEL_NODES") {
        a.sentinel_nodes = env_nodes(
            "REDIS_SENTINEL_NODES",
            &format!("{section}.sentinel_nodes"),
            &json,
            p,
        );
    }
    a.service_name = var("REDIS_SERVICE_NAME").map(|s| s.trim().to_owned());
    a.sentinel_password = var("REDIS_SENTINEL_PASSWORD").map(Secret::new);
    if !a.sentinel_nodes.is_empty() && a.service_name.is_none() {
        p.error(
            format!("{section}.service_name"),
            "REDIS_SENTINEL_NODES is set in the environment but REDIS_SERVICE_NAME (the name \
             the sentinels monitor the primary under) is not",
        );
    }
}

/// One section names one kind of Redis, and a Sentinel both its sentinels and its name.
fn check(section: &str, single: &str, a: &RedisAddress, p: &mut Problems) {
    let cluster = !a.startup_nodes.is_empty();
    let sentinel = !a.sentinel_nodes.is_empty() || a.service_name.is_some();
    if cluster && sentinel {
        p.error(
            format!("{section}.redis_startup_nodes"),
            "a Redis Cluster (redis_startup_nodes) and a Sentinel-managed primary \
             (sentinel_nodes, service_name) exclude each other; keep one",
        );
    }
    if (cluster || sentinel) && (a.url.is_some() || a.host.is_some()) {
        let which = if cluster {
            "redis_startup_nodes names a Redis Cluster"
        } else {
            "sentinel_nodes name the sentinels that find the primary"
        };
        p.error(
            format!("{section}.{single}"),
            format!(
                "one server's address is given, and {which}; keep one (the password and \
                 username stay: they are the nodes' credentials)"
            ),
        );
    }
    if !a.sentinel_nodes.is_empty() && a.service_name.is_none() {
        p.error(
            format!("{section}.service_name"),
            "sentinel_nodes is set but service_name, the name the sentinels monitor the \
             primary under (`sentinel monitor <name> ...`), is not",
        );
    }
    if a.service_name.is_some() && a.sentinel_nodes.is_empty() {
        p.error(
            format!("{section}.sentinel_nodes"),
            "service_name is set but no sentinel_nodes say where the sentinels are \
             ([[host, port], ...])",
        );
    }
    if a.sentinel_password.is_some() && a.sentinel_nodes.is_empty() {
        p.warn(
            format!("{section}.sentinel_password"),
            "no sentinel_nodes: ignored",
        );
    }
}

/// A list of nodes; each bad one is an error at its index.
fn nodes(path: &str, raw: Option<Vec<RawNode>>, p: &mut Problems) -> Vec<NodeAddress> {
    let raw = raw.unwrap_or_default();
    let mut out = Vec::with_capacity(raw.len());
    for (i, n) in raw.into_iter().enumerate() {
        if let Some(n) = node(&format!("{path}[{i}]"), n, p) {
            if !out.contains(&n) {
                out.push(n);
            }
        }
    }
    out
}

/// Nodes from an environment variable holding LiteLLM's JSON list.
fn env_nodes(var: &str, path: &str, json: &str, p: &mut Problems) -> Vec<NodeAddress> {
    match serde_json::from_str::<Vec<RawNode>>(json) {
        Ok(list) => nodes(&format!("{path} ({var})"), Some(list), p),
        Err(_) => {
            p.error(
                path,
                format!(
                    "{var} in the environment is not a JSON list of nodes \
                     ([{{\"host\": ..., \"port\": ...}}] or [[host, port]])"
                ),
            );
            Vec::new()
        }
    }
}

/// `{host, port}`, `[host, port]` or `"host:port"`.
fn node(path: &str, raw: RawNode, p: &mut Problems) -> Option<NodeAddress> {
    let (host, port) = match raw {
        RawNode::Map { host, port } => (text(host), port),
        RawNode::Pair(mut pair) if pair.len() == 2 => {
            let port = pair.pop();
            (text(pair.pop()), port)
        }
        RawNode::Pair(pair) => {
            p.error(
                path,
                format!("expected [host, port], got a list of {}", pair.len()),
            );
            return None;
        }
        RawNode::Text(t) => {
            let t = t.text();
            match t.trim().rsplit_once(':') {
                Some((h, port)) => (
                    Some(h.trim_start_matches('[').trim_end_matches(']').to_owned())
                        .filter(|h| !h.is_empty()),
                    Some(Scalar::Str(port.to_owned())),
                ),
                None => {
                    p.error(path, format!("expected \"host:port\", got {t:?}"));
                    return None;
                }
            }
        }
    };
    let Some(host) = host.map(|h| h.trim().to_owned()).filter(|h| !h.is_empty()) else {
        p.error(format!("{path}.host"), "a node needs a host");
        return None;
    };
    let port = match port {
        None => {
            p.error(format!("{path}.port"), "a node needs a port");
            return None;
        }
        Some(v) => match v
            .integer()
            .and_then(|i| u16::try_from(i).ok())
            .filter(|p| *p > 0)
        {
            Some(port) => port,
            None => {
                p.error(
                    format!("{path}.port"),
                    format!("expected a port (1 to 65535), got {:?}", v.text()),
                );
                return None;
            }
        },
    };
    Some(NodeAddress { host, port })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(yaml: &str) -> (Vec<NodeAddress>, Vec<String>) {
        let raw: Vec<RawNode> = serde_yaml_ng::from_str(yaml).unwrap();
        let mut p = Problems::default();
        let n = nodes("x.redis_startup_nodes", Some(raw), &mut p);
        (n, p.errors.iter().map(|e| e.to_string()).collect())
    }

    fn at(host: &str, port: u16) -> NodeAddress {
        NodeAddress {
            host: host.into(),
            port,
        }
    }

    #[test]
    fn nodes_in_every_shape_litellm_writes() {
        let (n, errs) = parse(
            r#"[{"host": "127.0.0.1", "port": "7001"}, {host: r2, port: 7002}, ["s1", 26379], "[::1]:7003", "r2:7002"]"#,
        );
        assert!(errs.is_empty(), "{errs:?}");
        assert_eq!(
            n,
            [
                at("127.0.0.1", 7001),
                at("r2", 7002),
                at("s1", 26379),
                at("::1", 7003)
            ],
            "the repeated r2:7002 is kept once"
        );
    }

    #[test]
    fn a_bad_node_names_its_index_and_field() {
        let (n, errs) =
            parse(r#"[{"host": "a", "port": "70x"}, {"port": 1}, ["a"], "nohost", ["b", 0]]"#);
        assert!(n.is_empty());
        assert_eq!(
            errs,
            [
                "x.redis_startup_nodes[0].port: expected a port (1 to 65535), got \"70x\"",
                "x.redis_startup_nodes[1].host: a node needs a host",
                "x.redis_startup_nodes[2]: expected [host, port], got a list of 1",
                "x.redis_startup_nodes[3]: expected \"host:port\", got \"nohost\"",
                "x.redis_startup_nodes[4].port: expected a port (1 to 65535), got \"0\"",
            ]
        );
    }
}
