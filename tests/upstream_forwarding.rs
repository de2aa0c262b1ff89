//! `--upstream`: requests forwarded to a fake upstream written here, and
//! its answers relayed: heads, bodies in both framings each way, and the
//! upstream's failures (nothing listening, no answer, garbage, a cut
//! body, more bytes than declared), each the upstream's, said as such.

mod support;

use std::time::{Duration, Instant};

use keepalive_server::upstream::Failure;
use support::client::Client;
use support::server::{TestServer, start};
use support::upstream::{FakeUpstream, Upstreamed};
use support::{SLACK, eventually, ms};

/// A server forwarding to `upstream`, with `tweak` applied.
fn forwarding_to(
    upstream: &FakeUpstream,
    tweak: impl FnOnce(&mut keepalive_server::Config),
) -> TestServer {
    start(|config| {
        upstream.configure(config);
        tweak(config);
    })
}

/// Serves requests on one connection, answering each with what the
/// upstream got: its request line, then its head, then its body.
fn echo(conn: &mut Upstreamed) {
    while let Some(got) = conn.read_request() {
        let mut body = format!("{}\n{}\n\n", got.line(), got.head).into_bytes();
        body.extend_from_slice(&got.body);
        conn.answer(&body);
    }
}

fn upstream_errors(server: &TestServer, failure: Failure) -> u64 {
    server
        .handle
        .stats()
        .map(|s| s.upstream_errors_by(failure))
        .sum()
}

#[test]
fn a_get_is_forwarded_with_its_controls_out_and_relayed_on_a_kept_connection() {
    let upstream = FakeUpstream::start(echo);
    let server = start(|config| {
        config.upstream = Some(
            keepalive_server::config::values::parse_upstream(&format!(
                "http://{}/api",
                upstream.addr
            ))
            .unwrap(),
        );
    });
    let mut client = Client::connect(server.addr);
    client.send(
        b"GET /items?ka=5s&q=1&advertise=none HTTP/1.1\r\nHost: svc\r\nConnection: keep-alive\r\nKeep-Alive: timeout=9\r\nX-Forwarded-For: 192.0.2.1\r\n\r\n",
    );
    let first = client.read_response();
    assert_eq!(first.status, 200, "{first:?}");
    let seen = first.body_str();
    assert!(seen.starts_with("GET /api/items?q=1 HTTP/1.1\n"), "{seen}");
    assert!(
        seen.contains("Host: svc\r\n"),
        "the client's Host is kept: {seen}"
    );
    assert!(
        seen.contains("X-Forwarded-For: 192.0.2.1, 127.0.0.1\r\n"),
        "{seen}"
    );
    assert!(seen.contains("X-Forwarded-Proto: http"), "{seen}");
    assert!(
        !seen.to_ascii_lowercase().contains("keep-alive"),
        "hop-by-hop fields stay on the client's hop: {seen}"
    );
    // The control set the client connection's terms: nothing advertised.
    assert!(first.header("keep-alive").is_none(), "{first:?}");
    assert!(first.has_token("connection", "keep-alive"), "{first:?}");
    let second = client.request("/again");
    assert_eq!(second.status, 200);
    assert!(second.body_str().starts_with("GET /api/again HTTP/1.1"));
    assert_eq!(server.accepted(), 1, "one client connection for both");
    assert_eq!(upstream.accepted(), 1, "the upstream connection was reused");
}

#[test]
fn request_bodies_go_up_by_length_and_chunked() {
    let upstream = FakeUpstream::start(|conn| {
        while let Some(got) = conn.read_request() {
            let said = format!("chunked={} {}:", got.chunked, got.body.len());
            let mut body = said.into_bytes();
            body.extend_from_slice(&got.body);
            conn.answer(&body);
        }
    });
    let server = forwarding_to(&upstream, |_| {});
    let mut client = Client::connect(server.addr);
    // Over the high-water mark, so the body goes up in several writes.
    let big = vec![b'x'; 200 * 1024];
    let mut request = format!(
        "POST /up HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n",
        big.len()
    )
    .into_bytes();
    request.extend_from_slice(&big);
    client.send(&request);
    let response = client.read_response();
    let prefix = format!("chunked=false {}:", big.len());
    assert!(
        response.body.starts_with(prefix.as_bytes()),
        "{:?}",
        &response.body[..40]
    );
    assert_eq!(&response.body[prefix.len()..], &big[..]);
    client.send(
        b"PUT /up HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
    );
    let response = client.read_response();
    assert_eq!(response.body_str(), "chunked=true 11:hello world");
}

