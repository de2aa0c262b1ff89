//! The admin listener's HTTP: its request heads are parsed by the
//! server's own parser ([`crate::http::parse_head`], under the admin's
//! limits), so both listeners take the same grammar and refuse the same
//! requests with the same statuses; here are only what the admin adds:
//! its routes, and the header lines its responses carry (written by the
//! server's own head encoder). Every admin response is
//! `Connection: close` (a scrape or a probe is one request; the event
//! stream ends with the connection), so there is no persistence, and no
//! request body is read.

use std::time::SystemTime;

use crate::date;
use crate::http::response::{BodyLength, Persistence, ResponseHead};
use crate::http::target::Target;
use crate::http::{HeadLimits, Method, RequestError, Status, parse_head};

/// The longest request head accepted; larger gets 431.
pub const MAX_HEAD: usize = 8 * 1024;
/// The most header fields a request head may carry; more gets 431.
const MAX_HEADER_FIELDS: usize = 64;
/// The admin's limits on a request head. No body is ever read (GET and
/// HEAD only, and the connection closes behind its answer), so no
/// `Content-Length` is refused for its size: a POST is told 405.
const HEAD_LIMITS: HeadLimits = HeadLimits {
    head_size: MAX_HEAD,
    header_fields: MAX_HEADER_FIELDS,
    body_size: usize::MAX,
};
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
    /// A method other than GET and HEAD (405, naming those two).
    MethodNotAllowed,
    /// Refused by the server's parser, with the status it maps the
    /// refusal to ([`RequestError::status`]).
    Refused(Status),
}

/// Parses the request head buffered so far (the parser may rewrite an
/// `HTTP/1.x` version digit in place, hence `&mut`).
pub fn parse(input: &mut [u8]) -> Request {
    let head = match parse_head(input, HEAD_LIMITS) {
        Ok(Some((head, _len))) => head,
        Ok(None) => return Request::Partial,
        Err(RequestError::MethodNotAllowed) => return Request::MethodNotAllowed,
        Err(refusal) => return Request::Refused(refusal.status()),
    };
    let head_only = match head.method {
        Method::Get => false,
        Method::Head => true,
        _ => return Request::MethodNotAllowed,
    };
    let route = match head.target {
        Target::Path(target) => route(target),
        Target::Asterisk | Target::Authority => Route::NotFound,
    };
    Request::Get { route, head_only }
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

/// Header lines every admin response carries: nothing of it is cached,
/// and its content types are taken as said.
const ALWAYS: &str = "Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n";

/// A response head with `Connection: close`, written by the server's own
/// encoder ([`ResponseHead`]), dated now; `extra` header lines (each
/// ending in CRLF) follow the admin's own.
pub fn head(
    status: Status,
    content_type: &'static str,
    length: BodyLength,
    extra: &str,
) -> Vec<u8> {
    let fields = [ALWAYS, extra].concat();
    let mut out = Vec::with_capacity(192 + fields.len());
    ResponseHead {
        status,
        content_type,
        length,
        persistence: Persistence::Close,
        date: &date::format(SystemTime::now()),
        keep_alive_header: b"",
        requests_left: None,
        extra: fields.as_bytes(),
    }
    .encode(&mut out);
    out
}

/// A complete response: head, then the body unless `head_only`.
pub fn response(reply: Reply<'_>, head_only: bool) -> Vec<u8> {
    let length = BodyLength::Known(reply.body.len() as u64);
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
    pub status: Status,
    pub content_type: &'static str,
    pub extra: &'a str,
    pub body: &'a [u8],
}

impl<'a> Reply<'a> {
    /// `200 OK` with `body` of `content_type`.
    pub fn ok(content_type: &'static str, body: &'a [u8]) -> Self {
        Reply {
            status: Status::Ok,
            content_type,
            extra: "",
            body,
        }
    }

    /// An error `status` with a plain-text `body`.
    pub fn error(status: Status, body: &'a [u8]) -> Self {
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
        let parse_text = |text: &[u8]| parse(&mut text.to_vec());
        let get = |target: &str| {
            parse_text(format!("GET {target} HTTP/1.1\r\nHost: a\r\n\r\n").as_bytes())
        };
        assert_eq!(
            get("/healthz?x=1"),
            Request::Get {
                route: Route::Healthz,
                head_only: false
            }
        );
        assert_eq!(
            parse_text(b"HEAD /metrics HTTP/1.0\r\n\r\n"),
            Request::Get {
                route: Route::Metrics,
                head_only: true
            }
        );
        assert_eq!(
            parse_text(b"POST /metrics HTTP/1.1\r\nHost: a\r\nContent-Length: 9999999\r\n\r\n"),
            Request::MethodNotAllowed,
            "a POST is told the methods, whatever body it announces"
        );
        assert_eq!(
            parse_text(b"CONNECT a:1 HTTP/1.1\r\nHost: a\r\n\r\n"),
            Request::MethodNotAllowed
        );
        assert_eq!(parse_text(b"GET /metrics HTTP/1.1\r\n"), Request::Partial);
        assert_eq!(route("/nope"), Route::NotFound);
        assert_eq!(route("/"), Route::Page);
    }

    #[test]
    fn requests_are_refused_by_the_servers_own_rules() {
        let parse_text = |text: &[u8]| parse(&mut text.to_vec());
        assert_eq!(
            parse_text(b"\x16\x03\x01 junk\r\n\r\n"),
            Request::Refused(Status::BadRequest)
        );
        assert_eq!(
            parse_text(b"GET /metrics HTTP/1.1\r\n\r\n"),
            Request::Refused(Status::BadRequest),
            "HTTP/1.1 without Host, as on the main listener"
        );
        assert_eq!(
            parse_text(b"GET / HTTP/2.0\r\nHost: a\r\n\r\n"),
            Request::Refused(Status::HttpVersionNotSupported)
        );
        let mut long = b"GET / HTTP/1.1\r\nHost: a\r\nX: ".to_vec();
        long.resize(MAX_HEAD + 1, b'a');
        assert_eq!(
            parse(&mut long),
            Request::Refused(Status::RequestHeaderFieldsTooLarge)
        );
        let mut many = b"GET / HTTP/1.1\r\nHost: a\r\n".to_vec();
        for i in 0..MAX_HEADER_FIELDS {
            many.extend_from_slice(format!("X-{i}: 1\r\n").as_bytes());
        }
        many.extend_from_slice(b"\r\n");
        assert_eq!(
            parse(&mut many),
            Request::Refused(Status::RequestHeaderFieldsTooLarge)
        );
    }

    #[test]
    fn responses_are_dated_closed_and_never_cached() {
        let page = response(
            Reply::ok("text/plain", b"ok\n").with_extra("X-A: b\r\n"),
            false,
        );
        let page = String::from_utf8(page).unwrap();
        let (head, body) = page.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 200 OK\r\nDate: "), "{head}");
        for field in [
            "Content-Length: 3",
            "Connection: close",
            "Cache-Control: no-store",
            "X-Content-Type-Options: nosniff",
            "X-A: b",
        ] {
            assert!(
                head.contains(&format!("\r\n{field}\r\n")) || head.ends_with(field),
                "{field}: {head}"
            );
        }
        assert_eq!(body, "ok\n");
        let stream = head_only_text(Status::Ok, BodyLength::UntilClose);
        assert!(
            !stream.contains("Content-Length") && !stream.contains("chunked"),
            "{stream}"
        );
    }

    fn head_only_text(status: Status, length: BodyLength) -> String {
        String::from_utf8(head(status, "text/event-stream", length, "")).unwrap()
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
