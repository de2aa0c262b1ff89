//! The pools people run, told apart by the `User-Agent` they send, and in
//! each the setting that decides how long an idle connection is kept: so
//! advice names the knob (`IdleConnTimeout` on a Go `Transport`) rather
//! than "the pool's idle timeout", and says what to do where there is none
//! (retry the request). Proxies forward their clients' `User-Agent`, so a
//! proxy in front is told by the `Forwarded`, `X-Forwarded-For` or `Via`
//! it adds, and the advice then names the proxies' settings. Clients that
//! send no `User-Agent` at all (Node's `http.Agent`) get [`UNNAMED`]'s.
//!
//! Each entry was checked against its own documentation for its unit, its
//! meaning and where it is set (the source is named beside it), and each
//! that installs here was run as the real client against this server
//! closing at exactly 2 s (tests/advice_clients.rs; docs/lab.md has the
//! table of how each entry was checked): the setting for 1,900 ms kept
//! every reuse under it, and the "do not pool" setting opened a
//! connection per request. Each has that "do not pool" setting, told
//! where the safe value is 0: several read a 0 timeout as "no limit" (Go,
//! Node, Envoy) and OkHttp refuses one. The whole-second settings are
//! checked coarsely and were seen to reuse connections past their value
//! (libcurl up to a second, the JDK 1.6 s and by its source up to 3 s),
//! so they are told that much less, and where no whole second is that
//! low the retry or "do not pool" instead.

use super::trim;

/// A client library (or a proxy) and its idle-timeout setting.
#[derive(Debug, PartialEq, Eq)]
pub struct Client {
    /// What people call it.
    pub name: &'static str,
    setting: Setting,
    /// How it is told to keep no idle connections at all, in its own
    /// terms (a value of 0 means "no limit" to several of them).
    no_pool: &'static str,
}

