//! Where a client may not send sluice: the check of an upstream address a request body names
//! (`api_base` with `general_settings.allow_client_side_credentials`). A gateway holds every
//! provider key and sits inside the network; without this check a caller could point it at
//! the cloud's metadata service or an internal admin port (server-side request forgery).
//!
//! Refused: loopback, private (RFC 1918), carrier-grade NAT, link-local (the metadata address
//! 169.254.169.254 among them), unspecified, IETF-reserved, benchmarking, multicast and
//! broadcast IPv4 addresses; loopback, unspecified, unique-local (`fc00::/7`, AWS's
//! `fd00:ec2::254` among them), link-local, site-local and multicast IPv6 addresses; and IPv4
//! addresses wrapped in IPv6 (mapped, compatible, NAT64, 6to4) by the IPv4 they carry. A name
//! is resolved and refused when any of its addresses is. Entries of an allow-list (host names,
//! addresses, CIDR blocks) are let through.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::networks::{block, Networks};

/// An address that is not on the public internet, or a name that resolves to one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The address itself (or one the name resolves to) is internal.
    #[error("{host} is {kind} address{via}; not allowed as an upstream {of}")]
    Internal {
        /// The host as the client wrote it.
        host: String,
        /// What kind of address (`a loopback`, `a private`, ...).
        kind: &'static str,
        /// `" (it resolves to …)"` for names, empty for addresses.
        via: String,
        /// Whose upstream it would be (`from a request body`, ...).
        of: &'static str,
    },
    /// The name does not resolve, so sluice cannot tell where it leads.
    #[error("{host} does not resolve")]
    Unresolved {
        /// The host as the client wrote it.
        host: String,
    },
}

/// Why `ip` is not a public address (`None`: it is one). The words complete "is … address".
pub fn internal_kind(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => v4_kind(v4),
        IpAddr::V6(v6) => v6_kind(v6),
    }
}

fn v4_kind(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, c, _] = ip.octets();
    Some(match (a, b) {
        _ if ip == Ipv4Addr::new(169, 254, 169, 254) => "the cloud metadata",
        (0, _) => "an unspecified",
        (127, _) => "a loopback",
        (10, _) | (172, 16..=31) | (192, 168) => "a private",
        (100, 64..=127) => "a shared (carrier-grade NAT)",
        (169, 254) => "a link-local",
        (192, 0) if c == 0 => "an IETF-reserved",
        (198, 18..=19) => "a benchmarking",
        (224..=239, _) => "a multicast",
        (240..=255, _) => "a reserved or broadcast",
        _ => return None,
    })
}

fn v6_kind(ip: Ipv6Addr) -> Option<&'static str> {
    let s = ip.segments();
    if ip.is_unspecified() {
        return Some("an unspecified");
    }
    if ip.is_loopback() {
        return Some("a loopback");
    }
    // IPv4 inside IPv6: mapped (::ffff:a.b.c.d), compatible (::a.b.c.d), NAT64 (64:ff9b::/96)
    // and 6to4 (2002:AABB:CCDD::/48) all reach the IPv4 address they carry.
    let embedded =
        |hi: u16, lo: u16| Ipv4Addr::new((hi >> 8) as u8, hi as u8, (lo >> 8) as u8, lo as u8);
    let v4 = match s {
        [0, 0, 0, 0, 0, 0xffff, hi, lo] | [0, 0, 0, 0, 0, 0, hi, lo] => Some(embedded(hi, lo)),
        [0x64, 0xff9b, 0, 0, 0, 0, hi, lo] => Some(embedded(hi, lo)),
        [0x2002, hi, lo, ..] => Some(embedded(hi, lo)),
        _ => None,
    };
    if let Some(v4) = v4 {
        return v4_kind(v4);
    }
    Some(match s[0] {
        x if x & 0xfe00 == 0xfc00 => "a unique-local",
        x if x & 0xffc0 == 0xfe80 => "a link-local",
        x if x & 0xffc0 == 0xfec0 => "a site-local",
        x if x & 0xff00 == 0xff00 => "a multicast",
        _ => return None,
    })
}

