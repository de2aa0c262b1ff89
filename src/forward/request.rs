//! The head of a request as the lab sends it to its upstream (RFC 9110
//! §7.6, RFC 9112), as nginx's `proxy_pass` and Caddy's `reverse_proxy`
//! write theirs:
//!
//! - `METHOD target HTTP/1.1`, the target in origin-form under the
//!   upstream's prefix, without the lab's query controls (`forward::target`);
//! - every field the client sent, in its order, except the hop-by-hop ones
//!   (`Connection` and what it names, `Keep-Alive`, `Proxy-Connection`,
//!   `TE`, `Trailer`, `Upgrade`) and the framing ones, which are written
//!   anew from the framing the lab decided on (`Content-Length: N` or
//!   `Transfer-Encoding: chunked`): what the upstream reads as the body is
//!   exactly what the lab read as one;
//! - `Host` as the client sent it (Caddy's choice; nginx sends its
//!   upstream's name unless told `proxy_set_header Host $host`): the
//!   service sees the name its clients use. Two exceptions: an
//!   absolute-form target's authority replaces it (RFC 9112 §3.2.2), and a
//!   request without one (HTTP/1.0 allows that) gets the upstream's
//!   authority, since the request goes on as HTTP/1.1, which needs a
//!   `Host`, and the upstream's own name is the one it surely serves (what
//!   nginx sends by default, and Go's proxy when the request had none);
//! - `X-Forwarded-For` with the client's address appended to what the
//!   client sent (nginx's `$proxy_add_x_forwarded_for`), and
//!   `X-Forwarded-Proto` set to the lab's own scheme, replacing the
//!   client's;
//! - `Expect: 100-continue` kept, so the upstream decides whether the body
//!   is wanted (dropped from an HTTP/1.0 request, which RFC 9110 §10.1.1
//!   says to ignore).
//!
//! The request goes on as HTTP/1.1 without `Connection`: the lab's link to
//! its upstream persists whatever the client's does. An `Upgrade` naming
//! anything but `h2c` is refused ([`Refused::Upgrade`], 501): the lab
//! forwards HTTP/1.1 exchanges, not tunnels. `Upgrade: h2c` is ignored, as
//! RFC 9110 §7.8 lets a server do, and so is any `Upgrade` in an HTTP/1.0
//! request (which §7.8 says to ignore). CONNECT never gets here: the
//! request parser refuses it (405).

use std::io::Write as _;
use std::net::IpAddr;

use super::fields::{HopByHop, list_items, push_field, trim, with_request};
use super::target::{absolute_form_authority, push_origin_form};
use crate::http::Status;
use crate::http::request::Framing;
use crate::http::response::push_decimal;

/// What the lab adds to a request it forwards, beside the request itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Forwarding<'a> {
    /// The client's address, appended to `X-Forwarded-For`.
    pub client_ip: IpAddr,
    /// The client came over TLS: `X-Forwarded-Proto: https`.
    pub tls: bool,
    /// The upstream URL's path (`/api` of `http://h:8000/api`), put before
    /// every target; empty or `/` for none.
    pub prefix: &'a str,
    /// The upstream's `host:port`, the `Host` of a request that had none.
    pub authority: &'a str,
    /// The lab obeys the query controls (`--test-controls`): take them out
    /// of the target. Off, they are the service's parameters like any other.
    pub strip_controls: bool,
}

/// A request the lab will not forward.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// An `Upgrade` to a protocol other than h2c (a WebSocket, say).
    Upgrade,
    /// The head does not parse again; never for a head `http::parse_head`
    /// accepted, and answered 400 should it happen.
    Malformed,
}

impl Refused {
    /// The status the refusal is answered with.
    pub fn status(self) -> Status {
        match self {
            Refused::Upgrade => Status::NotImplemented,
            Refused::Malformed => Status::BadRequest,
        }
    }
}

/// Appends to `out` the head of `raw_head`'s request as the upstream gets
/// it. `raw_head` is the head's bytes as `http::parse_head` accepted them
/// (its later-minor-version rewrite included), and `framing` how it found
/// the body delimited (`RequestHead::framing`). The head itself is not
/// taken: it borrows the buffer mutably, `raw_head` shares it. Nothing is
/// appended when the request is refused.
pub fn write_upstream_head(
    raw_head: &[u8],
    framing: Framing,
    how: &Forwarding<'_>,
    out: &mut Vec<u8>,
) -> Result<(), Refused> {
    with_request(raw_head, |status, request| match status {
        Ok(httparse::Status::Complete(_)) => write_parsed(request, framing, how, out),
        _ => Err(Refused::Malformed),
    })
}

