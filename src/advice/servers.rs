//! The other hop's advice: which server a service is, from what it says of
//! itself, and its own idle-timeout setting written with a value. Pure: the
//! probe reads the response head, this module only decides and words.
//!
//! The table holds one row per server: how it is recognised (its `Server`
//! field, or a fingerprint when it sends none) and the setting that bounds
//! how long it keeps an idle connection, with where that setting lives.
//! A service it cannot tell gets every row.

/// What a response head says of the server that sent it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Head {
    /// The `Server` field.
    pub server: Option<String>,
    /// `Keep-Alive: timeout=N`, seconds.
    pub keep_alive_timeout: Option<u64>,
    /// The field names in the order sent (lower case); empty when not read.
    pub field_names: Vec<String>,
    /// The `Content-Type` field.
    pub content_type: Option<String>,
    /// `X-Powered-By` (Express sets it).
    pub powered_by: Option<String>,
}

/// A server the table knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    Node,
    Uvicorn,
    Gunicorn,
    Hypercorn,
    Waitress,
    Go,
    Tomcat,
    Puma,
    Nginx,
    Apache,
    Caddy,
    Lighttpd,
    KeepaliveServer,
}

/// Every row, in the order the list gives them.
pub const ALL: [Service; 13] = [
    Service::Node,
    Service::Uvicorn,
    Service::Gunicorn,
    Service::Hypercorn,
    Service::Waitress,
    Service::Go,
    Service::Tomcat,
    Service::Puma,
    Service::Nginx,
    Service::Apache,
    Service::Caddy,
    Service::Lighttpd,
    Service::KeepaliveServer,
];

/// `Server` field prefixes (lower case) and whose they are; the first
/// match wins, so Tomcat's `Apache-Coyote` comes before Apache's.
const SERVER_FIELDS: [(&str, Service); 14] = [
    ("keepalive-server", Service::KeepaliveServer),
    ("uvicorn", Service::Uvicorn),
    ("gunicorn", Service::Gunicorn),
    ("hypercorn", Service::Hypercorn),
    ("waitress", Service::Waitress),
    ("apache-coyote", Service::Tomcat),
    ("apache tomcat", Service::Tomcat),
    ("puma", Service::Puma),
    ("nginx", Service::Nginx),
    ("openresty", Service::Nginx),
    ("apache", Service::Apache),
    ("caddy", Service::Caddy),
    ("lighttpd", Service::Lighttpd),
    ("node", Service::Node),
];

/// Which server sent `head`, when it can be told.
///
/// With no `Server` field: Express's `X-Powered-By` is Node; `Keep-Alive:
/// timeout=N` with `Keep-Alive` sent before the body's length is Node's
/// order (this server sends `Content-Length` first, and says
/// `Content-Type: text/plain`); `Date` first, then the fields in
/// alphabetical order and a sniffed `…; charset=utf-8` type, with no
/// `Connection` field, is Go's `net/http`.
pub fn identify(head: &Head) -> Option<Service> {
    if let Some(server) = &head.server {
        let server = server.to_ascii_lowercase();
        return SERVER_FIELDS
            .iter()
            .find(|(prefix, _)| server.starts_with(prefix))
            .map(|&(_, service)| service);
    }
    if head
        .powered_by
        .as_deref()
        .is_some_and(|by| by.eq_ignore_ascii_case("express"))
    {
        return Some(Service::Node);
    }
    let position = |name: &str| head.field_names.iter().position(|n| n == name);
    let length = position("content-length").or(position("transfer-encoding"));
    if head.keep_alive_timeout.is_some() {
        return match (position("keep-alive"), length) {
            (Some(keep_alive), Some(length)) if keep_alive < length => Some(Service::Node),
            (Some(_), Some(_)) if head.content_type.as_deref() == Some("text/plain") => {
                Some(Service::KeepaliveServer)
            }
            _ => None,
        };
    }
    let sorted_after_date =
        head.field_names.first().is_some_and(|n| n == "date") && head.field_names[1..].is_sorted();
    let sniffed = head
        .content_type
        .as_deref()
        .is_some_and(|t| t.ends_with("; charset=utf-8"));
    (sorted_after_date && sniffed && position("connection").is_none()).then_some(Service::Go)
}

