//! One Redis connection that keeps itself up: connected in the background (an instance starts
//! while Redis is down), reconnected once it exists, and a flag saying whether the last call
//! got an answer. The fleet's counters and the shared response cache each hold one.
//!
//! The Redis is one of three kinds (`sluice_core::RedisTarget`), and callers do not tell them
//! apart: every call goes through a [`RedisConn`].
//! - One server: redis' connection manager, which reconnects by itself.
//! - A Redis Cluster: redis' cluster connection, which follows `MOVED` and a replica promoted
//!   in a failover by itself. Pub/sub listens on one node at a time: a cluster delivers every
//!   `PUBLISH` to every node.
//! - A primary named by Redis Sentinel: the sentinels are asked for the primary, and asked
//!   again whenever a call fails (and every few seconds besides); when they name another
//!   server, a connection to it takes the old one's place. A server that answers `-READONLY`
//!   (an old primary come back as a replica) is a failed call like any other, so it is left.

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::{ArcSwap, ArcSwapOption};
use futures_util::StreamExt;
use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::sentinel::{SentinelClient, SentinelClientBuilder, SentinelServerType};
use redis::{
    Client, Cmd, ConnectionAddr, IntoConnectionInfo, Pipeline, RedisConnectionInfo, RedisFuture,
    RedisResult, Value,
};
use tokio::sync::Notify;

use sluice_core::{NodeAddress, RedisTarget, Secret};

/// The Redis address did not make a client (the address itself is not echoed: it may hold a
/// password).
#[derive(Debug, thiserror::Error)]
#[error("the Redis address is not usable: {0}")]
pub struct BadRedisUrl(&'static str);

/// Longest a connection attempt to one server waits.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// Longest the sentinels are given to name the primary.
const ASK_SENTINELS_TIMEOUT: Duration = Duration::from_secs(2);

/// How often the sentinels are asked while every call succeeds (a failed call asks at once).
const SENTINEL_RECHECK: Duration = Duration::from_secs(5);

/// How often they are asked while calls fail and they still name the same primary.
const SENTINEL_RECHECK_DOWN: Duration = Duration::from_millis(200);

/// A handle for one call, of whichever kind of Redis the link has: cheap to clone, and
/// usable wherever redis wants a connection (`query_async`, scripts, `AsyncCommands`).
#[derive(Clone)]
pub enum RedisConn {
    /// One server, or the primary Sentinel named last.
    One(ConnectionManager),
    /// A Redis Cluster.
    Cluster(ClusterConnection),
}

impl ConnectionLike for RedisConn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Self::One(c) => c.req_packed_command(cmd),
            Self::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Self::One(c) => c.req_packed_commands(pipeline, offset, count),
            Self::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Self::One(c) => c.get_db(),
            Self::Cluster(c) => c.get_db(),
        }
    }
}

impl RedisConn {
    /// The servers a walk over every key (`SCAN`) must visit, each as `Some((host, port))`
    /// of a cluster primary, or `[None]` for the one server.
    pub async fn scan_nodes(&mut self) -> RedisResult<Vec<Option<(String, u16)>>> {
        match self {
            Self::One(_) => Ok(vec![None]),
            Self::Cluster(c) => {
                let nodes: String = redis::cmd("CLUSTER").arg("NODES").query_async(c).await?;
                Ok(cluster_primaries(&nodes).into_iter().map(Some).collect())
            }
        }
    }

    /// One `SCAN cursor MATCH pattern COUNT count` step on `node` (from [`Self::scan_nodes`]).
    pub async fn scan_step(
        &mut self,
        node: &Option<(String, u16)>,
        cursor: u64,
        pattern: &str,
        count: usize,
    ) -> RedisResult<(u64, Vec<String>)> {
        let mut cmd = redis::cmd("SCAN");
        cmd.arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(count);
        match (self, node) {
            (Self::Cluster(c), Some((host, port))) => {
                use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
                let routing = RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress {
                    host: host.clone(),
                    port: *port,
                });
                let v = c.route_command(cmd, routing).await?;
                Ok(redis::from_redis_value(v)?)
            }
            (con, _) => cmd.query_async(con).await,
        }
    }
}

