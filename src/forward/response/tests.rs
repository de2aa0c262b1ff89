//! Tests of upstream response heads: the framing and reuse read from
//! them (RFC 9112 §6.3), every refusal, and the head the client gets for
//! each framing and client version.

use proptest::prelude::*;

use super::*;

const DATE: &[u8; DATE_LEN] = b"Sun, 06 Nov 1994 08:49:37 GMT";
const KEEP_ALIVE: &[u8] = b"Connection: keep-alive\r\nKeep-Alive: timeout=5";

fn parsed(text: &str) -> UpstreamHead {
    parse_upstream_head(text.as_bytes(), false)
        .unwrap()
        .unwrap()
}

fn refused(text: &str) -> BadResponse {
    parse_upstream_head(text.as_bytes(), false).unwrap_err()
}

fn client(minor_version: u8) -> ClientSide<'static> {
    ClientSide {
        minor_version,
        is_head: false,
        persistence: Persistence::KeepAlive,
        keep_alive_header: KEEP_ALIVE,
        requests_left: None,
        date: DATE,
    }
}

/// The head the client gets for `text`, and what was decided.
fn rewritten(text: &str, client: ClientSide<'_>) -> (String, ClientHead) {
    let upstream = parse_upstream_head(text.as_bytes(), client.is_head)
        .unwrap()
        .unwrap();
    let mut out = Vec::new();
    let decided = write_client_head(text.as_bytes(), &upstream, client, &mut out);
    (String::from_utf8(out).unwrap(), decided)
}

fn names(head: &str) -> Vec<String> {
    head.split("\r\n")
        .skip(1)
        .take_while(|line| !line.is_empty())
        .map(|line| line.split_once(':').unwrap().0.to_ascii_lowercase())
        .collect()
}

#[test]
fn an_incomplete_head_asks_for_more() {
    for text in [
        "",
        "HTTP/1.1 200 OK\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n",
    ] {
        assert_eq!(
            parse_upstream_head(text.as_bytes(), false),
            Ok(None),
            "{text:?}"
        );
    }
}

#[test]
fn content_length_frames_and_the_connection_is_reusable() {
    let text = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
    assert_eq!(
        parsed(text),
        UpstreamHead {
            status: 200,
            len: text.len() - 5,
            framing: ResponseFraming::Length(5),
            reusable: true,
            interim: false,
            keep_alive_timeout_s: None,
        }
    );
    let repeated = parsed("HTTP/1.1 200 OK\r\nContent-Length: 7, 7\r\nContent-Length: 7\r\n\r\n");
    assert_eq!(repeated.framing, ResponseFraming::Length(7));
}

