//! A [`TimedConn`] to an https server: the same steps as over plain TCP
//! (connect, request, response, idle, close), through a rustls client.
//!
//! Each `recvmsg` still carries its kernel receive stamp, so the response
//! is timed by the segment whose record completed it, and the server's
//! idle close, when it says `close_notify`, by the segment that carried
//! the alert: an exact time, where a bare FIN (no data, no stamp) is timed
//! by the wake-up that saw it. How it ended is kept: `close_notify`
//! (then or with the FIN), a bare FIN, or a reset.

use std::io::{self, Read, Write};

use super::timed_conn::{Closed, Phase, TimedConn, connect_failed, is_reset};
use crate::readiness::would_block;
use crate::rx_stamps::{Scratch, Seen};
use crate::tls::TlsVersion;
use crate::tls::client::plain_http;

impl TimedConn {
    /// [`TimedConn::on_ready`] over TLS: send what rustls holds, then read
    /// and decrypt until the socket would block.
    pub(super) fn on_ready_tls(&mut self, seen: Seen, scratch: &mut Scratch) {
        loop {
            if self.phase.finished() {
                return;
            }
            self.write_tls(seen);
            if self.phase.finished() {
                return;
            }
            let Some((n, stamp)) = self.recv(seen, scratch) else {
                return;
            };
            if !self.decrypt(scratch.data(n), stamp, seen) {
                return;
            }
        }
    }

    /// Hands rustls the request (once per send, it holds it until the
    /// handshake is done) and writes what rustls holds; the request
    /// counts as written once its records have left.
    pub(super) fn write_tls(&mut self, seen: Seen) {
        let (Some(tls), Some(stream)) = (self.tls.as_deref_mut(), self.stream.as_mut()) else {
            return;
        };
        if self.phase == Phase::Sending && self.sent == 0 {
            if let Err(e) = tls.writer().write_all(&self.request) {
                return self.phase = Phase::Failed(format!("TLS: {e}"));
            }
            self.sent = self.request.len();
        }
        while tls.wants_write() {
            match tls.write_tls(stream) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if would_block(&e) || e.kind() == io::ErrorKind::NotConnected => {
                    if let Ok(Some(error)) = stream.take_error() {
                        self.phase = connect_failed(&error, self.written_at.is_some());
                    }
                    return;
                }
                Err(e) if self.reused() && is_reset(&e) => {
                    self.closed_at = Some(seen.at);
                    return self.phase = Phase::Closed(Closed::Rst);
                }
                Err(e) => return self.phase = connect_failed(&e, self.written_at.is_some()),
            }
        }
        if self.phase == Phase::Sending && !tls.is_handshaking() {
            self.written_at = Some(seen.at);
            self.phase = Phase::Receiving;
        }
    }

    /// Feeds one segment's bytes to rustls and what they decrypt to to
    /// the response; false once the connection is finished.
    fn decrypt(
        &mut self,
        mut data: &[u8],
        stamp: Option<std::time::SystemTime>,
        seen: Seen,
    ) -> bool {
        let mut plain = [0u8; 4096];
        let segment = data;
        while !data.is_empty() {
            let Some(tls) = self.tls.as_deref_mut() else {
                return false;
            };
            if let Err(e) = tls.read_tls(&mut data) {
                self.phase = Phase::Failed(format!("TLS: {e}"));
                return false;
            }
            let handshaking = tls.is_handshaking();
            let state = match tls.process_new_packets() {
                Ok(state) => state,
                Err(e) => {
                    let _ = self.stream.as_mut().map(|s| tls.write_tls(s));
                    let why = match &self.tls_target {
                        _ if handshaking && segment.starts_with(b"HTTP/") => plain_http().into(),
                        Some(target) => target.explain(&e),
                        None => format!("TLS: {e}"),
                    };
                    self.phase = Phase::Failed(why);
                    return false;
                }
            };
            if self.tls_version.is_none() && !tls.is_handshaking() {
                self.tls_version = tls.protocol_version().and_then(TlsVersion::of);
            }
            let closed = state.peer_has_closed();
            loop {
                let Some(tls) = self.tls.as_deref_mut() else {
                    return false;
                };
                match tls.reader().read(&mut plain) {
                    Ok(0) => break,
                    Ok(n) => {
                        if !self.take(&plain[..n], stamp, seen) {
                            return false;
                        }
                    }
                    Err(_) => break, // WouldBlock: all read
                }
            }
            if closed {
                // The server's close_notify: the end of the connection as a
                // TLS client sees it, timed by the segment that carried it.
                self.close_notify = true;
                let at = stamp.map_or(seen.at, |wall| seen.instant_of(wall));
                self.on_eof(seen, None);
                if self.closed_at.is_some() {
                    self.closed_at = Some(at);
                }
                return false;
            }
        }
        true
    }
}