/// The primaries of a `CLUSTER NODES` answer that are not failing, as `(host, port)`.
fn cluster_primaries(nodes: &str) -> Vec<(String, u16)> {
    nodes
        .lines()
        .filter_map(|line| {
            let mut f = line.split_whitespace();
            let (_, addr, flags) = (f.next()?, f.next()?, f.next()?);
            let primary = flags.split(',').any(|x| x == "master")
                && !flags.split(',').any(|x| x == "fail" || x == "noaddr");
            if !primary {
                return None;
            }
            let addr = addr.split(['@', ',']).next()?;
            let (host, port) = addr.rsplit_once(':')?;
            let host = host.trim_start_matches('[').trim_end_matches(']');
            Some((host.to_owned(), port.parse().ok()?))
        })
        .collect()
}

/// How the link reaches its Redis.
enum Reach {
    /// One server.
    One(Client),
    /// A Redis Cluster, and its startup nodes (to listen on).
    Cluster(Box<(ClusterClient, Vec<Client>)>),
    /// The sentinels, and the primary they named last (to listen on).
    Sentinel(Box<SentinelReach>),
}

/// The Sentinel side of a link.
struct SentinelReach {
    sentinels: tokio::sync::Mutex<SentinelClient>,
    /// The primary's client, once they named one.
    primary: ArcSwapOption<Client>,
    /// Woken by a failed call: ask the sentinels again now.
    failed: Notify,
}

/// A connection to Redis and whether it currently answers.
pub struct RedisLink {
    reach: Reach,
    conn: ArcSwapOption<RedisConn>,
    up: AtomicBool,
    /// What this link serves, for the log lines when it goes down or comes back.
    role: (&'static str, &'static str),
    /// Where the link is connected now, for the log (`host:port`; never a password).
    at: ArcSwap<String>,
}

impl std::fmt::Debug for RedisLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisLink")
            .field("up", &self.is_up())
            .finish()
    }
}

/// A node's connection info with the credentials every node takes.
fn node_info(
    n: &NodeAddress,
    username: Option<&str>,
    password: Option<&Secret>,
) -> RedisResult<redis::ConnectionInfo> {
    let mut settings = RedisConnectionInfo::default();
    if let Some(u) = username {
        settings = settings.set_username(u);
    }
    if let Some(p) = password {
        settings = settings.set_password(p.expose());
    }
    Ok(ConnectionAddr::Tcp(n.host.clone(), n.port)
        .into_connection_info()?
        .set_redis_settings(settings))
}

fn reach(target: &RedisTarget) -> Result<Reach, BadRedisUrl> {
    match target {
        RedisTarget::Single(url) => Client::open(url.expose())
            .map(Reach::One)
            .map_err(|_| BadRedisUrl("not a valid redis:// URL")),
        RedisTarget::Cluster {
            nodes,
            username,
            password,
        } => {
            let infos = nodes
                .iter()
                .map(|n| node_info(n, username.as_deref(), password.as_ref()))
                .collect::<RedisResult<Vec<_>>>()
                .map_err(|_| BadRedisUrl("a cluster node's address"))?;
            let clients = infos
                .iter()
                .map(|i| Client::open(i.clone()))
                .collect::<RedisResult<Vec<_>>>()
                .map_err(|_| BadRedisUrl("a cluster node's address"))?;
            let mut b = ClusterClient::builder(infos)
                .connection_timeout(CONNECT_TIMEOUT)
                .retries(2);
            if let Some(u) = username {
                b = b.username(u);
            }
            if let Some(p) = password {
                b = b.password(p.expose());
            }
            let client = b
                .build()
                .map_err(|_| BadRedisUrl("the cluster's settings"))?;
            Ok(Reach::Cluster(Box::new((client, clients))))
        }
        RedisTarget::Sentinel {
            service_name,
            sentinels,
            sentinel_password,
            username,
            password,
        } => {
            let addrs = sentinels
                .iter()
                .map(|n| ConnectionAddr::Tcp(n.host.clone(), n.port));
            let mut b = SentinelClientBuilder::new(addrs, service_name, SentinelServerType::Master)
                .map_err(|_| BadRedisUrl("the sentinels' addresses"))?;
            if let Some(p) = sentinel_password {
                b = b.set_client_to_sentinel_password(p.expose());
            }
            if let Some(u) = username {
                b = b.set_client_to_redis_username(u);
            }
            if let Some(p) = password {
                b = b.set_client_to_redis_password(p.expose());
            }
            let client = b
                .build()
                .map_err(|_| BadRedisUrl("the Sentinel settings"))?;
            Ok(Reach::Sentinel(Box::new(SentinelReach {
                sentinels: tokio::sync::Mutex::new(client),
                primary: ArcSwapOption::empty(),
                failed: Notify::new(),
            })))
        }
    }
}

