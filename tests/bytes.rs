//! `/bytes/<n>`: n bytes of filler for sweeping response sizes. Its body is
//! generated as the output drains, so memory per connection stays bounded
//! however large n is; it is capped at `--max-body-size` (404 beyond).

mod session_driver;
mod support;

use keepalive_server::Config;
use keepalive_server::session::OUTPUT_HIGH_WATER;
use session_driver::Driver;
use support::server::start;

/// What `/bytes/<n>` answers: lines of `abc…xyzabc…k\n` (64 bytes), the
/// body ending on a whole line.
fn filler(n: usize) -> Vec<u8> {
    let line: Vec<u8> = (0..63)
        .map(|i| b'a' + (i % 26) as u8)
        .chain([b'\n'])
        .collect();
    let lines = line.repeat(n / 64 + 1);
    lines[lines.len() - n..].to_vec()
}

#[test]
fn answers_exactly_n_bytes_of_filler() {
    let server = start(|_| {});
    let mut client = server.client();
    for n in [0, 1, 63, 64, 1000, 16 * 1024, 300_000] {
        client.send(format!("GET /bytes/{n} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
        let response = client.read_response();
        assert_eq!(response.status, 200, "n = {n}");
        assert_eq!(response.content_length(), Some(n));
        assert_eq!(
            response.header("content-type"),
            Some("application/octet-stream")
        );
        assert!(response.body == filler(n), "n = {n}: wrong filler");
    }
}

#[test]
fn head_gives_the_length_without_the_body() {
    let server = start(|_| {});
    let mut client = server.client();
    client.send(
        b"HEAD /bytes/300000 HTTP/1.1\r\nHost: t\r\n\r\nGET /bytes/5 HTTP/1.1\r\nHost: t\r\n\r\n",
    );
    let head = client.read_head_response();
    assert_eq!(head.content_length(), Some(300_000));
    let next = client.read_response();
    assert_eq!(
        next.body, b"hijk\n",
        "the next response follows the head at once"
    );
}

#[test]
fn sizes_past_max_body_size_are_not_found() {
    let server = start(|c| c.max_body_size = 4096);
    let mut client = server.client();
    client.send(b"GET /bytes/4096 HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(client.read_response().body.len(), 4096);
    client.send(b"GET /bytes/4097 HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(client.read_response().status, 404);
}

#[test]
fn pipelined_requests_behind_a_large_answer_come_after_it_in_order() {
    // More than the socket buffers hold, so the server meets a full socket.
    let server = start(|c| c.max_body_size = 16 << 20);
    let mut client = server.client();
    client.send(
        b"GET /bytes/12000000 HTTP/1.1\r\nHost: t\r\n\r\n\
          GET / HTTP/1.1\r\nHost: t\r\n\r\n\
          GET /bytes/100 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    );
    // A reader slow to start: the server meets a full socket with
    // requests still behind.
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert!(client.read_response().body == filler(12_000_000));
    assert_eq!(client.read_response().body, support::HELLO);
    let last = client.read_response();
    assert!(last.closes());
    assert_eq!(last.body, filler(100));
    client.read_until_closed(support::SLACK);
}

/// The session never holds more than the high-water mark of generated
/// output, whatever n, and what it generates is the whole body.
#[test]
fn a_generated_body_never_outgrows_the_output_bound() {
    let mut config = Config::with_listen("127.0.0.1:0".parse().unwrap());
    config.max_body_size = 64 << 20;
    let mut driver = Driver::new(config.settings());
    let n = 64 << 20;
    let request = format!("GET /bytes/{n} HTTP/1.1\r\nHost: t\r\n\r\n");
    driver
        .buffers
        .input
        .spare(4096)
        .get_mut(..request.len())
        .unwrap()
        .copy_from_slice(request.as_bytes());
    driver.buffers.input.filled(request.len());
    let mut rounds = 0;
    loop {
        driver.process_once();
        // Only the head is ever queued: the body is written from the
        // shared filler block, never copied into the output.
        let pending = driver.buffers.output.pending();
        assert!(pending < 1024, "{pending} bytes queued");
        assert!(driver.buffers.output.buf.capacity() <= 2 * OUTPUT_HIGH_WATER);
        driver.drain();
        rounds += 1;
        if !driver.session.is_generating(Some(&driver.buffers)) {
            break;
        }
    }
    let head_end = driver
        .wire
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap()
        + 4;
    assert_eq!(driver.wire.len() - head_end, n);
    assert!(driver.wire[head_end..] == filler(n)[..]);
    assert!(
        rounds >= n / (256 << 10),
        "{rounds} rounds: 256 KiB a write at most"
    );
}
