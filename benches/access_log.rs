//! One access-log line: an [`Entry`] formatted into a worker's buffer
//! (`AccessLog::write`), the buffer emptied into a sink that writes nothing
//! whenever it fills. `same_second`: the usual case, many lines per second,
//! so the time text is formatted once and copied; `new_second`: every line
//! in a second of its own, so each one formats the time (the worst case,
//! and the cost of the date formatting itself).
//!
//! `cargo bench --bench access_log`

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use keepalive_server::access_log::{AccessLog, AccessLogSink, AccessRecord, Entry};
use keepalive_server::config::AccessLogTarget;

/// 2026-11-22 10:13:58 UTC.
const SECOND: u64 = 1_795_342_438;

fn access_log(c: &mut Criterion) {
    let sink = AccessLogSink::open(&AccessLogTarget::Off).expect("no file to open");
    let mut record = AccessRecord::default();
    record.remember_head(
        b"GET /?q=timers HTTP/1.1\r\nHost: example.com\r\n\
          User-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0\r\n\
          Referer: http://example.com/\r\n\r\n",
    );
    let peer = "192.0.2.7".parse().expect("an address");
    let mut group = c.benchmark_group("access_log");
    group.throughput(Throughput::Elements(1));
    group.measurement_time(Duration::from_secs(2));
    for (name, step) in [("same_second", 0), ("new_second", 1)] {
        let mut log = AccessLog::default();
        let mut second = SECOND;
        group.bench_function(name, |b| {
            b.iter(|| {
                second += step;
                log.write(black_box(&Entry {
                    peer,
                    unix_second: second,
                    record: &record,
                    status: 200,
                    bytes: 13,
                    micros: 1_234,
                    conn: 42,
                    idle_gap_ms: Some(1_503),
                    tls: None,
                }));
                if log.is_full() {
                    log.flush(&sink).expect("nothing to write to");
                }
            })
        });
    }
    group.finish();
}

criterion_group!(benches, access_log);
criterion_main!(benches);
