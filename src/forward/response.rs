//! An upstream's response head: parsed for what the lab needs (how its
//! body is delimited, whether the upstream connection can be used again),
//! then written again for the client (RFC 9110 §7.6, RFC 9112 §6.3).
//!
//! Parsing ([`parse_upstream_head`]) takes the framing rules of RFC 9112
//! §6.3 in order: a response to HEAD, a 1xx, 204 or 304 has no body;
//! `Transfer-Encoding: chunked` wins over `Content-Length` (and then the
//! connection is not used again: such a response might be an attempt at
//! smuggling); a `Content-Length` gives the length (conflicting ones are
//! refused); with neither, the body runs until the upstream closes. A
//! transfer coding other than a lone `chunked` is refused, as nginx does:
//! the lab does not decode gzip. 101 is refused: the lab forwarded no
//! `Upgrade`. A head over [`MAX_UPSTREAM_HEAD`], or one that does not
//! parse, is a [`BadResponse`] (a 502 for the client).
//!
//! Writing ([`write_client_head`]) keeps the upstream's status, reason and
//! fields, its `Date` included, except the hop-by-hop and framing ones,
//! then says the framing and persistence the lab chose for its client:
//!
//! | upstream body | HTTP/1.1 client | HTTP/1.0 client |
//! |---|---|---|
//! | none (HEAD, 1xx, 204, 304) | the upstream's `Content-Length` kept for HEAD and 304 | the same |
//! | `Content-Length: N` | `Content-Length: N`, bytes as they come | the same |
//! | chunked | chunked, bytes as they come | decoded, then `Connection: close` |
//! | until close | chunked, each read one chunk: stays persistent | bytes as they come, then `Connection: close` |
//!
//! A 1xx head goes to an HTTP/1.1 client as it came, hop-by-hop fields
//! removed, and to an HTTP/1.0 one not at all (RFC 9110 §15.2).

use super::fields::{HopByHop, list_items, push_field, trim, with_response};
use crate::date::DATE_LEN;
use crate::http::response::{Persistence, push_decimal, push_persistence};

/// The longest upstream head the lab reads (nginx's `proxy_buffer_size`
/// is 4 or 8 KiB, past which it answers 502).
pub const MAX_UPSTREAM_HEAD: usize = 64 * 1024;

/// What the lab needs to know of an upstream's response head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UpstreamHead {
    pub status: u16,
    /// The head's bytes, blank line included: the body starts there.
    pub len: usize,
    pub framing: ResponseFraming,
    /// The upstream connection can take another request once the body is
    /// read (meaningless for an interim head: the final one decides).
    pub reusable: bool,
    /// A 1xx: another head follows.
    pub interim: bool,
    /// `Keep-Alive: timeout=N`: how many seconds the upstream says it
    /// keeps an idle connection (its pool keeps them less).
    pub keep_alive_timeout_s: Option<u64>,
}

/// How an upstream's response body is delimited (RFC 9112 §6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResponseFraming {
    /// No body, whatever the fields say.
    Empty,
    Length(u64),
    Chunked,
    /// The body ends when the upstream closes.
    UntilClose,
}

/// Why an upstream's response head cannot be forwarded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BadResponse {
    /// Over [`MAX_UPSTREAM_HEAD`].
    TooLarge,
    /// Not an HTTP/1.x response head.
    Malformed(&'static str),
    /// Framing the lab cannot follow or will not trust.
    Framing(&'static str),
    /// 101, to a request whose `Upgrade` the lab did not forward.
    SwitchingProtocols,
}

impl BadResponse {
    /// A few words for the log and the 502's body.
    pub fn why(self) -> &'static str {
        match self {
            BadResponse::TooLarge => "response head too large",
            BadResponse::Malformed(why) | BadResponse::Framing(why) => why,
            BadResponse::SwitchingProtocols => {
                "101 Switching Protocols to a request without Upgrade"
            }
        }
    }
}

