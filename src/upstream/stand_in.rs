//! A minimal stand-in for the head rewriting `src/forward/` will own
//! (issue 39): the request head sent up, the answer head parsed, and the
//! client's head written from it. Enough to forward end to end; replaced
//! by `forward::request` and `forward::response` once they land.

use std::net::IpAddr;

use crate::http::RequestHead;
use crate::http::request::Framing;
use crate::http::response::{BodyLength, Persistence, push_decimal};
use crate::http::target::Target;

/// How a request is forwarded: who sent it and where it goes.
#[derive(Debug, Clone, Copy)]
pub struct Forwarding<'a> {
    pub client_ip: IpAddr,
    pub tls: bool,
    pub prefix: &'a str,
}

/// A request that is not forwarded (Upgrade): answered 501.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refused;

/// An answer head that is not HTTP, or too large.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadResponse(pub &'static str);

/// How an answer's body is framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResponseFraming {
    /// No body (HEAD, 1xx, 204, 304).
    Empty,
    Length(u64),
    Chunked,
    UntilClose,
}

/// An answer head, parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UpstreamHead {
    pub status: u16,
    pub framing: ResponseFraming,
    /// The upstream keeps the connection open after it.
    pub reusable: bool,
    /// Bytes the head took.
    pub len: usize,
    /// A 1xx answer: another head follows.
    pub interim: bool,
}

/// The largest answer head taken.
pub const MAX_ANSWER_HEAD: usize = 64 * 1024;

const HOP_BY_HOP: [&str; 9] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "content-length",
    "proxy-authorization",
];

const CONTROLS: [&str; 5] = ["ka", "advertise", "close", "after", "max"];

fn hop_by_hop(name: &str, connection: &[&str]) -> bool {
    HOP_BY_HOP.iter().any(|h| name.eq_ignore_ascii_case(h))
        || connection.iter().any(|c| name.eq_ignore_ascii_case(c))
}

/// The tokens a `Connection` field names.
fn connection_tokens<'a>(headers: &[httparse::Header<'a>]) -> Vec<&'a str> {
    headers
        .iter()
        .filter(|h| h.name.eq_ignore_ascii_case("connection"))
        .filter_map(|h| std::str::from_utf8(h.value).ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .collect()
}

/// The target without the lab's query controls.
fn without_controls(path: &str, out: &mut Vec<u8>) {
    let Some((path, query)) = path.split_once('?') else {
        out.extend_from_slice(path.as_bytes());
        return;
    };
    out.extend_from_slice(path.as_bytes());
    let mut first = true;
    for pair in query.split('&') {
        let name = pair.split_once('=').map_or(pair, |(name, _)| name);
        if CONTROLS.contains(&name) {
            continue;
        }
        out.push(if first { b'?' } else { b'&' });
        out.extend_from_slice(pair.as_bytes());
        first = false;
    }
}

/// Appends the request head sent up for `raw` (the client's head, as
/// `head` parsed it): HTTP/1.1, the prefix before the target, the
/// controls out of it, hop-by-hop fields dropped, the body's framing,
/// `X-Forwarded-For` and `X-Forwarded-Proto`.
pub fn write_upstream_head(
    raw: &[u8],
    head: &RequestHead<'_>,
    how: &Forwarding<'_>,
    out: &mut Vec<u8>,
) -> Result<(), Refused> {
    let mut fields = [httparse::EMPTY_HEADER; 256];
    let mut request = httparse::Request::new(&mut fields);
    if !matches!(request.parse(raw), Ok(httparse::Status::Complete(_))) {
        return Err(Refused);
    }
    let headers = request.headers;
    if headers
        .iter()
        .any(|h| h.name.eq_ignore_ascii_case("upgrade"))
    {
        return Err(Refused);
    }
    let connection = connection_tokens(headers);
    out.extend_from_slice(request.method.unwrap_or("GET").as_bytes());
    out.push(b' ');
    match head.target {
        Target::Path(path) => {
            out.extend_from_slice(how.prefix.as_bytes());
            without_controls(path, out);
        }
        Target::Asterisk | Target::Authority => out.push(b'*'),
    }
    out.extend_from_slice(b" HTTP/1.1\r\n");
    let mut forwarded_for = None;
    for h in headers.iter() {
        if h.name.eq_ignore_ascii_case("x-forwarded-for") {
            forwarded_for = Some(h.value);
            continue;
        }
        if hop_by_hop(h.name, &connection) || h.name.eq_ignore_ascii_case("x-forwarded-proto") {
            continue;
        }
        push_field(out, h.name.as_bytes(), h.value);
    }
    match head.framing {
        Framing::None => {}
        Framing::Length(n) => {
            out.extend_from_slice(b"Content-Length: ");
            push_decimal(out, n);
            out.extend_from_slice(b"\r\n");
        }
        Framing::Chunked => out.extend_from_slice(b"Transfer-Encoding: chunked\r\n"),
    }
    out.extend_from_slice(b"X-Forwarded-For: ");
    if let Some(earlier) = forwarded_for {
        out.extend_from_slice(earlier);
        out.extend_from_slice(b", ");
    }
    out.extend_from_slice(how.client_ip.to_canonical().to_string().as_bytes());
    out.extend_from_slice(b"\r\nX-Forwarded-Proto: ");
    out.extend_from_slice(if how.tls { b"https" } else { b"http" });
    out.extend_from_slice(b"\r\n\r\n");
    Ok(())
}

