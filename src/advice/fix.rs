//! What to change, said in one place for `/peers` and the probe: the safe
//! value as a headline, and the fix in the terms of whoever keeps the pool
//! (a known client's own setting, a proxy's upstream settings, both when
//! it may be a proxy that does not say so: the proxy's first when its
//! requests show one likely, with equal weight when that cannot be told;
//! or every client's and proxy's when the pool's keeper is not known).

use super::clients::{self, Client, PROXIES, UNNAMED};
use super::{PoolLimit, trim};

/// Who keeps the idle connections the advice is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keeper {
    /// A client its `User-Agent` names.
    Client(&'static Client),
    /// A client whose `User-Agent` names none in the table.
    Unknown,
    /// A client that sent no `User-Agent` (Node's `http.Agent` sends none).
    Unnamed,
    /// A proxy: its requests carry `Forwarded`, `Via`, `X-Real-IP` or an
    /// `X-Forwarded-*` field.
    Proxy,
    /// Likely a proxy that adds none of those (nginx by default): its
    /// requests show one ([`Sign`]); the fix is the proxy's first, then
    /// the client's, should there be none.
    ProxyLikely(Sign, Alone),
    /// A proxy that adds none of those, or not ([`Sign`]): which cannot
    /// be told, and both fixes carry equal weight.
    ProxyOrClients(Sign, Alone),
    /// Any pool in front of the server (the probe's advice).
    Anyone,
}

/// Who keeps the pool should no proxy relay the requests: the client as
/// its `User-Agent` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alone {
    Client(&'static Client),
    Unknown,
    Unnamed,
}

impl Alone {
    /// The keeper it is, alone.
    pub fn keeper(self) -> Keeper {
        match self {
            Alone::Client(client) => Keeper::Client(client),
            Alone::Unknown => Keeper::Unknown,
            Alone::Unnamed => Keeper::Unnamed,
        }
    }
}

/// What a peer's requests show of a proxy that adds no forwarding header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sign {
    /// HTTP/1.0 requests naming a client that speaks HTTP/1.1: nginx's
    /// default upstream version (a proxy is likely).
    Downgraded,
    /// A `Host` of one name and no port on another port than the
    /// default: an upstream's name, nginx's `$proxy_host` (likely).
    UpstreamName,
    /// Several User-Agents taking turns on its connections, or some named
    /// one and some none: a proxy, or several clients behind one address.
    AgentsTakeTurns,
    /// A `Host` naming another port or place than the one reached: a
    /// proxy passing its client's `Host` on, or a port mapping.
    HostElsewhere,
}

impl Sign {
    /// What was seen, and what it means.
    fn words(self) -> &'static str {
        match self {
            Sign::Downgraded => {
                "its requests came as HTTP/1.0 while naming a client that speaks HTTP/1.1, as \
                 nginx sends them upstream by default (unless proxy_http_version 1.1)"
            }
            Sign::UpstreamName => {
                "their Host named one name and no port, though they reached another port than \
                 the default, as nginx sends the name in its proxy_pass (an upstream block's) and \
                 no client library drops the port of its URL"
            }
            Sign::AgentsTakeTurns => {
                "This address's connections named several clients (User-Agents taking turns, or \
                 some named one and some none), with no Forwarded, X-Forwarded-For or Via: \
                 likely a proxy that adds none (nginx and HAProxy add none by default), else \
                 several clients behind one address."
            }
            Sign::HostElsewhere => {
                "Their Host named another port or place than the one they reached, with no \
                 Forwarded, X-Forwarded-For or Via: a proxy that passes its clients' Host on and \
                 adds none (nginx with proxy_set_header Host $host), or a port mapping in front \
                 (a Kubernetes Service, docker -p) that relays each client's own connection; \
                 which, cannot be told from here."
            }
        }
    }
}

/// The headline: what a pool in front should do with idle connections,
/// by `limit`; `unrounded` is the value, ms, before it was rounded down.
pub fn headline(limit: PoolLimit, unrounded: f64) -> String {
    match limit {
        PoolLimit::AtMost(safe) => {
            let rounded = match safe as f64 == unrounded.floor() {
                true => String::new(),
                false => format!(
                    ", {:.0} ms rounded down to two significant digits",
                    unrounded.floor()
                ),
            };
            format!(
                "A client or proxy pool in front of this server should close idle connections \
                 after at most {safe} ms ({} s{rounded}).",
                trim(safe as f64 / 1000.0)
            )
        }
        PoolLimit::DoNotPool | PoolLimit::Unknown => "A client or proxy pool in front of this \
            server should keep no idle connections: it closes them too soon to reuse safely."
            .to_owned(),
    }
}

