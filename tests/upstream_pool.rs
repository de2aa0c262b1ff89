//! `--upstream`: the lab's own pool of upstream connections. A pooled
//! connection the upstream closed before answering is retried once, for
//! an idempotent request only; one closed while pooled is dropped; an idle
//! client holds none; the pool keeps none past `--upstream-idle-timeout`;
//! a drain lets a slow forwarded answer finish. The pool learns the
//! upstream's idle life, shown (an idle close) or said (`Keep-Alive:
//! timeout=N`), and lets go of its connections first from then on.

mod support;

use std::io::Read;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::time::{Duration, Instant};

use keepalive_server::ServerHandle;
use keepalive_server::upstream::Failure;
use support::client::{Client, get};
use support::exposition::Exposition;
use support::server::{AdminFixture, TestServer, start, start_with_admin};
use support::upstream::{FakeUpstream, Upstreamed};
use support::{SLACK, eventually, ms};

fn retries(handle: &ServerHandle) -> u64 {
    handle.stats().map(|s| s.upstream_retries.get()).sum()
}

/// Answers the first request on each connection; on its first
/// connection, reads the second request and closes without a word (the
/// upstream's idle close crossing the lab's reuse).
fn closes_under_the_second_request() -> FakeUpstream {
    let connections = std::sync::atomic::AtomicUsize::new(0);
    FakeUpstream::start(move |conn: &mut Upstreamed| {
        let first = connections.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0;
        while let Some(got) = conn.read_request() {
            if first && got.line().contains("/second") {
                return;
            }
            conn.answer(got.line().as_bytes());
        }
    })
}

#[test]
fn a_get_that_meets_a_pooled_connection_closed_is_sent_again_once() {
    let upstream = closes_under_the_second_request();
    let server = start_with_admin(|config| upstream.configure(config));
    let mut client = Client::connect(server.addr);
    assert_eq!(client.request("/first").status, 200);
    let second = client.request("/second");
    assert_eq!(
        second.status, 200,
        "retried on a fresh connection: {second:?}"
    );
    assert_eq!(second.body_str(), "GET /second HTTP/1.1");
    assert_eq!(upstream.accepted(), 2);
    let metrics = Exposition::parse(&get(server.admin, "/metrics").text());
    assert_eq!(metrics.value("kas_upstream_retries_total", &[]), Some(1.0));
    assert_eq!(
        metrics.value("kas_upstream_errors_total", &[("reason", "reset")]),
        Some(0.0),
        "a retried request is no error"
    );
    assert_eq!(
        metrics.value("kas_upstream_connections_total", &[]),
        Some(2.0)
    );
    assert_eq!(
        metrics.value("kas_upstream_connections", &[("state", "idle")]),
        Some(1.0),
        "the fresh one pooled"
    );
    assert_eq!(
        metrics.value("kas_upstream_connections", &[("state", "lent")]),
        Some(0.0)
    );
}

#[test]
fn a_post_that_meets_a_pooled_connection_closed_is_not_sent_again() {
    let upstream = closes_under_the_second_request();
    let server = start(|config| upstream.configure(config));
    let mut client = Client::connect(server.addr);
    assert_eq!(client.request("/first").status, 200);
    client.send(b"POST /second HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\nhi");
    let response = client.read_response();
    assert_eq!(response.status, 502, "{response:?}");
    assert!(
        response
            .body_str()
            .contains("closed the connection before answering")
    );
    assert_eq!(retries(&server.handle), 0);
    let resets: u64 = server
        .handle
        .stats()
        .map(|s| s.upstream_errors_by(Failure::Reset))
        .sum();
    assert_eq!(resets, 1);
    assert_eq!(upstream.accepted(), 1, "no second connection for a POST");
}

