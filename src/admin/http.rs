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
    /// `/events` with an `interval=` that is not a whole number of ms in
    /// [`MIN_INTERVAL_MS`]..=[`MAX_INTERVAL_MS`] (400, naming the range).
    BadInterval,
    Metrics,
    Timers,
    /// `/peers`: the peer observer's per-client report.
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
        "/events" => match interval(query) {
            Some(interval_ms) => Route::Events { interval_ms },
            None => Route::BadInterval,
        },
        "/metrics" => Route::Metrics,
        "/timers" => Route::Timers,
        "/peers" => Route::Peers,
        "/healthz" => Route::Healthz,
        _ => Route::NotFound,
    }
}

/// `interval=` from a query string, in ms (absent: the default); `None`
/// when it is not a whole number of ms within the allowed range, which is
/// refused rather than quietly clamped.
fn interval(query: &str) -> Option<u64> {
    match query
        .split('&')
        .find_map(|pair| pair.strip_prefix("interval="))
    {
        None => Some(DEFAULT_INTERVAL_MS),
        Some(value) => value
            .parse::<u64>()
            .ok()
            .filter(|ms| (MIN_INTERVAL_MS..=MAX_INTERVAL_MS).contains(ms)),
    }
}

/// The body of the 400 for a bad `interval=`.
pub const BAD_INTERVAL: &str = "interval= must be a whole number of milliseconds from 100 \
                                to 5000 (default 250), e.g. /events?interval=500\n";

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
    fn the_event_interval_is_read_within_its_range_or_refused() {
        let interval_of = |target| match route(target) {
            Route::Events { interval_ms } => interval_ms,
            other => panic!("{other:?}"),
        };
        assert_eq!(interval_of("/events"), 250);
        assert_eq!(interval_of("/events?interval=1000"), 1000);
        assert_eq!(interval_of("/events?a=b&interval=100"), 100);
        assert_eq!(interval_of("/events?interval=5000"), 5000);
        for bad in ["1", "50", "99", "5001", "60000", "abc", "", "-5", "1.5"] {
            let target = format!("/events?interval={bad}");
            assert_eq!(route(&target), Route::BadInterval, "{target}");
        }
        assert!(BAD_INTERVAL.contains(&format!("{MIN_INTERVAL_MS} to {MAX_INTERVAL_MS}")));
    }
}
