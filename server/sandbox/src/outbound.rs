//! Every request Toolshed sends on someone's behalf (a tool's `$fetch`, an
//! external MCP server, a playground chat endpoint) obeys one rule: it never
//! reaches this network's own addresses (loopback, private, link-local and
//! cloud metadata, CGNAT, unique-local, …), checked after name resolution and
//! at every redirect hop, unless the operator named the host as an internal
//! one that may be reached ([`InternalHosts`], `TOOLSHED_INTERNAL_HOSTS`).

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};

use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use reqwest::Url;

/// Host names (or address literals) an operator lets requests reach although
/// they are internal. Empty by default.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct InternalHosts(Arc<[String]>);

impl InternalHosts {
    /// Names separated by commas or white space.
    pub fn parse(raw: &str) -> Self {
        let names: Vec<String> = raw
            .split(|c: char| c == ',' || c.is_whitespace())
            .map(|h| h.trim().trim_start_matches('[').trim_end_matches(']').trim_end_matches('.').to_ascii_lowercase())
            .filter(|h| !h.is_empty())
            .collect();
        Self(names.into())
    }

    pub fn allows(&self, host: &str) -> bool {
        let host = host.trim_start_matches('[').trim_end_matches(']').trim_end_matches('.');
        self.0.iter().any(|h| h.eq_ignore_ascii_case(host))
    }

    pub fn names(&self) -> &[String] {
        &self.0
    }
}

/// `host:port` into its parts (`[v6]:port` too); a bare IPv6 literal has no port.
pub fn split_port(entry: &str) -> (&str, Option<u16>) {
    if let Some(rest) = entry.strip_prefix('[') {
        return match rest.split_once(']') {
            Some((v6, tail)) => (v6, tail.strip_prefix(':').and_then(|p| p.parse().ok())),
            None => (entry, None),
        };
    }
    match entry.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') => match port.parse() {
            Ok(p) => (host, Some(p)),
            Err(_) => (entry, None),
        },
        _ => (entry, None),
    }
}

/// Whether `ip` belongs to a network requests on someone's behalf must not reach.
pub fn is_internal(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => internal_v4(v4),
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return internal_v4(v4);
            }
            let s = v6.segments();
            let embedded = |hi: u16, lo: u16| Ipv4Addr::new((hi >> 8) as u8, hi as u8, (lo >> 8) as u8, lo as u8);
            // NAT64 (64:ff9b::/96) and 6to4 (2002::/16) carry an IPv4 address inside.
            if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
                return internal_v4(embedded(s[6], s[7]));
            }
            if s[0] == 0x2002 {
                return internal_v4(embedded(s[1], s[2]));
            }
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (s[0] & 0xfe00) == 0xfc00 // unique-local fc00::/7 (AWS's metadata fd00:ec2::254 too)
                || (s[0] & 0xffc0) == 0xfe80 // link-local
                || (s[0] & 0xffc0) == 0xfec0 // site-local (deprecated, still routed in places)
                || s[..6] == [0, 0, 0, 0, 0, 0] // IPv4-compatible ::a.b.c.d
                || (s[0] == 0x2001 && s[1] == 0x0db8) // documentation
        }
    }
}

fn internal_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local() // 169.254.0.0/16: cloud metadata (169.254.169.254) lives here
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || ip.is_documentation()
        || a == 0
        || (a == 100 && (64..128).contains(&b)) // CGNAT 100.64.0.0/10
        || (a == 192 && b == 0 && c == 0) // IETF protocol assignments
        || (a == 198 && (b == 18 || b == 19)) // benchmarking
        || a >= 240 // reserved
}

