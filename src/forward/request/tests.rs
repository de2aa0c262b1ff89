//! Tests of the forwarded request head: each rule on a head given as text,
//! and a property: whatever head the parser accepts, its forwarded form
//! parses back with the same method, target and framing, and no
//! hop-by-hop field.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;

use super::*;
use crate::http::{HeadLimits, RequestError, parse_head};

const LIMITS: HeadLimits = HeadLimits {
    head_size: 64 * 1024,
    header_fields: 4000,
    body_size: 1 << 20,
};

const CLIENT: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 7));

fn plain() -> Forwarding<'static> {
    Forwarding {
        client_ip: CLIENT,
        tls: false,
        prefix: "",
        authority: "upstream:8000",
        strip_controls: true,
    }
}

/// The head `text` forwarded as `how` says.
fn forwarded_as(text: &str, how: &Forwarding<'_>) -> Result<String, Refused> {
    let mut raw = text.as_bytes().to_vec();
    let (head, len) = parse_head(&mut raw, LIMITS).unwrap().unwrap();
    let framing = head.framing;
    assert_eq!(len, raw.len());
    let mut out = Vec::new();
    let result = write_upstream_head(&raw, framing, how, &mut out);
    if result.is_err() {
        assert!(out.is_empty(), "a refusal writes nothing");
    }
    result.map(|()| String::from_utf8(out).unwrap())
}

fn forwarded(text: &str) -> String {
    forwarded_as(text, &plain()).unwrap()
}

/// The fields of a forwarded head, lower-cased names, in order.
fn fields(head: &str) -> Vec<(String, String)> {
    head.split("\r\n")
        .skip(1)
        .take_while(|line| !line.is_empty())
        .map(|line| {
            let (name, value) = line.split_once(": ").unwrap();
            (name.to_ascii_lowercase(), value.to_owned())
        })
        .collect()
}

fn field(head: &str, name: &str) -> Option<String> {
    let mut values = fields(head).into_iter().filter(|(n, _)| n == name);
    let value = values.next().map(|(_, value)| value);
    assert!(values.next().is_none(), "{name} once in {head}");
    value
}

#[test]
fn a_simple_get_goes_as_http_1_1_with_its_fields_in_order() {
    let head = forwarded("GET /a?x=1 HTTP/1.1\r\nHost: svc\r\nAccept: */*\r\nX-B: 2\r\n\r\n");
    assert_eq!(
        head,
        "GET /a?x=1 HTTP/1.1\r\nHost: svc\r\nAccept: */*\r\nX-B: 2\r\n\
         X-Forwarded-For: 192.0.2.7\r\nX-Forwarded-Proto: http\r\n\r\n"
    );
}

#[test]
fn hop_by_hop_fields_and_those_connection_names_are_dropped() {
    let head = forwarded(
        "GET / HTTP/1.1\r\nHost: svc\r\nConnection: keep-alive, X-Secret, upgrade\r\n\
         Keep-Alive: timeout=5\r\nProxy-Connection: keep-alive\r\nTE: trailers\r\n\
         Trailer: X-T\r\nx-secret: 1\r\nConnection: X-Other\r\nX-OTHER: 2\r\n\
         Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\nX-Kept: 3\r\n\r\n",
    );
    let names: Vec<String> = fields(&head).into_iter().map(|(name, _)| name).collect();
    assert_eq!(
        names,
        ["host", "x-kept", "x-forwarded-for", "x-forwarded-proto"],
        "{head}"
    );
}

#[test]
fn connection_cannot_take_the_host_away() {
    let head = forwarded("GET / HTTP/1.1\r\nHost: svc\r\nConnection: close, Host\r\n\r\n");
    assert_eq!(field(&head, "host").as_deref(), Some("svc"));
}

#[test]
fn the_client_host_is_kept_and_absolute_form_names_its_own() {
    let head = forwarded("GET / HTTP/1.1\r\nhost: Svc.Example:8443\r\n\r\n");
    assert_eq!(field(&head, "host").as_deref(), Some("Svc.Example:8443"));
    let head = forwarded("GET http://other:81/p?q=1&ka=1s HTTP/1.1\r\nHost: svc\r\n\r\n");
    assert!(head.starts_with("GET /p?q=1 HTTP/1.1\r\n"), "{head}");
    assert_eq!(field(&head, "host").as_deref(), Some("other:81"));
}

