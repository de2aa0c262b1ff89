//! How a peer's requests were addressed, kept as the signs of a proxy
//! that does not say it is one: nginx, by default, adds no forwarding
//! header, but speaks HTTP/1.0 upstream (unless `proxy_http_version 1.1`)
//! and sends `Host: $proxy_host`, the name in its `proxy_pass` (an
//! `upstream` block's name, `backend`), not the address its client used.
//!
//! A connection's first request is classed once, when it names its client
//! (`Event::ClientNamed`), against the port the server listens on
//! ([`Listening`]): counts only, in fixed room, added up like the rest of
//! a peer's totals. What the counts mean is the report's to judge
//! (`report::proxy`).

/// The port the server listens on, and the one a `Host` without a port
/// means (80 for plain HTTP, 443 over TLS).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Listening {
    pub port: u16,
    pub default_port: u16,
}

impl Listening {
    /// Listening on `port`, over TLS or not.
    pub fn on(port: u16, tls: bool) -> Self {
        Listening {
            port,
            default_port: if tls { 443 } else { 80 },
        }
    }
}

/// What a `Host` says of how the client reached the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostShape {
    /// The port the connection reached (or none, on the default port): a
    /// client that addressed this server (or no `Host`, an HTTP/1.0
    /// request's right).
    Direct,
    /// One name of one label (`backend`, not `localhost`, not an address)
    /// and no port, on a connection that reached another port than the
    /// default: the name of an upstream in a proxy's configuration, as
    /// nginx's `$proxy_host` is; no client library drops the port of the
    /// URL it was given. (A hand-written request with a made-up `Host`
    /// looks the same.)
    UpstreamName,
    /// Another port, or a dotted name without the port the connection
    /// reached: a proxy passing its client's `Host` on (nginx's `$host`
    /// drops the port), or a port mapping in front (a Kubernetes Service,
    /// `docker -p`), which relays each client's connection as it is.
    Elsewhere,
}

impl HostShape {
    /// The shape of `host` on a connection to `listening`.
    pub fn of(host: Option<&[u8]>, listening: Listening) -> HostShape {
        let Some(host) = host.filter(|host| !host.is_empty()) else {
            return HostShape::Direct;
        };
        let (name, port) = split_port(host);
        match port {
            Some(port) if port == listening.port => HostShape::Direct,
            Some(_) => HostShape::Elsewhere,
            None if listening.port == listening.default_port => HostShape::Direct,
            None if is_one_label_name(name) => HostShape::UpstreamName,
            None => HostShape::Elsewhere,
        }
    }
}

/// A `Host` value's name and port (`None`: no port, or not a number).
fn split_port(host: &[u8]) -> (&[u8], Option<u16>) {
    // An IPv6 literal's colons are inside its brackets.
    let name_end = match host.first() {
        Some(b'[') => host
            .iter()
            .position(|&b| b == b']')
            .map_or(host.len(), |at| at + 1),
        _ => host.iter().position(|&b| b == b':').unwrap_or(host.len()),
    };
    let (name, rest) = host.split_at(name_end);
    let port = rest
        .strip_prefix(b":")
        .and_then(|digits| std::str::from_utf8(digits).ok())
        .and_then(|digits| digits.parse().ok());
    (name, port)
}

/// A name of one label that is neither `localhost` nor an address.
fn is_one_label_name(name: &[u8]) -> bool {
    !name.is_empty()
        && !name.contains(&b'.')
        && !name.starts_with(b"[")
        && !name.eq_ignore_ascii_case(b"localhost")
        && !name.iter().all(u8::is_ascii_digit)
}

/// How a peer's connections were addressed: counts of their first
/// requests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Addressing {
    /// HTTP/1.0 requests that named a `User-Agent`.
    pub http10_named: u32,
    /// Requests whose `Host` was an upstream's name ([`HostShape::UpstreamName`]).
    pub upstream_named: u32,
    /// Requests whose `Host` named another port or place
    /// ([`HostShape::Elsewhere`]).
    pub elsewhere: u32,
}

impl Addressing {
    /// A connection's first request: HTTP/1.`minor_version`, naming
    /// `user_agent` (or none), with `host` in its `Host` field, on a
    /// connection to `listening` (`None`: not known, and the `Host` not
    /// judged).
    pub(super) fn note(
        &mut self,
        minor_version: u8,
        named: bool,
        host: Option<&[u8]>,
        listening: Option<Listening>,
    ) {
        if minor_version == 0 && named {
            self.http10_named = self.http10_named.saturating_add(1);
        }
        match listening.map(|on| HostShape::of(host, on)) {
            Some(HostShape::UpstreamName) => {
                self.upstream_named = self.upstream_named.saturating_add(1);
            }
            Some(HostShape::Elsewhere) => self.elsewhere = self.elsewhere.saturating_add(1),
            Some(HostShape::Direct) | None => {}
        }
    }

    /// Adds another record's.
    pub(super) fn merge(&mut self, other: &Addressing) {
        self.http10_named = self.http10_named.saturating_add(other.http10_named);
        self.upstream_named = self.upstream_named.saturating_add(other.upstream_named);
        self.elsewhere = self.elsewhere.saturating_add(other.elsewhere);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAIN_8080: Listening = Listening {
        port: 8080,
        default_port: 80,
    };

    fn shape(host: &str) -> HostShape {
        HostShape::of(Some(host.as_bytes()), PLAIN_8080)
    }

    #[test]
    fn a_host_naming_the_port_reached_is_direct_whatever_the_name() {
        for host in [
            "127.0.0.1:8080",
            "localhost:8080",
            "api.example.com:8080",
            "[::1]:8080",
        ] {
            assert_eq!(shape(host), HostShape::Direct, "{host}");
        }
        assert_eq!(HostShape::of(None, PLAIN_8080), HostShape::Direct);
        // On the default port a client leaves the port out.
        let on_80 = Listening::on(80, false);
        assert_eq!(HostShape::of(Some(b"backend"), on_80), HostShape::Direct);
        let on_443 = Listening::on(443, true);
        assert_eq!(HostShape::of(Some(b"backend"), on_443), HostShape::Direct);
    }

    #[test]
    fn nginx_s_upstream_name_is_told_from_a_port_mapping() {
        // `proxy_pass http://backend;` with `upstream backend { ... }`.
        assert_eq!(shape("backend"), HostShape::UpstreamName);
        assert_eq!(shape("app_servers"), HostShape::UpstreamName);
        // A client's own Host naming somewhere else: `$host`, or a mapping.
        for host in [
            "api.example.com",
            "backend:9000",
            "127.0.0.1:80",
            "localhost",
            "[::1]",
        ] {
            assert_eq!(shape(host), HostShape::Elsewhere, "{host}");
        }
    }

    #[test]
    fn a_peer_s_counts_add_up_and_merge() {
        let mut marks = Addressing::default();
        marks.note(0, true, Some(b"127.0.0.1:8080"), Some(PLAIN_8080));
        marks.note(0, false, None, Some(PLAIN_8080));
        marks.note(1, true, Some(b"backend"), Some(PLAIN_8080));
        marks.note(1, true, Some(b"example.com"), Some(PLAIN_8080));
        marks.note(1, true, Some(b"backend"), None);
        let mut sum = Addressing::default();
        sum.merge(&marks);
        sum.merge(&marks);
        assert_eq!(
            sum,
            Addressing {
                http10_named: 2,
                upstream_named: 2,
                elsewhere: 2,
            }
        );
    }
}
