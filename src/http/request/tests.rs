//! Tests of request-head parsing: framing, persistence, targets, limits
//! and every refusal, on heads given as text.

use super::*;

/// The defaults: 16 KiB heads, 2000 fields, 1 MiB bodies.
const DEFAULTS: HeadLimits = HeadLimits {
    head_size: 16 * 1024,
    header_fields: 2000,
    body_size: 1 << 20,
};

/// The defaults with heads of at most `head_size` bytes.
fn heads_of(head_size: usize) -> HeadLimits {
    HeadLimits {
        head_size,
        ..DEFAULTS
    }
}

/// Parses `text` from a buffer of its own, kept for the test's life.
fn parse(text: &str) -> Result<Option<(RequestHead<'static>, usize)>, RequestError> {
    let bytes = Box::leak(text.as_bytes().to_vec().into_boxed_slice());
    parse_head(bytes, DEFAULTS)
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
        !head("GET / HTTP/1.1\r\nHost: a\r\nConnection: foo, close\r\n\r\n").wants_persistence()
    );
}

#[test]
fn partial_head_asks_for_more_until_the_limit() {
    assert_eq!(parse("GET / HTTP/1.1\r\nHost: a\r\n"), Ok(None));
    let mut big = b"GET / HTTP/1.1\r\nX: ".to_vec();
    big.resize(2000, b'a');
    assert_eq!(
        parse_head(&mut big, heads_of(1024)),
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
    let repeated = "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n";
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
    assert!(parse_head(&mut client_hello, DEFAULTS).is_err());
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
        parse_head(&mut tiny, heads_of(10)),
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
        parse_head(&mut long_target, heads_of(1024)),
        Err(RequestError::TargetTooLong)
    );
    let mut whole_line = b"GET /".to_vec();
    whole_line.resize(2000, b'a');
    whole_line.extend_from_slice(b" HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_eq!(
        parse_head(&mut whole_line, heads_of(1024)),
        Err(RequestError::TargetTooLong)
    );
    let mut long_field = b"GET / HTTP/1.1\r\nX: ".to_vec();
    long_field.resize(2000, b'a');
    assert_eq!(
        parse_head(&mut long_field, heads_of(1024)),
        Err(RequestError::HeadTooLarge)
    );
}

/// A head of `fields` header fields (Host first), without its final CRLF.
fn head_with_fields(fields: usize) -> Vec<u8> {
    let mut head = b"GET / HTTP/1.1\r\nHost: a\r\n".to_vec();
    for _ in 1..fields {
        head.extend_from_slice(b"X:1\r\n");
    }
    head
}

fn parse_fields(fields: usize, limits: HeadLimits) -> Result<usize, RequestError> {
    let mut head = head_with_fields(fields);
    head.extend_from_slice(b"\r\n");
    parse_head(&mut head, limits).map(|parsed| parsed.expect("complete").1)
}

#[test]
fn header_fields_up_to_the_limit_parse_and_more_are_431() {
    for fields in [1, 64, 65, 1000, 2000] {
        assert!(parse_fields(fields, DEFAULTS).is_ok(), "{fields} fields");
    }
    assert_eq!(
        parse_fields(2001, DEFAULTS),
        Err(RequestError::TooManyHeaders)
    );
    // A limit within the stack array, and one past it.
    for limit in [10, 100] {
        let limits = HeadLimits {
            header_fields: limit,
            ..DEFAULTS
        };
        assert!(parse_fields(limit, limits).is_ok(), "{limit}");
        let over = parse_fields(limit + 1, limits);
        assert_eq!(over, Err(RequestError::TooManyHeaders), "{limit}");
    }
    // 0: only the size limits the count.
    let uncounted = HeadLimits {
        header_fields: 0,
        ..heads_of(64 * 1024)
    };
    assert!(parse_fields(10_000, uncounted).is_ok());
    let too_large = parse_fields(20_000, uncounted);
    assert_eq!(too_large, Err(RequestError::HeadTooLarge));
}

#[test]
fn a_partial_head_past_the_stack_array_is_incomplete_wherever_cut() {
    let head = head_with_fields(300);
    for cut in (head.len() / 2..head.len()).step_by(7) {
        let mut prefix = head[..cut].to_vec();
        assert_eq!(parse_head(&mut prefix, DEFAULTS), Ok(None), "cut at {cut}");
    }
}

#[test]
fn connect_is_405_and_targets_are_checked() {
    for connect in [
        "CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\n\r\n",
        // What `curl -X CONNECT http://a/` sends.
        "CONNECT / HTTP/1.1\r\nHost: a\r\n\r\n",
    ] {
        assert_eq!(
            parse(connect),
            Err(RequestError::MethodNotAllowed),
            "{connect}"
        );
    }
    for text in [
        "CONNECT a HTTP/1.1\r\nHost: a\r\n\r\n",
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

#[test]
fn the_host_and_the_signs_of_a_proxy_are_kept_for_the_observer() {
    let direct = head("GET / HTTP/1.1\r\nHost:  backend \r\nUser-Agent: curl/8\r\n\r\n");
    assert_eq!(direct.host, Some(&b"backend"[..]));
    assert!(!direct.forwarded);
    assert_eq!(head("GET / HTTP/1.0\r\n\r\n").host, None);
    for field in [
        "X-Forwarded-For: 10.0.0.1",
        "x-forwarded-proto: https",
        "X-Forwarded-Host: example.com",
        "Forwarded: for=10.0.0.1",
        "Via: 1.1 proxy",
        "X-Real-IP: 10.0.0.1",
    ] {
        let text = format!("GET / HTTP/1.1\r\nHost: a\r\n{field}\r\n\r\n");
        assert!(head(&text).forwarded, "{field}");
    }
    let text = "GET / HTTP/1.1\r\nHost: a\r\nX-Forwarded: no\r\nX-Real: no\r\n\r\n";
    assert!(!head(text).forwarded);
}