/// Parses the upstream's response head at the start of `input`.
/// `Ok(None)`: incomplete, read more.
pub fn parse_upstream_head(
    input: &[u8],
    request_was_head: bool,
) -> Result<Option<UpstreamHead>, BadResponse> {
    with_response(input, |status, response| match status {
        Ok(httparse::Status::Complete(len)) if len > MAX_UPSTREAM_HEAD => {
            Err(BadResponse::TooLarge)
        }
        Ok(httparse::Status::Complete(len)) => read(response, len, request_was_head).map(Some),
        Ok(httparse::Status::Partial) if input.len() >= MAX_UPSTREAM_HEAD => {
            Err(BadResponse::TooLarge)
        }
        Ok(httparse::Status::Partial) => Ok(None),
        Err(httparse::Error::TooManyHeaders) => Err(BadResponse::TooLarge),
        Err(error) => Err(BadResponse::Malformed(syntax_error(error))),
    })
}

fn syntax_error(error: httparse::Error) -> &'static str {
    match error {
        httparse::Error::HeaderName => "invalid header name",
        httparse::Error::HeaderValue => "invalid header value",
        httparse::Error::NewLine => "invalid line ending",
        httparse::Error::Status => "invalid status line",
        httparse::Error::Token => "invalid token",
        httparse::Error::TooManyHeaders => "too many header fields",
        httparse::Error::Version => "invalid HTTP version",
    }
}

/// What a complete head says.
fn read(
    response: &httparse::Response<'_, '_>,
    len: usize,
    request_was_head: bool,
) -> Result<UpstreamHead, BadResponse> {
    let status = response.code.unwrap_or_default();
    let minor_version = response.version.unwrap_or_default();
    if status < 100 {
        return Err(BadResponse::Malformed("status code under 100"));
    }
    if status == 101 {
        return Err(BadResponse::SwitchingProtocols);
    }
    let fields = Fields::read(response.headers)?;
    let interim = status < 200;
    let framing = if request_was_head || interim || status == 204 || status == 304 {
        ResponseFraming::Empty
    } else if fields.chunked {
        ResponseFraming::Chunked
    } else if let Some(length) = fields.content_length {
        ResponseFraming::Length(length)
    } else {
        ResponseFraming::UntilClose
    };
    let persistent = match minor_version {
        0 => fields.keep_alive && !fields.close,
        _ => !fields.close,
    };
    // RFC 9112 §6.1 and §6.3: chunked with a length, or in HTTP/1.0, is
    // processed and then the connection closed.
    let suspect = fields.chunked && (fields.content_length.is_some() || minor_version == 0);
    Ok(UpstreamHead {
        status,
        len,
        framing,
        reusable: persistent && !suspect && framing != ResponseFraming::UntilClose,
        interim,
        keep_alive_timeout_s: fields.keep_alive_timeout_s,
    })
}

/// The fields of an upstream head that decide its framing and persistence.
#[derive(Default)]
struct Fields {
    content_length: Option<u64>,
    chunked: bool,
    close: bool,
    keep_alive: bool,
    keep_alive_timeout_s: Option<u64>,
}

