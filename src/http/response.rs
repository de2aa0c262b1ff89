//! Response heads: status lines and the header block, written straight into
//! a connection's output buffer with no allocation once it has capacity.

use crate::date::DATE_LEN;

/// The statuses this server sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Continue,
    Ok,
    BadRequest,
    NotFound,
    MethodNotAllowed,
    RequestTimeout,
    ContentTooLarge,
    UriTooLong,
    ExpectationFailed,
    RequestHeaderFieldsTooLarge,
    NotImplemented,
    BadGateway,
    ServiceUnavailable,
    GatewayTimeout,
    HttpVersionNotSupported,
}

impl Status {
    pub fn code(self) -> u16 {
        match self {
            Status::Continue => 100,
            Status::Ok => 200,
            Status::BadRequest => 400,
            Status::NotFound => 404,
            Status::MethodNotAllowed => 405,
            Status::RequestTimeout => 408,
            Status::ContentTooLarge => 413,
            Status::UriTooLong => 414,
            Status::ExpectationFailed => 417,
            Status::RequestHeaderFieldsTooLarge => 431,
            Status::NotImplemented => 501,
            Status::BadGateway => 502,
            Status::ServiceUnavailable => 503,
            Status::GatewayTimeout => 504,
            Status::HttpVersionNotSupported => 505,
        }
    }

    /// A short plain-text body for an error response: the reason phrase.
    pub fn reason_line(self) -> &'static [u8] {
        match self {
            Status::Continue | Status::Ok => b"",
            Status::BadRequest => b"Bad Request\n",
            Status::NotFound => b"Not Found\n",
            Status::MethodNotAllowed => b"Method Not Allowed\n",
            Status::RequestTimeout => b"Request Timeout\n",
            Status::ContentTooLarge => b"Content Too Large\n",
            Status::UriTooLong => b"URI Too Long\n",
            Status::ExpectationFailed => b"Expectation Failed\n",
            Status::RequestHeaderFieldsTooLarge => b"Request Header Fields Too Large\n",
            Status::NotImplemented => b"Not Implemented\n",
            Status::BadGateway => b"Bad Gateway\n",
            Status::ServiceUnavailable => b"Service Unavailable\n",
            Status::GatewayTimeout => b"Gateway Timeout\n",
            Status::HttpVersionNotSupported => b"HTTP Version Not Supported\n",
        }
    }

    /// The whole status line, CRLF included.
    pub fn line(self) -> &'static [u8] {
        match self {
            Status::Continue => b"HTTP/1.1 100 Continue\r\n",
            Status::Ok => b"HTTP/1.1 200 OK\r\n",
            Status::BadRequest => b"HTTP/1.1 400 Bad Request\r\n",
            Status::NotFound => b"HTTP/1.1 404 Not Found\r\n",
            Status::MethodNotAllowed => b"HTTP/1.1 405 Method Not Allowed\r\n",
            Status::RequestTimeout => b"HTTP/1.1 408 Request Timeout\r\n",
            Status::ContentTooLarge => b"HTTP/1.1 413 Content Too Large\r\n",
            Status::UriTooLong => b"HTTP/1.1 414 URI Too Long\r\n",
            Status::ExpectationFailed => b"HTTP/1.1 417 Expectation Failed\r\n",
            Status::RequestHeaderFieldsTooLarge => {
                b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
            }
            Status::NotImplemented => b"HTTP/1.1 501 Not Implemented\r\n",
            Status::BadGateway => b"HTTP/1.1 502 Bad Gateway\r\n",
            Status::ServiceUnavailable => b"HTTP/1.1 503 Service Unavailable\r\n",
            Status::GatewayTimeout => b"HTTP/1.1 504 Gateway Timeout\r\n",
            Status::HttpVersionNotSupported => b"HTTP/1.1 505 HTTP Version Not Supported\r\n",
        }
    }
}

/// Whether the connection stays open after this response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Persistence {
    /// `Connection: close`.
    Close,
    /// `Connection: keep-alive` and the `Keep-Alive` parameters (HTTP/1.0
    /// and 1.1 alike: Keep-Alive is hop-by-hop, so Connection names it).
    KeepAlive,
}

/// How the response body is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyLength {
    /// `Content-Length: N`.
    Known(u64),
    /// `Transfer-Encoding: chunked`: the body is streamed as it is produced.
    Chunked,
    /// Neither: the body runs until the connection closes (the admin's
    /// event stream; only with [`Persistence::Close`]).
    UntilClose,
}

/// The methods this server answers (`/` takes any), named in the `Allow`
/// field that RFC 9110 §15.5.6 requires on a 405 (see
/// [`ResponseHead::extra`]).
pub const ALLOW: &[u8] = b"Allow: GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS\r\n";

/// Everything a response head says.
pub struct ResponseHead<'a> {
    pub status: Status,
    pub content_type: &'static str,
    pub length: BodyLength,
    pub persistence: Persistence,
    pub date: &'a [u8; DATE_LEN],
    /// The prebuilt `Connection: keep-alive\r\nKeep-Alive: timeout=N`,
    /// without its CRLF.
    pub keep_alive_header: &'a [u8],
    /// Requests the connection will still take after this one, when they
    /// are limited: sent as `max=N`, counting down as Apache does.
    pub requests_left: Option<u32>,
    /// Header lines of the response's own, each ending in CRLF: the
    /// `Allow` of a 405 ([`ALLOW`] on the main listener), the admin's
    /// `Cache-Control` and `Content-Security-Policy`; mostly empty.
    pub extra: &'a [u8],
}

