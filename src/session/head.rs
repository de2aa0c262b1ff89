//! Taking a request head from the input: whether a partial head is worth
//! parsing again (at a cost linear in the head however it trickles in),
//! the limits it is parsed under, and the start of its request, with the
//! observer told when the client names itself (a first request, or a
//! `User-Agent` other than the previous one's: a proxy's many clients).

use super::Session;
use crate::app::{Plan, Request};
use crate::config::Settings;
use crate::ctx::Ctx;
use crate::http::{HeadLimits, parse_head};
use crate::observe::Event;
use crate::pool::{Buffers, HeadProgress};

impl Session {
    /// Parses the head at the front of the input and starts its request.
    /// Returns whether processing may go on (`false`: the head is not all
    /// here, or it was refused).
    pub(super) fn take_head(&mut self, buffers: &mut Buffers, ctx: &mut Ctx<'_>) -> bool {
        if ctx.settings.logs_access() {
            buffers.log.begin(ctx.now);
        }
        let limit = ctx.settings.max_header_size;
        if !worth_parsing(buffers, limit) {
            return false;
        }
        match parse_head(buffers.input.bytes_mut(), head_limits(ctx.settings)) {
            Ok(Some((head, len))) => {
                let request = Request {
                    head: &head,
                    served: self.served,
                    draining: ctx.draining,
                    kept_on: self.kept_on,
                };
                let planned = match ctx.admin.as_deref_mut() {
                    Some(admin) => {
                        let answer = admin.plan(head.method, head.target, ctx.timers, ctx.now);
                        Ok(Plan::admin(request, answer, ctx.settings))
                    }
                    None => Plan::of(request, ctx.settings),
                };
                let answer = match planned {
                    Ok(answer) => answer,
                    Err(bad) => {
                        let method = head.method;
                        buffers.head_progress = HeadProgress::default();
                        self.refuse_control(bad, method, buffers, ctx);
                        return false;
                    }
                };
                self.kept_on = answer.kept_on;
                let agent = agent_key(head.user_agent);
                if !self.received_any || agent != self.agent {
                    self.agent = agent;
                    ctx.observe(Event::ClientNamed {
                        user_agent: head.user_agent,
                        forwarded: head.forwarded,
                        again: self.received_any,
                        minor_version: head.minor_version,
                        host: head.host,
                    });
                }
                let body = (head.framing, head.expect_continue);
                let forwarded = (len, head.framing, head.minor_version);
                if ctx.settings.logs_access() {
                    let Buffers { input, log, .. } = &mut *buffers;
                    log.remember_head(&input.bytes()[..len]);
                }
                if answer.forwards() && !self.start_forward(answer, forwarded, buffers, ctx) {
                    buffers.head_progress = HeadProgress::default();
                    return false;
                }
                buffers.input.consume(len);
                buffers.head_progress = HeadProgress::default();
                self.begin(answer, body, buffers, ctx);
                true
            }
            Ok(None) => {
                buffers.head_progress = HeadProgress::incomplete(buffers.input.len());
                false
            }
            Err(error) => {
                buffers.head_progress = HeadProgress::default();
                self.refuse(error, buffers, ctx);
                false
            }
        }
    }
}

/// What a request head may take, as configured.
fn head_limits(settings: &Settings) -> HeadLimits {
    HeadLimits {
        head_size: settings.max_header_size,
        header_fields: settings.max_headers,
        body_size: settings.max_body_size,
    }
}

/// Heads are parsed on every arrival up to this size, so garbage in a
/// request line is refused at once however the bytes are split.
const EAGER_PARSE_BYTES: usize = 256;

/// Whether parsing the buffered head again could tell anything new, at a
/// cost linear in the head however it trickles in (thousands of header
/// fields, a line per packet, would otherwise cost a parse of the whole
/// head per line: quadratic). Parsed again: while it is short, whenever
/// bytes arrive; past that, once the empty line that ends it has arrived,
/// once it has grown by a quarter since the last parse (so a head of n
/// bytes costs at most about 5n bytes of parsing), and when the buffer is
/// full. A bad line in a long head is thus refused once the head grows by
/// that much or ends, not at once.
fn worth_parsing(buffers: &mut Buffers, limit: usize) -> bool {
    let len = buffers.input.len();
    let progress = buffers.head_progress;
    if len <= EAGER_PARSE_BYTES || len >= limit || len >= progress.parsed + progress.parsed / 4 {
        return true;
    }
    // From two bytes back: the end may straddle the previous arrival.
    let from = progress.searched.min(len).saturating_sub(2);
    buffers.head_progress.searched = len;
    ends_a_head(&buffers.input.bytes()[from..])
}

/// Whether `bytes` hold an empty line after a line end: `\n\r\n`, or a
/// bare `\n\n` (which the parser then refuses).
fn ends_a_head(bytes: &[u8]) -> bool {
    bytes
        .iter()
        .enumerate()
        .filter(|&(_, &b)| b == b'\n')
        .any(|(at, _)| matches!(&bytes[at + 1..], [b'\n', ..] | [b'\r', b'\n', ..]))
}

/// A User-Agent (or none, 0) as one byte that tells one from another: a
/// connection compares each request's with its previous one's, with no
/// copy kept and no room added to it (the byte fits in the session's
/// padding). Two clients' agents share a byte one time in 255; a proxy
/// carries many clients, and one change seen is enough.
fn agent_key(user_agent: Option<&[u8]>) -> u8 {
    use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
    user_agent.map_or(0, |agent| {
        let hash = BuildHasherDefault::<DefaultHasher>::default().hash_one(agent);
        (hash % 255) as u8 + 1
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pool::BufferPool;

    #[test]
    fn the_end_of_a_head_is_an_empty_line() {
        assert!(ends_a_head(b"Host: a\r\n\r\n"));
        assert!(ends_a_head(b"\n\r\n"));
        assert!(ends_a_head(b"Host: a\n\n"));
        assert!(!ends_a_head(b"Host: a\r\nX: 1\r\n"));
        assert!(!ends_a_head(b"\r\n"));
        assert!(!ends_a_head(b"\n\r"));
    }

    /// 2000 header fields trickled a line per arrival are parsed a few
    /// dozen times, not 2000: on each of the ~45 lines within the first
    /// 256 bytes, then at every growth by a quarter (~17 more up to 10 KB).
    /// The empty line that ends the head is parsed at once.
    #[test]
    fn a_trickled_head_is_parsed_a_number_of_times_logarithmic_in_its_size() {
        const LIMIT: usize = 16 * 1024;
        let mut pool = BufferPool::default();
        let mut buffers = pool.take();
        let arrive = |buffers: &mut Buffers, mut bytes: &[u8]| {
            while !bytes.is_empty() {
                let spare = buffers.input.spare(LIMIT);
                let n = spare.len().min(bytes.len());
                spare[..n].copy_from_slice(&bytes[..n]);
                buffers.input.filled(n);
                bytes = &bytes[n..];
            }
            let parse = worth_parsing(buffers, LIMIT);
            if parse {
                buffers.head_progress = HeadProgress::incomplete(buffers.input.len());
            }
            parse
        };
        let mut parses = usize::from(arrive(&mut buffers, b"GET / HTTP/1.1\r\nHost: a\r\n"));
        for _ in 0..2000 {
            parses += usize::from(arrive(&mut buffers, b"X:1\r\n"));
        }
        assert!(parses <= 70, "{parses} parses of a 10 KB head");
        // The empty line, split: parsed once its LF is in.
        arrive(&mut buffers, b"\r");
        assert!(arrive(&mut buffers, b"\n"), "an empty line ends the head");
        pool.give(buffers);
    }
}