#[test]
fn a_pooled_connection_the_upstream_closes_is_dropped_before_reuse() {
    // Closed right behind the answer (the lab sees the hangup with it),
    // and closed a while later (while it sits in the pool).
    for linger in [ms(0), ms(150)] {
        let upstream = FakeUpstream::start(move |conn| {
            if let Some(got) = conn.read_request() {
                conn.answer(got.line().as_bytes());
                std::thread::sleep(linger);
            }
            // Then the upstream's own idle close.
        });
        let server = start(|config| upstream.configure(config));
        let mut client = Client::connect(server.addr);
        assert_eq!(client.request("/one").status, 200);
        eventually(SLACK, || match upstream.open() {
            0 => Ok(()),
            n => Err(format!("{n} upstream connections open")),
        });
        std::thread::sleep(ms(100)); // the lab sees the close
        assert_eq!(client.request("/two").status, 200);
        assert_eq!(
            retries(&server.handle),
            0,
            "{linger:?}: dropped, not retried"
        );
        assert_eq!(upstream.accepted(), 2, "{linger:?}");
    }
}

#[test]
fn an_idle_client_holds_no_upstream_connection_and_the_pool_expires() {
    let upstream = FakeUpstream::start(|conn| {
        while let Some(got) = conn.read_request() {
            conn.answer(got.line().as_bytes());
        }
    });
    let server = start(|config| {
        upstream.configure(config);
        config.upstream_idle_timeout = ms(300);
    });
    let mut clients: Vec<Client> = (0..3).map(|_| Client::connect(server.addr)).collect();
    for client in &mut clients {
        assert_eq!(client.request("/").status, 200);
    }
    assert_eq!(
        upstream.accepted(),
        1,
        "idle clients share one pooled connection"
    );
    let pooled_at = Instant::now();
    eventually(ms(300) + SLACK, || match upstream.open() {
        0 => Ok(()),
        n => Err(format!("{n} upstream connections open")),
    });
    assert!(
        pooled_at.elapsed() >= ms(250),
        "not closed before its idle timeout: {:?}",
        pooled_at.elapsed()
    );
    assert_eq!(server.handle.open_connections(), 3, "the clients stay");
    assert_eq!(clients[0].request("/").status, 200);
    assert_eq!(upstream.accepted(), 2, "a fresh upstream connection");
}

#[test]
fn a_drain_lets_a_slow_forwarded_answer_finish() {
    let upstream = FakeUpstream::start(|conn| {
        if conn.read_request().is_some() {
            std::thread::sleep(ms(600));
            conn.answer(b"worth the wait");
        }
    });
    let server = start(|config| upstream.configure(config));
    let mut client = Client::connect(server.addr);
    client.get("/slow");
    eventually(SLACK, || match upstream.accepted() {
        0 => Err("not forwarded yet".to_owned()),
        _ => Ok(()),
    });
    let TestServer { handle, .. } = server;
    handle.shutdown();
    let response = client.read_response();
    assert_eq!(response.body_str(), "worth the wait");
    assert!(response.closes(), "draining: {response:?}");
    let joined = Instant::now();
    handle.join().unwrap();
    assert!(joined.elapsed() < SLACK, "{:?}", joined.elapsed());
}

#[test]
fn a_client_that_stops_reading_pauses_the_upstream_read() {
    // 128 MiB answered; the client reads nothing for a while: the lab
    // reads the upstream only as its output drains, so the upstream's
    // writes block once the sockets' buffers (a few MiB each way on
    // loopback) are full, long before the whole answer is sent.
    const SIZE: usize = 128 << 20;
    let written = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = std::sync::Arc::clone(&written);
    let upstream = FakeUpstream::start(move |conn| {
        use std::io::Write;
        if conn.read_request().is_none() {
            return;
        }
        conn.send(format!("HTTP/1.1 200 OK\r\nContent-Length: {SIZE}\r\n\r\n").as_bytes());
        let block = vec![b'z'; 64 * 1024];
        for _ in 0..SIZE / block.len() {
            if conn.stream.write_all(&block).is_err() {
                return;
            }
            counted.fetch_add(block.len(), std::sync::atomic::Ordering::SeqCst);
        }
    });
    let server = start(|config| upstream.configure(config));
    let mut client = Client::connect(server.addr);
    client.get("/big");
    std::thread::sleep(ms(500));
    let sent = written.load(std::sync::atomic::Ordering::SeqCst);
    std::thread::sleep(ms(400));
    let later = written.load(std::sync::atomic::Ordering::SeqCst);
    assert!(
        sent < SIZE / 2,
        "the upstream sent {sent} bytes to a client reading none"
    );
    assert_eq!(later, sent, "the upstream's writes stay blocked");
    let mut total = 0;
    let mut chunk = vec![0u8; 256 * 1024];
    client
        .stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    while total < SIZE {
        match client.stream.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => total += n,
        }
    }
    assert!(total > SIZE, "the whole answer came once read: {total}");
}

