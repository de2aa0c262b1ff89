//! Request targets against nginx and Node: what each answers (a response
//! other than 400) or refuses (400), and what we do, one row per case.
//!
//! The project's rule is to accept what nginx and Node both accept unless
//! an RFC MUST or request smuggling says otherwise; the test checks our
//! column and that rule over the table. The nginx and Node columns were
//! taken by sending these exact bytes to nginx 1.22.1 (`return 200`) and
//! Node 20.20 (`http.createServer`) on loopback. Where they differ we side
//! with the refusal, except for bytes ≥ 0x80, where we follow nginx as far
//! as httparse lets us (UTF-8 only): Node refuses any.
//!
//! Not answered here: bytes ≥ 0x80 that are not UTF-8 (`/\xff`: nginx
//! answers, Node refuses, and httparse needs UTF-8), a bad `%` in the
//! path (nginx refuses), a bare LF (Node refuses; RFC 9112 §2.2 lets us),
//! userinfo, a bad port or an empty host in absolute-form (nginx refuses;
//! RFC 9110 §4.2.4 forbids userinfo).

mod support;

/// What a server did with a request: answered it, or refused it with 400.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Answers,
    Refuses,
}
use Verdict::{Answers, Refuses};
use support::client::Client;
use support::server::{TestServer, start};

/// case, request-target bytes, nginx 1.22, Node 20, ours.
#[rustfmt::skip]
const TABLE: &[(&str, &[u8], Verdict, Verdict, Verdict)] = &[
    ("fragment after a query",      b"/forums/1?page=1#posts-17408", Answers, Answers, Answers),
    ("fragment in the path",        b"/a#frag",                      Answers, Answers, Answers),
    ("fragments after a fragment",  b"/a#f#g",                       Answers, Answers, Answers),
    ("quotes in path and query",    b"/with_\"quotes\"?foo=\"bar\"", Answers, Answers, Answers),
    ("braces",                      b"/a{b}?q={x}",                  Answers, Answers, Answers),
    ("pipe",                        b"/a|b?q=|",                     Answers, Answers, Answers),
    ("caret",                       b"/a^b?q=^",                     Answers, Answers, Answers),
    ("backtick",                    b"/a`b?q=`",                     Answers, Answers, Answers),
    ("backslash",                   b"/a\\b?q=\\",                   Answers, Answers, Answers),
    ("brackets",                    b"/a[b]?q=[]",                   Answers, Answers, Answers),
    ("less and greater than",       b"/a<b>?q=<>",                   Answers, Answers, Answers),
    ("bad % escape in the query",   b"/a?q=%zz",                     Answers, Answers, Answers),
    ("UTF-8 in the path",           b"/caf\xc3\xa9",                 Answers, Refuses, Answers),
    ("absolute-form",               b"http://h/p?q",                 Answers, Answers, Answers),
    ("absolute-form, fragment",     b"http://h/p#f",                 Answers, Answers, Answers),
    ("bad % escape in the path",    b"/a%zz",                        Refuses, Answers, Refuses),
    ("not UTF-8 (0xff)",            b"/\xff",                        Answers, Refuses, Refuses),
    ("control byte 0x01",           b"/a\x01b",                      Refuses, Refuses, Refuses),
    ("DEL 0x7f",                    b"/a\x7fb",                      Refuses, Refuses, Refuses),
    ("tab",                         b"/a\tb",                        Refuses, Refuses, Refuses),
    ("space",                       b"/a b",                         Refuses, Refuses, Refuses),
    ("userinfo in absolute-form",   b"http://u@h/",                  Refuses, Answers, Refuses),
    ("bad port in absolute-form",   b"http://h:ffff1/",              Refuses, Answers, Refuses),
    ("empty host in absolute-form", b"http:///p",                    Refuses, Answers, Refuses),
    ("no form at all",              b"abc",                          Refuses, Refuses, Refuses),
];

/// Requests that differ from a target row in their framing, not their
/// target: case, whole request bytes, nginx, Node, ours.
#[rustfmt::skip]
const FRAMING: &[(&str, &[u8], Verdict, Verdict, Verdict)] = &[
    ("bare LF line ends", b"GET / HTTP/1.1\nHost: t\n\n", Answers, Refuses, Refuses),
];

fn verdict(server: &TestServer, request: &[u8]) -> (Verdict, u16) {
    let mut client = Client::connect(server.addr);
    client.send(request);
    let status = client.read_response().status;
    let verdict = if status == 400 { Refuses } else { Answers };
    (verdict, status)
}

fn get(target: &[u8]) -> Vec<u8> {
    let mut request = b"GET ".to_vec();
    request.extend_from_slice(target);
    request.extend_from_slice(b" HTTP/1.1\r\nHost: t\r\n\r\n");
    request
}

#[test]
fn targets_are_answered_and_refused_as_the_table_says() {
    let server = start(|_| {});
    let rows = TABLE
        .iter()
        .map(|&(case, target, nginx, node, ours)| (case, get(target), nginx, node, ours))
        .chain(FRAMING.iter().map(|&(case, request, nginx, node, ours)| {
            (case, request.to_vec(), nginx, node, ours)
        }));
    let mut wrong = Vec::new();
    for (case, request, nginx, node, ours) in rows {
        if nginx == Answers && node == Answers {
            assert_eq!(ours, Answers, "{case}: nginx and Node both answer it");
        }
        let (got, status) = verdict(&server, &request);
        if got != ours {
            wrong.push(format!("{case}: expected {ours:?}, got {status}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn a_fragment_is_dropped_before_routing() {
    let server = start(|_| {});
    // Routed as /bytes/5 and / (a fragment kept would make them 404).
    let mut client = Client::connect(server.addr);
    client.send(&get(b"/bytes/5#part-2"));
    let response = client.read_response();
    assert_eq!(
        (response.status, response.body.len()),
        (200, 5),
        "{response:?}"
    );
    client.send(&get(b"/?page=1#posts-17408"));
    assert_eq!(client.read_response().status, 200);
}