/// How a client is told to keep idle connections at most so long; `{}` is
/// where the value goes, in the setting's unit.
#[derive(Debug, PartialEq, Eq)]
enum Setting {
    /// A setting in milliseconds.
    Millis(&'static str),
    /// A setting in seconds, fractions allowed.
    Seconds(&'static str),
    /// A setting in whole seconds, checked coarsely: set to N it may reuse
    /// a connection idle up to `late_s` seconds past N (`why` says how
    /// and what was seen), so N is `late_s` under the safe value; `retry`
    /// is what covers the race where no N is that low.
    WholeSeconds {
        template: &'static str,
        late_s: u64,
        why: &'static str,
        retry: &'static str,
    },
    /// nginx's time: whole seconds as `2s`, else milliseconds (`1900ms`),
    /// never rounded to a second (a 1 s server is not told `0s`).
    NginxTime(&'static str),
    /// No idle timeout to set: what covers a request that loses the race
    /// (`{}`, if present, is the safe value in ms).
    Missing(&'static str),
}

/// `User-Agent` tokens (matched case-insensitively, anywhere in the value)
/// and the client each names, most specific first.
const KNOWN: &[(&str, Client)] = &[
    // undici docs/api/Client.md: keepAliveTimeout, ms, "may be overridden
    // by keep-alive hints from the server" up to keepAliveMaxTimeout.
    ("undici", UNDICI),
    // axios takes an http.Agent as `httpAgent`: Node's, below.
    (
        "axios/",
        Client {
            name: "axios (Node's http.Agent)",
            setting: Setting::Millis(
                "timeout: {} on the http.Agent passed as httpAgent (new http.Agent({ keepAlive: \
                 true, timeout: {} })); Node lowers it to a server's Keep-Alive: timeout less a \
                 second",
            ),
            no_pool: "keepAlive: false on the http.Agent passed as httpAgent (new http.Agent({ \
             keepAlive: false }))",
        },
    ),
    // Go net/http Transport.IdleConnTimeout, a time.Duration; zero: no limit.
    (
        "go-http-client/",
        Client {
            name: "Go net/http",
            setting: Setting::Millis(
                "IdleConnTimeout on its http.Transport ({} * time.Millisecond)",
            ),
            no_pool: "DisableKeepAlives: true on its http.Transport",
        },
    ),
    // httpx.Limits(keepalive_expiry=...): float seconds.
    (
        "python-httpx/",
        Client {
            name: "httpx",
            setting: Setting::Seconds("keepalive_expiry={} in httpx.Limits"),
            no_pool: "max_keepalive_connections=0 in httpx.Limits",
        },
    ),
    // aiohttp TCPConnector(keepalive_timeout=...): float seconds.
    (
        "aiohttp/",
        Client {
            name: "aiohttp",
            setting: Setting::Seconds("keepalive_timeout={} on its TCPConnector"),
            no_pool: "force_close=True on its TCPConnector",
        },
    ),
    // requests/urllib3: no idle expiry in the pool; HTTPAdapter(max_retries)
    // takes a urllib3 Retry; allowed_methods=None retries any method.
    (
        "python-requests/",
        Client {
            name: "python-requests",
            setting: Setting::Missing(
                "requests (urllib3) keeps idle connections with no time limit: retry a request \
                 that meets a closed connection (an HTTPAdapter with max_retries=urllib3.Retry(\
                 total=2, allowed_methods=None) for requests that are safe to repeat), or send \
                 Connection: close when calls are further apart than the server's timeout",
            ),
            no_pool: "send Connection: close on each request (session.headers[\"Connection\"] = \
                 \"close\")",
        },
    ),
    (
        "python-urllib3/",
        Client {
            name: "urllib3",
            setting: Setting::Missing(
                "urllib3 keeps idle connections with no time limit: retry a request that meets a \
                 closed connection (urllib3.Retry on the PoolManager, for requests safe to \
                 repeat)",
            ),
            no_pool: "send Connection: close on each request (headers={\"Connection\": \"close\"})",
        },
    ),
    // java.net.http module docs: jdk.httpclient.keepalive.timeout, whole
    // seconds (default 30); values <= 0 were unspecified until JDK-8371950.
    // HttpClientImpl.SelectorManager purges expired pooled connections
    // only when its selector wakes, which waits up to 3 s (NODEADLINE,
    // "keep-alive have seconds granularity") when nothing else is due.
    // Tried: tests/advice_clients.rs (Connection: close; the rule at 5 s).
    (
        "java-http-client/",
        Client {
            name: "Java HttpClient",
            setting: Setting::WholeSeconds {
                template: "-Djdk.httpclient.keepalive.timeout={}",
                late_s: 3,
                why: "it drops an expired idle connection only when its selector thread next \
                      wakes, which can be 3 s later: JDK 17.0.15 set to 1 reused connections \
                      idle up to 1,996 ms at a 2 s server, a request lost and retried, and \
                      2,606 ms at a 6 s one",
                retry: "retry a request that fails with an IOException on a reused connection \
                        (for requests safe to repeat)",
            },
            no_pool: "send Connection: close on each request (a restricted header: allow it with \
                      -Djdk.httpclient.allowRestrictedHeaders=connection)",
        },
    ),
    // OkHttp ConnectionPool(maxIdleConnections, keepAliveDuration, TimeUnit).
    // Tried: tests/advice_clients.rs (Debian's OkHttp 3.13.1).
    (
        "okhttp/",
        Client {
            name: "OkHttp",
            setting: Setting::Millis(
                "keepAliveDuration in its ConnectionPool (ConnectionPool(5, {}, TimeUnit.MILLISECONDS))",
            ),
            no_pool: "ConnectionPool(0, 1, TimeUnit.SECONDS) (no idle connection kept; OkHttp \
                      refuses a keepAliveDuration of 0)",
        },
    ),
    // libcurl CURLOPT_MAXAGE_CONN: long, seconds idle allowed for reuse
    // (default 118); an older cached connection is closed instead. Its
    // check compares whole seconds, the fraction dropped. Tried:
    // tests/advice_clients.rs (FORBID_REUSE; the rule at 3 s).
    (
        "curl/",
        Client {
            name: "curl",
            setting: Setting::WholeSeconds {
                template: "CURLOPT_MAXAGE_CONN={} in libcurl (the curl tool reuses connections \
                           only within one run)",
                late_s: 1,
                why: "it compares whole seconds of idle time, the fraction dropped: libcurl \
                      7.88.1 set to 1 reused connections idle up to 1,999 ms",
                retry: "retry a request that fails with CURLE_GOT_NOTHING or \
                        CURLE_SEND_ERROR on a reused connection (for requests safe to repeat)",
            },
            no_pool: "CURLOPT_FORBID_REUSE=1 in libcurl",
        },
    ),
];

/// undici's `Agent` (and `Pool`, `Client`): its own setting, and the cap on
/// what a server's `Keep-Alive` hint may raise it to.
const UNDICI: Client = Client {
    name: "undici",
    setting: Setting::Millis(
        "keepAliveTimeout: {} and keepAliveMaxTimeout: {} on its Agent (new Agent({ \
         keepAliveTimeout: {}, keepAliveMaxTimeout: {} }); a server's Keep-Alive hint overrides \
         the first, up to the second)",
    ),
    no_pool: "pipelining: 0 on its Agent (new Agent({ pipelining: 0 }): 0 disables keep-alive)",
};

/// Node's built-in `fetch` (undici) sends exactly this.
const NODE_FETCH: Client = Client {
    name: "Node fetch (undici)",
    setting: Setting::Millis(
        "keepAliveTimeout: {} and keepAliveMaxTimeout: {} on an undici Agent passed as the \
         dispatcher (setGlobalDispatcher(new Agent({ keepAliveTimeout: {}, keepAliveMaxTimeout: \
         {} })))",
    ),
    no_pool: "pipelining: 0 on an undici Agent passed as the dispatcher \
              (setGlobalDispatcher(new Agent({ pipelining: 0 })): 0 disables keep-alive)",
};

/// The pools of clients that send no `User-Agent` by default, for a peer
/// that sent none: which one it is cannot be told, so each is named.
pub const UNNAMED: &[Client] = &[
    // Node lib/_http_agent.js keepSocketAlive: a free socket's timeout is
    // the agent's `timeout` option (ms), lowered to a server's Keep-Alive
    // hint less agentKeepAliveTimeoutBuffer (1 s); the socket is destroyed
    // when it fires.
    Client {
        name: "Node http.Agent",
        setting: Setting::Millis(
            "timeout: {} on the agent (new http.Agent({ keepAlive: true, timeout: {} }))",
        ),
        no_pool: "keepAlive: false on the agent (new http.Agent({ keepAlive: false }))",
    },
    // agentkeepalive README: freeSocketTimeout, ms (default 4000).
    Client {
        name: "agentkeepalive",
        setting: Setting::Millis("freeSocketTimeout: {} on its Agent"),
        no_pool: "keepAlive: false on its Agent",
    },
    UNDICI,
    // reqwest ClientBuilder::pool_idle_timeout (hyper's), Option<Duration>,
    // default 90 s. Tried by hand (0.12.28): docs/lab.md.
    Client {
        name: "reqwest",
        setting: Setting::Millis(
            "pool_idle_timeout(Duration::from_millis({})) on its ClientBuilder",
        ),
        no_pool: "pool_max_idle_per_host(0) on its ClientBuilder",
    },
];

/// Proxies in front of a server: their upstream idle timeout settings.
pub const PROXIES: &[Client] = &[
    // nginx ngx_http_upstream_module: keepalive_timeout (context upstream,
    // 1.15.3+, default 60s) takes a time with its unit; `970ms` passes
    // `nginx -t` (1.22.1), `1.9s` does not. Needs `keepalive N;` too.
    Client {
        name: "nginx",
        setting: Setting::NginxTime(
            "keepalive_timeout {}; in the upstream block (beside keepalive N;)",
        ),
        no_pool: "no keepalive directive in the upstream block (nginx then closes each \
                  upstream connection after its response)",
    },
    // HAProxy 2.6 configuration.txt: pool-purge-delay, a server-line
    // option, "Each <delay> interval, half of the idle connections are
    // closed" (not an idle timeout); retry-on (empty-response: "the server
    // connection was closed after part of the request was sent, and
    // nothing was received"), retries, http-reuse (backend). In front of
    // this server at a 200 ms boundary, 9,600 requests a run: 5 and 7 lost
    // by default, 0 and 0 with retry-on conn-failure empty-response and
    // retries 3, 2 and 1 with pool-purge-delay 100ms.
    Client {
        name: "HAProxy",
        setting: Setting::Missing(
            "it has no idle timeout for server connections: put retry-on conn-failure \
             empty-response and retries 3 in the backend (it replays a request that met a \
             closed connection: only for requests safe to repeat) and keep http-reuse safe (the \
             default: a client's first request goes on a new connection); pool-purge-delay (on \
             the server line) is no idle timeout: each delay it closes half of the idle \
             connections, so one can outlive several delays and the server's timeout (a delay \
             well under {} ms makes that rarer, never impossible)",
        ),
        no_pool: "option http-server-close in the backend (it closes the server connection \
                  after each response)",
    },
    // Envoy (not tried: not in Debian): idle_timeout (a protobuf Duration,
    // written "1.9s") in common_http_protocol_options, under the cluster's
    // typed_extension_protocol_options keyed by
    // envoy.extensions.upstreams.http.v3.HttpProtocolOptions; default 1 h.
    Client {
        name: "Envoy",
        setting: Setting::Seconds(
            "idle_timeout: {}s in common_http_protocol_options of the cluster's \
             envoy.extensions.upstreams.http.v3.HttpProtocolOptions \
             (typed_extension_protocol_options)",
        ),
        no_pool: "max_requests_per_connection: 1 in common_http_protocol_options of the \
                  cluster's envoy.extensions.upstreams.http.v3.HttpProtocolOptions (one request \
                  per upstream connection)",
    },
];

/// The client a `User-Agent` names, if it is one of the known ones.
pub fn recognise(user_agent: &str) -> Option<&'static Client> {
    if user_agent.trim() == "node" {
        return Some(&NODE_FETCH);
    }
    let lower = user_agent.to_ascii_lowercase();
    KNOWN
        .iter()
        .find(|(token, _)| lower.contains(token))
        .map(|(_, client)| client)
}

impl Client {
    /// What this client should set to keep idle connections at most
    /// `safe_ms`, as one phrase: "`IdleConnTimeout` … (1900 ms)"; at 0 its
    /// own "do not pool" setting (never a 0 it would read as "no limit");
    /// where its setting cannot go so low, or there is none, what covers
    /// a request that loses the race.
    pub fn advice(&self, safe_ms: u64) -> String {
        if safe_ms == 0 {
            return self.no_pool.to_owned();
        }
        let ms = safe_ms.to_string();
        match self.setting {
            Setting::Millis(template) | Setting::Missing(template) => template.replace("{}", &ms),
            Setting::Seconds(template) => template.replace("{}", &trim(safe_ms as f64 / 1000.0)),
            Setting::WholeSeconds {
                late_s, why, retry, ..
            } if whole_seconds_under(safe_ms, late_s) == 0 => format!(
                "its setting takes whole seconds and may let a connection be reused up to \
                 {late_s} s past it ({why}), so it cannot keep one under {ms} ms: {retry}, or \
                 keep no idle connections: {}",
                self.no_pool
            ),
            Setting::WholeSeconds {
                template, late_s, ..
            } => format!(
                "{}; {late_s} s under {ms} ms, as it may reuse a connection idle up to {late_s} s \
                 past its setting",
                template.replace("{}", &whole_seconds_under(safe_ms, late_s).to_string())
            ),
            Setting::NginxTime(template) => match safe_ms % 1000 {
                0 => template.replace("{}", &format!("{}s", safe_ms / 1000)),
                _ => template.replace("{}", &format!("{safe_ms}ms")),
            },
        }
    }

    /// Whether the client can be told to keep idle connections at most
    /// `safe_ms` > 0 (it has such a setting, fine enough for the value).
    pub fn can_be_set_to(&self, safe_ms: u64) -> bool {
        match self.setting {
            Setting::Missing(_) => false,
            Setting::WholeSeconds { late_s, .. } => whole_seconds_under(safe_ms, late_s) > 0,
            _ => safe_ms > 0,
        }
    }

    /// How it is told to keep no idle connections at all.
    pub fn no_pool(&self) -> &'static str {
        self.no_pool
    }
}

/// The whole-second setting that keeps a connection under `safe_ms` where
/// it may be reused up to `late_s` seconds past the setting: 0 if none.
fn whole_seconds_under(safe_ms: u64, late_s: u64) -> u64 {
    (safe_ms / 1000).saturating_sub(late_s)
}

/// Every client and proxy in the table, once each.
pub fn every() -> impl Iterator<Item = &'static Client> {
    std::iter::once(&NODE_FETCH)
        .chain(KNOWN.iter().map(|(_, client)| client))
        .chain(UNNAMED.iter().filter(|client| **client != UNDICI))
        .chain(PROXIES)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn common_clients_are_recognised_by_their_user_agent() {
        let name = |ua| recognise(ua).map(|c| c.name);
        assert_eq!(name("Go-http-client/1.1"), Some("Go net/http"));
        assert_eq!(name("python-httpx/0.27.0"), Some("httpx"));
        assert_eq!(name("python-requests/2.32.3"), Some("python-requests"));
        assert_eq!(name("Python/3.11 aiohttp/3.9.5"), Some("aiohttp"));
        assert_eq!(name("Java-http-client/17.0.15"), Some("Java HttpClient"));
        assert_eq!(name("okhttp/4.12.0"), Some("OkHttp"));
        assert_eq!(name("curl/8.5.0"), Some("curl"));
        assert_eq!(name("axios/1.7.2"), Some("axios (Node's http.Agent)"));
        assert_eq!(name("node"), Some("Node fetch (undici)"));
        assert_eq!(name("Mozilla/5.0 (X11; Linux x86_64)"), None);
    }

    #[test]
    fn the_advice_names_the_setting_in_its_unit() {
        let go = recognise("Go-http-client/1.1").unwrap();
        assert!(
            go.advice(1900).contains("IdleConnTimeout"),
            "{}",
            go.advice(1900)
        );
        assert!(go.advice(1900).contains("1900"));
        let httpx = recognise("python-httpx/0.27").unwrap();
        assert!(
            httpx.advice(1900).contains("keepalive_expiry=1.9"),
            "{}",
            httpx.advice(1900)
        );
        let java = recognise("Java-http-client/17").unwrap();
        assert!(
            java.advice(60_000).contains("timeout=57;"),
            "{}",
            java.advice(60_000)
        );
        let requests = recognise("python-requests/2.32").unwrap();
        assert!(!requests.can_be_set_to(1900) && !requests.can_be_set_to(60_000));
        assert!(requests.advice(1900).contains("retry"));
    }

    fn proxy(name: &str) -> &'static Client {
        PROXIES.iter().find(|p| p.name == name).unwrap()
    }