/// Answers every request, and keeps a connection idle `idle_close` at
/// most: its first connection is closed when that time has passed (seen
/// by the lab while pooled), the others only when a request comes after
/// it (the close crossing the request, the race made certain).
fn closing_idle_after(idle_close: Duration) -> FakeUpstream {
    let connections = AtomicUsize::new(0);
    FakeUpstream::start(move |conn| {
        if connections.fetch_add(1, SeqCst) == 0 {
            conn.stream.set_read_timeout(Some(idle_close)).unwrap();
        }
        let mut answered = Instant::now();
        while let Some(got) = conn.read_request() {
            if answered.elapsed() >= idle_close {
                return;
            }
            conn.answer(got.line().as_bytes());
            answered = Instant::now();
        }
    })
}

fn idle_limit(server: &AdminFixture) -> Option<f64> {
    let metrics = Exposition::parse(&get(server.admin, "/metrics").text());
    metrics.value("kas_upstream_idle_limit_seconds", &[])
}

#[test]
fn an_upstream_closing_idle_connections_at_300ms_is_let_go_first_once_seen() {
    let upstream = closing_idle_after(ms(300));
    let server = start_with_admin(|config| upstream.configure(config));
    let mut client = Client::connect(server.addr);
    assert_eq!(client.request("/first").status, 200);
    assert_eq!(idle_limit(&server), Some(1.0), "the setting, until shown");
    // The upstream's idle close, seen while the connection is pooled.
    let learned = eventually(SLACK, || match idle_limit(&server) {
        Some(limit) if limit < 1.0 => Ok(limit),
        other => Err(format!("{other:?}")),
    });
    assert!(
        (0.1..=0.3).contains(&learned),
        "under the 300 ms seen: {learned}"
    );
    // Gaps either side of the upstream's 300 ms: the lab lets go of its
    // idle connection first each time, so no request meets the close
    // (with the 1 s pool unlearned, those after 300 ms would each be a
    // retry).
    for (n, gap) in [250, 350, 300, 280, 320, 260, 340, 300]
        .into_iter()
        .enumerate()
    {
        std::thread::sleep(ms(gap));
        let response = client.request(&format!("/spaced/{n}"));
        assert_eq!(response.status, 200, "{gap} ms: {response:?}");
    }
    assert_eq!(
        retries(&server.handle),
        0,
        "no request met a closed connection"
    );
}

#[test]
fn a_keep_alive_timeout_said_caps_the_pool_a_second_below_it() {
    let upstream = FakeUpstream::start(|conn| {
        while let Some(got) = conn.read_request() {
            let body = got.line();
            let head = format!(
                "HTTP/1.1 200 OK\r\nKeep-Alive: timeout=2\r\nContent-Length: {}\r\n\r\n",
                body.len()
            );
            conn.send(head.as_bytes());
            conn.send(body.as_bytes());
        }
    });
    let server = start_with_admin(|config| {
        upstream.configure(config);
        config.upstream_idle_timeout = Duration::from_secs(5);
    });
    let mut client = Client::connect(server.addr);
    let response = client.request("/");
    assert_eq!(response.status, 200);
    assert_eq!(idle_limit(&server), Some(1.0), "2 s said, less 1 s");
    let pooled_at = Instant::now();
    eventually(SLACK, || match upstream.open() {
        0 => Ok(()),
        n => Err(format!("{n} upstream connections open")),
    });
    assert!(
        pooled_at.elapsed() < ms(1_000) + SLACK,
        "let go at 1 s, not 5 s: {:?}",
        pooled_at.elapsed()
    );
}