/// What `keeper` should change: its setting for `safe` ms, or (no value
/// known safe) what else covers the race.
pub fn fix(limit: PoolLimit, keeper: Keeper) -> String {
    let Some(safe) = limit.ms() else {
        return "No pool idle timeout is known to be safe: raise the server's keep-alive \
                timeout above how long the client keeps idle connections, or have the client \
                retry a request that meets a closed connection."
            .to_owned();
    };
    match keeper {
        Keeper::Proxy => format!(
            "A proxy forwards these requests: {} ({}).",
            keep(safe, "upstream connections"),
            settings(PROXIES.iter(), safe)
        ),
        Keeper::ProxyLikely(sign, alone) => format!(
            "Likely a proxy that adds no Forwarded, X-Forwarded-For or Via: {}. The fix is the \
             proxy's: {} ({}). Only if no proxy relays these requests, the client's: {}",
            sign.words(),
            keep(safe, "upstream connections"),
            settings(silent_proxies(), safe),
            fix(limit, alone.keeper())
        ),
        Keeper::ProxyOrClients(sign, alone) => format!(
            "{} If a proxy, {} ({}). If the clients: {}",
            sign.words(),
            keep(safe, "upstream connections"),
            settings(PROXIES.iter(), safe),
            fix(limit, alone.keeper())
        ),
        Keeper::Client(client) if safe == 0 => format!(
            "Have {} keep no idle connections: {}.",
            client.name,
            client.advice(0)
        ),
        Keeper::Client(client) if client.can_be_set_to(safe) => format!(
            "Set {}'s {} ({safe} ms or less).",
            client.name,
            client.advice(safe)
        ),
        Keeper::Client(client) => format!(
            "{} cannot be told so: {}.",
            client.name,
            client.advice(safe)
        ),
        Keeper::Unknown if safe == 0 => "Have this client keep no idle connections (turn its \
            pool's keep-alive off, or send Connection: close on each request)."
            .to_owned(),
        Keeper::Unknown => format!(
            "Lower this client's pool idle timeout to {safe} ms or less (or raise the server's \
             keep-alive timeout above how long the client keeps idle connections)."
        ),
        Keeper::Unnamed => format!(
            "This client sent no User-Agent (Node's http.Agent sends none), so which pool it is \
             cannot be told: {} in its own setting ({}), or raise the server's keep-alive \
             timeout above how long it keeps them.",
            keep(safe, "connections"),
            settings(UNNAMED.iter(), safe)
        ),
        Keeper::Anyone if safe == 0 => format!(
            "In a pool in front, keep no idle connections: {}.",
            settings(clients::every(), safe)
        ),
        Keeper::Anyone => format!("In a pool in front: {}.", settings(clients::every(), safe)),
    }
}

/// For a client with lost requests, the other party it may be: a proxy
/// that adds no forwarding header passes its clients' `User-Agent` on, and
/// then the fix is the proxy's. `None` where the keeper is already a proxy
/// or no value is known safe.
pub fn unless_a_proxy(limit: PoolLimit, keeper: Keeper) -> Option<String> {
    let safe = limit.ms()?;
    match keeper {
        Keeper::Client(_) | Keeper::Unknown | Keeper::Unnamed => Some(format!(
            "(If a proxy that adds no X-Forwarded-For relays these requests, as nginx and \
             HAProxy do by default, the fix is the proxy's instead: {} ({}).)",
            keep(safe, "upstream connections"),
            settings(silent_proxies(), safe)
        )),
        Keeper::Proxy | Keeper::ProxyLikely(..) | Keeper::ProxyOrClients(..) | Keeper::Anyone => {
            None
        }
    }
}

/// "keep its idle `what` 1900 ms or less", or at 0 "keep no idle `what`".
fn keep(safe: u64, what: &str) -> String {
    match safe {
        0 => format!("keep no idle {what}"),
        safe => format!("keep its idle {what} {safe} ms or less"),
    }
}

/// The proxies that add no forwarding header unless told to.
fn silent_proxies() -> impl Iterator<Item = &'static Client> {
    PROXIES
        .iter()
        .filter(|proxy| matches!(proxy.name, "nginx" | "HAProxy"))
}

