//! Request heads (RFC 9112 §2–§3, §6–§7): httparse reads the syntax, this
//! module decides what the head means: the target, whether the connection
//! may persist, how the body is framed, and every reason to refuse it.

use std::mem::MaybeUninit;

mod version;

use super::RequestError;
use super::method::Method;
use super::target::{Target, is_host_value, parse_target};
use version::{
    later_minor_version_line_incomplete, names_another_major_version, names_later_minor_version,
    patch_later_minor_version, version_incomplete,
};

/// Header fields parsed into an array on the stack (2 KiB). A head with
/// more is parsed again into room for up to its limit, on the heap: what
/// nearly every request pays stays small, and the count a head may carry
/// is a setting (`--max-headers`), not a stack size.
const INLINE_HEADER_FIELDS: usize = 64;
/// Fewest bytes a header field line takes: a name, `:` and a line end.
const MIN_FIELD_LINE: usize = 3;
/// Empty lines tolerated before a request line (RFC 9112 §2.2 "at least one").
const MAX_LEADING_EMPTY_LINES: usize = 8;

/// What one request head may take; past these it is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeadLimits {
    /// Bytes of the head, request line included (`--max-header-size`):
    /// more is 431 (414 when the request line alone does not fit).
    pub head_size: usize,
    /// Header fields (`--max-headers`): more is 431; 0 leaves the count to
    /// `head_size` alone.
    pub header_fields: usize,
    /// Body bytes a `Content-Length` may announce (`--max-body-size`): more
    /// is 413.
    pub body_size: usize,
}

impl HeadLimits {
    /// The most header fields a head may carry.
    fn most_fields(&self) -> usize {
        match self.header_fields {
            0 => usize::MAX,
            n => n,
        }
    }
}

/// How a request's body is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    None,
    Length(u64),
    Chunked,
}

/// What the server needs to know about a parsed request head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestHead<'a> {
    /// The checked target (never authority-form: CONNECT is refused).
    pub target: Target<'a>,
    /// The method, as the metrics count it.
    pub method: Method,
    pub is_head: bool,
    /// 0 for HTTP/1.0, 1 for HTTP/1.1 (and later 1.x).
    pub minor_version: u8,
    pub framing: Framing,
    /// `Connection: close` was sent.
    pub close: bool,
    /// `Connection: keep-alive` was sent.
    pub keep_alive: bool,
    /// `Expect: 100-continue` on an HTTP/1.1 request.
    pub expect_continue: bool,
    /// The `User-Agent` field's value, as sent (the last one).
    pub user_agent: Option<&'a [u8]>,
    /// The `Host` field's value, trimmed (the last one): the address the
    /// client says it reached, which a proxy rewrites to its upstream's.
    pub host: Option<&'a [u8]>,
    /// A proxy forwarded the request (`Forwarded`, `Via`, `X-Real-IP` or
    /// an `X-Forwarded-*` field was sent).
    pub forwarded: bool,
}

impl RequestHead<'_> {
    /// Whether the client asked for (or, on 1.1, did not refuse) persistence.
    pub fn wants_persistence(&self) -> bool {
        if self.minor_version == 0 {
            self.keep_alive && !self.close
        } else {
            !self.close
        }
    }
}

/// Parses the head at the start of `input`. `Ok(None)`: incomplete, read
/// more. `Ok(Some((head, len)))`: the head and the bytes it took.
/// `input` is mutable only to read an `HTTP/1.x` request line with x > 1 as
/// HTTP/1.1 (RFC 9112 §2.6), by rewriting the minor digit in place.
pub fn parse_head(
    input: &mut [u8],
    limits: HeadLimits,
) -> Result<Option<(RequestHead<'_>, usize)>, RequestError> {
    let leading = input
        .iter()
        .take_while(|b| matches!(b, b'\r' | b'\n'))
        .count();
    if leading > 2 * MAX_LEADING_EMPTY_LINES {
        return Err(RequestError::Malformed(
            "too many empty lines before the request",
        ));
    }
    // httparse refuses `HTTP/1.x` (x > 1); RFC 9112 §2.6 reads it as
    // HTTP/1.1. Until the line ends, wait for the rest, however the bytes
    // split; then rewrite the digit and parse again. (Only a request line
    // that ends so is parsed twice: the head returned borrows the input,
    // so the rewrite has to come before the parse that returns it.)
    if names_later_minor_version(input) {
        match parse_as_is(input, limits)? {
            Parsed::LaterMinorVersion if later_minor_version_line_incomplete(input) => {
                if input.len() >= limits.head_size {
                    return Err(RequestError::TargetTooLong);
                }
                return Ok(None);
            }
            Parsed::LaterMinorVersion => {
                patch_later_minor_version(input);
            }
            Parsed::Incomplete => return Ok(None),
            Parsed::Head(..) => {}
        }
    }
    match parse_as_is(input, limits)? {
        Parsed::Head(head, len) => Ok(Some((head, len))),
        Parsed::Incomplete => Ok(None),
        Parsed::LaterMinorVersion => Err(RequestError::Malformed("invalid HTTP-version")),
    }
}