impl Fields {
    fn read(headers: &[httparse::Header<'_>]) -> Result<Fields, BadResponse> {
        let mut fields = Fields::default();
        for header in headers {
            let name = header.name;
            if name.eq_ignore_ascii_case("content-length") {
                fields.add_content_length(header.value)?;
            } else if name.eq_ignore_ascii_case("transfer-encoding") {
                fields.add_transfer_codings(header.value)?;
            } else if name.eq_ignore_ascii_case("connection") {
                for token in list_items(header.value) {
                    fields.close |= token.eq_ignore_ascii_case(b"close");
                    fields.keep_alive |= token.eq_ignore_ascii_case(b"keep-alive");
                }
            } else if name.eq_ignore_ascii_case("keep-alive") {
                fields.keep_alive_timeout_s =
                    keep_alive_timeout(header.value).or(fields.keep_alive_timeout_s);
            }
        }
        Ok(fields)
    }

    /// RFC 9110 §8.6: digits only; a list or repeat must agree.
    fn add_content_length(&mut self, value: &[u8]) -> Result<(), BadResponse> {
        let bad = BadResponse::Framing("bad Content-Length");
        let mut items = 0;
        for item in list_items(value) {
            items += 1;
            let length = std::str::from_utf8(item)
                .ok()
                .filter(|digits| digits.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|digits| digits.parse::<u64>().ok())
                .ok_or(bad)?;
            if self.content_length.is_some_and(|seen| seen != length) {
                return Err(BadResponse::Framing("conflicting Content-Length"));
            }
            self.content_length = Some(length);
        }
        if items == 0 {
            return Err(bad);
        }
        Ok(())
    }

    /// Only `chunked`, once: the lab decodes no other transfer coding.
    fn add_transfer_codings(&mut self, value: &[u8]) -> Result<(), BadResponse> {
        for coding in list_items(value) {
            if self.chunked || !coding.eq_ignore_ascii_case(b"chunked") {
                return Err(BadResponse::Framing(
                    "a transfer coding other than a lone chunked",
                ));
            }
            self.chunked = true;
        }
        if !self.chunked {
            return Err(BadResponse::Framing("empty Transfer-Encoding"));
        }
        Ok(())
    }
}

/// The seconds of a `Keep-Alive` field's `timeout=N` (its leading digits,
/// as Node's agent reads it: `timeout=5s` is 5), if it has one.
fn keep_alive_timeout(value: &[u8]) -> Option<u64> {
    list_items(value).find_map(|item| {
        let (name, seconds) = item.split_at(item.iter().position(|&b| b == b'=')?);
        if !trim(name).eq_ignore_ascii_case(b"timeout") {
            return None;
        }
        let seconds = trim(&seconds[1..]);
        let digits = seconds.iter().take_while(|b| b.is_ascii_digit()).count();
        let seconds = std::str::from_utf8(&seconds[..digits]).ok()?;
        // More digits than a u64 holds: as long as can be said.
        (digits > 0).then(|| seconds.parse().unwrap_or(u64::MAX))
    })
}

/// The client's side of a forwarded response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientSide<'a> {
    /// 0 for an HTTP/1.0 client, 1 for HTTP/1.1.
    pub minor_version: u8,
    /// The request was HEAD.
    pub is_head: bool,
    /// What the lab decided for the client's connection (its own terms,
    /// not the upstream's: `Connection` is hop-by-hop).
    pub persistence: Persistence,
    /// The prebuilt keep-alive fields, as `ResponseHead::keep_alive_header`.
    pub keep_alive_header: &'a [u8],
    /// As `ResponseHead::requests_left`: `Keep-Alive: max=N`.
    pub requests_left: Option<u32>,
    /// The lab's `Date`, sent only when the upstream's head has none.
    pub date: &'a [u8; DATE_LEN],
}

/// How the body that follows a head written for the client is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientFraming {
    /// No body (HEAD, 1xx, 204, 304).
    None,
    /// The upstream's body bytes as they come, its framing included
    /// (`Content-Length`, or chunked to an HTTP/1.1 client: the engine
    /// follows the chunks only to find the end).
    Raw,
    /// Each piece of a body that runs until the upstream's close sent as
    /// one chunk, and the last chunk once the upstream has closed.
    Chunks,
    /// The body's data (the upstream's chunked coding taken off), then the
    /// client's connection closes: an HTTP/1.0 client.
    UntilClose,
}

/// What [`write_client_head`] wrote for the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientHead {
    pub framing: ClientFraming,
    /// What the head said: [`ClientSide::persistence`], or `Close` when
    /// the body can only end with the connection.
    pub persistence: Persistence,
}