/// Refuses `host` when any address it resolved to is internal (one internal
/// answer is enough: a name may resolve differently on the next lookup).
pub fn check_addresses(internal: &InternalHosts, host: &str, addrs: &[IpAddr]) -> Result<(), String> {
    if internal.allows(host) {
        return Ok(());
    }
    match addrs.iter().find(|ip| is_internal(**ip)) {
        Some(ip) => Err(format!(
            "{host} is an internal address ({ip}), which requests on a user's behalf may not reach (an administrator can allow a named internal host with TOOLSHED_INTERNAL_HOSTS)"
        )),
        None => Ok(()),
    }
}

/// The checks a URL passes before anything is sent: http or https, and an
/// address literal (which no resolver sees) that is not internal.
pub fn check_url(internal: &InternalHosts, url: &Url) -> Result<(), String> {
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!("only http and https URLs can be reached, not {url}"));
    }
    let host = url.host_str().ok_or_else(|| format!("URL {url} has no host"))?;
    let literal = match url.host() {
        Some(url::Host::Ipv4(ip)) => Some(IpAddr::V4(ip)),
        Some(url::Host::Ipv6(ip)) => Some(IpAddr::V6(ip)),
        _ => None,
    };
    match literal {
        Some(ip) => check_addresses(internal, host, &[ip]),
        None => Ok(()),
    }
}

/// Resolves names as the system does, then refuses internal answers; the
/// connection goes to exactly the addresses checked.
#[derive(Clone)]
struct GuardedResolver {
    internal: InternalHosts,
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let internal = self.internal.clone();
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let ips: Vec<IpAddr> = addrs.iter().map(SocketAddr::ip).collect();
            check_addresses(&internal, &host, &ips).map_err(|e| -> Box<dyn std::error::Error + Send + Sync> { e.into() })?;
            Ok(Box::new(addrs.into_iter()) as Addrs)
        })
    }
}

/// A client builder whose every connection passes the rule; redirects are
/// not followed (callers that follow them check each hop with [`check_url`]).
pub fn client_builder(internal: &InternalHosts) -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .dns_resolver(Arc::new(GuardedResolver { internal: internal.clone() }))
        .redirect(reqwest::redirect::Policy::none())
}

/// reqwest's top-level message hides the cause ("error sending request").
pub fn describe(error: &reqwest::Error) -> String {
    let mut message = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    message
}

/// Clients by the internal hosts they allow (one in practice), so
/// connections are pooled across requests.
#[derive(Default)]
pub struct Clients(Mutex<HashMap<InternalHosts, reqwest::Client>>);

impl Clients {
    pub fn get(
        &self,
        internal: &InternalHosts,
        build: impl FnOnce(reqwest::ClientBuilder) -> reqwest::ClientBuilder,
    ) -> Result<reqwest::Client, String> {
        let mut clients = self.0.lock().expect("clients lock");
        if let Some(c) = clients.get(internal) {
            return Ok(c.clone());
        }
        let client = build(client_builder(internal)).build().map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        clients.insert(internal.clone(), client.clone());
        Ok(client)
    }
}

/// Methods a read-only tool's `$fetch` may send.
pub fn read_only_method(method: &str) -> bool {
    method.eq_ignore_ascii_case("GET") || method.eq_ignore_ascii_case("HEAD")
}

/// An entry names a host (exact, or `*.example.com` for any subdomain of
/// example.com) and a port: `host` allows 80 and 443, `host:8080` only 8080.
pub fn host_allowed(allow: &[String], host: &str, port: u16) -> bool {
    allowing_entry(allow, host, port).is_some()
}