fn push_field(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

/// Parses the answer head at the front of `input`: `Ok(None)` until it is
/// all in.
pub fn parse_upstream_head(
    input: &[u8],
    request_was_head: bool,
) -> Result<Option<UpstreamHead>, BadResponse> {
    let mut fields = [httparse::EMPTY_HEADER; 256];
    let mut response = httparse::Response::new(&mut fields);
    let len = match response.parse(input) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) if input.len() >= MAX_ANSWER_HEAD => {
            return Err(BadResponse("answer head too large"));
        }
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(_) => return Err(BadResponse("not an HTTP answer")),
    };
    let status = response.code.unwrap_or(0);
    let minor = response.version.unwrap_or(1);
    let headers = response.headers;
    let connection = connection_tokens(headers);
    let says = |token: &str| connection.iter().any(|t| t.eq_ignore_ascii_case(token));
    let chunked = headers.iter().any(|h| {
        h.name.eq_ignore_ascii_case("transfer-encoding")
            && std::str::from_utf8(h.value)
                .is_ok_and(|v| v.to_ascii_lowercase().contains("chunked"))
    });
    let mut length = None;
    for h in headers
        .iter()
        .filter(|h| h.name.eq_ignore_ascii_case("content-length"))
    {
        let n = std::str::from_utf8(h.value)
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .ok_or(BadResponse("bad Content-Length"))?;
        if length.is_some_and(|m| m != n) {
            return Err(BadResponse("conflicting Content-Length"));
        }
        length = Some(n);
    }
    let interim = (100..200).contains(&status);
    if interim && status == 101 {
        return Err(BadResponse("an upgrade nobody asked for"));
    }
    let framing = match () {
        _ if interim || request_was_head || status == 204 || status == 304 => {
            ResponseFraming::Empty
        }
        _ if chunked => ResponseFraming::Chunked,
        _ => length.map_or(ResponseFraming::UntilClose, ResponseFraming::Length),
    };
    let persists = match minor {
        0 => says("keep-alive"),
        _ => !says("close"),
    };
    Ok(Some(UpstreamHead {
        status,
        framing,
        reusable: persists && framing != ResponseFraming::UntilClose,
        len,
        interim,
    }))
}

/// What the client's head says of its framing and connection.
#[derive(Debug, Clone, Copy)]
pub struct ClientTerms<'a> {
    pub length: BodyLength,
    pub persistence: Persistence,
    /// `Connection: keep-alive` and `Keep-Alive: …` without their CRLF.
    pub keep_alive_header: &'a [u8],
    pub requests_left: Option<u32>,
}

/// Appends the client's head for the answer head `raw`: its status and
/// end-to-end fields, then this hop's framing and connection terms.
pub fn write_client_head(raw: &[u8], terms: &ClientTerms<'_>, out: &mut Vec<u8>) {
    let mut fields = [httparse::EMPTY_HEADER; 256];
    let mut response = httparse::Response::new(&mut fields);
    let _ = response.parse(raw);
    out.extend_from_slice(b"HTTP/1.1 ");
    push_decimal(out, u64::from(response.code.unwrap_or(502)));
    out.push(b' ');
    out.extend_from_slice(response.reason.unwrap_or("").as_bytes());
    out.extend_from_slice(b"\r\n");
    let connection = connection_tokens(response.headers);
    // With no framing of its own (a HEAD's answer, a 204, a 304), the
    // upstream's Content-Length says what it says.
    let own_length = terms.length != BodyLength::UntilClose;
    for h in response.headers.iter() {
        let theirs = !own_length && h.name.eq_ignore_ascii_case("content-length");
        if theirs || !hop_by_hop(h.name, &connection) {
            push_field(out, h.name.as_bytes(), h.value);
        }
    }
    match terms.length {
        BodyLength::Known(n) => {
            out.extend_from_slice(b"Content-Length: ");
            push_decimal(out, n);
            out.extend_from_slice(b"\r\n");
        }
        BodyLength::Chunked => out.extend_from_slice(b"Transfer-Encoding: chunked\r\n"),
        BodyLength::UntilClose => {}
    }
    match terms.persistence {
        Persistence::Close => out.extend_from_slice(b"Connection: close\r\n"),
        Persistence::KeepAlive => {
            out.extend_from_slice(terms.keep_alive_header);
            if let Some(left) = terms.requests_left {
                out.extend_from_slice(b", max=");
                push_decimal(out, u64::from(left));
            }
            out.extend_from_slice(b"\r\n");
        }
    }
    out.extend_from_slice(b"\r\n");
}