#[test]
fn http_1_0_without_host_gets_the_upstream_authority() {
    let head = forwarded("GET /x HTTP/1.0\r\n\r\n");
    assert!(head.starts_with("GET /x HTTP/1.1\r\n"), "{head}");
    assert_eq!(field(&head, "host").as_deref(), Some("upstream:8000"));
    // HTTP/1.0 may repeat Host: the upstream gets one, the last.
    let head = forwarded("GET /x HTTP/1.0\r\nHost: a\r\nHost: b\r\n\r\n");
    assert_eq!(field(&head, "host").as_deref(), Some("b"));
}

#[test]
fn x_forwarded_for_appends_the_client_to_what_was_sent() {
    let head = forwarded(
        "GET / HTTP/1.1\r\nHost: s\r\nX-Forwarded-For: 203.0.113.1\r\n\
         x-forwarded-for: 203.0.113.2, 10.0.0.1\r\nX-Forwarded-For: \r\n\r\n",
    );
    assert_eq!(
        field(&head, "x-forwarded-for").as_deref(),
        Some("203.0.113.1, 203.0.113.2, 10.0.0.1, 192.0.2.7")
    );
    let v6 = Forwarding {
        client_ip: IpAddr::V6(Ipv6Addr::LOCALHOST),
        ..plain()
    };
    let head = forwarded_as("GET / HTTP/1.1\r\nHost: s\r\n\r\n", &v6).unwrap();
    assert_eq!(field(&head, "x-forwarded-for").as_deref(), Some("::1"));
    let mapped = Forwarding {
        client_ip: IpAddr::V6(Ipv4Addr::new(127, 0, 0, 9).to_ipv6_mapped()),
        ..plain()
    };
    let head = forwarded_as("GET / HTTP/1.1\r\nHost: s\r\n\r\n", &mapped).unwrap();
    assert_eq!(
        field(&head, "x-forwarded-for").as_deref(),
        Some("127.0.0.9")
    );
}

#[test]
fn x_forwarded_proto_is_the_lab_scheme_whatever_the_client_said() {
    let text = "GET / HTTP/1.1\r\nHost: s\r\nX-Forwarded-Proto: https\r\n\r\n";
    assert_eq!(
        field(&forwarded(text), "x-forwarded-proto").as_deref(),
        Some("http")
    );
    let tls = Forwarding {
        tls: true,
        ..plain()
    };
    let text = "GET / HTTP/1.1\r\nHost: s\r\nX-Forwarded-Proto: http\r\n\r\n";
    let head = forwarded_as(text, &tls).unwrap();
    assert_eq!(field(&head, "x-forwarded-proto").as_deref(), Some("https"));
}

#[test]
fn framing_is_said_anew_from_what_the_lab_decided() {
    let head = forwarded("POST / HTTP/1.1\r\nHost: s\r\nContent-Length: 012, 12\r\n\r\n");
    assert_eq!(field(&head, "content-length").as_deref(), Some("12"));
    let head = forwarded("POST / HTTP/1.1\r\nHost: s\r\nTransfer-Encoding: Chunked\r\n\r\n");
    assert_eq!(
        field(&head, "transfer-encoding").as_deref(),
        Some("chunked")
    );
    assert_eq!(field(&head, "content-length"), None);
    // No body: a length only where one was said or the method defines content.
    let head = forwarded("GET / HTTP/1.1\r\nHost: s\r\n\r\n");
    assert_eq!(field(&head, "content-length"), None);
    let head = forwarded("GET / HTTP/1.1\r\nHost: s\r\nContent-Length: 0\r\n\r\n");
    assert_eq!(field(&head, "content-length").as_deref(), Some("0"));
    for method in ["POST", "PUT", "PATCH"] {
        let head = forwarded(&format!("{method} / HTTP/1.1\r\nHost: s\r\n\r\n"));
        assert_eq!(
            field(&head, "content-length").as_deref(),
            Some("0"),
            "{method}"
        );
    }
}