/// Hosts and networks an operator lets client-supplied upstreams reach although they are
/// internal (`general_settings.client_side_api_base_allowlist`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Allowlist {
    hosts: Vec<String>,
    nets: Networks,
}

impl Allowlist {
    /// Read entries: a host name (matched case-insensitively, exactly), an IP address, or a
    /// CIDR block (`10.0.0.0/8`, `fd00::/8`). The error names the entry.
    pub fn parse<S: AsRef<str>>(entries: &[S]) -> Result<Self, String> {
        let mut list = Self::default();
        for e in entries {
            let e = e.as_ref().trim();
            if let Some(b) = block(e)? {
                list.nets.push(b);
            } else if e.is_empty() || e.contains(|c: char| c.is_whitespace() || c == ':') {
                return Err(format!(
                    "{e:?}: expected a host name, an address or a CIDR block"
                ));
            } else {
                list.hosts.push(e.to_ascii_lowercase());
            }
        }
        Ok(list)
    }

    /// Whether `host` (a name as the client wrote it) is listed by name.
    pub fn allows_host(&self, host: &str) -> bool {
        self.hosts.iter().any(|h| h.eq_ignore_ascii_case(host))
    }

    /// Whether `ip` lies in a listed address or block.
    pub fn allows_ip(&self, ip: IpAddr) -> bool {
        self.nets.contains(ip)
    }
}

/// Which addresses a check refuses, and whose upstream it guards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// An upstream a request body names (`api_base` with client-side credentials): any
    /// internal address ([`internal_kind`]).
    RequestBody,
    /// A deployment added at run time (`/model/new`, the console): the addresses that lead
    /// back into the gateway's own machine or its cloud's control plane ([`local_kind`]).
    /// Private networks stay allowed: self-hosted model servers live there.
    Deployment,
}

impl Scope {
    fn kind(self, ip: IpAddr) -> Option<&'static str> {
        match self {
            Self::RequestBody => internal_kind(ip),
            Self::Deployment => local_kind(ip),
        }
    }

    fn of(self) -> &'static str {
        match self {
            Self::RequestBody => "from a request body",
            Self::Deployment => "of a deployment added at run time",
        }
    }
}

/// AWS's IPv6 instance metadata address (`fd00:ec2::254`).
const AWS_METADATA_V6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254);

/// Why `ip` leads back into this machine or the cloud's metadata service (`None`: it does
/// not): loopback, unspecified, link-local (the metadata address among them), and AWS's IPv6
/// metadata address, also when wrapped in IPv6.
pub fn local_kind(ip: IpAddr) -> Option<&'static str> {
    if ip == IpAddr::V6(AWS_METADATA_V6) {
        return Some("the cloud metadata");
    }
    internal_kind(ip).filter(|k| {
        matches!(
            *k,
            "a loopback" | "an unspecified" | "a link-local" | "the cloud metadata"
        )
    })
}

/// Check the addresses `host` stands for: `Ok` when the allow-list names it, or when every
/// address is public or in an allowed block. `resolved` are the name's addresses (ignored for
/// an IP literal); a name without addresses is refused.
pub fn check_resolved(host: &str, resolved: &[IpAddr], allow: &Allowlist) -> Result<(), Refusal> {
    check_resolved_in(Scope::RequestBody, host, resolved, allow)
}