#[test]
fn chunked_wins_over_content_length_and_ends_the_reuse() {
    let alone = parsed("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
    assert_eq!(alone.framing, ResponseFraming::Chunked);
    assert!(alone.reusable);
    let both = parsed("HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n");
    assert_eq!(both.framing, ResponseFraming::Chunked);
    assert!(!both.reusable);
    let from_1_0 =
        parsed("HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n");
    assert_eq!(from_1_0.framing, ResponseFraming::Chunked);
    assert!(!from_1_0.reusable);
}

#[test]
fn without_a_length_the_body_runs_until_the_close() {
    let head = parsed("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n");
    assert_eq!(head.framing, ResponseFraming::UntilClose);
    assert!(!head.reusable);
}

#[test]
fn head_1xx_204_and_304_have_no_body_whatever_they_say() {
    let text = "HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n";
    let head = parse_upstream_head(text.as_bytes(), true).unwrap().unwrap();
    assert_eq!(head.framing, ResponseFraming::Empty);
    assert!(head.reusable);
    let head = parse_upstream_head(b"HTTP/1.1 200 OK\r\n\r\n", true)
        .unwrap()
        .unwrap();
    assert_eq!(
        (head.framing, head.reusable),
        (ResponseFraming::Empty, true)
    );
    for status in ["204 No Content", "304 Not Modified"] {
        let head = parsed(&format!("HTTP/1.1 {status}\r\nContent-Length: 9\r\n\r\n"));
        assert_eq!(head.framing, ResponseFraming::Empty, "{status}");
        assert!(head.reusable && !head.interim, "{status}");
    }
    for status in ["100 Continue", "102 Processing", "103 Early Hints"] {
        let head = parsed(&format!("HTTP/1.1 {status}\r\n\r\n"));
        assert_eq!(head.framing, ResponseFraming::Empty, "{status}");
        assert!(head.interim, "{status}");
    }
}

#[test]
fn persistence_follows_the_version_and_connection() {
    let cases = [
        ("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", true),
        (
            "HTTP/1.1 200 OK\r\nConnection: Close\r\nContent-Length: 0\r\n\r\n",
            false,
        ),
        (
            "HTTP/1.1 200 OK\r\nConnection: x, close\r\nContent-Length: 0\r\n\r\n",
            false,
        ),
        ("HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", false),
        (
            "HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 0\r\n\r\n",
            true,
        ),
    ];
    for (text, reusable) in cases {
        assert_eq!(parsed(text).reusable, reusable, "{text:?}");
    }
}

#[test]
fn bad_framing_garbage_and_upgrades_are_bad_responses() {
    let cases = [
        (
            "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n",
            "conflicting Content-Length",
        ),
        (
            "HTTP/1.1 200 OK\r\nContent-Length: 3, 4\r\n\r\n",
            "conflicting Content-Length",
        ),
        (
            "HTTP/1.1 200 OK\r\nContent-Length: -3\r\n\r\n",
            "bad Content-Length",
        ),
        (
            "HTTP/1.1 200 OK\r\nContent-Length: 0x10\r\n\r\n",
            "bad Content-Length",
        ),
        (
            "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999999\r\n\r\n",
            "bad Content-Length",
        ),
        (
            "HTTP/1.1 200 OK\r\nContent-Length:\r\n\r\n",
            "bad Content-Length",
        ),
        (
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
            "a transfer coding other than a lone chunked",
        ),
        (
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, chunked\r\n\r\n",
            "a transfer coding other than a lone chunked",
        ),
        (
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: \r\n\r\n",
            "empty Transfer-Encoding",
        ),
    ];
    for (text, why) in cases {
        let bad = refused(text);
        assert_eq!(bad.why(), why, "{text:?}");
        assert!(matches!(bad, BadResponse::Framing(_)), "{text:?}");
    }
    for garbage in [
        "hello there\r\n\r\n",
        "HTTP/2 200\r\n\r\n",
        "HTTP/1.1 2000 OK\r\n\r\n",
        "HTTP/1.1 099 Low\r\n\r\n",
        "HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n",
        "HTTP/1.1 200 OK\r\nX: a\r\n folded\r\n\r\n",
    ] {
        assert!(
            matches!(refused(garbage), BadResponse::Malformed(_)),
            "{garbage:?}"
        );
    }
    let upgrade = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n";
    assert_eq!(refused(upgrade), BadResponse::SwitchingProtocols);
}

#[test]
fn an_over_long_head_is_too_large_complete_or_not() {
    let mut partial = b"HTTP/1.1 200 OK\r\nX: ".to_vec();
    partial.resize(MAX_UPSTREAM_HEAD, b'a');
    assert_eq!(
        parse_upstream_head(&partial, false),
        Err(BadResponse::TooLarge)
    );
    let mut whole = partial.clone();
    whole.extend_from_slice(b"\r\n\r\n");
    assert_eq!(
        parse_upstream_head(&whole, false),
        Err(BadResponse::TooLarge)
    );
    let mut many = String::from("HTTP/1.1 200 OK\r\n");
    for n in 0..500 {
        many.push_str(&format!("Set-Cookie: c{n}=1\r\n"));
    }
    many.push_str("Content-Length: 0\r\n\r\n");
    assert_eq!(parsed(&many).framing, ResponseFraming::Length(0));
    let (head, _) = rewritten(&many, client(1));
    assert_eq!(head.matches("Set-Cookie: c").count(), 500);
    assert!(head.contains("Set-Cookie: c0=1\r\nSet-Cookie: c1=1\r\n"));
}

#[test]
fn the_client_head_keeps_status_reason_and_end_to_end_fields() {
    let text = "HTTP/1.1 404 Nope\r\nDate: Mon, 01 Jan 2024 00:00:00 GMT\r\nServer: svc\r\n\
                Connection: keep-alive, X-Hop\r\nKeep-Alive: timeout=2\r\nX-Hop: 1\r\n\
                Proxy-Connection: close\r\nTrailer: X-T\r\nUpgrade: h2c\r\n\
                Content-Type: text/plain\r\nContent-Length: 4\r\n\r\n";
    let (head, decided) = rewritten(text, client(1));
    assert_eq!(
        head,
        "HTTP/1.1 404 Nope\r\nDate: Mon, 01 Jan 2024 00:00:00 GMT\r\nServer: svc\r\n\
         Content-Type: text/plain\r\nContent-Length: 4\r\n\
         Connection: keep-alive\r\nKeep-Alive: timeout=5\r\n\r\n"
    );
    assert_eq!(
        decided,
        ClientHead {
            framing: ClientFraming::Raw,
            persistence: Persistence::KeepAlive,
        }
    );
}

#[test]
fn our_date_only_when_the_upstream_sent_none_and_our_terms_say_the_rest() {
    let limited = ClientSide {
        requests_left: Some(3),
        ..client(1)
    };
    let (head, _) = rewritten("HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", limited);
    assert!(
        head.starts_with("HTTP/1.1 200 OK\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\n"),
        "{head}"
    );
    assert!(
        head.ends_with("Keep-Alive: timeout=5, max=3\r\n\r\n"),
        "{head}"
    );
    let closing = ClientSide {
        persistence: Persistence::Close,
        ..client(1)
    };
    let (head, decided) = rewritten("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", closing);
    assert!(head.ends_with("\r\nConnection: close\r\n\r\n"), "{head}");
    assert!(!head.contains("keep-alive"), "{head}");
    assert_eq!(decided.persistence, Persistence::Close);
}

#[test]
fn each_framing_reaches_each_client_version() {
    let chunked = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
    let until_close = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n";
    let length = "HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n";
    let cases = [
        (
            length,
            1,
            ClientFraming::Raw,
            Persistence::KeepAlive,
            Some("Content-Length: 12"),
        ),
        (
            length,
            0,
            ClientFraming::Raw,
            Persistence::KeepAlive,
            Some("Content-Length: 12"),
        ),
        (
            chunked,
            1,
            ClientFraming::Raw,
            Persistence::KeepAlive,
            Some("Transfer-Encoding: chunked"),
        ),
        (
            chunked,
            0,
            ClientFraming::UntilClose,
            Persistence::Close,
            None,
        ),
        (
            until_close,
            1,
            ClientFraming::Chunks,
            Persistence::KeepAlive,
            Some("Transfer-Encoding: chunked"),
        ),
        (
            until_close,
            0,
            ClientFraming::UntilClose,
            Persistence::Close,
            None,
        ),
    ];
    for (text, minor, framing, persistence, field) in cases {
        let (head, decided) = rewritten(text, client(minor));
        assert_eq!(
            (decided.framing, decided.persistence),
            (framing, persistence),
            "{text:?} to 1.{minor}"
        );
        let framing_fields = names(&head)
            .iter()
            .filter(|name| *name == "content-length" || *name == "transfer-encoding")
            .count();
        match field {
            Some(field) => {
                assert!(head.contains(&format!("\r\n{field}\r\n")), "{head}");
                assert_eq!(framing_fields, 1, "{head}");
            }
            None => assert_eq!(framing_fields, 0, "{head}"),
        }
        if persistence == Persistence::Close {
            assert!(head.ends_with("\r\nConnection: close\r\n\r\n"), "{head}");
        }
    }
}

#[test]
fn head_and_304_keep_the_upstream_length_and_204_drops_it() {
    let head_client = ClientSide {
        is_head: true,
        ..client(1)
    };
    let (head, decided) = rewritten(
        "HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\n",
        head_client,
    );
    assert!(head.contains("\r\nContent-Length: 1234\r\n"), "{head}");
    assert_eq!(decided.framing, ClientFraming::None);
    let (head, _) = rewritten(
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
        head_client,
    );
    assert!(
        head.contains("\r\nTransfer-Encoding: chunked\r\n"),
        "{head}"
    );
    let head_1_0 = ClientSide {
        minor_version: 0,
        ..head_client
    };
    let (head, decided) = rewritten(
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
        head_1_0,
    );
    assert!(!head.contains("Transfer-Encoding"), "{head}");
    assert_eq!(decided.persistence, Persistence::KeepAlive);
    let (head, _) = rewritten(
        "HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n",
        client(1),
    );
    assert!(head.contains("\r\nContent-Length: 10\r\n"), "{head}");
    let (head, decided) = rewritten(
        "HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n",
        client(1),
    );
    assert!(!head.contains("Content-Length"), "{head}");
    assert_eq!(decided.framing, ClientFraming::None);
}

#[test]
fn an_interim_head_goes_as_it_came_to_http_1_1_only() {
    let text = "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\nConnection: X-Hop\r\nX-Hop: 1\r\n\r\n";
    let (head, decided) = rewritten(text, client(1));
    assert_eq!(
        head,
        "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n"
    );
    assert_eq!(decided.framing, ClientFraming::None);
    let (head, _) = rewritten("HTTP/1.1 100 Continue\r\n\r\n", client(1));
    assert_eq!(head, "HTTP/1.1 100 Continue\r\n\r\n");
    let (head, decided) = rewritten("HTTP/1.1 100 Continue\r\n\r\n", client(0));
    assert_eq!(head, "");
    assert_eq!(decided.persistence, Persistence::KeepAlive);
}

#[test]
fn bare_line_feeds_from_the_upstream_leave_as_crlf() {
    let text = "HTTP/1.1 200 OK\nContent-Length: 2\nX-A: b\n\nhi";
    let upstream = parsed(text);
    assert_eq!(upstream.len, text.len() - 2);
    let (head, _) = rewritten(text, client(1));
    assert!(head.starts_with("HTTP/1.1 200 OK\r\nX-A: b\r\n"), "{head}");
    assert_eq!(head.matches('\n').count(), head.matches("\r\n").count());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn a_client_head_parses_with_one_framing_its_decision_names(
        status in prop::sample::select(vec![200u16, 201, 204, 304, 404, 500, 103]),
        framing in 0usize..4,
        minor in 0u8..2,
        is_head in any::<bool>(),
        upstream_close in any::<bool>(),
    ) {
        let framing_field = ["", "Content-Length: 7\r\n", "Transfer-Encoding: chunked\r\n",
            "Content-Length: 7\r\nTransfer-Encoding: chunked\r\n"][framing];
        let connection = if upstream_close { "Connection: close\r\n" } else { "" };
        let text = format!("HTTP/1.1 {status} X\r\n{connection}{framing_field}X-Y: z\r\n\r\n");
        let side = ClientSide { is_head, ..client(minor) };
        let (head, decided) = rewritten(&text, side);
        if status == 103 && minor == 0 {
            prop_assert_eq!(head, "");
            return Ok(());
        }
        let mut slots = [httparse::EMPTY_HEADER; 16];
        let mut response = httparse::Response::new(&mut slots);
        let status_again = response.parse(head.as_bytes()).unwrap();
        prop_assert_eq!(status_again, httparse::Status::Complete(head.len()));
        prop_assert_eq!(response.code, Some(status));
        let has = |name: &str| response.headers.iter().any(|h| h.name.eq_ignore_ascii_case(name));
        prop_assert!(has("x-y"));
        prop_assert_eq!(has("connection"), status != 103);
        let body_framing = has("content-length") || has("transfer-encoding");
        match decided.framing {
            ClientFraming::Raw | ClientFraming::Chunks => prop_assert!(body_framing, "{}", head),
            ClientFraming::UntilClose => {
                prop_assert!(!body_framing, "{}", head);
                prop_assert_eq!(decided.persistence, Persistence::Close);
            }
            ClientFraming::None => prop_assert!(is_head || status == 304 || !body_framing, "{}", head),
        }
        if minor == 0 {
            prop_assert!(!has("transfer-encoding"), "{}", head);
        }
    }
}

#[test]
fn a_keep_alive_timeout_is_read_for_the_pool() {
    let said = |fields: &str| {
        parsed(&format!(
            "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n{fields}\r\n"
        ))
        .keep_alive_timeout_s
    };
    assert_eq!(said("Keep-Alive: timeout=5\r\n"), Some(5));
    assert_eq!(said("keep-alive: max=100, Timeout = 2\r\n"), Some(2));
    assert_eq!(
        said("Keep-Alive: timeout=2s\r\n"),
        Some(2),
        "Node reads its digits"
    );
    assert_eq!(
        said("Keep-Alive: timeout=99999999999999999999999\r\n"),
        Some(u64::MAX)
    );
    assert_eq!(said("Keep-Alive: max=100\r\n"), None);
    assert_eq!(said("Keep-Alive: timeout=\r\n"), None);
    assert_eq!(said("Keep-Alive: timeout=x\r\n"), None);
    assert_eq!(said(""), None);
}