    #[test]
    fn nginx_is_told_milliseconds_where_seconds_would_round_down() {
        let nginx = proxy("nginx");
        // `keepalive_timeout 970ms;` passes `nginx -t`; `0s` would keep
        // no idle connections at all, `1s` lose half of 1900.
        for (safe, says) in [(970, "970ms;"), (1900, "1900ms;"), (63_000, "63s;")] {
            let text = nginx.advice(safe);
            assert!(
                text.contains(&format!("keepalive_timeout {says}")),
                "{text}"
            );
        }
        assert!(!nginx.advice(970).contains("0s"), "{}", nginx.advice(970));
    }

    #[test]
    fn haproxy_is_told_what_it_has_not_a_purge_delay_as_a_timeout() {
        let haproxy = proxy("HAProxy");
        assert!(!haproxy.can_be_set_to(970));
        let text = haproxy.advice(970);
        for words in [
            "retry-on conn-failure empty-response",
            "retries",
            "http-reuse safe",
        ] {
            assert!(text.contains(words), "{words:?} not in {text}");
        }
        assert!(!text.contains("pool-purge-delay 970"), "{text}");
        assert!(text.contains("half of the idle connections"), "{text}");
    }

    #[test]
    fn settings_are_written_in_their_own_units() {
        let envoy = proxy("Envoy").advice(1900);
        assert!(envoy.contains("idle_timeout: 1.9s"), "{envoy}");
        let undici = recognise("undici").unwrap().advice(1900);
        assert!(undici.contains("keepAliveMaxTimeout: 1900"), "{undici}");
        // Whole seconds cannot say 700 ms: no `=0`, what to do instead.
        let java = recognise("Java-http-client/17").unwrap();
        assert!(!java.can_be_set_to(700));
        assert!(
            !java.advice(700).contains("timeout=0"),
            "{}",
            java.advice(700)
        );
        let curl = recognise("curl/8.5.0").unwrap().advice(700);
        assert!(curl.contains("CURLOPT_FORBID_REUSE"), "{curl}");
    }

