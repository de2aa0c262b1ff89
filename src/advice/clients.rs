//! The pools people run, told apart by the `User-Agent` they send, and in
//! each the setting that decides how long an idle connection is kept: so
//! advice names the knob (`IdleConnTimeout` on a Go `Transport`) rather
//! than "the pool's idle timeout", and says what to do where there is none
//! (retry the request). Proxies forward their clients' `User-Agent`, so a
//! proxy in front is told by the `Forwarded`, `X-Forwarded-For` or `Via`
//! it adds, and the advice then names the proxies' settings.

use super::trim;

/// A client library (or a proxy) and its idle-timeout setting.
#[derive(Debug, PartialEq, Eq)]
pub struct Client {
    /// What people call it.
    pub name: &'static str,
    setting: Setting,
}

/// How a client is told to keep idle connections at most so long.
#[derive(Debug, PartialEq, Eq)]
enum Setting {
    /// A setting in milliseconds; `{}` is where the value goes.
    Millis(&'static str),
    /// A setting in seconds, fractions allowed; `{}` is where it goes.
    Seconds(&'static str),
    /// A setting in whole seconds (rounded down, never up).
    WholeSeconds(&'static str),
    /// No such setting: what covers a request that loses the race.
    Missing(&'static str),
}

/// `User-Agent` tokens (matched case-insensitively, anywhere in the value)
/// and the client each names, most specific first.
const KNOWN: &[(&str, Client)] = &[
    (
        "undici",
        Client {
            name: "undici",
            setting: Setting::Millis(
                "keepAliveTimeout: {} on its Agent (new Agent({ keepAliveTimeout: {} }))",
            ),
        },
    ),
    (
        "axios/",
        Client {
            name: "axios (Node's http.Agent)",
            setting: Setting::Millis(
                "timeout: {} on the http.Agent it uses (new http.Agent({ keepAlive: true, timeout: {} })); Node also honours Keep-Alive: timeout less a second",
            ),
        },
    ),
    (
        "go-http-client/",
        Client {
            name: "Go net/http",
            setting: Setting::Millis(
                "IdleConnTimeout on its http.Transport ({} * time.Millisecond)",
            ),
        },
    ),
    (
        "python-httpx/",
        Client {
            name: "httpx",
            setting: Setting::Seconds("keepalive_expiry={} in httpx.Limits"),
        },
    ),
    (
        "aiohttp/",
        Client {
            name: "aiohttp",
            setting: Setting::Seconds("keepalive_timeout={} on its TCPConnector"),
        },
    ),
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
        },
    ),
    (
        "java-http-client/",
        Client {
            name: "Java HttpClient",
            setting: Setting::WholeSeconds("-Djdk.httpclient.keepalive.timeout={}"),
        },
    ),
    (
        "okhttp/",
        Client {
            name: "OkHttp",
            setting: Setting::Millis(
                "keepAliveDuration in its ConnectionPool (ConnectionPool(5, {}, TimeUnit.MILLISECONDS))",
            ),
        },
    ),
    (
        "curl/",
        Client {
            name: "curl",
            setting: Setting::WholeSeconds(
                "CURLOPT_MAXAGE_CONN={} in libcurl (the curl tool reuses connections only within \
                 one run)",
            ),
        },
    ),
];

/// Node's built-in `fetch` (undici) sends exactly this.
const NODE_FETCH: Client = Client {
    name: "Node fetch (undici)",
    setting: Setting::Millis(
        "keepAliveTimeout: {} on an undici Agent passed as the dispatcher (setGlobalDispatcher(new \
         Agent({ keepAliveTimeout: {} })))",
    ),
};

/// Proxies in front of a server: their upstream idle timeout settings.
pub const PROXIES: &[Client] = &[
    Client {
        name: "nginx",
        setting: Setting::WholeSeconds("keepalive_timeout {}s; in the upstream block"),
    },
    Client {
        name: "HAProxy",
        setting: Setting::Millis(
            "pool-purge-delay {}ms on the backend's servers (idle connections kept for reuse)",
        ),
    },
    Client {
        name: "Envoy",
        setting: Setting::Millis(
            "idle_timeout: {}ms in the cluster's common_http_protocol_options",
        ),
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
    /// `safe_ms`, as one phrase: "`IdleConnTimeout` … (1900 ms)", or what
    /// covers a race where there is no setting.
    pub fn advice(&self, safe_ms: u64) -> String {
        match self.setting {
            Setting::Millis(template) => template.replace("{}", &safe_ms.to_string()),
            Setting::Seconds(template) => template.replace("{}", &trim(safe_ms as f64 / 1000.0)),
            Setting::WholeSeconds(template) if safe_ms < 1000 => format!(
                "{} (under a second: keep no idle connections)",
                template.replace("{}", "0")
            ),
            Setting::WholeSeconds(template) => {
                template.replace("{}", &(safe_ms / 1000).to_string())
            }
            Setting::Missing(what) => what.to_owned(),
        }
    }

    /// Whether the client has a setting for it at all.
    pub fn has_setting(&self) -> bool {
        !matches!(self.setting, Setting::Missing(_))
    }
}

/// Every client and proxy in the table, once each.
pub fn every() -> impl Iterator<Item = &'static Client> {
    std::iter::once(&NODE_FETCH)
        .chain(KNOWN.iter().map(|(_, client)| client))
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
            java.advice(1900).ends_with("timeout=1"),
            "{}",
            java.advice(1900)
        );
        let requests = recognise("python-requests/2.32").unwrap();
        assert!(!requests.has_setting());
        assert!(requests.advice(1900).contains("retry"));
        let nginx = &PROXIES[0];
        assert!(
            nginx.advice(63_000).contains("keepalive_timeout 63s"),
            "{}",
            nginx.advice(63_000)
        );
    }
}