/// [`check_resolved`] for the addresses `scope` refuses.
pub fn check_resolved_in(
    scope: Scope,
    host: &str,
    resolved: &[IpAddr],
    allow: &Allowlist,
) -> Result<(), Refusal> {
    if allow.allows_host(host) {
        return Ok(());
    }
    let literal = host.trim_matches(['[', ']']).parse::<IpAddr>().ok();
    let addrs = match &literal {
        Some(ip) => std::slice::from_ref(ip),
        None if resolved.is_empty() => {
            return Err(Refusal::Unresolved {
                host: host.to_owned(),
            })
        }
        None => resolved,
    };
    for ip in addrs {
        if allow.allows_ip(*ip) {
            continue;
        }
        if let Some(kind) = scope.kind(*ip) {
            return Err(Refusal::Internal {
                host: host.to_owned(),
                kind,
                of: scope.of(),
                via: if literal.is_some() {
                    String::new()
                } else {
                    format!(" (it resolves to {ip})")
                },
            });
        }
    }
    Ok(())
}

/// Resolve `host` (as a URL names it) and check every address it stands for: see
/// [`check_resolved`]. Called only for a request that names its own upstream.
pub async fn check_host(host: &str, port: u16, allow: &Allowlist) -> Result<(), Refusal> {
    check_host_in(Scope::RequestBody, host, port, allow).await
}