#[test]
fn expect_100_continue_goes_on_except_from_http_1_0() {
    let text = "PUT / HTTP/1.1\r\nHost: s\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n";
    assert_eq!(
        field(&forwarded(text), "expect").as_deref(),
        Some("100-continue")
    );
    let text = "PUT / HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n";
    assert_eq!(field(&forwarded(text), "expect"), None);
}

#[test]
fn controls_are_taken_out_of_the_target_and_the_prefix_put_before_it() {
    let head = forwarded("GET /a?x=1&ka=5s&y=2 HTTP/1.1\r\nHost: s\r\n\r\n");
    assert!(head.starts_with("GET /a?x=1&y=2 HTTP/1.1\r\n"), "{head}");
    let head = forwarded("GET /a?ka=5s HTTP/1.1\r\nHost: s\r\n\r\n");
    assert!(head.starts_with("GET /a HTTP/1.1\r\n"), "{head}");
    let prefixed = Forwarding {
        prefix: "/api",
        ..plain()
    };
    let text = "DELETE /items/3?max=2 HTTP/1.1\r\nHost: s\r\n\r\n";
    let head = forwarded_as(text, &prefixed).unwrap();
    assert!(
        head.starts_with("DELETE /api/items/3 HTTP/1.1\r\n"),
        "{head}"
    );
    let head = forwarded("OPTIONS * HTTP/1.1\r\nHost: s\r\n\r\n");
    assert!(head.starts_with("OPTIONS * HTTP/1.1\r\n"), "{head}");
}

#[test]
fn an_upgrade_is_refused_with_501_but_h2c_and_http_1_0_ones_are_ignored() {
    for upgrade in ["websocket", "h2c, websocket", "HTTP/2.0", "TLS/1.2"] {
        let text = format!(
            "GET / HTTP/1.1\r\nHost: s\r\nConnection: Upgrade\r\nUpgrade: {upgrade}\r\n\r\n"
        );
        let refused = forwarded_as(&text, &plain());
        assert_eq!(refused, Err(Refused::Upgrade), "{upgrade}");
        assert_eq!(Refused::Upgrade.status().code(), 501);
    }
    let head =
        forwarded("GET / HTTP/1.1\r\nHost: s\r\nConnection: Upgrade\r\nUpgrade: H2C\r\n\r\n");
    assert_eq!(field(&head, "upgrade"), None);
    let head = forwarded("GET / HTTP/1.0\r\nUpgrade: websocket\r\n\r\n");
    assert_eq!(field(&head, "upgrade"), None);
}

#[test]
fn connect_stays_refused_by_the_parser_with_405() {
    for text in [
        "CONNECT svc:443 HTTP/1.1\r\nHost: svc:443\r\n\r\n",
        "CONNECT / HTTP/1.1\r\nHost: svc\r\n\r\n",
    ] {
        let mut raw = text.as_bytes().to_vec();
        let refused = parse_head(&mut raw, LIMITS).unwrap_err();
        assert_eq!(refused, RequestError::MethodNotAllowed, "{text}");
        assert_eq!(refused.status().code(), 405);
    }
}

#[test]
fn a_later_minor_version_and_a_head_of_many_fields_forward() {
    let head = forwarded("GET / HTTP/1.7\r\nHost: s\r\n\r\n");
    assert!(head.starts_with("GET / HTTP/1.1\r\n"), "{head}");
    let mut text = String::from("GET / HTTP/1.1\r\nHost: s\r\n");
    for n in 0..300 {
        text.push_str(&format!("X-F{n}: {n}\r\n"));
    }
    text.push_str("\r\n");
    let head = forwarded(&text);
    assert_eq!(field(&head, "x-f299").as_deref(), Some("299"));
    assert_eq!(fields(&head).len(), 303);
}

#[test]
fn bytes_that_do_not_parse_are_refused_not_forwarded() {
    let mut out = Vec::new();
    for raw in [&b"GET / HTTP/1.1\r\nHost: s\r\n"[..], b"\x00 bad\r\n\r\n"] {
        let refused = write_upstream_head(raw, Framing::None, &plain(), &mut out);
        assert_eq!(refused, Err(Refused::Malformed));
        assert_eq!(Refused::Malformed.status().code(), 400);
    }
    assert!(out.is_empty());
}

/// Names a forwarded head must never carry.
const HOP_BY_HOP: [&str; 6] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "upgrade",
];

fn method() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH",
    ])
}