impl Service {
    /// The server's name as the advice says it.
    pub fn name(self) -> &'static str {
        match self {
            Service::Node => "Node.js (http.Server)",
            Service::Uvicorn => "uvicorn",
            Service::Gunicorn => "gunicorn",
            Service::Hypercorn => "Hypercorn",
            Service::Waitress => "waitress",
            Service::Go => "Go net/http",
            Service::Tomcat => "Tomcat",
            Service::Puma => "Puma",
            Service::Nginx => "nginx",
            Service::Apache => "Apache httpd",
            Service::Caddy => "Caddy",
            Service::Lighttpd => "lighttpd",
            Service::KeepaliveServer => "keepalive-server",
        }
    }

    /// A short key for the JSON.
    pub fn key(self) -> &'static str {
        match self {
            Service::Node => "node",
            Service::Uvicorn => "uvicorn",
            Service::Gunicorn => "gunicorn",
            Service::Hypercorn => "hypercorn",
            Service::Waitress => "waitress",
            Service::Go => "go",
            Service::Tomcat => "tomcat",
            Service::Puma => "puma",
            Service::Nginx => "nginx",
            Service::Apache => "apache",
            Service::Caddy => "caddy",
            Service::Lighttpd => "lighttpd",
            Service::KeepaliveServer => "keepalive-server",
        }
    }

    /// The setting's name alone.
    pub fn setting(self) -> &'static str {
        match self {
            Service::Node => "server.keepAliveTimeout",
            Service::Uvicorn => "--timeout-keep-alive",
            Service::Gunicorn => "--keep-alive",
            Service::Hypercorn => "keep_alive_timeout",
            Service::Waitress => "channel_timeout",
            Service::Go => "http.Server.IdleTimeout",
            Service::Tomcat => "keepAliveTimeout",
            Service::Puma => "persistent_timeout",
            Service::Nginx => "keepalive_timeout",
            Service::Apache => "KeepAliveTimeout",
            Service::Caddy => "idle",
            Service::Lighttpd => "server.max-keep-alive-idle",
            Service::KeepaliveServer => "--keep-alive-timeout",
        }
    }

    /// The setting at `seconds`, written as it is set, and what to know.
    pub fn set_to(self, seconds: u64) -> String {
        let ms = seconds * 1000;
        match self {
            Service::Node => format!(
                "server.keepAliveTimeout = {ms}; server.headersTimeout = {}; (headersTimeout \
                 above it; Node closes an idle connection about 1 s after keepAliveTimeout, a \
                 buffer of its own, and advertises keepAliveTimeout: set keepAliveTimeout itself \
                 above the balancer's, and leave the buffer as grace)",
                ms + 1000
            ),
            Service::Uvicorn => format!(
                "uvicorn --timeout-keep-alive {seconds} (timeout_keep_alive={seconds} in \
                 uvicorn.run or uvicorn.Config)"
            ),
            Service::Gunicorn => format!(
                "gunicorn --keep-alive {seconds} (keepalive = {seconds} in the config file; the \
                 sync worker keeps no connections alive at all)"
            ),
            Service::Hypercorn => format!(
                "keep_alive_timeout = {seconds} in Hypercorn's config (--keep-alive {seconds} on \
                 its command line)"
            ),
            Service::Waitress => format!(
                "channel_timeout={seconds} (serve(app, channel_timeout={seconds}) or \
                 --channel-timeout={seconds}; waitress closes in passes every cleanup_interval, \
                 so later, never sooner)"
            ),
            Service::Go => format!(
                "http.Server.IdleTimeout = {seconds} * time.Second (IdleTimeout: in the \
                 http.Server literal; when it is zero, ReadTimeout is used)"
            ),
            Service::Tomcat => format!(
                "keepAliveTimeout=\"{ms}\" on the Connector, in ms (Spring Boot: \
                 server.tomcat.keep-alive-timeout={seconds}s)"
            ),
            Service::Puma => format!("persistent_timeout {seconds} in config/puma.rb"),
            Service::Nginx => format!("keepalive_timeout {seconds}s; in its http or server block"),
            Service::Apache => format!("KeepAliveTimeout {seconds} (with KeepAlive On)"),
            Service::Caddy => format!(
                "idle {seconds}s in the Caddyfile's global options: servers {{ timeouts {{ idle \
                 {seconds}s }} }}"
            ),
            Service::Lighttpd => format!(
                "server.max-keep-alive-idle = {seconds} (lighttpd compares whole-second stamps \
                 once a second, so it may close up to a second sooner)"
            ),
            Service::KeepaliveServer => format!("--keep-alive-timeout {seconds}s"),
        }
    }
}

