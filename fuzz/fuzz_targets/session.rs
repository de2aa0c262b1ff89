//! Drives one socket-free [`Session`] the way a connection does: bytes
//! arrive in arbitrary pieces, output drains at arbitrary rates, `/delay`
//! timers and receive timeouts fire at arbitrary points. Checks that the
//! session never panics, never hangs, never outgrows its input limit or
//! its output high-water mark (beyond one response), and that what it
//! writes is a well-formed sequence of HTTP/1.1 responses, of which only
//! the last may be unfinished, and only when the connection ends for a
//! body refused after its echo began or a timeout after it.
//!
//! Input layout:
//! - byte 0: settings (see [`settings`]);
//! - byte 1: number of steps (mod 32; bit 6: the server is draining; bit 7:
//!   the stream is sent 16 times over), then two bytes per step: how many
//!   stream bytes to offer, and what else happens in that step (see
//!   [`Action`]);
//! - the rest: the byte stream the client sends. Whatever the steps did not
//!   offer is offered at the end, as fast as the input buffer takes it.

#![no_main]

use std::collections::BTreeMap;
use std::time::Duration;

use keepalive_server::Config;
use keepalive_server::Settings;

#[path = "../../tests/session_driver/mod.rs"]
mod session_driver;
use keepalive_server::app::filler;
use keepalive_server::config::AccessLogTarget;
use keepalive_server::ctx::Ctx;
use keepalive_server::pool::Buffers;
use keepalive_server::session::{ECHO_BUFFER, OUTPUT_HIGH_WATER, Session};
use keepalive_server::stats::CloseCause;
use libfuzzer_sys::fuzz_target;
use session_driver::Driver;

/// Bits of a step's action byte.
struct Action;
impl Action {
    /// Leave the output unsent this step (a stalled client).
    const STALL: u8 = 0x01;
    /// Send only half of the output.
    const HALF: u8 = 0x02;
    /// The `/delay` timer fires.
    const DELAY: u8 = 0x04;
    /// A receive timer fires (headers/request deadline by 0x10).
    const TIME_OUT: u8 = 0x08;
    const DEADLINE: u8 = 0x10;
    /// The Date cache's second ends.
    const DATE: u8 = 0x20;
}

/// Byte 0: bits 0-1 max header size, 2-3 max body size, 4 keep-alive off,
/// 5-6 requests per socket, 7 access log. Draining comes from bit 6 of byte 1.
fn settings(byte: u8) -> Settings {
    let mut config = Config::with_listen("127.0.0.1:0".parse().unwrap());
    config.max_header_size = [16 * 1024, 64, 300, 2048][usize::from(byte & 3)];
    config.max_body_size = [1 << 20, 0, 10, 200][usize::from(byte >> 2 & 3)];
    if byte & 0x10 != 0 {
        config.keep_alive_timeout = Duration::ZERO;
    }
    config.max_requests_per_socket = [0, 1, 2, 5][usize::from(byte >> 5 & 3)];
    if byte & 0x80 != 0 {
        config.access_log = AccessLogTarget::Stdout;
    }
    config.settings()
}

/// The harness's side of one connection: the session driver the tests
/// use, and what the invariants need to remember.
struct Harness {
    driver: Driver,
    /// Every byte the session was given.
    fed: Vec<u8>,
    /// Output produced (sent or not) when the session started closing.
    closed_at: Option<usize>,
    /// A timeout found the response already begun: the connection would
    /// close here, its response unfinished.
    cut: bool,
}

impl Harness {
    fn new(settings: Settings, draining: bool) -> Self {
        let mut driver = Driver::new(settings);
        driver.draining = draining;
        Harness {
            driver,
            fed: Vec::new(),
            closed_at: None,
            cut: false,
        }
    }

    fn limit(&self) -> usize {
        Session::input_limit(&self.driver.settings)
    }