fn write_parsed(
    request: &httparse::Request<'_, '_>,
    framing: Framing,
    how: &Forwarding<'_>,
    out: &mut Vec<u8>,
) -> Result<(), Refused> {
    let (Some(method), Some(raw_target), Some(minor_version)) =
        (request.method, request.path, request.version)
    else {
        return Err(Refused::Malformed);
    };
    let headers = &*request.headers;
    if minor_version >= 1 && asks_an_upgrade(headers) {
        return Err(Refused::Upgrade);
    }
    out.extend_from_slice(method.as_bytes());
    out.push(b' ');
    push_origin_form(out, raw_target, how.prefix, how.strip_controls);
    out.extend_from_slice(b" HTTP/1.1\r\n");
    let host = absolute_form_authority(raw_target)
        .map(str::as_bytes)
        .or_else(|| last_host(headers));
    let hops = HopByHop::of(headers);
    let mut wrote_host = false;
    let mut sent_length = false;
    for header in headers {
        let name = header.name;
        if hops.drops(name) {
            sent_length |= name.eq_ignore_ascii_case("content-length");
        } else if name.eq_ignore_ascii_case("host") {
            // Once, with the last value (as `parse_head` keeps: an HTTP/1.0
            // request may repeat it) or the absolute-form target's authority.
            if !wrote_host {
                push_field(out, b"Host", host.unwrap_or_default());
                wrote_host = true;
            }
        } else if !is_written_by_the_lab(name, minor_version) {
            push_field(out, name.as_bytes(), header.value);
        }
    }
    if !wrote_host {
        push_field(out, b"Host", host.unwrap_or(how.authority.as_bytes()));
    }
    push_forwarded_for(out, headers, how.client_ip);
    out.extend_from_slice(if how.tls {
        b"X-Forwarded-Proto: https\r\n"
    } else {
        b"X-Forwarded-Proto: http\r\n"
    });
    push_framing(out, framing, sent_length || defines_content(method));
    out.extend_from_slice(b"\r\n");
    Ok(())
}

/// The last `Host` field's value, trimmed.
fn last_host<'b>(headers: &[httparse::Header<'b>]) -> Option<&'b [u8]> {
    headers
        .iter()
        .rev()
        .find(|header| header.name.eq_ignore_ascii_case("host"))
        .map(|header| trim(header.value))
}

/// Fields the lab writes itself from what the client sent and its own
/// (`X-Forwarded-For`, `-Proto`), or drops: an HTTP/1.0 `Expect`.
fn is_written_by_the_lab(name: &str, minor_version: u8) -> bool {
    name.eq_ignore_ascii_case("x-forwarded-for")
        || name.eq_ignore_ascii_case("x-forwarded-proto")
        || (minor_version == 0 && name.eq_ignore_ascii_case("expect"))
}

/// Whether an `Upgrade` field names a protocol other than h2c.
fn asks_an_upgrade(headers: &[httparse::Header<'_>]) -> bool {
    headers
        .iter()
        .filter(|header| header.name.eq_ignore_ascii_case("upgrade"))
        .flat_map(|header| list_items(header.value))
        .any(|protocol| !protocol.eq_ignore_ascii_case(b"h2c"))
}

/// `X-Forwarded-For: what the client sent, its address`, the values of
/// repeated fields joined in order.
fn push_forwarded_for(out: &mut Vec<u8>, headers: &[httparse::Header<'_>], client_ip: IpAddr) {
    out.extend_from_slice(b"X-Forwarded-For: ");
    for header in headers {
        if header.name.eq_ignore_ascii_case("x-forwarded-for") {
            let sent = trim(header.value);
            if !sent.is_empty() {
                out.extend_from_slice(sent);
                out.extend_from_slice(b", ");
            }
        }
    }
    // An IPv4 client on a dual-stack listener shows as itself, not
    // `::ffff:a.b.c.d`. Writing into a Vec cannot fail.
    let _ = write!(out, "{}", client_ip.to_canonical());
    out.extend_from_slice(b"\r\n");
}

/// The body's framing as the lab decided it. A request without a body
/// says `Content-Length: 0` when it said so itself or its method defines
/// content (RFC 9110 §8.6: a POST without a length is a 411 at some
/// servers); otherwise nothing.
fn push_framing(out: &mut Vec<u8>, framing: Framing, says_length: bool) {
    match framing {
        Framing::Length(length) => {
            out.extend_from_slice(b"Content-Length: ");
            push_decimal(out, length);
            out.extend_from_slice(b"\r\n");
        }
        Framing::Chunked => out.extend_from_slice(b"Transfer-Encoding: chunked\r\n"),
        Framing::None if says_length => out.extend_from_slice(b"Content-Length: 0\r\n"),
        Framing::None => {}
    }
}

/// Methods whose request content has a meaning (RFC 9110 §9.3).
fn defines_content(method: &str) -> bool {
    matches!(method, "POST" | "PUT" | "PATCH")
}

#[cfg(test)]
mod tests;