impl ResponseHead<'_> {
    /// Appends the head, blank line included, to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self.status.line());
        out.extend_from_slice(b"Date: ");
        out.extend_from_slice(self.date);
        out.extend_from_slice(b"\r\nContent-Type: ");
        out.extend_from_slice(self.content_type.as_bytes());
        match self.length {
            BodyLength::Known(length) => {
                out.extend_from_slice(b"\r\nContent-Length: ");
                push_decimal(out, length);
                out.extend_from_slice(b"\r\n");
            }
            BodyLength::Chunked => out.extend_from_slice(b"\r\nTransfer-Encoding: chunked\r\n"),
            BodyLength::UntilClose => out.extend_from_slice(b"\r\n"),
        }
        out.extend_from_slice(self.extra);
        push_persistence(
            out,
            self.persistence,
            self.keep_alive_header,
            self.requests_left,
        );
        out.extend_from_slice(b"\r\n");
    }
}

/// Appends the fields that say whether the connection persists:
/// `Connection: close`, or `keep_alive_header` (see
/// [`ResponseHead::keep_alive_header`]) with `max=N` when `requests_left`
/// says so. Shared with the heads of forwarded responses.
pub fn push_persistence(
    out: &mut Vec<u8>,
    persistence: Persistence,
    keep_alive_header: &[u8],
    requests_left: Option<u32>,
) {
    match persistence {
        Persistence::Close => out.extend_from_slice(b"Connection: close\r\n"),
        Persistence::KeepAlive => {
            out.extend_from_slice(keep_alive_header);
            if let Some(left) = requests_left {
                out.extend_from_slice(b", max=");
                push_decimal(out, u64::from(left));
            }
            out.extend_from_slice(b"\r\n");
        }
    }
}

/// The interim response sent before reading an expected body.
pub const CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

/// The last chunk of a chunked body, with an empty trailer section.
pub const LAST_CHUNK: &[u8] = b"0\r\n\r\n";

/// Appends `n` in decimal without allocating.
pub fn push_decimal(out: &mut Vec<u8>, n: u64) {
    push_digits::<10>(out, n);
}

/// Appends `data` as one chunk of the chunked transfer coding (RFC 9112
/// §7.1): its size in hex, CRLF, the data, CRLF. Empty data appends
/// nothing (an empty chunk would end the body).
pub fn push_chunk(out: &mut Vec<u8>, data: &[u8]) {
    if data.is_empty() {
        return;
    }
    push_digits::<16>(out, data.len() as u64);
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
}

/// Most bytes [`push_chunk`] adds around the data.
pub const CHUNK_FRAMING: usize = 16 + 4;

// The radix is a constant parameter so each division by it compiles to a
// multiplication (a division by a variable costs several times more, once
// per digit).
fn push_digits<const RADIX: u64>(out: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b"0123456789abcdef"[(n % RADIX) as usize];
        n /= RADIX;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[at..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    const DATE: &[u8; DATE_LEN] = b"Sun, 06 Nov 1994 08:49:37 GMT";

    fn encoded(persistence: Persistence, requests_left: Option<u32>) -> String {
        let mut out = Vec::new();
        ResponseHead {
            status: Status::Ok,
            content_type: "text/plain",
            length: BodyLength::Known(13),
            persistence,
            date: DATE,
            keep_alive_header: b"Connection: keep-alive\r\nKeep-Alive: timeout=5",
            requests_left,
            extra: b"",
        }
        .encode(&mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn persistent_heads_name_keep_alive_in_connection() {
        assert_eq!(
            encoded(Persistence::KeepAlive, None),
            "HTTP/1.1 200 OK\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\n\
             Content-Type: text/plain\r\nContent-Length: 13\r\n\
             Connection: keep-alive\r\nKeep-Alive: timeout=5\r\n\r\n"
        );
        assert!(
            encoded(Persistence::KeepAlive, Some(4))
                .contains("\r\nKeep-Alive: timeout=5, max=4\r\n\r\n")
        );
    }

    #[test]
    fn close_says_so_without_parameters() {
        let close = encoded(Persistence::Close, Some(4));
        assert!(close.contains("Connection: close\r\n"));
        assert!(!close.contains("Keep-Alive") && !close.contains("keep-alive"));
    }

    #[test]
    fn chunked_and_405_heads() {
        let mut out = Vec::new();
        ResponseHead {
            status: Status::MethodNotAllowed,
            content_type: "text/plain",
            length: BodyLength::Chunked,
            persistence: Persistence::Close,
            date: DATE,
            keep_alive_header: b"",
            requests_left: None,
            extra: ALLOW,
        }
        .encode(&mut out);
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("HTTP/1.1 405 Method Not Allowed\r\n"));
        assert!(text.contains("\r\nTransfer-Encoding: chunked\r\nAllow: GET, HEAD"));
        assert!(!text.contains("Content-Length"));
    }

    #[test]
    fn chunks() {
        let mut out = Vec::new();
        push_chunk(&mut out, &[b'x'; 300]);
        push_chunk(&mut out, b"");
        assert_eq!(&out[..5], b"12c\r\n");
        assert_eq!(out.len(), 5 + 300 + 2);
    }

    #[test]
    fn decimals() {
        for n in [0, 7, 10, 65_535, u64::MAX] {
            let mut out = Vec::new();
            push_decimal(&mut out, n);
            assert_eq!(out, n.to_string().into_bytes());
        }
    }
}