fn query_pair() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z]{1,4}=[a-z0-9]{0,3}",
        Just("ka=2s".to_owned()),
        Just("advertise=none".to_owned()),
        Just("close=rst".to_owned()),
        Just("after=keep".to_owned()),
        Just("max=4".to_owned()),
    ]
}

fn extra_field() -> impl Strategy<Value = String> {
    prop_oneof![
        "X-[A-Za-z]{1,6}: [ -~&&[^:]]{0,10}".prop_map(|field| field.trim_end().to_owned()),
        Just("Connection: keep-alive, X-Named".to_owned()),
        Just("Connection: close".to_owned()),
        Just("X-Named: secret".to_owned()),
        Just("Keep-Alive: timeout=9".to_owned()),
        Just("Proxy-Connection: keep-alive".to_owned()),
        Just("TE: trailers".to_owned()),
        Just("Trailer: Expires".to_owned()),
        Just("Upgrade: h2c".to_owned()),
        Just("X-Forwarded-For: 10.1.2.3".to_owned()),
    ]
}

fn body_framing() -> impl Strategy<Value = Option<String>> {
    prop_oneof![
        Just(None),
        (0u32..5000).prop_map(|n| Some(format!("Content-Length: {n}"))),
        Just(Some("Transfer-Encoding: chunked".to_owned())),
    ]
}

/// The target with its controls taken out, as the service must see it.
fn without_controls(path: &str, pairs: &[String]) -> String {
    let kept: Vec<&str> = pairs
        .iter()
        .map(String::as_str)
        .filter(|pair| {
            let name = pair.split_once('=').map_or(*pair, |(name, _)| name);
            !crate::app::controls::NAMES.contains(&name)
        })
        .collect();
    if kept.is_empty() {
        path.to_owned()
    } else {
        format!("{path}?{}", kept.join("&"))
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn a_forwarded_head_parses_back_the_same_without_hop_by_hop_fields(
        method in method(),
        path in "(/[a-z0-9._~-]{0,6}){1,3}",
        pairs in prop::collection::vec(query_pair(), 0..5),
        extras in prop::collection::vec(extra_field(), 0..8),
        framing in body_framing(),
        http_1_0 in any::<bool>(),
    ) {
        let chunked = framing.as_deref().is_some_and(|f| f.starts_with("Transfer"));
        prop_assume!(!(http_1_0 && chunked));
        let target = if pairs.is_empty() { path.clone() } else { format!("{path}?{}", pairs.join("&")) };
        let version = if http_1_0 { "1.0" } else { "1.1" };
        let mut text = format!("{method} {target} HTTP/{version}\r\nHost: svc\r\n");
        for field in extras.iter().chain(framing.iter()) {
            text.push_str(field);
            text.push_str("\r\n");
        }
        text.push_str("\r\n");
        let mut raw = text.clone().into_bytes();
        let (sent, _) = parse_head(&mut raw, LIMITS).unwrap().unwrap();
        let (sent_framing, sent_method) = (sent.framing, sent.method);
        let mut out = Vec::new();
        write_upstream_head(&raw, sent_framing, &plain(), &mut out).unwrap();

        let forwarded = String::from_utf8(out.clone()).unwrap();
        let (again, len) = parse_head(&mut out, LIMITS).unwrap().unwrap();
        prop_assert_eq!(len, forwarded.len());
        prop_assert_eq!(again.method, sent_method);
        prop_assert_eq!(again.minor_version, 1);
        prop_assert_eq!(again.framing, sent_framing);
        let expected = without_controls(&path, &pairs);
        prop_assert_eq!(again.target, crate::http::target::Target::Path(&expected));
        prop_assert_eq!(again.host, Some(&b"svc"[..]));
        prop_assert!(!again.close, "{}", forwarded);
        let named = extras.iter().any(|field| field.ends_with("X-Named"));
        for (name, _) in fields(&forwarded) {
            let hop_by_hop = HOP_BY_HOP.contains(&name.as_str()) || (named && name == "x-named");
            prop_assert!(!hop_by_hop, "{} in {}", name, forwarded);
        }
        let xff = field(&forwarded, "x-forwarded-for").unwrap();
        prop_assert!(xff.ends_with("192.0.2.7"), "{}", xff);
    }
}