impl Service {
    /// What a check shorter than the server's close passes can miss, for
    /// a server known to close idle connections in passes far apart.
    pub fn passes(self) -> Option<&'static str> {
        (self == Service::Waitress).then_some(
            "waitress closes idle connections in passes every cleanup_interval (30 s by \
             default), anywhere from channel_timeout to a pass later: a check shorter than a \
             pass can miss its earliest close, so see that channel_timeout itself is above the \
             balancer's timeout.",
        )
    }
}

/// Every row at `seconds`, "name: setting" each, for a service that could
/// not be told.
pub fn every_setting(seconds: u64) -> String {
    ALL.iter()
        .map(|service| format!("{}: {}", service.name(), service.set_to(seconds)))
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(server: Option<&str>, timeout: Option<u64>, names: &[&str]) -> Head {
        Head {
            server: server.map(str::to_owned),
            keep_alive_timeout: timeout,
            field_names: names.iter().map(|n| (*n).to_owned()).collect(),
            ..Head::default()
        }
    }

    #[test]
    fn server_fields_name_their_server() {
        for (field, service) in [
            ("nginx/1.24.0", Service::Nginx),
            ("uvicorn", Service::Uvicorn),
            ("gunicorn/21.2.0", Service::Gunicorn),
            ("hypercorn-h11", Service::Hypercorn),
            ("waitress", Service::Waitress),
            ("Apache-Coyote/1.1", Service::Tomcat),
            ("Apache/2.4.58 (Unix)", Service::Apache),
            ("Caddy", Service::Caddy),
            ("Puma 6.4", Service::Puma),
            ("openresty", Service::Nginx),
            ("lighttpd/1.4.69", Service::Lighttpd),
        ] {
            assert_eq!(
                identify(&head(Some(field), None, &[])),
                Some(service),
                "{field}"
            );
        }
        assert_eq!(identify(&head(Some("Microsoft-IIS/10.0"), None, &[])), None);
    }

    #[test]
    fn fingerprints_tell_node_ours_and_go_apart() {
        let node = head(
            None,
            Some(5),
            &["date", "connection", "keep-alive", "content-length"],
        );
        assert_eq!(identify(&node), Some(Service::Node));
        let ours = Head {
            content_type: Some("text/plain".into()),
            ..head(
                None,
                Some(5),
                &[
                    "date",
                    "content-type",
                    "content-length",
                    "connection",
                    "keep-alive",
                ],
            )
        };
        assert_eq!(identify(&ours), Some(Service::KeepaliveServer));
        let go = Head {
            content_type: Some("text/plain; charset=utf-8".into()),
            ..head(None, None, &["date", "content-length", "content-type"])
        };
        assert_eq!(identify(&go), Some(Service::Go));
        assert_eq!(
            identify(&head(None, None, &["date", "content-length"])),
            None
        );
    }

    #[test]
    fn settings_carry_the_value_and_node_its_buffer() {
        let node = Service::Node.set_to(66);
        assert!(node.contains("keepAliveTimeout = 66000"), "{node}");
        assert!(node.contains("headersTimeout = 67000"), "{node}");
        assert!(node.contains("1 s after keepAliveTimeout"), "{node}");
        assert!(
            Service::Nginx
                .set_to(66)
                .starts_with("keepalive_timeout 66s")
        );
        let list = every_setting(66);
        for service in ALL {
            assert!(list.contains(service.setting()), "{list}");
        }
    }
}