/// [`check_host`] for the addresses `scope` refuses.
pub async fn check_host_in(
    scope: Scope,
    host: &str,
    port: u16,
    allow: &Allowlist,
) -> Result<(), Refusal> {
    let bare = host.trim_matches(['[', ']']);
    if allow.allows_host(host) || bare.parse::<IpAddr>().is_ok() {
        return check_resolved_in(scope, host, &[], allow);
    }
    let resolved: Vec<IpAddr> = match tokio::net::lookup_host((bare, port)).await {
        Ok(addrs) => addrs.map(|a| a.ip()).collect(),
        Err(_) => Vec::new(),
    };
    check_resolved_in(scope, host, &resolved, allow)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(s: &str) -> Option<&'static str> {
        internal_kind(s.parse().unwrap())
    }

    #[test]
    fn ipv4_internal_ranges_are_refused_and_public_ones_pass() {
        for (ip, k) in [
            ("127.0.0.1", "a loopback"),
            ("127.255.0.9", "a loopback"),
            ("10.1.2.3", "a private"),
            ("172.16.0.1", "a private"),
            ("172.31.255.255", "a private"),
            ("192.168.1.1", "a private"),
            ("169.254.169.254", "the cloud metadata"),
            ("169.254.1.1", "a link-local"),
            ("0.0.0.0", "an unspecified"),
            ("100.64.0.1", "a shared (carrier-grade NAT)"),
            ("192.0.0.8", "an IETF-reserved"),
            ("198.18.0.1", "a benchmarking"),
            ("224.0.0.1", "a multicast"),
            ("255.255.255.255", "a reserved or broadcast"),
        ] {
            assert_eq!(kind(ip), Some(k), "{ip}");
        }
        for ip in [
            "8.8.8.8",
            "172.32.0.1",
            "172.15.255.255",
            "100.128.0.1",
            "1.1.1.1",
        ] {
            assert_eq!(kind(ip), None, "{ip}");
        }
    }

    #[test]
    fn ipv6_internal_ranges_and_embedded_ipv4_are_refused() {
        for (ip, k) in [
            ("::1", "a loopback"),
            ("::", "an unspecified"),
            ("fe80::1", "a link-local"),
            ("fc00::1", "a unique-local"),
            ("fd00:ec2::254", "a unique-local"),
            ("fec0::1", "a site-local"),
            ("ff02::1", "a multicast"),
            ("::ffff:127.0.0.1", "a loopback"),
            ("::ffff:169.254.169.254", "the cloud metadata"),
            ("::ffff:10.0.0.1", "a private"),
            ("::10.0.0.1", "a private"),
            ("64:ff9b::a9fe:a9fe", "the cloud metadata"),
            ("2002:c0a8:0101::1", "a private"),
        ] {
            assert_eq!(kind(ip), Some(k), "{ip}");
        }
        for ip in [
            "2606:4700::1111",
            "::ffff:8.8.8.8",
            "2002:0808:0808::1",
            "2001:db9::1",
        ] {
            assert_eq!(kind(ip), None, "{ip}");
        }
    }

    #[test]
    fn names_are_refused_by_what_they_resolve_to() {
        let none = Allowlist::default();
        let public: IpAddr = "93.184.216.34".parse().unwrap();
        let private: IpAddr = "10.0.0.7".parse().unwrap();
        assert_eq!(check_resolved("api.example", &[public], &none), Ok(()));
        // One internal address among public ones is enough to refuse (DNS round robin).
        let e = check_resolved("evil.example", &[public, private], &none).unwrap_err();
        assert_eq!(
            e.to_string(),
            "evil.example is a private address (it resolves to 10.0.0.7); not allowed as an \
             upstream from a request body"
        );
        assert!(matches!(
            check_resolved("nowhere.example", &[], &none),
            Err(Refusal::Unresolved { .. })
        ));
        // A deployment may live on a private network, never on loopback or the metadata service.
        let local: IpAddr = "127.0.0.1".parse().unwrap();
        assert_eq!(
            check_resolved_in(Scope::Deployment, "vllm.internal", &[private], &none),
            Ok(())
        );
        let e = check_resolved_in(Scope::Deployment, "me.example", &[local], &none).unwrap_err();
        assert!(
            e.to_string().ends_with("of a deployment added at run time"),
            "{e}"
        );
        for refused in [
            "169.254.169.254",
            "::1",
            "0.0.0.0",
            "fd00:ec2::254",
            "::ffff:127.0.0.1",
        ] {
            assert!(
                check_resolved_in(Scope::Deployment, refused, &[], &none).is_err(),
                "{refused}"
            );
        }
        let allow = Allowlist::parse(&["127.0.0.1"]).unwrap();
        assert_eq!(
            check_resolved_in(Scope::Deployment, "127.0.0.1", &[], &allow),
            Ok(())
        );
        // A literal is judged by itself, whatever a resolver said.
        assert!(check_resolved("[::1]", &[public], &none).is_err());
    }

    #[tokio::test]
    async fn localhost_resolves_to_loopback_and_is_refused() {
        let e = check_host("localhost", 80, &Allowlist::default())
            .await
            .unwrap_err();
        assert!(
            matches!(
                &e,
                Refusal::Internal {
                    kind: "a loopback",
                    ..
                }
            ),
            "{e}"
        );
        let by_name = Allowlist::parse(&["LOCALHOST"]).unwrap();
        assert_eq!(check_host("localhost", 80, &by_name).await, Ok(()));
    }

    #[test]
    fn allowlist_entries_are_names_addresses_and_blocks() {
        let a =
            Allowlist::parse(&["127.0.0.1", "10.0.0.0/8", "fd00::/8", "vllm.internal"]).unwrap();
        let none: &[IpAddr] = &[];
        assert_eq!(check_resolved("127.0.0.1", none, &a), Ok(()));
        assert!(check_resolved("127.0.0.2", none, &a).is_err());
        assert_eq!(check_resolved("10.9.8.7", none, &a), Ok(()));
        assert_eq!(check_resolved("[fd12::1]", none, &a), Ok(()));
        assert_eq!(check_resolved("::ffff:10.1.1.1", none, &a), Ok(()));
        assert_eq!(check_resolved("vllm.internal", none, &a), Ok(()));
        let loop_name: IpAddr = "127.0.0.5".parse().unwrap();
        assert!(check_resolved("other.internal", &[loop_name], &a).is_err());
        assert!(Allowlist::parse(&["0.0.0.0/0"])
            .unwrap()
            .allows_ip(loop_name));
        for bad in ["10.0.0.0/33", "nonsense/8", "a b", ""] {
            assert!(Allowlist::parse(&[bad]).is_err(), "{bad}");
        }
    }
}