    /// Words no client may be told: a value a client refuses or reads as
    /// "no limit", a plural for one.
    const NEVER: &[&str] = &["(0 *", "under 0 ms", "ConnectionPool(5, 0,", "1 requests"];
    /// Settings no client may be told to set to 0.
    const NEVER_ZERO: &[&str] = &[
        "timeout: ",
        "Timeout: ",
        "idle_timeout: ",
        "keepalive_expiry=",
        "keepalive_timeout=",
        "keepalive.timeout=",
        "MAXAGE_CONN=",
        "keepalive_timeout ",
        "from_millis(",
    ];

    /// `text` sets `setting` to the digit `value` (not 0.5, not 500).
    fn sets(text: &str, setting: &str, value: char) -> bool {
        text.match_indices(setting).any(|(at, _)| {
            let mut after = text[at + setting.len()..].chars();
            after.next() == Some(value)
                && after.next().is_none_or(|c| !c.is_ascii_digit() && c != '.')
        })
    }

    #[test]
    fn every_client_is_told_values_it_can_keep_in_its_own_terms() {
        use crate::advice::PoolLimit;
        use crate::advice::fix::{Keeper, fix, table};
        for client in every() {
            for safe in [0, 500, 1900, 60_000] {
                let limit = PoolLimit::from(Some(safe));
                let words = [
                    client.advice(safe),
                    fix(limit, Keeper::Client(client)),
                    table(safe),
                ];
                for text in &words {
                    for never in NEVER {
                        assert!(!text.contains(never), "{never:?} in {text}");
                    }
                    for setting in NEVER_ZERO {
                        assert!(!sets(text, setting, '0'), "{setting:?}0 in {text}");
                    }
                }
                let coarse = matches!(client.setting, Setting::WholeSeconds { .. });
                let out_of_reach = safe == 0 || (coarse && safe < 2000);
                if out_of_reach {
                    for text in &words[..2] {
                        assert!(
                            text.contains(client.no_pool),
                            "{} {safe}: {text}",
                            client.name
                        );
                    }
                }
                if coarse {
                    // Never the whole seconds that were seen to fail: 1 s
                    // of setting reused connections idle up to 1,999 ms.
                    for setting in ["keepalive.timeout=", "MAXAGE_CONN="] {
                        assert!(!sets(&words[0], setting, '1'), "{}", words[0]);
                    }
                }
            }
        }
        let java = recognise("Java-http-client/17").unwrap();
        assert!(
            java.advice(1900)
                .contains("allowRestrictedHeaders=connection")
        );
        // Set to 1 it reused a connection idle 2,606 ms: never 1 below
        // 4 s, and 3 s under from there.
        assert!(!java.can_be_set_to(3999), "{}", java.advice(3999));
        assert!(!sets(&java.advice(3999), "keepalive.timeout=", '1'));
        assert!(java.advice(4000).contains("keepalive.timeout=1;"));
        let curl = recognise("curl/8.5.0").unwrap();
        assert!(curl.advice(2000).contains("MAXAGE_CONN=1 "));
        assert!(java.advice(1900).contains("retry"));
        let go = recognise("Go-http-client/1.1").unwrap();
        assert!(go.advice(0).contains("DisableKeepAlives: true"));
        let node = UNNAMED
            .iter()
            .find(|c| c.name == "Node http.Agent")
            .unwrap();
        assert!(node.advice(0).contains("keepAlive: false"));
    }
}
