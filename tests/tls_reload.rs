//! SIGHUP with HTTPS on, against the built binary (started without
//! `--config`: renewing a certificate is reason enough to reload): new
//! connections shake hands with the new certificate, a connection opened
//! before keeps its own and stays open, and files that do not load leave
//! the running pair in force.

mod support;

use std::time::Duration;

use support::binary::{Running, command};
use support::tls::TestCert;

const WITHIN: Duration = Duration::from_secs(10);

#[test]
fn sighup_swaps_the_certificate_for_new_connections_and_keeps_open_ones() {
    let live = TestCert::new(); // the files the server reads
    let first = TestCert::new();
    let renewed = TestCert::new();
    first.copy_over(&live);
    let server = Running::start_silent(command(&[
        "--workers",
        "1",
        "--tls-cert",
        live.cert_arg(),
        "--tls-key",
        live.key_arg(),
    ]));
    let mut open = first.connect(server.addr);
    assert!(open.get("/").0.starts_with("HTTP/1.1 200"));

    renewed.copy_over(&live);
    server.signal("HUP");
    server.wait_for_line("certificate and key read again", WITHIN);
    server.wait_for_line("reloaded", WITHIN);

    let (head, _) = open.get("/");
    assert!(
        head.starts_with("HTTP/1.1 200"),
        "the open connection stays: {head}"
    );
    let mut fresh = renewed
        .try_connect(server.addr)
        .expect("the renewed certificate");
    assert!(fresh.get("/").0.starts_with("HTTP/1.1 200"));
    assert!(
        first.try_connect(server.addr).is_err(),
        "new connections no longer get the first certificate"
    );

    // A reload whose files do not load changes nothing.
    std::fs::write(&live.cert, "not a certificate\n").unwrap();
    server.signal("HUP");
    let line = server.wait_for_line("reload failed", WITHIN);
    assert!(line.contains(live.cert_arg()), "names the file: {line}");
    let mut after = renewed
        .try_connect(server.addr)
        .expect("the pair in force stays");
    assert!(after.get("/").0.starts_with("HTTP/1.1 200"));
    assert!(open.get("/").0.starts_with("HTTP/1.1 200"));
}
