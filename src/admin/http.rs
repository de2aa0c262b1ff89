//! The admin listener's HTTP: reading one request head, routing it, and
//! writing response heads. Every admin response is `Connection: close`
//! (a scrape or a probe is one request; the event stream ends with the
//! connection), so there is no body framing to read and no persistence.

/// The longest request head accepted; larger gets 431.
pub const MAX_HEAD: usize = 8 * 1024;
/// The event stream's push interval: default and bounds, in ms.
pub const DEFAULT_INTERVAL_MS: u64 = 250;
pub const MIN_INTERVAL_MS: u64 = 100;
pub const MAX_INTERVAL_MS: u64 = 5_000;

/// What a request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// `/`: the dashboard page.
    Page,
    Script,
    Style,
    Icon,
    /// `/events`: the dashboard's feed, pushed every `interval_ms`.
    Events {
        interval_ms: u64,
    },
    Metrics,
    Timers,
    /// `/peers`: the keep-alive lab's per-client report.
    Peers,
    Healthz,
    NotFound,
}

/// A parsed request, or why it cannot be answered normally.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request {
    /// Wait for more bytes.
    Partial,
    Get {
        route: Route,
        head_only: bool,
    },
    /// A method other than GET and HEAD.
    MethodNotAllowed,
    /// Not HTTP/1.x (400).
    Malformed,
    /// The head is over [`MAX_HEAD`] (431).
    TooLarge,
}

/// Parses the request head buffered so far.
pub fn parse(input: &[u8]) -> Request {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut request = httparse::Request::new(&mut headers);
    match request.parse(input) {
        Ok(httparse::Status::Complete(_)) => {}
        Ok(httparse::Status::Partial) if input.len() < MAX_HEAD => return Request::Partial,
        Ok(httparse::Status::Partial) => return Request::TooLarge,
        Err(httparse::Error::TooManyHeaders) => return Request::TooLarge,
        Err(_) => return Request::Malformed,
    }
    let target = request.path.unwrap_or("/");
    let head_only = match request.method {
        Some("GET") => false,
        Some("HEAD") => true,
        _ => return Request::MethodNotAllowed,
    };
    Request::Get {
        route: route(target),
        head_only,
    }
}

/// Routes a request target (`/path?query`).
pub fn route(target: &str) -> Route {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    match path {
        "/" | "/index.html" => Route::Page,
        "/dashboard.js" => Route::Script,
        "/dashboard.css" => Route::Style,
        "/favicon.svg" | "/favicon.ico" => Route::Icon,
        "/events" => Route::Events {
            interval_ms: interval(query),
        },
        "/metrics" => Route::Metrics,
        "/timers" => Route::Timers,
        "/peers" => Route::Peers,
        "/healthz" => Route::Healthz,
        _ => Route::NotFound,
    }
}

/// `interval=` from a query string, in ms, clamped to the allowed range;
/// absent or unreadable: the default.
fn interval(query: &str) -> u64 {
    query
        .split('&')
        .find_map(|pair| pair.strip_prefix("interval="))
        .and_then(|value| value.parse::<u64>().ok())
        .map_or(DEFAULT_INTERVAL_MS, |ms| {
            ms.clamp(MIN_INTERVAL_MS, MAX_INTERVAL_MS)
        })
}

/// A response head with `Connection: close`; `length` `None` for a body
/// that runs until the close (the event stream).
pub fn head(status: &str, content_type: &str, length: Option<usize>, extra: &str) -> Vec<u8> {
    let mut head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nCache-Control: no-store\r\n\
         X-Content-Type-Options: nosniff\r\nConnection: close\r\n{extra}"
    );
    if let Some(length) = length {
        head.push_str(&format!("Content-Length: {length}\r\n"));
    }
    head.push_str("\r\n");
    head.into_bytes()
}

/// A complete response: head, then the body unless `head_only`.
pub fn response(reply: Reply<'_>, head_only: bool) -> Vec<u8> {
    let length = Some(reply.body.len());
    let mut bytes = head(reply.status, reply.content_type, length, reply.extra);
    if !head_only {
        bytes.extend_from_slice(reply.body);
    }
    bytes
}

/// A whole admin response: its status, content type, any extra header
/// lines (each ending in CRLF) and its body.
#[derive(Debug, Clone, Copy)]
pub struct Reply<'a> {
    pub status: &'a str,
    pub content_type: &'a str,
    pub extra: &'a str,
    pub body: &'a [u8],
}

impl<'a> Reply<'a> {
    /// `200 OK` with `body` of `content_type`.
    pub fn ok(content_type: &'a str, body: &'a [u8]) -> Self {
        Reply {
            status: "200 OK",
            content_type,
            extra: "",
            body,
        }
    }

    /// An error `status` with a plain-text `body`.
    pub fn error(status: &'a str, body: &'a [u8]) -> Self {
        Reply {
            status,
            content_type: "text/plain",
            extra: "",
            body,
        }
    }

    /// The same, with `extra` header lines.
    pub fn with_extra(self, extra: &'a str) -> Self {
        Reply { extra, ..self }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_routed_by_path_and_method() {
        let get =
            |target: &str| parse(format!("GET {target} HTTP/1.1\r\nHost: a\r\n\r\n").as_bytes());
        assert_eq!(
            get("/healthz?x=1"),
            Request::Get {
                route: Route::Healthz,
                head_only: false
            }
        );
        assert_eq!(
            parse(b"HEAD /metrics HTTP/1.1\r\n\r\n"),
            Request::Get {
                route: Route::Metrics,
                head_only: true
            }
        );
        assert_eq!(
            parse(b"POST /metrics HTTP/1.1\r\n\r\n"),
            Request::MethodNotAllowed
        );
        assert_eq!(parse(b"GET /metrics HTTP/1.1\r\n"), Request::Partial);
        assert_eq!(parse(b"\x16\x03\x01 junk\r\n\r\n"), Request::Malformed);
        assert_eq!(parse(&[b'a'; MAX_HEAD]), Request::TooLarge);
        assert_eq!(route("/nope"), Route::NotFound);
        assert_eq!(route("/"), Route::Page);
    }

    #[test]
    fn the_event_interval_is_clamped() {
        let interval_of = |target| match route(target) {
            Route::Events { interval_ms } => interval_ms,
            other => panic!("{other:?}"),
        };
        assert_eq!(interval_of("/events"), 250);
        assert_eq!(interval_of("/events?interval=1000"), 1000);
        assert_eq!(interval_of("/events?a=b&interval=1"), 100);
        assert_eq!(interval_of("/events?interval=60000"), 5000);
        assert_eq!(interval_of("/events?interval=soon"), 250);
    }
}
