//! Hostile cases through the lab (`--upstream`): clients that pipeline,
//! stop reading or trickle, and upstreams that answer garbage or more than
//! they declared. What must hold: every client gets its own answers in
//! order and nobody else's bytes; memory stays bounded while the upstream
//! read pauses; a crowd of slow clients does not slow a fast one; a bad
//! upstream answer is a 502 or a cut, never a client connection out of
//! step (a second request on it gets its own answer, or a close).
//!
//! The tests run one at a time (`support::serial`): one measures this
//! process's memory, another its latency beside a thousand connections.

mod support;
mod upstreams;

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

use support::SLACK;
use support::procfs::vm_rss_kib;
use support::upstream::FakeUpstream;
use upstreams::{Framed, Reader, idle, lab, wsgi_echo};

/// `n` pipelined requests from client `who`, every fourth a POST with a
/// body naming it, in one write.
fn pipeline(who: &str, n: usize) -> Vec<u8> {
    let mut bytes = Vec::new();
    for i in 0..n {
        if i % 4 == 3 {
            let body = format!("{who}-{i}-body");
            bytes.extend_from_slice(
                format!(
                    "POST /{who}/{i} HTTP/1.1\r\nHost: s\r\nContent-Length: {}\r\n\r\n{body}",
                    body.len()
                )
                .as_bytes(),
            );
        } else {
            bytes.extend_from_slice(
                format!("GET /{who}/{i}?ka=30s HTTP/1.1\r\nHost: s\r\n\r\n").as_bytes(),
            );
        }
    }
    bytes
}

#[test]
fn sixteen_pipelined_requests_are_answered_in_order_with_only_their_own_bytes() {
    let _serial = support::serial();
    let Some(echo) = wsgi_echo() else {
        return;
    };
    let fixture = lab(echo.addr, "", |_| {});
    let clients: Vec<_> = ["alice", "bob", "carol"]
        .into_iter()
        .map(|who| {
            let addr = fixture.addr;
            std::thread::spawn(move || {
                let mut client = Reader::connect(addr);
                client.send(&pipeline(who, 16));
                for i in 0..16 {
                    let (response, _) = client.read(false);
                    assert_eq!(response.status, 200, "{who} {i}: {response:?}");
                    let echo: Value = serde_json::from_slice(&response.body)
                        .unwrap_or_else(|_| panic!("{who} {i}: {}", response.text()));
                    assert_eq!(
                        echo["path"],
                        format!("/{who}/{i}"),
                        "{who}'s answer {i} in order"
                    );
                    let body = if i % 4 == 3 {
                        format!("{who}-{i}-body")
                    } else {
                        String::new()
                    };
                    assert_eq!(echo["body"], body.as_str(), "{who} {i}");
                }
                assert!(client.leftover().is_empty(), "{who}: no seventeenth answer");
            })
        })
        .collect();
    for client in clients {
        client.join().expect("a client's answers");
    }
}