    /// Runs `f` with a context, then checks the invariants that hold after
    /// every session call.
    fn with_ctx(&mut self, f: impl FnOnce(&mut Session, &mut Buffers, &mut Ctx<'_>)) {
        self.driver.with_ctx(f);
        self.check();
    }

    fn produced(&self) -> usize {
        self.driver.wire.len() + self.driver.buffers.output.pending()
    }

    fn check(&mut self) {
        let buffers = Some(&*self.driver.buffers);
        assert!(
            self.driver.buffers.input.len() <= self.limit(),
            "input {} over its limit {}",
            self.driver.buffers.input.len(),
            self.limit()
        );
        // Exercise the condensed views; they must not panic.
        let _ = self.driver.session.is_idle(buffers);
        let _ = self.driver.session.is_receiving(buffers);
        let _ = self.driver.session.is_in_body(buffers);
        match (self.driver.session.closing(), self.closed_at) {
            (Some(_), None) => self.closed_at = Some(self.produced()),
            (Some(_), Some(at)) => assert_eq!(
                self.produced(),
                at,
                "output after the session started closing"
            ),
            (None, Some(_)) => panic!("the session stopped closing"),
            (None, None) => {}
        }
        if self.closed_at.is_some() {
            // Closing, nothing more is asked of the exchange: no request
            // in progress, nothing left to read.
            assert!(self.driver.buffers.in_flight.is_none(), "closing mid-request");
            assert!(!self.driver.session.is_receiving(buffers));
        }
        // Bodies stream through bounded output: past the high-water mark
        // by at most one queued response (an echo gathers ECHO_BUFFER).
        let bound = OUTPUT_HIGH_WATER + ECHO_BUFFER + 1024;
        assert!(
            self.driver.buffers.output.pending() <= bound,
            "output {} past {bound}",
            self.driver.buffers.output.pending()
        );
    }

    /// Offers up to `n` bytes of `stream`; returns how many were taken.
    fn feed(&mut self, stream: &[u8], n: usize) -> usize {
        let limit = self.limit();
        let spare = self.driver.buffers.input.spare(limit);
        let take = spare.len().min(n).min(stream.len());
        spare[..take].copy_from_slice(&stream[..take]);
        self.driver.buffers.input.filled(take);
        self.fed.extend_from_slice(&stream[..take]);
        take
    }

    fn process(&mut self) {
        // What it drops of a closing exchange's input is the connection's
        // business (it lingers); the session's output is what is checked.
        self.with_ctx(|session, buffers, ctx| {
            session.process(buffers, ctx);
        });
    }

    fn drain(&mut self, n: usize) {
        let from_output = n.min(self.driver.buffers.output.pending());
        self.driver
            .wire
            .extend_from_slice(&self.driver.buffers.output.unsent()[..from_output]);
        self.driver.buffers.output.advance(from_output);
        // A generated body follows the output, as the connection writes it.
        if let (Some(remaining), 0) = (
            self.driver.session.filler_due(&self.driver.buffers),
            self.driver.buffers.output.pending(),
        ) {
            let mut iov = [std::io::IoSlice::new(&[]); filler::MAX_SLICES];
            let slices = filler::slices(remaining, &mut iov);
            let mut left = n - from_output;
            for slice in &iov[..slices] {
                let take = slice.len().min(left);
                self.driver.wire.extend_from_slice(&slice[..take]);
                self.driver
                    .session
                    .filler_sent(take as u64, &mut self.driver.buffers);
                left -= take;
            }
        }
    }

    fn act(&mut self, action: u8) {
        if action & Action::DATE != 0 {
            self.driver.resources.date.invalidate();
        }
        if action & Action::DELAY != 0 {
            self.with_ctx(|session, buffers, ctx| session.delay_elapsed(buffers, ctx));
        }
        if action & Action::TIME_OUT != 0 {
            let cause = if action & Action::DEADLINE != 0 {
                CloseCause::RequestTimeout
            } else {
                CloseCause::HeadersTimeout
            };
            let mut answered = true;
            self.with_ctx(|session, buffers, ctx| {
                answered = session.time_out(cause, buffers, ctx);
            });
            if !answered {
                // The connection closes now, as it is.
                self.cut = true;
                return;
            }
        }
        if action & Action::STALL == 0 {
            let pending = self.driver.buffers.output.pending();
            let n = if action & Action::HALF != 0 {
                pending / 2
            } else {
                pending
            };
            self.drain(n);
        }
        self.process();
    }

    /// Offers the rest of the stream as fast as it is taken, answering
    /// delays at once, until nothing moves.
    fn finish(&mut self, mut stream: &[u8]) {
        loop {
            let before = (
                stream.len(),
                self.produced(),
                self.driver.session.received(),
            );
            let taken = self.feed(stream, usize::MAX);
            stream = &stream[taken..];
            self.process();
            self.drain(usize::MAX);
            if self.driver.session.is_delayed(Some(&self.driver.buffers)) {
                self.with_ctx(|session, buffers, ctx| session.delay_elapsed(buffers, ctx));
            }
            self.process();
            self.drain(usize::MAX);
            let after = (
                stream.len(),
                self.produced(),
                self.driver.session.received(),
            );
            if before == after {
                break;
            }
        }
        // Nothing moves: the stream must be exhausted, or the session done.
        assert!(
            stream.is_empty() || self.driver.session.closing().is_some(),
            "stalled with {} bytes unoffered, {} buffered, in flight {:?}",
            stream.len(),
            self.driver.buffers.input.len(),
            self.driver.buffers.in_flight
        );
        assert_eq!(self.driver.buffers.output.pending(), 0);
    }
}

/// Upper bound on the request heads in `bytes`: each ends at a distinct
/// LF followed by an empty line (LF or CRLF).
fn possible_heads(bytes: &[u8]) -> usize {
    (0..bytes.len())
        .filter(|&i| {
            bytes[i] == b'\n'
                && (bytes.get(i + 1) == Some(&b'\n') || bytes.get(i + 1..i + 3) == Some(b"\r\n"))
        })
        .count()
}

/// The body an error status is sent with.
fn reason_body(code: u16) -> Option<&'static [u8]> {
    Some(match code {
        400 => b"Bad Request\n",
        404 => b"Not Found\n",
        405 => b"Method Not Allowed\n",
        408 => b"Request Timeout\n",
        413 => b"Content Too Large\n",
        414 => b"URI Too Long\n",
        417 => b"Expectation Failed\n",
        431 => b"Request Header Fields Too Large\n",
        501 => b"Not Implemented\n",
        503 => b"Service Unavailable\n",
        505 => b"HTTP Version Not Supported\n",
        _ => return None,
    })
}