/// The allow-list entry that lets `host:port` through, as written.
pub fn allowing_entry<'a>(allow: &'a [String], host: &str, port: u16) -> Option<&'a str> {
    let host = host.trim_start_matches('[').trim_end_matches(']').trim_end_matches('.').to_ascii_lowercase();
    allow.iter().map(String::as_str).find(|entry| {
        let (pattern, ports) = split_port(entry.trim());
        let port_ok = match ports {
            Some(p) => p == port,
            None => port == 80 || port == 443,
        };
        let pattern = pattern.trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase();
        let host_ok = match pattern.strip_prefix("*.") {
            Some(domain) => host.strip_suffix(domain).is_some_and(|sub| sub.len() > 1 && sub.ends_with('.')),
            None => host == pattern,
        };
        host_ok && port_ok
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_get_and_head_are_reads() {
        assert!(read_only_method("GET") && read_only_method("head"));
        for m in ["POST", "PUT", "PATCH", "DELETE", "OPTIONS"] {
            assert!(!read_only_method(m), "{m}");
        }
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn loopback_private_link_local_cgnat_unique_local_and_metadata_addresses_are_internal() {
        for a in [
            "127.0.0.1",
            "127.8.9.10",
            "10.0.0.1",
            "172.16.5.4",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254", // AWS, GCP, Azure metadata
            "169.254.0.1",
            "100.64.0.1",
            "100.127.255.254",
            "0.0.0.0",
            "0.1.2.3",
            "255.255.255.255",
            "224.0.0.1",
            "192.0.0.8",
            "198.18.0.1",
            "240.0.0.1",
            "::1",
            "::",
            "fc00::1",
            "fd00:ec2::254", // AWS metadata over IPv6
            "fe80::1",
            "fec0::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "::ffff:10.1.2.3",
            "::127.0.0.1",
            "64:ff9b::a9fe:a9fe", // NAT64 of 169.254.169.254
            "2002:7f00:1::",      // 6to4 of 127.0.0.1
            "ff02::1",
        ] {
            assert!(is_internal(ip(a)), "{a} is internal");
        }
    }

    #[test]
    fn public_addresses_are_not_internal() {
        for a in [
            "8.8.8.8",
            "1.1.1.1",
            "93.184.216.34",
            "172.32.0.1",
            "100.128.0.1",
            "169.255.0.1",
            "2606:4700::1111",
            "2a00:1450::1",
            "64:ff9b::808:808",
        ] {
            assert!(!is_internal(ip(a)), "{a} is public");
        }
    }

    #[test]
    fn a_name_with_any_internal_answer_is_refused_unless_the_operator_named_it() {
        let none = InternalHosts::default();
        let err = check_addresses(&none, "rebind.example", &[ip("93.184.216.34"), ip("127.0.0.1")]).unwrap_err();
        assert!(err.contains("rebind.example") && err.contains("127.0.0.1") && err.contains("TOOLSHED_INTERNAL_HOSTS"), "{err}");
        assert!(check_addresses(&none, "example.com", &[ip("93.184.216.34")]).is_ok());
        let wiki = InternalHosts::parse("wiki.corp, 10.0.0.7 [::1]");
        assert_eq!(wiki.names(), ["wiki.corp", "10.0.0.7", "::1"]);
        assert!(check_addresses(&wiki, "WIKI.corp.", &[ip("10.1.1.1")]).is_ok());
        assert!(check_addresses(&wiki, "other.corp", &[ip("10.1.1.1")]).is_err());
    }

    #[test]
    fn address_literals_are_checked_before_anything_is_sent() {
        let none = InternalHosts::default();
        for url in [
            "http://127.0.0.1/admin",
            "http://[::1]:3000/",
            "http://169.254.169.254/latest/meta-data/",
            "http://[::ffff:a9fe:a9fe]/",
            "http://2130706433/", // 127.0.0.1 as one number: the URL parser normalizes it
            "http://0x7f.1/",
            "http://10.0.0.1:8080/",
        ] {
            let url = Url::parse(url).unwrap();
            assert!(check_url(&none, &url).is_err(), "{url} refused");
        }
        assert!(check_url(&none, &Url::parse("file:///etc/passwd").unwrap()).is_err());
        assert!(check_url(&none, &Url::parse("https://example.com/").unwrap()).is_ok());
        assert!(check_url(&InternalHosts::parse("127.0.0.1"), &Url::parse("http://127.0.0.1:9/").unwrap()).is_ok());
    }
}