#[test]
fn a_client_that_stops_reading_a_64_mb_answer_holds_bounded_memory_and_pauses_the_upstream() {
    let _serial = support::serial();
    const SIZE: u64 = 64 << 20;
    // The upstream counts the body bytes it has written.
    let sent = Arc::new(AtomicU64::new(0));
    let counter = sent.clone();
    let upstream = FakeUpstream::start(move |conn| {
        while let Some(got) = conn.read_request() {
            if !got.line().starts_with("GET /big") {
                conn.send(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n");
                continue;
            }
            conn.send(format!("HTTP/1.1 200 OK\r\nContent-Length: {SIZE}\r\n\r\n").as_bytes());
            let piece = [b'L'; 64 * 1024];
            for _ in 0..SIZE / piece.len() as u64 {
                if conn.stream.write_all(&piece).is_err() {
                    return;
                }
                counter.fetch_add(piece.len() as u64, Ordering::SeqCst);
            }
        }
    });
    let fixture = lab(upstream.addr, "", |_| {});
    // Warm up (the worker's pools, the upstream link), then measure.
    let mut client = Reader::connect(fixture.addr);
    client.send(b"GET /missing HTTP/1.1\r\nHost: s\r\n\r\n");
    assert_eq!(client.read(false).0.status, 404);
    let rss_before = vm_rss_kib();

    let mut stream = TcpStream::connect(fixture.addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream
        .write_all(b"GET /big HTTP/1.1\r\nHost: s\r\n\r\n")
        .unwrap();
    let mut first = vec![0u8; 256 * 1024];
    stream.read_exact(&mut first).unwrap();
    // Stop reading: once the buffers between are full, the upstream's
    // writes stall.
    let sent = || sent.load(Ordering::SeqCst);
    let mut stalled_at = sent();
    loop {
        idle(Duration::from_millis(500));
        if sent() == stalled_at {
            break;
        }
        stalled_at = sent();
    }
    let grown_kib = vm_rss_kib().saturating_sub(rss_before);
    eprintln!(
        "upstream stalled after {} KiB of {} KiB; RSS grew {grown_kib} KiB",
        stalled_at >> 10,
        SIZE >> 10
    );
    assert!(
        stalled_at < SIZE / 4,
        "the upstream read did not pause: {stalled_at} bytes written"
    );
    assert!(
        grown_kib < 16 * 1024,
        "RSS grew {grown_kib} KiB while the client did not read"
    );

    // Reading again, the rest arrives whole: a pause, not a cut.
    let head_end = support::client::find(&first, b"\r\n\r\n").expect("the head") + 4;
    let mut body = (first.len() - head_end) as u64;
    let mut chunk = vec![0u8; 1 << 20];
    while body < SIZE {
        let n = stream.read(&mut chunk).unwrap();
        assert!(n > 0, "EOF after {body} body bytes");
        body += n as u64;
    }
    assert_eq!(body, SIZE);
}

#[test]
fn a_thousand_slow_clients_do_not_slow_a_fast_one() {
    let _serial = support::serial();
    let upstream = FakeUpstream::start(|conn| {
        // Head and body go in two writes: no Nagle wait between them.
        conn.stream.set_nodelay(true).unwrap();
        while let Some(got) = conn.read_request() {
            if got.line().starts_with("GET /big") {
                conn.answer(&[b'b'; 128 * 1024]);
            } else {
                conn.answer(b"fast");
            }
        }
    });
    let fixture = lab(upstream.addr, "", |_| {});
    let fast = |rounds: usize| -> Duration {
        let mut client = Reader::connect(fixture.addr);
        let start = Instant::now();
        for _ in 0..rounds {
            client.send(b"GET /fast HTTP/1.1\r\nHost: s\r\n\r\n");
            let (response, _) = client.read(false);
            assert_eq!(response.body, b"fast");
        }
        start.elapsed()
    };
    let alone = fast(50);
    // 500 trickling their heads a byte at a time, 500 asking for 128 KiB
    // and reading none of it.
    let mut tricklers: Vec<TcpStream> = (0..500)
        .map(|_| {
            let mut stream = TcpStream::connect(fixture.addr).unwrap();
            std::io::Write::write_all(&mut stream, b"GET /slow HTTP/1.1\r\nHost: s\r\n").unwrap();
            stream
        })
        .collect();
    let stalled: Vec<TcpStream> = (0..500)
        .map(|_| {
            let mut stream = TcpStream::connect(fixture.addr).unwrap();
            std::io::Write::write_all(&mut stream, b"GET /big HTTP/1.1\r\nHost: s\r\n\r\n")
                .unwrap();
            stream
        })
        .collect();
    let stop = Arc::new(AtomicBool::new(false));
    let trickling = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                for stream in &mut tricklers {
                    let _ = std::io::Write::write_all(stream, b"X");
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    };
    fixture_wait_open(&fixture, 1000);
    let crowded = fast(50);
    stop.store(true, Ordering::Relaxed);
    trickling.join().unwrap();
    drop(stalled);
    eprintln!("50 requests alone {alone:?}, beside 1000 slow clients {crowded:?}");
    assert!(
        crowded < alone * 10 + SLACK,
        "50 requests took {crowded:?} beside 1000 slow clients, {alone:?} alone"
    );
}

/// Waits until the lab holds at least `n` client connections.
fn fixture_wait_open(fixture: &support::server::AdminFixture, n: u64) {
    support::server::wait_for_open(&fixture.handle, n);
}

/// A second request on `client` after a bad upstream answer: its own
/// answer from the upstream's next connection (`fresh`), or a close;
/// never bytes left from the bad one.
fn second_request_in_step(client: &mut Reader, context: &str) {
    if client.leftover().is_empty() && client.stream.peek(&mut [0u8; 1]).is_ok_and(|n| n == 0) {
        return;
    }
    let sent = std::io::Write::write_all(
        &mut client.stream,
        b"GET /again HTTP/1.1\r\nHost: s\r\n\r\n",
    );
    if sent.is_err() {
        return;
    }
    match client.try_read(false) {
        Ok((response, _)) => {
            let text = response.text();
            assert!(
                (response.status == 200 && text == "fresh") || response.status == 502,
                "{context}: the second request got {response:?}"
            );
        }
        Err(e) => assert!(
            matches!(
                e.kind(),
                ErrorKind::UnexpectedEof | ErrorKind::ConnectionReset
            ),
            "{context}: {e}"
        ),
    }
}

/// An upstream whose first answer of all is `bad` (then it closes) and
/// every later one `fresh`.
fn bad_once(bad: Vec<u8>) -> FakeUpstream {
    let asked = AtomicUsize::new(0);
    FakeUpstream::start(move |conn| {
        while conn.read_request().is_some() {
            if asked.fetch_add(1, Ordering::SeqCst) == 0 {
                conn.send(&bad);
                return;
            }
            conn.answer(b"fresh");
        }
    })
}

#[test]
fn bad_upstream_heads_are_502s_and_the_client_stays_in_step() {
    let _serial = support::serial();
    let mut big_head = b"HTTP/1.1 200 OK\r\n".to_vec();
    for n in 0..2000 {
        big_head.extend_from_slice(format!("X-Filler-{n}: {}\r\n", "f".repeat(30)).as_bytes());
    }
    big_head.extend_from_slice(b"Content-Length: 0\r\n\r\n");
    // (Plain garbage is upstream_forwarding.rs's.)
    let answers: Vec<(&str, Vec<u8>)> = vec![
        ("a head over 64 KiB", big_head),
        (
            "101 to a plain request",
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n".to_vec(),
        ),
        (
            "conflicting lengths",
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!".to_vec(),
        ),
        (
            "a coding the lab cannot decode",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nxyz".to_vec(),
        ),
        (
            "an obsolete line folding",
            b"HTTP/1.1 200 OK\r\nX-A: 1\r\n folded\r\nContent-Length: 0\r\n\r\n".to_vec(),
        ),
    ];
    for (what, bad) in answers {
        let upstream = bad_once(bad);
        let fixture = lab(upstream.addr, "", |_| {});
        let mut client = Reader::connect(fixture.addr);
        client.send(b"GET /first HTTP/1.1\r\nHost: s\r\n\r\n");
        let (response, _) = client.read(false);
        assert_eq!(response.status, 502, "{what}: {response:?}");
        second_request_in_step(&mut client, what);
    }
}

#[test]
fn bytes_an_upstream_sends_while_pooled_never_answer_the_next_request() {
    let _serial = support::serial();
    // The first answer is whole; 300 ms later, while the connection sits
    // idle in the lab's pool, a second answer nobody asked for follows.
    // (Surplus in the same write is upstream_forwarding.rs's.)
    let asked = AtomicUsize::new(0);
    let upstream = FakeUpstream::start(move |conn| {
        while conn.read_request().is_some() {
            if asked.fetch_add(1, Ordering::SeqCst) > 0 {
                conn.answer(b"fresh");
                continue;
            }
            conn.answer(b"hello");
            std::thread::sleep(Duration::from_millis(300));
            conn.send(b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nSMUGGLED");
        }
    });
    let fixture = lab(upstream.addr, "", |_| {});
    let mut client = Reader::connect(fixture.addr);
    client.send(b"GET /first HTTP/1.1\r\nHost: s\r\n\r\n");
    let (response, framed) = client.read(false);
    assert_eq!(
        (response.status, framed),
        (200, Framed::Length),
        "{response:?}"
    );
    assert_eq!(response.body, b"hello");
    idle(Duration::from_millis(600));
    for n in 0..3 {
        client.send(b"GET /next HTTP/1.1\r\nHost: s\r\n\r\n");
        let (response, _) = client.read(false);
        assert_eq!(response.body, b"fresh", "request {n} after: {response:?}");
    }
}

#[test]
fn a_chunked_answer_turning_to_garbage_is_cut_not_continued() {
    let _serial = support::serial();
    let upstream = bad_once(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nzz\r\nmore".to_vec(),
    );
    let fixture = lab(upstream.addr, "", |_| {});
    let mut client = Reader::connect(fixture.addr);
    client.send(b"GET /first HTTP/1.1\r\nHost: s\r\n\r\n");
    // The head and the good chunk may have gone; the bad size line never
    // does, nor a last chunk: the connection ends.
    match client.try_read(false) {
        Ok((response, _)) => assert_eq!(
            response.status, 502,
            "a clean end to a broken body: {response:?}"
        ),
        Err(e) => assert!(
            matches!(
                e.kind(),
                ErrorKind::UnexpectedEof | ErrorKind::ConnectionReset
            ),
            "{e}"
        ),
    }
    let relayed = String::from_utf8_lossy(client.leftover()).into_owned();
    assert!(
        !relayed.contains("zz") && !relayed.contains("more"),
        "{relayed:?}"
    );
}

#[test]
fn a_body_an_upstream_sends_after_a_head_answer_never_answers_the_next_request() {
    let _serial = support::serial();
    // A buggy upstream sends a body with its answer to HEAD: that
    // connection is not used again.
    let upstream = FakeUpstream::start(|conn| {
        while let Some(got) = conn.read_request() {
            if got.line().starts_with("HEAD") {
                conn.send(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello");
            } else {
                conn.answer(b"fresh");
            }
        }
    });
    let fixture = lab(upstream.addr, "", |_| {});
    let mut client = Reader::connect(fixture.addr);
    client.send(b"HEAD / HTTP/1.1\r\nHost: s\r\n\r\n");
    let (response, _) = client.read(true);
    assert_eq!(response.content_length(), Some(5));
    for n in 0..3 {
        client.send(b"GET / HTTP/1.1\r\nHost: s\r\n\r\n");
        let (response, _) = client.read(false);
        assert_eq!(
            response.body, b"fresh",
            "request {n} after the HEAD: {response:?}"
        );
    }
    assert!(client.leftover().is_empty());
}

#[test]
fn a_client_gone_mid_answer_takes_its_upstream_connection_with_it() {
    let _serial = support::serial();
    let upstream = FakeUpstream::start(|conn| {
        while let Some(got) = conn.read_request() {
            if !got.line().starts_with("GET /big") {
                conn.answer(b"fresh");
                continue;
            }
            conn.send(b"HTTP/1.1 200 OK\r\nContent-Length: 50000000\r\n\r\n");
            let piece = [b'x'; 64 * 1024];
            for _ in 0..800 {
                if conn.stream.write_all(&piece).is_err() {
                    return;
                }
            }
        }
    });
    let fixture = lab(upstream.addr, "", |_| {});
    let mut leaving = Reader::connect(fixture.addr);
    leaving.send(b"GET /big HTTP/1.1\r\nHost: s\r\n\r\n");
    let mut some = [0u8; 64 * 1024];
    leaving.stream.read_exact(&mut some).unwrap();
    drop(leaving);
    // The half-sent answer's connection is closed, not pooled: the next
    // client's request is answered on a fresh one.
    support::eventually(SLACK, || match upstream.open() {
        0 => Ok(()),
        open => Err(format!("{open} upstream connections still open")),
    });
    let mut client = Reader::connect(fixture.addr);
    client.send(b"GET /x HTTP/1.1\r\nHost: s\r\n\r\n");
    let (response, framed) = client.read(false);
    assert_eq!(
        (response.body.as_slice(), framed),
        (&b"fresh"[..], Framed::Length)
    );
    assert_eq!(upstream.accepted(), 2);
}

#[test]
fn a_client_waiting_on_a_slow_upstream_is_not_timed_out_as_idle_or_inactive() {
    let _serial = support::serial();
    // The service takes 2.5 s; the client side's timers are all 1 s. The
    // wait is the upstream's, bounded by --upstream-timeout (60 s) alone.
    let upstream = FakeUpstream::start(|conn| {
        while conn.read_request().is_some() {
            std::thread::sleep(Duration::from_millis(2500));
            conn.answer(b"late");
        }
    });
    let fixture = lab(upstream.addr, "", |config| {
        config.timeout = Duration::from_secs(1);
        config.keep_alive_timeout = Duration::from_secs(1);
        config.keep_alive_buffer = Duration::ZERO;
        config.headers_timeout = Duration::from_secs(1);
    });
    let mut client = Reader::connect(fixture.addr);
    client.send(b"GET / HTTP/1.1\r\nHost: s\r\n\r\n");
    let (response, _) = client.read(false);
    assert_eq!(
        (response.status, response.body.as_slice()),
        (200, &b"late"[..]),
        "{response:?}"
    );
}

#[test]
fn a_request_pipelined_behind_a_body_refused_early_is_answered() {
    let _serial = support::serial();
    // The upstream answers 413 from the head alone, then reads the body
    // slowly; the client sends the body and its next request in one go.
    // The lab drops the rest of the body and must go on to the request
    // behind it, already in hand, with no new byte from the client.
    let asked = AtomicUsize::new(0);
    let upstream = FakeUpstream::start(move |conn| {
        if asked.fetch_add(1, Ordering::SeqCst) > 0 {
            while conn.read_request().is_some() {
                conn.answer(b"next");
            }
            return;
        }
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            if conn.stream.read(&mut byte).unwrap_or(0) == 0 {
                return;
            }
            head.push(byte[0]);
        }
        conn.send(b"HTTP/1.1 413 Too Big\r\nContent-Length: 4\r\nConnection: close\r\n\r\nnope");
        let _ = conn.stream.shutdown(std::net::Shutdown::Write);
        std::thread::sleep(Duration::from_millis(200));
        conn.wait_closed();
    });
    let fixture = lab(upstream.addr, "", |_| {});
    let mut client = Reader::connect(fixture.addr);
    let body = vec![b'u'; 900 * 1024];
    let mut request = format!(
        "POST /upload HTTP/1.1\r\nHost: s\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    request.extend_from_slice(&body);
    request.extend_from_slice(b"GET /next HTTP/1.1\r\nHost: s\r\n\r\n");
    let mut writer = client.stream.try_clone().unwrap();
    let sending = std::thread::spawn(move || writer.write_all(&request).is_ok());
    let (refused, _) = client.read(false);
    assert_eq!(
        (refused.status, refused.body.as_slice()),
        (413, &b"nope"[..])
    );
    assert!(sending.join().unwrap(), "the client's bytes all went");
    if refused.closes() {
        return;
    }
    let (next, _) = client.read(false);
    assert_eq!(
        (next.status, next.body.as_slice()),
        (200, &b"next"[..]),
        "{next:?}"
    );
}
