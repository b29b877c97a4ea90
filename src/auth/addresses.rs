//! Which addresses may call: the gateway's `general_settings.allowed_ips` (LiteLLM's key) and
//! a key's or team's own list (`metadata.allowed_ips`, sluice's addition). A client's address
//! is read once at the top of the pipeline (`read`): the peer the accept loop recorded, or,
//! with `use_x_forwarded_for`, the address trusted proxies say they received the request from
//! (`sluice_net::networks::client_address`). The accept loop records peers only while some
//! list exists ([`sluice_net::server::PeerAddresses`]); a list that finds no address refuses.

use std::net::IpAddr;
use std::sync::Arc;

use http::{Extensions, HeaderMap};
use serde_json::{Map, Value};

use sluice_net::networks::{client_address, Forwarded, Networks};
use sluice_net::server::PeerAddr;

/// A request extension: the address the request comes from, as the gateway reads it. Set
/// once at the top of the pipeline and carried into the requests sluice makes on a client's
/// behalf (several models, background Responses, the console's playground).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientAddr(pub IpAddr);

/// The client's address, when the pipeline read one.
pub fn client_of(ext: &Extensions) -> Option<IpAddr> {
    ext.get::<ClientAddr>().map(|c| c.0)
}

/// The client's address, read from the peer the accept loop recorded (`None` when it recorded
/// none) through `X-Forwarded-For` as `how` says; the pipeline keeps it as [`ClientAddr`].
pub fn read(ext: &Extensions, headers: &HeaderMap, how: &Forwarded) -> Option<IpAddr> {
    let PeerAddr(peer) = ext.get::<PeerAddr>().copied()?;
    let forwarded = headers.get("x-forwarded-for").map(|v| v.as_bytes());
    client_address(peer, forwarded, how)
}

/// Whether `list` lets `client` in; an unknown address is refused.
pub fn allows(list: &Networks, client: Option<IpAddr>) -> bool {
    client.is_some_and(|ip| list.contains(ip))
}

/// A key's or team's `metadata.allowed_ips`: `None` without one; `Err` (for the admin API's
/// 400) naming what is wrong.
pub fn from_metadata(m: &Map<String, Value>) -> Result<Option<Arc<Networks>>, String> {
    let Some(v) = m.get("allowed_ips").filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let list = v
        .as_array()
        .filter(|a| a.iter().all(Value::is_string))
        .ok_or("must be a list of IP addresses or CIDR blocks")?;
    let texts: Vec<&str> = list.iter().filter_map(Value::as_str).collect();
    Networks::parse(&texts).map(|n| Some(Arc::new(n)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_client_is_read_from_the_recorded_peer_only() {
        let mut ext = Extensions::new();
        let mut headers = HeaderMap::new();
        headers.insert("x-forwarded-for", "203.0.113.5".parse().unwrap());
        assert_eq!(
            read(&ext, &headers, &Forwarded::OneHop),
            None,
            "no peer recorded, no address"
        );
        ext.insert(PeerAddr("127.0.0.1".parse().unwrap()));
        assert_eq!(
            read(&ext, &headers, &Forwarded::Ignored),
            Some("127.0.0.1".parse().unwrap())
        );
        assert_eq!(
            read(&ext, &headers, &Forwarded::OneHop),
            Some("203.0.113.5".parse().unwrap())
        );
        ext.insert(ClientAddr("192.0.2.1".parse().unwrap()));
        assert_eq!(client_of(&ext), Some("192.0.2.1".parse().unwrap()));
    }

    #[test]
    fn a_list_in_metadata_is_read_or_refused() {
        let m = |v: Value| from_metadata(v.as_object().unwrap());
        assert_eq!(m(json!({})), Ok(None));
        let list = m(json!({"allowed_ips": ["10.0.0.0/8"]})).unwrap().unwrap();
        assert!(allows(&list, Some("10.2.3.4".parse().unwrap())));
        assert!(!allows(&list, Some("11.2.3.4".parse().unwrap())));
        assert!(!allows(&list, None), "an unknown address is refused");
        assert!(m(json!({"allowed_ips": "10.0.0.1"})).is_err());
        assert!(m(json!({"allowed_ips": ["nowhere"]})).is_err());
    }
}