/// One response head at the start of `bytes`, checked on its own.
struct Head {
    len: usize,
    code: u16,
    /// `None`: `Transfer-Encoding: chunked`.
    content_length: Option<usize>,
    close: bool,
    content_type: Vec<u8>,
}

fn parse_response(bytes: &[u8], settings: &Settings) -> Result<Head, String> {
    let mut headers = [httparse::EMPTY_HEADER; 16];
    let mut response = httparse::Response::new(&mut headers);
    let len = match response.parse(bytes) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return Err("truncated response head".into()),
        Err(e) => return Err(format!("bad response head: {e}")),
    };
    if response.version != Some(1) {
        return Err("not HTTP/1.1".into());
    }
    let code = response.code.unwrap_or(0);
    if code == 100 {
        if !response.headers.is_empty() {
            return Err("100 Continue with header fields".into());
        }
        return Ok(Head {
            len,
            code,
            content_length: Some(0),
            close: false,
            content_type: Vec::new(),
        });
    }
    let field = |name: &str| -> Result<Option<&[u8]>, String> {
        let mut found = response
            .headers
            .iter()
            .filter(|h| h.name.eq_ignore_ascii_case(name));
        let first = found.next().map(|h| h.value);
        if found.next().is_some() {
            return Err(format!("{name} repeated"));
        }
        Ok(first)
    };
    let date = field("Date")?.ok_or("no Date")?;
    if date.len() != 29 || !date.ends_with(b" GMT") {
        return Err("bad Date".into());
    }
    let content_type = field("Content-Type")?.ok_or("no Content-Type")?.to_vec();
    let content_length = match (field("Content-Length")?, field("Transfer-Encoding")?) {
        (Some(length), None) => Some(
            std::str::from_utf8(length)
                .ok()
                .filter(|s| s.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|s| s.parse::<usize>().ok())
                .ok_or("bad Content-Length")?,
        ),
        (None, Some(b"chunked")) if code == 200 && content_type == b"application/octet-stream" => {
            None
        }
        _ => return Err("need Content-Length or (for a streamed echo) chunked, not both".into()),
    };
    if (code == 405) != field("Allow")?.is_some() {
        return Err("Allow must come exactly with 405".into());
    }
    let connection = field("Connection")?;
    let close = match connection {
        Some(b"close") => true,
        None | Some(b"keep-alive") => false,
        Some(other) => return Err(format!("Connection: {:?}", String::from_utf8_lossy(other))),
    };
    let keep_alive = field("Keep-Alive")?;
    if close == keep_alive.is_some() {
        return Err("Keep-Alive parameters must come exactly with persistence".into());
    }
    if let Some(value) = keep_alive {
        // The settings hold `Connection: keep-alive\r\nKeep-Alive: timeout=N`;
        // a limited connection adds `, max=M` (M counting down).
        let expected = &settings.keep_alive_header;
        let prefix = b"Connection: keep-alive\r\nKeep-Alive: ";
        let timeout = expected
            .strip_prefix(prefix)
            .ok_or("bad keep_alive_header")?;
        let rest = value
            .strip_prefix(timeout)
            .ok_or("Keep-Alive parameters differ from the settings")?;
        let max_ok = match rest.strip_prefix(b", max=") {
            None => rest.is_empty() && settings.max_requests_per_socket == 0,
            Some(digits) => {
                settings.max_requests_per_socket > 0
                    && !digits.is_empty()
                    && digits.iter().all(u8::is_ascii_digit)
            }
        };
        if !max_ok || connection != Some(b"keep-alive") {
            return Err("Keep-Alive without Connection: keep-alive, or a bad max".into());
        }
    }
    if code >= 400 && code != 404 && !close {
        return Err(format!("{code} without Connection: close"));
    }
    if reason_body(code).is_none() && code != 200 {
        return Err(format!("unexpected status {code}"));
    }
    Ok(Head {
        len,
        code,
        content_length,
        close,
        content_type,
    })
}

