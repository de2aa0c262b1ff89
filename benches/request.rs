//! The user-space cost of one keep-alive request, without the socket: the
//! request wrk sends (`GET /`, a Host field) parsed from a connection's
//! input buffer and answered into its output buffer by `Session::process`,
//! the output then marked sent. What the server adds to the kernel's two
//! syscalls per request; `scripts/loadtest.sh` measures the whole.
//! `fields_100` is a head of 100 fields, past the parser's stack array.
//!
//! `cargo bench --bench request`

use std::hint::black_box;
use std::time::{Duration, SystemTime};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use keepalive_server::Config;
use keepalive_server::ctx::Resources;
use keepalive_server::session::Session;
use keepalive_server::stats::Stats;

/// What `wrk -c100 http://127.0.0.1:18480/` sends.
const WRK_GET: &[u8] = b"GET / HTTP/1.1\r\nHost: 127.0.0.1:18480\r\n\r\n";
/// A browser-like request: more fields to read past.
const BROWSER_GET: &[u8] = b"GET /?q=timers HTTP/1.1\r\nHost: example.com\r\n\
User-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0\r\n\
Accept: text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8\r\n\
Accept-Language: en-US,en;q=0.5\r\nAccept-Encoding: gzip, deflate, br\r\n\
Connection: keep-alive\r\nUpgrade-Insecure-Requests: 1\r\n\r\n";

/// A head of 100 fields: more than the parser's stack array (64), so it
/// is parsed again with room on the heap.
fn hundred_fields() -> Vec<u8> {
    let mut head = b"GET / HTTP/1.1\r\nHost: 127.0.0.1:18480\r\n".to_vec();
    for n in 1..100 {
        head.extend_from_slice(format!("X-Field-{n}: value\r\n").as_bytes());
    }
    head.extend_from_slice(b"\r\n");
    head
}

fn request(c: &mut Criterion) {
    let settings = Config::with_listen("127.0.0.1:0".parse().unwrap()).settings();
    let stats = Stats::default();
    let mut resources = Resources::default();
    resources.date.refresh(SystemTime::now());
    let mut group = c.benchmark_group("request");
    group.throughput(Throughput::Elements(1));
    group.measurement_time(Duration::from_secs(2));
    let fields_100 = hundred_fields();
    for (name, bytes) in [
        ("wrk", WRK_GET),
        ("browser", BROWSER_GET),
        ("fields_100", &fields_100),
    ] {
        let mut session = Session::new();
        let mut buffers = resources.pool.take();
        group.bench_function(name, |b| {
            b.iter(|| {
                let spare = buffers.input.spare(4096);
                spare[..bytes.len()].copy_from_slice(bytes);
                buffers.input.filled(bytes.len());
                let observer = &mut keepalive_server::observe::Ignore;
                let mut ctx = resources.lend(0, &settings, &stats, observer);
                session.process(&mut buffers, &mut ctx);
                let sent = buffers.output.pending();
                black_box(buffers.output.unsent());
                buffers.output.advance(sent);
            })
        });
        resources.pool.give(buffers);
    }
    group.finish();
}

criterion_group!(benches, request);
criterion_main!(benches);
