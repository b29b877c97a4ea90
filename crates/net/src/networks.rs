//! Sets of IP address blocks, and who a request comes from: the one representation of an
//! address list (`allowed_ips`, `trusted_proxy_ranges`, the address part of the client-side
//! upstream allow-list) and the one rule for reading a client's address through proxies.

use std::net::IpAddr;

/// Addresses and CIDR blocks (`10.0.0.0/8`, `fd00::/8`, `192.0.2.7`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Networks {
    blocks: Vec<(IpAddr, u8)>,
}

impl Networks {
    /// Read entries, each an address or a CIDR block; the error names the entry.
    pub fn parse<S: AsRef<str>>(entries: &[S]) -> Result<Self, String> {
        let mut out = Self::default();
        for e in entries {
            let e = e.as_ref().trim();
            match block(e)? {
                Some(b) => out.blocks.push(b),
                None => return Err(format!("{e:?}: expected an IP address or a CIDR block")),
            }
        }
        Ok(out)
    }

    /// Add one block (for lists that also hold host names: `ssrf::Allowlist`).
    pub(crate) fn push(&mut self, b: (IpAddr, u8)) {
        self.blocks.push(b);
    }

    /// Whether the list is empty (an empty allow-list allows no one).
    pub fn is_empty(&self) -> bool {
        self.blocks.is_empty()
    }

    /// Whether `ip` lies in a listed address or block. An IPv4 block also covers the same
    /// addresses written as IPv4-mapped IPv6 (a dual-stack listener's peers).
    pub fn contains(&self, ip: IpAddr) -> bool {
        self.blocks
            .iter()
            .any(|(net, len)| in_block(ip, *net, *len))
    }
}

/// An entry as a block: `Ok(None)` when it is not written as an address at all (a host name,
/// which `ssrf::Allowlist` accepts), `Err` when it is a malformed block.
pub(crate) fn block(e: &str) -> Result<Option<(IpAddr, u8)>, String> {
    if let Some((addr, len)) = e.split_once('/') {
        let ip: IpAddr = addr
            .parse()
            .map_err(|_| format!("{e:?}: not an address/prefix (CIDR) block"))?;
        let max = if ip.is_ipv4() { 32 } else { 128 };
        let len: u8 = len
            .parse()
            .ok()
            .filter(|l| *l <= max)
            .ok_or_else(|| format!("{e:?}: prefix length must be 0..={max}"))?;
        return Ok(Some((ip, len)));
    }
    Ok(e.trim_matches(['[', ']'])
        .parse::<IpAddr>()
        .ok()
        .map(|ip| (ip, if ip.is_ipv4() { 32 } else { 128 })))
}

fn in_block(ip: IpAddr, net: IpAddr, len: u8) -> bool {
    match (ip, net) {
        (IpAddr::V4(a), IpAddr::V4(n)) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
            u32::from(a) & mask == u32::from(n) & mask
        }
        (IpAddr::V6(a), IpAddr::V6(n)) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
            u128::from(a) & mask == u128::from(n) & mask
        }
        (IpAddr::V6(a), IpAddr::V4(_)) => a
            .to_ipv4_mapped()
            .is_some_and(|v4| in_block(IpAddr::V4(v4), net, len)),
        (IpAddr::V4(_), IpAddr::V6(_)) => false,
    }
}

/// How far `X-Forwarded-For` is believed (`general_settings.use_x_forwarded_for`,
/// `trusted_proxy_ranges`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Forwarded {
    /// Not at all: the client is the connection's peer (the default).
    #[default]
    Ignored,
    /// The peer is one trusted proxy: the client is the last address it appended.
    OneHop,
    /// Proxies in these blocks are trusted: walking the header from the right, the client is
    /// the first address outside them.
    Through(Networks),
}