/// Whether `body` is what a response with this head carries.
fn body_fits(head: &Head, body: &[u8]) -> bool {
    match reason_body(head.code) {
        Some(reason) => body == reason,
        None if head.content_type == b"text/plain" => {
            body == b"Hello, World!"
                || body.is_empty()
                || body
                    .strip_prefix(b"delayed ")
                    .and_then(|rest| rest.strip_suffix(b"ms\n"))
                    .is_some_and(|ms| !ms.is_empty() && ms.iter().all(u8::is_ascii_digit))
        }
        None => head.content_type == b"application/octet-stream" && !body.is_empty(),
    }
}

/// Where a chunked body starting at `at` ends (after its last chunk), or
/// `Err(true)` if `wire` ends first, `Err(false)` if it is malformed.
fn chunked_end(wire: &[u8], mut at: usize) -> Result<(usize, bool), bool> {
    let mut empty = true;
    loop {
        let rest = wire.get(at..).ok_or(true)?;
        let Some(line) = rest.windows(2).position(|w| w == b"\r\n") else {
            return Err(true);
        };
        let size = std::str::from_utf8(&rest[..line])
            .ok()
            .and_then(|hex| usize::from_str_radix(hex, 16).ok())
            .ok_or(false)?;
        at += line + 2;
        if size == 0 {
            return match wire.get(at..at + 2) {
                Some(b"\r\n") => Ok((at + 2, !empty)),
                Some(_) => Err(false),
                None => Err(true),
            };
        }
        empty = false;
        at += size;
        match wire.get(at..at + 2) {
            Some(b"\r\n") => at += 2,
            Some(_) => return Err(false),
            None => return Err(true),
        }
    }
}

