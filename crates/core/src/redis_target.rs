//! Where a Redis is, once the config has been read: one server, a Redis Cluster, or a primary
//! found through Redis Sentinel. The fleet's Redis and the cache's are both one of these, so
//! the code that connects (`src/fleet/link.rs`) has one input to match on.

use crate::Secret;

/// One server's address in a list of them (cluster startup nodes, sentinels).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeAddress {
    /// Host name or IP address.
    pub host: String,
    /// TCP port.
    pub port: u16,
}

impl std::fmt::Display for NodeAddress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// A Redis to connect to, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RedisTarget {
    /// One server at a `redis://` URL (it may hold a password).
    Single(Secret),
    /// A Redis Cluster (`redis_startup_nodes`): any of `nodes` tells where the others are.
    Cluster {
        /// The nodes asked first for the cluster's layout.
        nodes: Vec<NodeAddress>,
        /// ACL user every node takes.
        username: Option<String>,
        /// Password every node takes.
        password: Option<Secret>,
    },
    /// A primary that Redis Sentinel names (`service_name` + `sentinel_nodes`), followed when
    /// the sentinels fail over to another.
    Sentinel {
        /// The name the sentinels monitor the primary under.
        service_name: String,
        /// The sentinels' addresses.
        sentinels: Vec<NodeAddress>,
        /// Password of the sentinels themselves (`sentinel_password`).
        sentinel_password: Option<Secret>,
        /// ACL user of the primary and its replicas.
        username: Option<String>,
        /// Password of the primary and its replicas.
        password: Option<Secret>,
    },
}

impl RedisTarget {
    /// What kind of deployment this is, for logs and errors (never an address or a secret).
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Single(_) => "single",
            Self::Cluster { .. } => "cluster",
            Self::Sentinel { .. } => "sentinel",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_print_as_host_port_and_secrets_never() {
        let n = NodeAddress {
            host: "10.0.0.1".into(),
            port: 7001,
        };
        assert_eq!(n.to_string(), "10.0.0.1:7001");
        let v6 = NodeAddress {
            host: "::1".into(),
            port: 26379,
        };
        assert_eq!(v6.to_string(), "[::1]:26379");
        let t = RedisTarget::Sentinel {
            service_name: "mymaster".into(),
            sentinels: vec![n],
            sentinel_password: Some(Secret::new("hunter2-sentinel")),
            username: None,
            password: Some(Secret::new("hunter2-data")),
        };
        let shown = format!("{t:?}");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert_eq!(t.kind(), "sentinel");
    }
}