/// Every client's and proxy's setting for `safe` ms, one `- name:
/// setting` line each (the probe's table of a pool in front).
pub fn table(safe: u64) -> String {
    named(clients::every(), safe)
        .map(|line| format!("- {line}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `name: setting` for each of `clients`, joined with "; ".
fn settings<'a>(clients: impl Iterator<Item = &'a Client>, safe: u64) -> String {
    named(clients, safe).collect::<Vec<_>>().join("; ")
}

/// `name: setting` for each of `clients`.
fn named<'a>(clients: impl Iterator<Item = &'a Client>, safe: u64) -> impl Iterator<Item = String> {
    clients.map(move |client| format!("{}: {}", client.name, client.advice(safe)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_keeper_is_told_its_own_setting() {
        let go = clients::recognise("Go-http-client/1.1").unwrap();
        let text = fix(PoolLimit::AtMost(1900), Keeper::Client(go));
        assert!(text.contains("IdleConnTimeout"), "{text}");
        let text = fix(PoolLimit::AtMost(1900), Keeper::Proxy);
        assert!(
            text.contains("nginx: ") && text.contains("Envoy: "),
            "{text}"
        );
        let text = fix(PoolLimit::AtMost(1900), Keeper::Anyone);
        assert!(text.starts_with("In a pool in front: "), "{text}");
        assert!(
            text.contains("httpx: ") && text.contains("HAProxy: "),
            "{text}"
        );
        let text = fix(PoolLimit::AtMost(1900), Keeper::Unnamed);
        for words in ["no User-Agent", "timeout: 1900", "freeSocketTimeout: 1900"] {
            assert!(text.contains(words), "{words:?} not in {text}");
        }
        assert!(text.contains("keepAliveTimeout: 1900"), "{text}");
        assert!(!text.contains("this client's pool idle timeout"), "{text}");
        let go = Alone::Client(go);
        let turns = Keeper::ProxyOrClients(Sign::AgentsTakeTurns, go);
        let text = fix(PoolLimit::AtMost(1900), turns);
        for words in [
            "likely a proxy",
            "keepalive_timeout 1900ms",
            "IdleConnTimeout",
        ] {
            assert!(text.contains(words), "{words:?} not in {text}");
        }
        let hedge = unless_a_proxy(PoolLimit::AtMost(1900), Keeper::Unnamed).unwrap();
        assert!(hedge.contains("nginx: keepalive_timeout 1900ms"), "{hedge}");
        assert!(
            hedge.contains("HAProxy: ") && hedge.contains("retry-on"),
            "{hedge}"
        );
        assert_eq!(unless_a_proxy(PoolLimit::AtMost(1900), Keeper::Proxy), None);
        let text = fix(PoolLimit::Unknown, Keeper::Anyone);
        assert!(text.contains("retry"), "{text}");
    }

    #[test]
    fn a_likely_proxy_is_told_the_proxy_s_fix_first_and_the_client_s_after() {
        let requests = Alone::Client(clients::recognise("python-requests/2.32.3").unwrap());
        let limit = PoolLimit::AtMost(1900);
        for sign in [Sign::Downgraded, Sign::UpstreamName] {
            let text = fix(limit, Keeper::ProxyLikely(sign, requests));
            assert!(text.starts_with("Likely a proxy"), "{text}");
            let nginx = text.find("nginx: keepalive_timeout 1900ms").expect(&text);
            let client = text.find("Retry").expect(&text);
            assert!(nginx < client, "the proxy's fix leads: {text}");
            assert!(text.contains("Only if no proxy relays"), "{text}");
            assert_eq!(
                unless_a_proxy(limit, Keeper::ProxyLikely(sign, requests)),
                None
            );
        }
        // Cannot be told: both, each under its own "If".
        let text = fix(limit, Keeper::ProxyOrClients(Sign::HostElsewhere, requests));
        for words in [
            "cannot be told",
            "If a proxy, ",
            "If the clients: ",
            "Retry",
        ] {
            assert!(text.contains(words), "{words:?} not in {text}");
        }
        // No User-Agent: the clients' fix is the unnamed pools'.
        let text = fix(
            limit,
            Keeper::ProxyLikely(Sign::UpstreamName, Alone::Unnamed),
        );
        assert!(text.contains("freeSocketTimeout: 1900"), "{text}");
    }

    #[test]
    fn the_headline_says_keep_none_at_zero() {
        let none = headline(PoolLimit::DoNotPool, 0.4);
        assert!(none.contains("keep no idle connections"), "{none}");
        let text = headline(PoolLimit::AtMost(1900), 1939.5);
        assert!(
            text.contains("at most 1900 ms (1.9 s, 1939 ms rounded down"),
            "{text}"
        );
    }

    #[test]
    fn the_table_lists_every_client_and_proxy_once() {
        let table = table(1900);
        for name in [
            "Go net/http",
            "httpx",
            "nginx",
            "Envoy",
            "Node fetch (undici)",
        ] {
            let line = format!("- {name}: ");
            assert_eq!(table.matches(&line).count(), 1, "{name} in {table}");
        }
    }
}