/// What one parse of the buffered bytes found.
enum Parsed<'a> {
    Head(RequestHead<'a>, usize),
    /// Read more.
    Incomplete,
    /// httparse refused the version, which names HTTP/1.x with x > 1.
    LaterMinorVersion,
}

/// Parses the head at the start of `input` as it stands: into the stack
/// array, and only when that is too small (and the limit allows more),
/// again into room on the heap for as many fields as the head can hold.
fn parse_as_is(input: &[u8], limits: HeadLimits) -> Result<Parsed<'_>, RequestError> {
    // Uninitialised: httparse writes only the fields it finds, so a
    // request does not pay for zeroing all the slots.
    let mut inline = [const { MaybeUninit::uninit() }; INLINE_HEADER_FIELDS];
    let most = limits.most_fields();
    let room = most.min(INLINE_HEADER_FIELDS);
    match parse_into(input, &mut inline[..room], limits) {
        Err(RequestError::TooManyHeaders) if most > INLINE_HEADER_FIELDS => {
            parse_spilled(input, most, limits)
        }
        parsed => parsed,
    }
}

/// [`parse_as_is`] for a head with more fields than the stack array holds:
/// room for `most` of them, or for as many as the head's bytes can hold if
/// that is fewer.
#[cold]
fn parse_spilled(
    input: &[u8],
    most: usize,
    limits: HeadLimits,
) -> Result<Parsed<'_>, RequestError> {
    let head = input.len().min(limits.head_size);
    let room = most.min(head / MIN_FIELD_LINE + 1);
    let mut spilled = Vec::with_capacity(room);
    spilled.resize_with(room, MaybeUninit::uninit);
    parse_into(input, &mut spilled, limits)
}

/// Parses the head at the start of `input` with room for `headers.len()`
/// fields: more is [`RequestError::TooManyHeaders`].
#[inline]
fn parse_into<'b>(
    input: &'b [u8],
    headers: &mut [MaybeUninit<httparse::Header<'b>>],
    limits: HeadLimits,
) -> Result<Parsed<'b>, RequestError> {
    let max_header_size = limits.head_size;
    let mut request = httparse::Request::new(&mut []);
    let head_len = match request.parse_with_uninit_headers(input, headers) {
        Ok(httparse::Status::Complete(len)) if len <= max_header_size => len,
        Ok(httparse::Status::Complete(_)) => return Err(too_large(input, max_header_size)),
        Ok(httparse::Status::Partial) if input.len() >= max_header_size => {
            return Err(too_large(input, max_header_size));
        }
        Ok(httparse::Status::Partial) => return Ok(Parsed::Incomplete),
        Err(httparse::Error::Version) if names_later_minor_version(input) => {
            return Ok(Parsed::LaterMinorVersion);
        }
        // httparse refuses `HTTP/2` before its `.0` arrives; whether the
        // version is unsupported (505) or malformed (400) shows only once it
        // is whole, so wait for it, however the bytes split.
        Err(httparse::Error::Version) if version_incomplete(input) => {
            if input.len() >= max_header_size {
                return Err(too_large(input, max_header_size));
            }
            return Ok(Parsed::Incomplete);
        }
        Err(error) => return Err(syntax_error(error, input)),
    };
    // RFC 9112 §2.2 lets a recipient accept a bare LF as a line end; behind
    // a proxy that reads lines otherwise, that is a smuggling hole, so this
    // server takes CRLF only (as Node's parser and gunicorn do).
    if has_bare_lf(&input[..head_len]) {
        return Err(RequestError::Malformed("line not ended by CRLF"));
    }
    let minor_version = request.version.unwrap_or(1);
    let method = request.method.unwrap_or("GET");
    let target = parse_target(method, request.path.unwrap_or("/"))?;
    let fields = HeaderFields::read(request.headers, minor_version)?;
    if method == "CONNECT" {
        // A well-formed CONNECT (any target form): this server is not a
        // proxy. 405 with `Allow`, as nginx answers.
        return Err(RequestError::MethodNotAllowed);
    }
    let framing = fields.framing(minor_version, limits.body_size)?;
    Ok(Parsed::Head(
        RequestHead {
            target,
            method: Method::of(method),
            is_head: method == "HEAD",
            minor_version,
            framing,
            close: fields.close,
            keep_alive: fields.keep_alive,
            expect_continue: fields.expect_continue,
            user_agent: fields.user_agent,
            host: fields.host,
            forwarded: fields.forwarded,
        },
        head_len,
    ))
}

