//! Request heads (RFC 9112 §2–§3, §6–§7): httparse reads the syntax, this
//! module decides what the head means: the target, whether the connection
//! may persist, how the body is framed, and every reason to refuse it.

use std::mem::MaybeUninit;

use super::RequestError;
use super::method::Method;
use super::target::{Target, is_host_value, parse_target};

/// Header fields one head may carry; more is 431.
pub const MAX_HEADERS: usize = 64;
/// Empty lines tolerated before a request line (RFC 9112 §2.2 "at least one").
const MAX_LEADING_EMPTY_LINES: usize = 8;

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
    max_header_size: usize,
    max_body_size: usize,
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
        match parse_as_is(input, max_header_size, max_body_size)? {
            Parsed::LaterMinorVersion if later_minor_version_line_incomplete(input) => {
                if input.len() >= max_header_size {
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
    match parse_as_is(input, max_header_size, max_body_size)? {
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

/// Parses the head at the start of `input` as it stands.
fn parse_as_is(
    input: &[u8],
    max_header_size: usize,
    max_body_size: usize,
) -> Result<Parsed<'_>, RequestError> {
    // Uninitialised: httparse writes only the fields it finds, so a
    // request does not pay for zeroing all MAX_HEADERS slots (2 KiB).
    let mut headers = [const { MaybeUninit::uninit() }; MAX_HEADERS];
    let mut request = httparse::Request::new(&mut []);
    let head_len = match request.parse_with_uninit_headers(input, &mut headers) {
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
    if target == Target::Authority {
        // A well-formed CONNECT: this server is not a proxy.
        return Err(RequestError::MethodNotAllowed);
    }
    let framing = fields.framing(minor_version, max_body_size)?;
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
        },
        head_len,
    ))
}

/// The header fields that matter here, gathered over repeated fields.
#[derive(Default)]
struct HeaderFields {
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
}

impl HeaderFields {
    fn read(headers: &[httparse::Header<'_>], minor_version: u8) -> Result<Self, RequestError> {
        let mut fields = HeaderFields::default();
        for header in headers {
            let name = header.name;
            let value = header.value;
            if name.eq_ignore_ascii_case("host") {
                fields.hosts += 1;
                if !is_host_value(trim(value)) {
                    return Err(RequestError::Malformed("invalid Host"));
                }
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

/// The comma-separated items of a field value, trimmed, empty ones skipped.
fn list_items(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    value
        .split(|&b| b == b',')
        .map(trim)
        .filter(|item| !item.is_empty())
}

fn trim(bytes: &[u8]) -> &[u8] {
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

/// Whether the third part of the request line (after `method SP target SP`)
/// is an HTTP-version by the grammar, `HTTP/` DIGIT `.` DIGIT (RFC 9112
/// §2.3), with a major version other than 1: only that is a version this
/// server does not support (505). Anything else there (`HTTP/01.1`,
/// `HTTP/1.77`, `http/1.1`, a space inside the target) is an invalid
/// request-line (400, RFC 9112 §3).
fn names_another_major_version(input: &[u8]) -> bool {
    let version = version_token(input);
    let version = version.strip_suffix(b"\r").unwrap_or(version);
    version.len() == VERSION_SHAPE.len() && fits_version_shape(version) && version[5] != b'1'
}

/// `HTTP/` DIGIT `.` DIGIT, with `#` standing for a digit.
const VERSION_SHAPE: &[u8; 8] = b"HTTP/#.#";

/// Whether `bytes` could begin an HTTP-version.
fn fits_version_shape(bytes: &[u8]) -> bool {
    bytes.len() <= VERSION_SHAPE.len()
        && bytes
            .iter()
            .zip(VERSION_SHAPE)
            .all(|(&b, &shape)| match shape {
                b'#' => b.is_ascii_digit(),
                _ => b == shape,
            })
}

/// Whether the request line has not ended and what it has of a version
/// could still become a whole one.
fn version_incomplete(input: &[u8]) -> bool {
    let line = &input[leading_empty_lines(input)..];
    if line.contains(&b'\n') {
        return false;
    }
    let version = version_token(line);
    match version.strip_suffix(b"\r") {
        Some(whole) => whole.len() == VERSION_SHAPE.len() && fits_version_shape(whole),
        None => fits_version_shape(version),
    }
}

/// The third part of the request line (after `method SP target SP`), up
/// to its LF.
fn version_token(input: &[u8]) -> &[u8] {
    let start = leading_empty_lines(input);
    let line = input[start..]
        .split(|&b| b == b'\n')
        .next()
        .unwrap_or_default();
    line.splitn(3, |&b| b == b' ').nth(2).unwrap_or_default()
}

/// Rewrites `HTTP/1.x` (x > 1) in the request line to `HTTP/1.1`, so a
/// later minor version is served as 1.1. Returns whether it did.
fn patch_later_minor_version(input: &mut [u8]) -> bool {
    let start = input
        .iter()
        .take_while(|b| matches!(b, b'\r' | b'\n'))
        .count();
    let Some(line_len) = input[start..].iter().position(|&b| b == b'\n') else {
        return false;
    };
    let line_end = start + line_len;
    let line = &input[start..line_end];
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let later_minor = ends_in_later_minor_version(line);
    if later_minor {
        let digit_at = start + line.len() - 1;
        input[digit_at] = b'1';
    }
    later_minor
}

/// Whether the request line (ended or not) ends in ` HTTP/1.x`, x > 1.
fn names_later_minor_version(input: &[u8]) -> bool {
    let line = &input[leading_empty_lines(input)..];
    let line = line.split(|&b| b == b'\n').next().unwrap_or_default();
    ends_in_later_minor_version(line.strip_suffix(b"\r").unwrap_or(line))
}

/// Whether the request line has not ended yet (no LF) and so far ends in
/// ` HTTP/1.x` (x > 1), perhaps with its CR.
fn later_minor_version_line_incomplete(input: &[u8]) -> bool {
    let start = input
        .iter()
        .take_while(|b| matches!(b, b'\r' | b'\n'))
        .count();
    let line = &input[start..];
    if line.contains(&b'\n') {
        return false;
    }
    ends_in_later_minor_version(line.strip_suffix(b"\r").unwrap_or(line))
}

/// Whether `line` ends in ` HTTP/1.x` with a single digit x > 1.
fn ends_in_later_minor_version(line: &[u8]) -> bool {
    let Some(version) = line.len().checked_sub(9).map(|at| &line[at..]) else {
        return false;
    };
    version.starts_with(b" HTTP/1.") && version[8].is_ascii_digit() && version[8] > b'1'
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Parses `text` from a buffer of its own, kept for the test's life.
    fn parse(text: &str) -> Result<Option<(RequestHead<'static>, usize)>, RequestError> {
        let bytes = Box::leak(text.as_bytes().to_vec().into_boxed_slice());
        parse_head(bytes, 16 * 1024, 1 << 20)
    }

    fn head(text: &str) -> RequestHead<'static> {
        parse(text).expect("valid").expect("complete").0
    }

    #[test]
    fn simple_get_is_persistent_on_1_1() {
        let text = "GET / HTTP/1.1\r\nHost: a\r\n\r\n";
        let (parsed, len) = parse(text).unwrap().unwrap();
        assert_eq!(len, text.len());
        assert_eq!(parsed.target, Target::Path("/"));
        assert!(parsed.wants_persistence());
        assert_eq!(parsed.framing, Framing::None);
    }

    #[test]
    fn http10_persists_only_when_asked() {
        assert!(!head("GET / HTTP/1.0\r\n\r\n").wants_persistence());
        assert!(head("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n").wants_persistence());
        assert!(
            !head("GET / HTTP/1.1\r\nHost: a\r\nConnection: foo, close\r\n\r\n")
                .wants_persistence()
        );
    }

    #[test]
    fn partial_head_asks_for_more_until_the_limit() {
        assert_eq!(parse("GET / HTTP/1.1\r\nHost: a\r\n"), Ok(None));
        let mut big = b"GET / HTTP/1.1\r\nX: ".to_vec();
        big.resize(2000, b'a');
        assert_eq!(
            parse_head(&mut big, 1024, 1 << 20),
            Err(RequestError::HeadTooLarge)
        );
    }

    #[test]
    fn host_rules_on_1_1() {
        assert!(parse("GET / HTTP/1.1\r\n\r\n").is_err());
        assert!(parse("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n").is_err());
        assert!(parse("GET / HTTP/1.0\r\n\r\n").is_ok());
        for good in [
            "a.example:8080",
            "[::1]:80",
            "",
            "10.0.0.1",
            "xn--d-1ga.example",
        ] {
            let text = format!("GET / HTTP/1.1\r\nHost: {good}\r\n\r\n");
            assert!(parse(&text).is_ok(), "{good:?}");
        }
        for bad in ["a b", "a/b", "u@a", "a?b", "a#b", "a\"b"] {
            let text = format!("GET / HTTP/1.1\r\nHost: {bad}\r\n\r\n");
            assert!(
                matches!(parse(&text), Err(RequestError::Malformed(_))),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn content_length_rules() {
        assert_eq!(
            head("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\n").framing,
            Framing::Length(5)
        );
        assert_eq!(
            head("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 5\r\n\r\n").framing,
            Framing::Length(5)
        );
        for bad in ["+5", "-1", "5 5", "0x5", "5, 6", ""] {
            let text = format!("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: {bad}\r\n\r\n");
            assert!(
                matches!(parse(&text), Err(RequestError::Malformed(_))),
                "{bad:?}"
            );
        }
        let repeated =
            "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n";
        assert!(parse(repeated).is_err());
        let huge = "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999999\r\n\r\n";
        assert_eq!(parse(huge), Err(RequestError::BodyTooLarge));
        let over = "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 2000000\r\n\r\n";
        assert_eq!(parse(over), Err(RequestError::BodyTooLarge));
    }

    #[test]
    fn transfer_coding_rules() {
        assert_eq!(
            head("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n").framing,
            Framing::Chunked
        );
        let both =
            "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n";
        assert!(matches!(parse(both), Err(RequestError::Malformed(_))));
        let gzip = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n";
        assert_eq!(parse(gzip), Err(RequestError::UnsupportedTransferCoding));
        let twice = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, chunked\r\n\r\n";
        assert!(matches!(parse(twice), Err(RequestError::Malformed(_))));
        let old = "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n";
        assert!(matches!(parse(old), Err(RequestError::Malformed(_))));
    }

    #[test]
    fn versions() {
        assert_eq!(head("GET / HTTP/1.2\r\nHost: a\r\n\r\n").minor_version, 1);
        assert_eq!(
            parse("GET / HTTP/2.0\r\nHost: a\r\n\r\n"),
            Err(RequestError::UnsupportedVersion)
        );
        assert!(parse("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").is_err());
        // Not a version at all: an invalid request-line, 400 (RFC 9112 §3).
        for text in [
            "GET /a b HTTP/1.1\r\n",
            "GET / http/1.1\r\n",
            "GET / FOO\r\n",
        ] {
            assert!(
                matches!(parse(text), Err(RequestError::Malformed(_))),
                "{text:?}"
            );
        }
        let mut client_hello = b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03".to_vec();
        assert!(parse_head(&mut client_hello, 16384, 1024).is_err());
    }

    /// Fuzz regression (fuzz/fuzz_targets/parse_head.rs): the request line
    /// cut right after `HTTP/1.7` was refused 505 while the whole line is
    /// served as HTTP/1.1; a head must parse alike however it is split.
    #[test]
    fn later_minor_version_cut_anywhere_is_incomplete() {
        let text = "GET / HTTP/1.7\r\nHost: a\r\n\r\n";
        for cut in 0..text.len() {
            assert_eq!(parse(&text[..cut]), Ok(None), "cut at {cut}");
        }
        assert_eq!(head(text).minor_version, 1);
        // A longer version is not an HTTP-version at all: 400, cut or not.
        for text in ["GET / HTTP/1.77\r\n", "GET / HTTP/1.7x\r\n"] {
            assert!(
                matches!(parse(text), Err(RequestError::Malformed(_))),
                "{text:?}"
            );
        }
        let mut tiny = b"GET / HTTP/1.7".to_vec();
        assert_eq!(
            parse_head(&mut tiny, 10, 1024),
            Err(RequestError::TargetTooLong)
        );
    }

    /// RFC 9112 §2.3: `HTTP/` DIGIT `.` DIGIT. A version of that shape with
    /// another major is unsupported (505); any other shape is malformed
    /// (400); and the verdict does not depend on where the bytes split.
    #[test]
    fn version_grammar_decides_505_or_400_however_split() {
        let cases = [
            (
                "GET / HTTP/2.0\r\nHost: a\r\n\r\n",
                Some(RequestError::UnsupportedVersion),
            ),
            (
                "GET / HTTP/0.9\r\nHost: a\r\n\r\n",
                Some(RequestError::UnsupportedVersion),
            ),
            ("GET / HTTP/01.1\r\nHost: a\r\n\r\n", None),
            ("GET / HTTP/2\r\nHost: a\r\n\r\n", None),
            ("GET / HTTP/2.00\r\nHost: a\r\n\r\n", None),
            ("GET / HTTP/a.0\r\nHost: a\r\n\r\n", None),
        ];
        for (text, unsupported) in cases {
            let whole = parse(text);
            match unsupported {
                Some(error) => assert_eq!(whole, Err(error), "{text:?}"),
                None => assert!(
                    matches!(whole, Err(RequestError::Malformed(_))),
                    "{text:?}: {whole:?}"
                ),
            }
            for cut in 0..text.len() {
                let part = parse(&text[..cut]);
                assert!(
                    part == Ok(None) || part == whole,
                    "{text:?} cut at {cut}: {part:?}, whole: {whole:?}"
                );
            }
        }
    }

    #[test]
    fn bare_lf_line_ends_are_refused() {
        for text in [
            "GET / HTTP/1.1\nHost: a\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: a\n\r\n",
            "GET / HTTP/1.1\r\nHost: a\r\n\n",
            "GET / HTTP/1.1\nHost: a\n\n",
            "\nGET / HTTP/1.1\r\nHost: a\r\n\r\n",
        ] {
            assert_eq!(
                parse(text),
                Err(RequestError::Malformed("line not ended by CRLF")),
                "{text:?}"
            );
        }
    }

    #[test]
    fn an_overlong_request_line_is_414_and_overlong_headers_431() {
        let mut long_target = b"GET /".to_vec();
        long_target.resize(2000, b'a');
        assert_eq!(
            parse_head(&mut long_target, 1024, 1 << 20),
            Err(RequestError::TargetTooLong)
        );
        let mut whole_line = b"GET /".to_vec();
        whole_line.resize(2000, b'a');
        whole_line.extend_from_slice(b" HTTP/1.1\r\nHost: a\r\n\r\n");
        assert_eq!(
            parse_head(&mut whole_line, 1024, 1 << 20),
            Err(RequestError::TargetTooLong)
        );
        let mut long_field = b"GET / HTTP/1.1\r\nX: ".to_vec();
        long_field.resize(2000, b'a');
        assert_eq!(
            parse_head(&mut long_field, 1024, 1 << 20),
            Err(RequestError::HeadTooLarge)
        );
    }

    #[test]
    fn connect_is_405_and_targets_are_checked() {
        assert_eq!(
            parse("CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\n\r\n"),
            Err(RequestError::MethodNotAllowed)
        );
        for text in [
            "CONNECT / HTTP/1.1\r\nHost: a\r\n\r\n",
            "GET abc HTTP/1.1\r\nHost: a\r\n\r\n",
            "GET ?x HTTP/1.1\r\nHost: a\r\n\r\n",
            "GET ht\"tp://h/ HTTP/1.1\r\nHost: a\r\n\r\n",
            "GET http://h:ffff1/ HTTP/1.1\r\nHost: a\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: :a\r\n\r\n",
        ] {
            assert!(
                matches!(parse(text), Err(RequestError::Malformed(_))),
                "{text:?}"
            );
        }
    }

    #[test]
    fn expectations() {
        assert!(
            head("POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\n")
                .expect_continue
        );
        assert_eq!(
            parse("GET / HTTP/1.1\r\nHost: a\r\nExpect: teapot\r\n\r\n"),
            Err(RequestError::ExpectationFailed)
        );
        assert!(!head("GET / HTTP/1.0\r\nExpect: teapot\r\n\r\n").expect_continue);
    }

    #[test]
    fn leading_empty_lines_tolerated_but_bounded() {
        assert_eq!(
            head("\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n").target,
            Target::Path("/")
        );
        let flood = format!("{}GET / HTTP/1.1\r\nHost: a\r\n\r\n", "\r\n".repeat(100));
        assert!(parse(&flood).is_err());
    }

    #[test]
    fn bad_header_syntax_is_400() {
        for bad in ["Bad Name: x", "Name : x", "X: a\x01b"] {
            let text = format!("GET / HTTP/1.1\r\nHost: a\r\n{bad}\r\n\r\n");
            assert!(
                matches!(parse(&text), Err(RequestError::Malformed(_))),
                "{bad:?}"
            );
        }
        let folded = "GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n b\r\n\r\n";
        assert!(matches!(parse(folded), Err(RequestError::Malformed(_))));
    }
}