/// Appends to `out` the head the client gets for the upstream's head
/// `raw_upstream_head` (its first `parsed.len` bytes are the head), which
/// [`parse_upstream_head`] read as `parsed`.
pub fn write_client_head(
    raw_upstream_head: &[u8],
    parsed: &UpstreamHead,
    client: ClientSide<'_>,
    out: &mut Vec<u8>,
) -> ClientHead {
    let (framing, persistence) = client_terms(parsed, &client);
    let head = ClientHead {
        framing,
        persistence,
    };
    if parsed.interim && client.minor_version == 0 {
        return head;
    }
    let raw = &raw_upstream_head[..parsed.len.min(raw_upstream_head.len())];
    with_response(raw, |_, response| {
        out.extend_from_slice(b"HTTP/1.1 ");
        push_decimal(out, u64::from(parsed.status));
        out.push(b' ');
        out.extend_from_slice(response.reason.unwrap_or_default().as_bytes());
        out.extend_from_slice(b"\r\n");
        let kept_length = parsed.framing == ResponseFraming::Empty && keeps_length(parsed, &client);
        let wrote_date = push_end_to_end(out, response.headers, kept_length, &client);
        if parsed.interim {
            out.extend_from_slice(b"\r\n");
            return;
        }
        if !wrote_date {
            push_field(out, b"Date", client.date);
        }
        match parsed.framing {
            ResponseFraming::Length(length) => {
                out.extend_from_slice(b"Content-Length: ");
                push_decimal(out, length);
                out.extend_from_slice(b"\r\n");
            }
            ResponseFraming::Chunked | ResponseFraming::UntilClose if client.minor_version >= 1 => {
                out.extend_from_slice(b"Transfer-Encoding: chunked\r\n");
            }
            _ => {}
        }
        push_persistence(
            out,
            persistence,
            client.keep_alive_header,
            client.requests_left,
        );
        out.extend_from_slice(b"\r\n");
    });
    head
}

/// The client's framing, and the persistence the head says.
fn client_terms(parsed: &UpstreamHead, client: &ClientSide<'_>) -> (ClientFraming, Persistence) {
    let http_1_1 = client.minor_version >= 1;
    let framing = match parsed.framing {
        ResponseFraming::Empty => ClientFraming::None,
        ResponseFraming::Length(_) => ClientFraming::Raw,
        ResponseFraming::Chunked if http_1_1 => ClientFraming::Raw,
        ResponseFraming::UntilClose if http_1_1 => ClientFraming::Chunks,
        ResponseFraming::Chunked | ResponseFraming::UntilClose => ClientFraming::UntilClose,
    };
    let persistence = match framing {
        ClientFraming::UntilClose => Persistence::Close,
        _ => client.persistence,
    };
    (framing, persistence)
}

/// Whether a body-less response keeps the upstream's framing fields, which
/// describe the body a GET would have had: for HEAD and 304 (RFC 9110
/// §8.6), not for 1xx or 204, which must not carry them.
fn keeps_length(parsed: &UpstreamHead, client: &ClientSide<'_>) -> bool {
    !parsed.interim && parsed.status != 204 && (client.is_head || parsed.status == 304)
}

/// Appends the upstream's end-to-end fields, and its framing ones as they
/// are when `kept_length` (chunked only to an HTTP/1.1 client). Returns
/// whether a `Date` was among them.
fn push_end_to_end(
    out: &mut Vec<u8>,
    headers: &[httparse::Header<'_>],
    kept_length: bool,
    client: &ClientSide<'_>,
) -> bool {
    let hops = HopByHop::of(headers);
    let mut wrote_date = false;
    for header in headers {
        let name = header.name;
        let framing_kept = kept_length
            && (name.eq_ignore_ascii_case("content-length")
                || (name.eq_ignore_ascii_case("transfer-encoding") && client.minor_version >= 1));
        if hops.drops(name) && !framing_kept {
            continue;
        }
        wrote_date |= name.eq_ignore_ascii_case("date");
        push_field(out, name.as_bytes(), trim(header.value));
    }
    wrote_date
}

#[cfg(test)]
mod tests;