/// The header fields that matter here, gathered over repeated fields.
#[derive(Default)]
struct HeaderFields<'a> {
    hosts: usize,
    content_length: Option<u64>,
    /// Transfer codings in order, as seen: (is chunked, count).
    codings: usize,
    chunked_last: bool,
    chunked_before_last: bool,
    unknown_coding: bool,
    close: bool,
    keep_alive: bool,
    expect_continue: bool,
    user_agent: Option<&'a [u8]>,
    host: Option<&'a [u8]>,
    forwarded: bool,
}

impl<'a> HeaderFields<'a> {
    fn read(headers: &[httparse::Header<'a>], minor_version: u8) -> Result<Self, RequestError> {
        let mut fields = HeaderFields::default();
        for header in headers {
            let name = header.name;
            let value = header.value;
            if name.eq_ignore_ascii_case("host") {
                fields.hosts += 1;
                let host = trim(value);
                if !is_host_value(host) {
                    return Err(RequestError::Malformed("invalid Host"));
                }
                fields.host = Some(host);
            } else if name.eq_ignore_ascii_case("content-length") {
                fields.add_content_length(value)?;
            } else if name.eq_ignore_ascii_case("transfer-encoding") {
                fields.add_transfer_codings(value)?;
            } else if name.eq_ignore_ascii_case("connection") {
                for token in list_items(value) {
                    fields.close |= token.eq_ignore_ascii_case(b"close");
                    fields.keep_alive |= token.eq_ignore_ascii_case(b"keep-alive");
                }
            } else if name.eq_ignore_ascii_case("expect") && minor_version >= 1 {
                // RFC 9110 §10.1.1: a 1.0 request's expectation is ignored.
                if trim(value).eq_ignore_ascii_case(b"100-continue") {
                    fields.expect_continue = true;
                } else {
                    return Err(RequestError::ExpectationFailed);
                }
            } else if name.eq_ignore_ascii_case("user-agent") {
                fields.user_agent = Some(trim(value));
            } else if names_a_forwarding_field(name) {
                fields.forwarded = true;
            }
        }
        if minor_version >= 1 && fields.hosts != 1 {
            return Err(RequestError::Malformed("HTTP/1.1 needs exactly one Host"));
        }
        Ok(fields)
    }

    /// RFC 9110 §8.6: digits only; a list or repeat must agree.
    fn add_content_length(&mut self, value: &[u8]) -> Result<(), RequestError> {
        let mut items = 0;
        for item in list_items(value) {
            items += 1;
            let length = parse_length(item)?;
            if self.content_length.is_some_and(|seen| seen != length) {
                return Err(RequestError::Malformed("conflicting Content-Length"));
            }
            self.content_length = Some(length);
        }
        if items == 0 {
            return Err(RequestError::Malformed("empty Content-Length"));
        }
        Ok(())
    }

    /// RFC 9112 §6.1: codings apply in order; chunked must be last, once.
    fn add_transfer_codings(&mut self, value: &[u8]) -> Result<(), RequestError> {
        let mut items = 0;
        for coding in list_items(value) {
            items += 1;
            self.codings += 1;
            if self.chunked_last {
                self.chunked_before_last = true;
            }
            // Parameters (`;q=...`) do not change which coding it is.
            let name = trim(coding.split(|&b| b == b';').next().unwrap_or_default());
            self.chunked_last = name.eq_ignore_ascii_case(b"chunked");
            self.unknown_coding |= !self.chunked_last;
        }
        if items == 0 {
            return Err(RequestError::Malformed("empty Transfer-Encoding"));
        }
        Ok(())
    }

    /// RFC 9112 §6.3: how the body is delimited, or why it cannot be.
    fn framing(&self, minor_version: u8, max_body_size: usize) -> Result<Framing, RequestError> {
        if self.codings > 0 {
            if minor_version == 0 {
                return Err(RequestError::Malformed("Transfer-Encoding in HTTP/1.0"));
            }
            if self.content_length.is_some() {
                return Err(RequestError::Malformed(
                    "both Content-Length and Transfer-Encoding",
                ));
            }
            if self.unknown_coding {
                return Err(RequestError::UnsupportedTransferCoding);
            }
            if self.chunked_before_last || !self.chunked_last {
                return Err(RequestError::Malformed(
                    "chunked must be the final coding, once",
                ));
            }
            return Ok(Framing::Chunked);
        }
        match self.content_length {
            Some(length) if length > max_body_size as u64 => Err(RequestError::BodyTooLarge),
            Some(0) | None => Ok(Framing::None),
            Some(length) => Ok(Framing::Length(length)),
        }
    }
}

fn parse_length(item: &[u8]) -> Result<u64, RequestError> {
    if item.is_empty() || !item.iter().all(u8::is_ascii_digit) {
        return Err(RequestError::Malformed("Content-Length is not digits"));
    }
    item.iter().try_fold(0u64, |acc, &digit| {
        acc.checked_mul(10)
            .and_then(|acc| acc.checked_add(u64::from(digit - b'0')))
            .ok_or(RequestError::BodyTooLarge)
    })
}

/// Whether a field named `name` is one a proxy adds to say it forwarded
/// the request: `Forwarded`, `Via`, `X-Real-IP` (nginx configurations set
/// it) or any `X-Forwarded-*` (`-For`, `-Proto`, `-Host`).
fn names_a_forwarding_field(name: &str) -> bool {
    const X_FORWARDED: &str = "x-forwarded-";
    name.eq_ignore_ascii_case("forwarded")
        || name.eq_ignore_ascii_case("via")
        || name.eq_ignore_ascii_case("x-real-ip")
        || name
            .get(..X_FORWARDED.len())
            .is_some_and(|start| start.eq_ignore_ascii_case(X_FORWARDED))
}

/// The comma-separated items of a field value, trimmed, empty ones skipped.
pub(crate) fn list_items(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    value
        .split(|&b| b == b',')
        .map(trim)
        .filter(|item| !item.is_empty())
}

/// `bytes` without the spaces and tabs around it.
pub(crate) fn trim(bytes: &[u8]) -> &[u8] {
    let is_space = |b: &u8| *b == b' ' || *b == b'\t';
    let start = bytes
        .iter()
        .position(|b| !is_space(b))
        .unwrap_or(bytes.len());
    let end = bytes
        .iter()
        .rposition(|b| !is_space(b))
        .map_or(start, |at| at + 1);
    &bytes[start..end]
}

/// A head over the limit: 414 if the request line alone does not fit
/// (RFC 9112 §3), else 431.
fn too_large(input: &[u8], max_header_size: usize) -> RequestError {
    let start = leading_empty_lines(input);
    let line_fits = input[start..]
        .iter()
        .take(max_header_size)
        .any(|&b| b == b'\n');
    if line_fits {
        RequestError::HeadTooLarge
    } else {
        RequestError::TargetTooLong
    }
}

/// Whether some LF in `head` is not preceded by CR.
///
/// In a head httparse has accepted, every CR is followed by LF (it refuses
/// a lone CR), so an LF without a CR before it shows as more LFs than CRs:
/// two counts the compiler vectorises, not a scan that looks behind each LF.
fn has_bare_lf(head: &[u8]) -> bool {
    // Counted in u8 lanes, a chunk at a time (vectorises 16 bytes a step).
    let mut surplus = 0isize;
    for chunk in head.chunks(u8::MAX as usize) {
        let count = |byte: u8| chunk.iter().fold(0u8, |n, &b| n + u8::from(b == byte));
        surplus += isize::from(count(b'\n')) - isize::from(count(b'\r'));
    }
    surplus > 0
}

fn leading_empty_lines(input: &[u8]) -> usize {
    input
        .iter()
        .take_while(|b| matches!(b, b'\r' | b'\n'))
        .count()
}

fn syntax_error(error: httparse::Error, input: &[u8]) -> RequestError {
    match error {
        httparse::Error::Version if names_another_major_version(input) => {
            RequestError::UnsupportedVersion
        }
        httparse::Error::Version => RequestError::Malformed("invalid HTTP-version"),
        httparse::Error::TooManyHeaders => RequestError::TooManyHeaders,
        httparse::Error::HeaderName => RequestError::Malformed("invalid header name"),
        httparse::Error::HeaderValue => RequestError::Malformed("invalid header value"),
        httparse::Error::NewLine => RequestError::Malformed("invalid line ending"),
        httparse::Error::Status | httparse::Error::Token => {
            RequestError::Malformed("invalid request line")
        }
    }
}

#[cfg(test)]
mod tests;
