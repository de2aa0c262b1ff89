//! Plain HTTP on the TLS port: told from TLS by the connection's first
//! byte, and answered in cleartext with a `400` that says to use
//! `https://`, as nginx ("The plain HTTP request was sent to HTTPS port")
//! and Go's `net/http` ("Client sent an HTTP request to an HTTPS server")
//! answer it. Left to rustls, such a client gets an alert, which curl
//! reports as "Received HTTP/0.9 when not allowed".
//!
//! One byte decides, as in nginx, which peeks at one: a TLS client opens
//! with a record whose content type is 20 to 24 (a ClientHello: 22, 0x16)
//! or an SSLv2-style hello with the high bit set, while an HTTP request
//! opens with its method, and every method in use begins with an ASCII
//! capital letter. So a capital is plain HTTP, and anything else goes to
//! rustls, which answers garbage with an alert. (Go matches the first
//! five bytes against a few methods; one byte decides as soon as anything
//! arrives, whatever the method.)
//!
//! This module is the verdict and the answer's bytes; the transport's TLS
//! read (`conn::transport`) peeks, sends the answer, shuts its write side
//! and drains what follows, and counts the connection as a failed
//! handshake (`plain_http`).

use std::net::SocketAddr;
use std::time::SystemTime;

use crate::http::Status;
use crate::http::response::{BodyLength, Persistence, ResponseHead};
use crate::http::target::is_host_value;

/// What a TLS connection's first byte said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opening {
    /// Nothing has arrived yet.
    Unread,
    /// TLS, or garbage: rustls reads it.
    Tls,
    /// A plain HTTP request, answered: whatever follows is drained.
    PlainHttp,
}

impl Opening {
    /// What a connection whose first byte is `first` opened with.
    pub fn of(first: u8) -> Opening {
        match first.is_ascii_uppercase() {
            true => Opening::PlainHttp,
            false => Opening::Tls,
        }
    }
}

/// The longest `Host` value the answer repeats.
const HOST_MAX: usize = 255;

/// The cleartext answer to `request` (as much of it as has arrived), sent
/// to this server's address `local`, dated `now`: `400 Bad Request` with
/// `Connection: close` and a body naming the `https://` URL to use: with
/// the request's own `Host` when it has a valid one, else with `local`.
/// A `HEAD` request gets the head alone.
pub fn answer(request: &[u8], local: Option<SocketAddr>, now: SystemTime) -> Vec<u8> {
    let url = match host_field(request) {
        Some(host) => format!("https://{}/", String::from_utf8_lossy(host)),
        None => local.map_or_else(|| "https://".to_owned(), |at| format!("https://{at}/")),
    };
    let body = format!(
        "This port speaks HTTPS, and the request came in plain HTTP.\nUse {url} instead.\n"
    );
    let date = crate::date::format(now);
    let mut out = Vec::with_capacity(160 + body.len());
    ResponseHead {
        status: Status::BadRequest,
        content_type: "text/plain",
        length: BodyLength::Known(body.len() as u64),
        persistence: Persistence::Close,
        date: &date,
        keep_alive_header: b"",
        requests_left: None,
        extra: b"",
    }
    .encode(&mut out);
    if !request.starts_with(b"HEAD ") {
        out.extend_from_slice(body.as_bytes());
    }
    out
}

/// The `Host` field's value among the head's complete lines, when it is
/// a valid one (ASCII, not empty, at most [`HOST_MAX`] bytes).
fn host_field(head: &[u8]) -> Option<&[u8]> {
    // Only whole lines: the last may still be arriving, cut short.
    let whole = head.iter().rposition(|&b| b == b'\n')?;
    head[..whole]
        .split(|&b| b == b'\n')
        .skip(1)
        .map(|line| line.strip_suffix(b"\r").unwrap_or(line))
        .take_while(|line| !line.is_empty())
        .find_map(|line| {
            let (name, value) = line.split_at(line.iter().position(|&b| b == b':')?);
            name.eq_ignore_ascii_case(b"host")
                .then(|| value[1..].trim_ascii())
        })
        .filter(|host| {
            !host.is_empty() && host.len() <= HOST_MAX && host.is_ascii() && is_host_value(host)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_capital_letter_opens_plain_http_and_a_tls_record_does_not() {
        for first in *b"GDHPOCTX" {
            assert_eq!(Opening::of(first), Opening::PlainHttp, "{}", first as char);
        }
        // A handshake record, the other content types, SSLv2, garbage.
        for first in [0x16, 0x14, 0x15, 0x17, 0x18, 0x80, 0x00, 0xff, b'g', b' '] {
            assert_eq!(Opening::of(first), Opening::Tls, "{first:#04x}");
        }
    }

    fn text(request: &[u8], local: Option<SocketAddr>) -> String {
        String::from_utf8(answer(request, local, SystemTime::UNIX_EPOCH)).unwrap()
    }

    const LOCAL: Option<SocketAddr> = Some(SocketAddr::V4(std::net::SocketAddrV4::new(
        std::net::Ipv4Addr::LOCALHOST,
        8443,
    )));

    #[test]
    fn the_answer_is_a_whole_400_that_closes_and_names_the_https_url() {
        let said = text(b"GET /x HTTP/1.1\r\nhost: example.com:8443\r\n\r\n", LOCAL);
        let (head, body) = said.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{head}");
        assert!(head.contains("\r\nConnection: close"), "{head}");
        assert!(head.contains("\r\nContent-Type: text/plain"), "{head}");
        assert!(
            head.contains("Date: Thu, 01 Jan 1970 00:00:00 GMT"),
            "{head}"
        );
        assert!(
            head.contains(&format!("Content-Length: {}", body.len())),
            "{head}"
        );
        assert!(body.contains("plain HTTP"), "{body}");
        assert!(body.contains("https://example.com:8443/"), "{body}");
    }

    #[test]
    fn without_a_usable_host_the_url_names_the_address_it_came_to() {
        for request in [
            &b"GET / HTTP/1.0\r\n\r\n"[..],
            b"GET / HTTP/1.1\r\nHost: \r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: a b\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: <script>\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: exam", // still arriving
            b"G",
        ] {
            let said = text(request, LOCAL);
            assert!(
                said.contains("Use https://127.0.0.1:8443/ instead."),
                "{said}"
            );
        }
        let long = format!("GET / HTTP/1.1\r\nHost: {}\r\n\r\n", "a".repeat(300));
        assert!(text(long.as_bytes(), LOCAL).contains("https://127.0.0.1:8443/"));
        assert!(text(b"G", None).contains("Use https:// instead."));
    }

    #[test]
    fn a_host_after_the_head_is_not_taken() {
        let said = text(b"POST / HTTP/1.1\r\n\r\nHost: body.example\r\n", LOCAL);
        assert!(said.contains("https://127.0.0.1:8443/"), "{said}");
    }

    #[test]
    fn a_head_request_gets_the_head_alone() {
        let said = text(b"HEAD / HTTP/1.1\r\nHost: localhost\r\n\r\n", LOCAL);
        assert!(said.ends_with("\r\n\r\n"), "{said}");
        assert!(!said.contains("Content-Length: 0"), "{said}");
    }
}
