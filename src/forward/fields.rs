//! The header fields of a head being forwarded: read again with httparse
//! into as many slots as the head needs, and judged hop-by-hop or not
//! (RFC 9110 §7.6.1).
//!
//! A forwarded head is parsed twice: once where it is received (to decide
//! framing and refusals) and once here, to copy its fields. The second
//! parse borrows nothing from the first, so the engine keeps plain values
//! between the two and the head's bytes in its buffer; it costs about what
//! the first did, a few hundred nanoseconds for a typical head.

use std::mem::MaybeUninit;

pub(super) use crate::http::request::{list_items, trim};

/// Header slots on the stack (2 KiB); a head with more is parsed again
/// into room on the heap for as many as its lines.
const INLINE_FIELDS: usize = 64;

/// The fields RFC 9110 §7.6.1 makes hop-by-hop whatever `Connection`
/// names, with the framing fields (`Content-Length`, `Transfer-Encoding`),
/// which a forwarder writes anew from the framing it decided on, and
/// `HTTP2-Settings` (RFC 7540 §3.2.1: it belongs to the connection an
/// `Upgrade: h2c` would upgrade).
const ALWAYS_DROPPED: [&str; 9] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "upgrade",
    "content-length",
    "transfer-encoding",
    "http2-settings",
];

/// `f` applied to `input` parsed as a request head.
pub(super) fn with_request<R>(
    input: &[u8],
    f: impl FnOnce(httparse::Result<usize>, &httparse::Request<'_, '_>) -> R,
) -> R {
    let mut slots = [const { MaybeUninit::uninit() }; INLINE_FIELDS];
    let mut request = httparse::Request::new(&mut []);
    match request.parse_with_uninit_headers(input, &mut slots) {
        Err(httparse::Error::TooManyHeaders) => {}
        status => return f(status, &request),
    }
    let mut spilled = spilled_slots(input);
    let mut request = httparse::Request::new(&mut []);
    let status = request.parse_with_uninit_headers(input, &mut spilled);
    f(status, &request)
}

/// `f` applied to `input` parsed as a response head.
pub(super) fn with_response<R>(
    input: &[u8],
    f: impl FnOnce(httparse::Result<usize>, &httparse::Response<'_, '_>) -> R,
) -> R {
    let mut slots = [const { MaybeUninit::uninit() }; INLINE_FIELDS];
    let mut response = httparse::Response::new(&mut []);
    let config = httparse::ParserConfig::default();
    match config.parse_response_with_uninit_headers(&mut response, input, &mut slots) {
        Err(httparse::Error::TooManyHeaders) => {}
        status => return f(status, &response),
    }
    let mut spilled = spilled_slots(input);
    let mut response = httparse::Response::new(&mut []);
    let status = config.parse_response_with_uninit_headers(&mut response, input, &mut spilled);
    f(status, &response)
}

/// Room for one field per line of the head at the start of `input` (its
/// bytes up to [`super::response::MAX_UPSTREAM_HEAD`] at most).
#[cold]
fn spilled_slots<'b>(input: &[u8]) -> Vec<MaybeUninit<httparse::Header<'b>>> {
    let searched = &input[..input.len().min(super::response::MAX_UPSTREAM_HEAD)];
    let lines = searched.iter().filter(|&&b| b == b'\n').count();
    let mut slots = Vec::with_capacity(lines + 1);
    slots.resize_with(lines + 1, MaybeUninit::uninit);
    slots
}

/// Which fields of one head a forwarder drops: the ones RFC 9110 §7.6.1
/// names, and every field the head's own `Connection` fields name.
pub(super) struct HopByHop<'a> {
    /// What `Connection` names beyond `close` and `keep-alive`, sorted
    /// without regard to case; empty (and unallocated) for nearly every
    /// head.
    named: Vec<&'a [u8]>,
}

impl<'a> HopByHop<'a> {
    /// Reads what `headers`' `Connection` fields name.
    pub(super) fn of(headers: &[httparse::Header<'a>]) -> Self {
        let mut named = Vec::new();
        for header in headers {
            if header.name.eq_ignore_ascii_case("connection") {
                named.extend(list_items(header.value).filter(|token| {
                    !token.eq_ignore_ascii_case(b"close")
                        && !token.eq_ignore_ascii_case(b"keep-alive")
                }));
            }
        }
        named.sort_unstable_by(|a, b| compare_ignoring_case(a, b));
        HopByHop { named }
    }

    /// Whether the field `name` stays on this hop.
    pub(super) fn drops(&self, name: &str) -> bool {
        ALWAYS_DROPPED
            .iter()
            .any(|hop| name.eq_ignore_ascii_case(hop))
            || (!self.named.is_empty()
                && self
                    .named
                    .binary_search_by(|token| compare_ignoring_case(token, name.as_bytes()))
                    .is_ok())
    }
}

/// Orders `a` and `b` as their ASCII-lowercase forms, without building them.
fn compare_ignoring_case(a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    a.iter()
        .map(u8::to_ascii_lowercase)
        .cmp(b.iter().map(u8::to_ascii_lowercase))
}

/// Appends `name: value` and its CRLF.
pub(super) fn push_field(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}