/// The address a request comes from: the peer, or, when forwarding is believed, the address
/// the trusted proxies in front say they received it from. `None` when a header that must be
/// read names no address (a client's own garbage cannot match an allow-list).
pub fn client_address(
    peer: IpAddr,
    forwarded_for: Option<&[u8]>,
    how: &Forwarded,
) -> Option<IpAddr> {
    let trusted = match how {
        Forwarded::Ignored => return Some(peer),
        Forwarded::OneHop => None,
        Forwarded::Through(nets) => {
            if !nets.contains(peer) {
                return Some(peer);
            }
            Some(nets)
        }
    };
    let Some(header) = forwarded_for else {
        return Some(peer);
    };
    let text = std::str::from_utf8(header).ok()?;
    let mut hop = peer;
    for entry in text.rsplit(',') {
        let entry = entry.trim();
        if entry.is_empty() {
            continue;
        }
        hop = parse_hop(entry)?;
        match trusted {
            Some(nets) if nets.contains(hop) => {}
            _ => return Some(hop),
        }
    }
    Some(hop)
}

/// One `X-Forwarded-For` entry: an address, possibly with a port (`192.0.2.1:4711`,
/// `[2001:db8::1]:4711`).
fn parse_hop(entry: &str) -> Option<IpAddr> {
    if let Ok(ip) = entry.parse::<IpAddr>() {
        return Some(ip);
    }
    entry
        .parse::<std::net::SocketAddr>()
        .ok()
        .map(|s| s.ip())
        .or_else(|| entry.trim_matches(['[', ']']).parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn parses_addresses_and_blocks_and_names_a_bad_entry() {
        let n = Networks::parse(&["10.0.0.0/8", "192.0.2.7", "fd00::/8", "[::1]"]).unwrap();
        assert!(n.contains(ip("10.1.2.3")));
        assert!(n.contains(ip("192.0.2.7")));
        assert!(!n.contains(ip("192.0.2.8")));
        assert!(n.contains(ip("fd12::1")));
        assert!(n.contains(ip("::1")));
        assert!(n.contains(ip("::ffff:10.9.9.9")), "IPv4-mapped");
        for bad in ["example.com", "10.0.0.0/33", "10.0.0/8", ""] {
            let e = Networks::parse(&[bad]).unwrap_err();
            assert!(e.contains(&format!("{bad:?}")), "{e}");
        }
    }

    #[test]
    fn the_client_is_the_peer_unless_forwarding_is_believed() {
        let peer = ip("127.0.0.1");
        let xff = Some(&b"203.0.113.9, 198.51.100.2"[..]);
        assert_eq!(client_address(peer, xff, &Forwarded::Ignored), Some(peer));
        // One hop: the address the proxy appended, whatever the client wrote before it.
        assert_eq!(
            client_address(peer, xff, &Forwarded::OneHop),
            Some(ip("198.51.100.2"))
        );
        assert_eq!(client_address(peer, None, &Forwarded::OneHop), Some(peer));
        // Trusted blocks: walk past every trusted proxy.
        let lb = Forwarded::Through(Networks::parse(&["127.0.0.0/8", "198.51.100.0/24"]).unwrap());
        assert_eq!(client_address(peer, xff, &lb), Some(ip("203.0.113.9")));
        // A peer outside the trusted blocks is the client, whatever it forwards.
        assert_eq!(
            client_address(ip("192.0.2.1"), xff, &lb),
            Some(ip("192.0.2.1"))
        );
        // Ports and brackets are read; garbage where an address must be read is no address.
        assert_eq!(
            client_address(peer, Some(b"[2001:db8::1]:4711"), &Forwarded::OneHop),
            Some(ip("2001:db8::1"))
        );
        assert_eq!(
            client_address(peer, Some(b"not-an-ip"), &Forwarded::OneHop),
            None
        );
        // All hops trusted: the leftmost is as far as the header goes.
        assert_eq!(
            client_address(peer, Some(b"198.51.100.7"), &lb),
            Some(ip("198.51.100.7"))
        );
    }
}