impl RedisLink {
    /// A link to `target` whose calls wait at most `timeout`; connecting runs in the
    /// background. `role` is what the log says when Redis comes back and when it goes away.
    pub fn start(
        target: &RedisTarget,
        timeout: Duration,
        role: (&'static str, &'static str),
    ) -> Result<Arc<Self>, BadRedisUrl> {
        let link = Arc::new(Self {
            reach: reach(target)?,
            conn: ArcSwapOption::empty(),
            up: AtomicBool::new(false),
            role,
            at: ArcSwap::from_pointee(String::new()),
        });
        match &link.reach {
            Reach::One(_) | Reach::Cluster(..) => {
                tokio::spawn(link.clone().connect_loop(timeout));
            }
            Reach::Sentinel(_) => {
                tokio::spawn(link.clone().follow_sentinels(timeout));
            }
        }
        Ok(link)
    }

    fn manager_config(timeout: Duration) -> ConnectionManagerConfig {
        ConnectionManagerConfig::new()
            .set_connection_timeout(Some(CONNECT_TIMEOUT))
            .set_response_timeout(Some(timeout))
            .set_max_delay(Duration::from_secs(2))
    }

    /// Keep a connection in place (one server, or a cluster); it reconnects by itself once
    /// it exists.
    async fn connect_loop(self: Arc<Self>, timeout: Duration) {
        let mut wait = Duration::from_millis(100);
        loop {
            let made = match &self.reach {
                Reach::One(client) => ConnectionManager::new_with_config(
                    client.clone(),
                    Self::manager_config(timeout),
                )
                .await
                .map(RedisConn::One),
                Reach::Cluster(c) => {
                    let client = &c.0;
                    let config = redis::cluster::ClusterConfig::new()
                        .set_connection_timeout(CONNECT_TIMEOUT)
                        .set_response_timeout(timeout);
                    client
                        .get_async_connection_with_config(config)
                        .await
                        .map(RedisConn::Cluster)
                }
                Reach::Sentinel(_) => return,
            };
            match made {
                Ok(c) => {
                    self.conn.store(Some(Arc::new(c)));
                    self.mark(true);
                    return;
                }
                Err(e) => {
                    self.mark(false);
                    tracing::debug!(error = ?e.kind(), "redis connect failed; retrying");
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(Duration::from_secs(2));
                }
            }
        }
    }