#[test]
fn chunked_and_close_delimited_answers_reach_an_http_1_1_client_chunked() {
    let upstream = FakeUpstream::start(|conn| {
        while let Some(got) = conn.read_request() {
            if !got.line().contains("/chunked") {
                // No length: the body ends with the close.
                conn.send(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the close");
                return;
            }
            conn.send(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n");
        }
    });
    let server = forwarding_to(&upstream, |_| {});
    let mut client = Client::connect(server.addr);
    client.get("/chunked");
    let chunked = client.read_chunked_response();
    assert_eq!(chunked.body, b"abcde");
    client.get("/eof");
    let until_close = client.read_chunked_response();
    assert_eq!(until_close.body, b"until the close");
    assert!(
        !until_close.closes(),
        "the client's connection stays: {until_close:?}"
    );
    client.get("/chunked");
    assert_eq!(client.read_chunked_response().status, 200, "and serves on");
    // An HTTP/1.0 client gets the close-delimited body as it came.
    let mut old = Client::connect(server.addr);
    old.send(b"GET /eof HTTP/1.0\r\nHost: t\r\nConnection: keep-alive\r\n\r\n");
    let raw = old.read_to_close();
    let text = String::from_utf8_lossy(&raw);
    assert!(text.contains("Connection: close\r\n"), "{text}");
    assert!(text.ends_with("\r\n\r\nuntil the close"), "{text}");
}

#[test]
fn head_204_and_304_answers_carry_no_body() {
    let upstream = FakeUpstream::start(|conn| {
        while let Some(got) = conn.read_request() {
            let status = if got.line().contains("/304") {
                304
            } else {
                204
            };
            if got.line().starts_with("HEAD") {
                conn.send(b"HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\n");
            } else {
                conn.send(format!("HTTP/1.1 {status} X\r\n\r\n").as_bytes());
            }
        }
    });
    let server = forwarding_to(&upstream, |_| {});
    let mut client = Client::connect(server.addr);
    client.send(b"HEAD / HTTP/1.1\r\nHost: t\r\n\r\n");
    let head = client.read_head_response();
    assert_eq!(
        head.content_length(),
        Some(1234),
        "HEAD keeps the length: {head:?}"
    );
    for (path, status) in [("/204", 204), ("/304", 304)] {
        client.get(path);
        let response = client.read_head_response();
        assert_eq!(response.status, status);
        assert!(
            response.header("transfer-encoding").is_none(),
            "{response:?}"
        );
    }
    // Nothing stray came between them: the next answer parses.
    client.send(b"HEAD / HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(client.read_head_response().status, 200);
}

#[test]
fn expect_100_continue_is_passed_to_the_upstream_and_its_100_relayed() {
    let upstream = FakeUpstream::start(|conn| {
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            use std::io::Read;
            if conn.stream.read(&mut byte).unwrap_or(0) == 0 {
                return;
            }
            head.push(byte[0]);
        }
        let text = String::from_utf8_lossy(&head).to_ascii_lowercase();
        assert!(text.contains("expect: 100-continue"), "{text}");
        conn.send(b"HTTP/1.1 100 Continue\r\n\r\n");
        let mut body = [0u8; 4];
        use std::io::Read;
        conn.stream.read_exact(&mut body).unwrap();
        conn.answer(&body);
    });
    let server = forwarding_to(&upstream, |_| {});
    let mut client = Client::connect(server.addr);
    client.send(b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n");
    let interim = client.read_response();
    assert_eq!(interim.status, 100, "the upstream's 100, and only it");
    client.send(b"ping");
    let response = client.read_response();
    assert_eq!((response.status, response.body_str()), (200, "ping"));
}

#[test]
fn a_port_with_nothing_on_it_is_a_502_naming_the_upstream() {
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = free.local_addr().unwrap();
    drop(free);
    let server = start(|config| {
        config.upstream = Some(
            keepalive_server::config::values::parse_upstream(&format!("http://{addr}")).unwrap(),
        );
    });
    let mut client = Client::connect(server.addr);
    client.get("/");
    let response = client.read_response();
    assert_eq!(response.status, 502, "{response:?}");
    let body = response.body_str();
    assert!(body.contains(&addr.to_string()), "{body}");
    assert!(body.contains("refused"), "names the reason: {body}");
    assert_eq!(upstream_errors(&server, Failure::Refused), 1);
}

#[test]
fn an_upstream_that_never_answers_is_a_504_after_the_upstream_timeout() {
    let upstream = FakeUpstream::start(|conn| {
        let _ = conn.read_request();
        conn.wait_closed();
    });
    let server = forwarding_to(&upstream, |config| {
        config.upstream_timeout = ms(300);
    });
    let mut client = Client::connect(server.addr);
    let asked = Instant::now();
    client.get("/");
    let response = client.read_response();
    let waited = asked.elapsed();
    assert_eq!(response.status, 504, "{response:?}");
    assert!(waited >= ms(300), "never early: {waited:?}");
    assert!(waited < ms(300) + SLACK, "{waited:?}");
    assert!(response.body_str().contains(&upstream.addr.to_string()));
    assert_eq!(upstream_errors(&server, Failure::Timeout), 1);
    eventually(SLACK, || match upstream.open() {
        0 => Ok(()),
        n => Err(format!("{n} upstream connections still open")),
    });
}

#[test]
fn an_answer_cut_mid_body_ends_the_clients_answer_broken_and_closes() {
    let upstream = FakeUpstream::start(|conn| {
        let _ = conn.read_request();
        conn.send(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly ten..");
    });
    let server = forwarding_to(&upstream, |_| {});
    let mut client = Client::connect(server.addr);
    client.get("/");
    let raw = client.read_to_close();
    let text = String::from_utf8_lossy(&raw);
    assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
    assert!(text.contains("Content-Length: 100\r\n"), "{text}");
    assert!(
        text.ends_with("\r\n\r\nonly ten.."),
        "short of its length, then closed: {text}"
    );
    assert_eq!(upstream_errors(&server, Failure::Cut), 1);
}

#[test]
fn a_chunked_answer_cut_mid_body_has_no_clean_end() {
    let upstream = FakeUpstream::start(|conn| {
        let _ = conn.read_request();
        conn.send(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nsome\r\n");
    });
    let server = forwarding_to(&upstream, |_| {});
    let mut client = Client::connect(server.addr);
    client.get("/");
    let raw = client.read_to_close();
    let text = String::from_utf8_lossy(&raw);
    assert!(text.contains("some"), "{text}");
    assert!(!text.ends_with("0\r\n\r\n"), "no last chunk: {text}");
}

#[test]
fn a_garbage_answer_is_a_502() {
    let upstream = FakeUpstream::start(|conn| {
        let _ = conn.read_request();
        conn.send(b"SSH-2.0-OpenSSH_9.6\r\n\r\n");
    });
    let server = forwarding_to(&upstream, |_| {});
    let mut client = Client::connect(server.addr);
    client.get("/");
    let response = client.read_response();
    assert_eq!(response.status, 502, "{response:?}");
    assert!(response.closes());
    assert_eq!(upstream_errors(&server, Failure::BadResponse), 1);
}

#[test]
fn bytes_past_the_declared_length_are_dropped_and_the_connection_not_reused() {
    let upstream = FakeUpstream::start(|conn| {
        while conn.read_request().is_some() {
            conn.send(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nEVIL!");
        }
    });
    let server = forwarding_to(&upstream, |_| {});
    let mut client = Client::connect(server.addr);
    for _ in 0..2 {
        let response = client.request("/");
        assert_eq!(response.body_str(), "hello");
    }
    client.get("/");
    assert_eq!(client.read_response().body_str(), "hello");
    assert_eq!(
        upstream.accepted(),
        3,
        "an upstream connection that said too much is not reused"
    );
    // Nothing of the extra reached the client.
    client
        .stream
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut probe = [0u8; 1];
    use std::io::Read;
    assert!(client.stream.read(&mut probe).is_err(), "no stray bytes");
}

#[test]
fn an_early_answer_ends_the_exchange_and_the_rest_of_the_body_is_dropped() {
    // The upstream refuses a large upload from its head alone (a 413),
    // then drains and closes, as a server that lingers does.
    let upstream = FakeUpstream::start(|conn| {
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            use std::io::Read;
            if conn.stream.read(&mut byte).unwrap_or(0) == 0 {
                return;
            }
            head.push(byte[0]);
        }
        conn.send(b"HTTP/1.1 413 Too Big\r\nContent-Length: 4\r\nConnection: close\r\n\r\nnope");
        let _ = conn.stream.shutdown(std::net::Shutdown::Write);
        conn.wait_closed();
    });
    let server = forwarding_to(&upstream, |_| {});
    let mut client = Client::connect(server.addr);
    let body = vec![b'u'; 900 * 1024];
    let mut request = format!(
        "POST /upload HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    request.extend_from_slice(&body);
    let sender = {
        let mut stream = client.stream.try_clone().unwrap();
        std::thread::spawn(move || {
            use std::io::Write;
            let _ = stream.write_all(&request);
        })
    };
    let response = client.read_response();
    assert_eq!((response.status, response.body_str()), (413, "nope"));
    sender.join().unwrap();
    assert!(!response.closes(), "the client's own terms: {response:?}");
    // The rest of the body was read and dropped: the connection serves on.
    client.get("/next");
    let next = client.read_response();
    assert_eq!(
        next.status, 413,
        "a fresh upstream connection answers: {next:?}"
    );
    assert_eq!(upstream.accepted(), 2);
}

#[test]
fn a_client_over_tls_is_forwarded_as_https() {
    let upstream = FakeUpstream::start(echo);
    let cert = support::tls::TestCert::new();
    let server = cert.serve(|config| upstream.configure(config));
    let mut client = cert.connect(server.addr);
    for _ in 0..2 {
        let (head, body) = client.get("/over-tls");
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        assert!(body.contains("X-Forwarded-Proto: https"), "{body}");
    }
    assert_eq!(upstream.accepted(), 1, "kept on both hops");
}

#[test]
fn a_name_whose_first_address_refuses_is_reached_at_the_next() {
    // `localhost` as 127.0.0.1 and ::1, with the service on ::1 alone (as
    // Node listens on `localhost`).
    let upstream = FakeUpstream::start_on("[::1]:0", echo);
    let port = upstream.addr.port();
    let server = start(|config| {
        config.upstream = Some(keepalive_server::config::Upstream {
            url: format!("http://localhost:{port}"),
            authority: format!("localhost:{port}"),
            addrs: vec![format!("127.0.0.1:{port}").parse().unwrap(), upstream.addr],
            prefix: String::new(),
        });
    });
    for _ in 0..2 {
        let response = support::client::get(server.addr, "/");
        assert_eq!(response.status, 200, "{response:?}");
    }
    assert_eq!(upstream_errors(&server, Failure::Refused), 0);
}

#[test]
fn a_request_in_hand_when_an_answer_fills_the_output_to_its_mark_is_answered() {
    // An answer whose client head and body make exactly the output's
    // high-water mark (32 KiB), its bytes all read at once: when it ends,
    // the next request is already in hand, and only the output's drain
    // can start it (no edge comes for it).
    let upstream = FakeUpstream::start(|conn| {
        while let Some(got) = conn.read_request() {
            let size: usize = got
                .line()
                .split('/')
                .nth(1)
                .unwrap()
                .split(' ')
                .next()
                .unwrap()
                .parse()
                .unwrap();
            let mut answer =
                format!("HTTP/1.1 200 OK\r\nContent-Length: {size}\r\n\r\n").into_bytes();
            answer.resize(answer.len() + size, b'.');
            conn.send(&answer);
        }
    });
    let server = forwarding_to(&upstream, |_| {});
    let mut client = Client::connect(server.addr);
    client.send(b"GET /10000 HTTP/1.1\r\nHost: t\r\n\r\n");
    let probe = client.read_response();
    // The head the client gets, as text, with the length's digits.
    let head: usize = probe
        .headers
        .iter()
        .map(|(n, v)| n.len() + 2 + v.len() + 2)
        .sum::<usize>()
        + "HTTP/1.1 200 OK\r\n\r\n".len();
    let size = 32 * 1024 - head;
    assert_eq!(size.to_string().len(), 5, "as many digits as 10000");
    let requests: String = (0..4)
        .map(|_| format!("GET /{size} HTTP/1.1\r\nHost: t\r\n\r\n"))
        .collect();
    client.send(requests.as_bytes());
    for i in 0..4 {
        let response = client.read_response();
        assert_eq!(response.body.len(), size, "answer {i}");
    }
}