/// Reads `wire` as a sequence of responses. A response to HEAD carries no
/// body, and which ones answer HEAD is not known here, so every reading is
/// followed; the wire is well-formed if one reads to the end. With
/// `unfinished_ok`, the last may be an echo whose body ends early. Returns
/// the fewest final (non-1xx) responses over such readings.
fn check_wire(wire: &[u8], settings: &Settings, unfinished_ok: bool) -> Result<usize, String> {
    // offset -> fewest final responses to reach it
    let mut frontier = BTreeMap::from([(0usize, 0usize)]);
    let mut last_error = String::new();
    while let Some((at, count)) = frontier.pop_first() {
        if at == wire.len() {
            return Ok(count);
        }
        let head = match parse_response(&wire[at..], settings) {
            Ok(head) => head,
            Err(e) => {
                last_error = format!("at byte {at}: {e}");
                continue;
            }
        };
        let body_at = at + head.len;
        let mut next = Vec::with_capacity(2);
        let echo = head.content_type == b"application/octet-stream";
        if head.code == 100 {
            next.push((body_at, count));
        } else if let Some(length) = head.content_length {
            let end = body_at + length;
            if end <= wire.len() && body_fits(&head, &wire[body_at..end]) {
                next.push((end, count + 1));
            } else if end > wire.len() && echo && unfinished_ok {
                next.push((wire.len(), count + 1)); // cut short
            }
            if length > 0 {
                next.push((body_at, count + 1)); // answering HEAD
            }
        } else {
            match chunked_end(wire, body_at) {
                Ok((end, true)) => next.push((end, count + 1)),
                Ok((_, false)) => last_error = format!("at byte {body_at}: empty chunked echo"),
                Err(true) if unfinished_ok => next.push((wire.len(), count + 1)),
                Err(_) => last_error = format!("at byte {body_at}: bad chunked body"),
            }
            next.push((body_at, count + 1)); // answering HEAD
        }
        for (offset, count) in next {
            if head.close && offset != wire.len() {
                last_error = format!("at byte {offset}: output after Connection: close");
                continue;
            }
            let best = frontier.entry(offset).or_insert(count);
            *best = (*best).min(count);
        }
    }
    Err(last_error)
}

fuzz_target!(|data: &[u8]| {
    let Some((&settings_byte, rest)) = data.split_first() else {
        return;
    };
    let Some((&steps_byte, rest)) = rest.split_first() else {
        return;
    };
    let steps = usize::from(steps_byte % 32).min(rest.len() / 2);
    let (plan, stream) = rest.split_at(steps * 2);
    // Bit 7: the stream sixteen times over, so pipelined answers can pass
    // the output high-water mark (32 KiB) while the output stalls.
    let repeated = stream.repeat(if steps_byte & 0x80 != 0 { 16 } else { 1 });
    let mut stream = &repeated[..];
    let settings = settings(settings_byte);
    let mut harness = Harness::new(settings, steps_byte & 0x40 != 0);

    for step in plan.chunks_exact(2) {
        let taken = harness.feed(stream, usize::from(step[0]));
        stream = &stream[taken..];
        harness.process();
        harness.act(step[1]);
        if harness.cut {
            break;
        }
    }
    if !harness.cut {
        harness.finish(stream);
    }

    let abandoned = harness.driver.session.closing() == Some(CloseCause::BadRequest);
    let unfinished_ok = harness.cut || abandoned;
    let finals = match check_wire(
        &harness.driver.wire,
        &harness.driver.settings,
        unfinished_ok,
    ) {
        Ok(finals) => finals,
        Err(e) => panic!(
            "malformed output: {e}\n--- wire ---\n{}",
            String::from_utf8_lossy(&harness.driver.wire)
        ),
    };
    let heads = possible_heads(&harness.fed);
    assert!(
        (harness.driver.session.received() as usize) <= heads,
        "received {} requests from {heads} possible heads",
        harness.driver.session.received()
    );
    assert!(
        finals <= heads + 1,
        "{finals} responses to at most {heads} requests"
    );
});