    /// Ask the sentinels for the primary for as long as the process lives: at once when a
    /// call failed, every few seconds otherwise; connect to the primary they name whenever it
    /// is not the one this link is connected to.
    async fn follow_sentinels(self: Arc<Self>, timeout: Duration) {
        let Reach::Sentinel(s) = &self.reach else {
            return;
        };
        loop {
            let asked = tokio::time::timeout(ASK_SENTINELS_TIMEOUT, async {
                s.sentinels.lock().await.async_get_client().await
            })
            .await;
            match asked {
                Ok(Ok(client)) => {
                    let addr = client.get_connection_info().addr().to_string();
                    let moved = s
                        .primary
                        .load()
                        .as_deref()
                        .is_none_or(|c| c.get_connection_info().addr().to_string() != addr);
                    if moved || self.conn.load().is_none() {
                        let made = tokio::time::timeout(
                            CONNECT_TIMEOUT * 2,
                            ConnectionManager::new_with_config(
                                client.clone(),
                                Self::manager_config(timeout),
                            ),
                        )
                        .await;
                        match made {
                            Ok(Ok(m)) => {
                                s.primary.store(Some(Arc::new(client)));
                                self.conn.store(Some(Arc::new(RedisConn::One(m))));
                                let before = self.at.swap(Arc::new(addr.clone()));
                                if !before.is_empty() {
                                    tracing::warn!(
                                        from = %before,
                                        to = %addr,
                                        "redis sentinel: the primary moved; following it"
                                    );
                                }
                                self.mark(true);
                            }
                            Ok(Err(e)) => {
                                tracing::debug!(error = ?e.kind(), "redis primary unreachable");
                                self.mark(false);
                            }
                            Err(_) => self.mark(false),
                        }
                    }
                }
                // Sentinels away say nothing about the primary: the calls on it do.
                Ok(Err(e)) => {
                    tracing::debug!(error = ?e.kind(), "redis sentinels gave no primary");
                    if self.conn.load().is_none() {
                        self.mark(false);
                    }
                }
                Err(_) => {
                    if self.conn.load().is_none() {
                        self.mark(false);
                    }
                }
            }
            let recheck = if self.is_up() {
                SENTINEL_RECHECK
            } else {
                SENTINEL_RECHECK_DOWN
            };
            tokio::select! {
                () = s.failed.notified() => {}
                () = tokio::time::sleep(recheck) => {}
            }
            // A burst of failed calls asks once.
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Whether Redis answered the last call.
    pub fn is_up(&self) -> bool {
        self.up.load(Relaxed)
    }

    /// Note whether the last call got an answer (logged when that changes). A failed call on
    /// a Sentinel link has the sentinels asked again.
    pub fn mark(&self, up: bool) {
        if !up {
            if let Reach::Sentinel(s) = &self.reach {
                s.failed.notify_one();
            }
        }
        if self.up.swap(up, Relaxed) != up {
            if up {
                tracing::info!("redis reachable: {}", self.role.0);
            } else {
                tracing::warn!("redis unreachable: {}", self.role.1);
            }
        }
    }

    /// A handle on the connection, once there is one.
    pub fn connection(&self) -> Option<RedisConn> {
        self.conn.load().as_deref().cloned()
    }

    /// The server to subscribe on, the `attempt`-th time: the one server, the primary
    /// Sentinel named last, or each cluster node in turn (a cluster delivers every message
    /// to every node).
    fn subscriber(&self, attempt: usize) -> Option<Client> {
        match &self.reach {
            Reach::One(c) => Some(c.clone()),
            Reach::Cluster(c) => c.1.get(attempt % c.1.len().max(1)).cloned(),
            Reach::Sentinel(s) => s.primary.load().as_deref().cloned(),
        }
    }

    /// Hear `channels` for as long as `on` wants (it returns `false` to stop), resubscribing
    /// whenever Redis goes away and comes back. `on` gets each message's channel and text.
    pub fn listen<F>(self: &Arc<Self>, channels: &'static [&'static str], mut on: F)
    where
        F: FnMut(&str, &str) -> bool + Send + 'static,
    {
        let link = self.clone();
        tokio::spawn(async move {
            let mut attempt = 0usize;
            loop {
                if let Some(client) = link.subscriber(attempt) {
                    match client.get_async_pubsub().await {
                        Ok(mut ps) => {
                            if ps.subscribe(channels).await.is_ok() {
                                let mut messages = ps.on_message();
                                while let Some(msg) = messages.next().await {
                                    let payload: String = msg.get_payload().unwrap_or_default();
                                    if !on(msg.get_channel_name(), &payload) {
                                        return;
                                    }
                                }
                            }
                        }
                        Err(e) => {
                            tracing::debug!(error = ?e.kind(), "redis subscribe failed");
                            // The primary Sentinel named may have gone: ask again. (On a
                            // cluster the next node is tried; the calls say whether it is up.)
                            if let Reach::Sentinel(s) = &link.reach {
                                s.failed.notify_one();
                            }
                        }
                    }
                }
                attempt = attempt.wrapping_add(1);
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_primaries_are_read_from_cluster_nodes() {
        let nodes = "\
07c3 127.0.0.1:57001@67001 myself,master - 0 0 1 connected 0-5460
67ed 127.0.0.1:57002@67002,host-b master - 0 1 2 connected 5461-10922
292f 127.0.0.1:57003@67003 master,fail - 0 1 3 connected
6ec2 127.0.0.1:57004@67004 slave 07c3 0 1 1 connected
e7d1 [::1]:57005@67005 master - 0 1 4 connected 10923-16383
";
        assert_eq!(
            cluster_primaries(nodes),
            [
                ("127.0.0.1".to_owned(), 57001),
                ("127.0.0.1".to_owned(), 57002),
                ("::1".to_owned(), 57005),
            ]
        );
    }

    #[test]
    fn a_bad_address_names_what_is_wrong_and_not_the_address() {
        let e = RedisLink::start(
            &RedisTarget::Single(Secret::new("http://user:hunter2@x")),
            Duration::from_millis(100),
            ("", ""),
        )
        .unwrap_err();
        assert!(!e.to_string().contains("hunter2"), "{e}");
    }
}
