//! One pass of rustls' unbuffered state machine over the bytes a
//! connection received: handshake records answered into its unsent
//! records, application data decrypted into the reader's buffer (what
//! does not fit kept aside, in order), the peer's `close_notify` noted,
//! and, when the connection may send application data, one chance to
//! encrypt.

use rustls::server::{ServerConnectionData, UnbufferedServerConnection};
use rustls::unbuffered::{
    ConnectionState, EncodeError, EncodeTlsData, EncryptError, UnbufferedStatus, WriteTraffic,
};

use super::buffers::{Received, Unsent};

/// Encrypts into the unsent records when the connection may send.
pub type Encrypt<'f> =
    &'f mut dyn FnMut(&mut WriteTraffic<'_, ServerConnectionData>, &mut Unsent) -> EncryptResult;

pub type EncryptResult = Result<(), EncryptError>;

/// Decrypted bytes the reader had no room for: `bytes[at..]`, given
/// before anything newer. Empty (no heap) but after a record larger than
/// the reader's room, and bounded by what one read brought.
#[derive(Debug, Default)]
pub struct Leftover {
    bytes: Vec<u8>,
    at: usize,
}

impl Leftover {
    pub fn is_empty(&self) -> bool {
        self.at == self.bytes.len()
    }

    /// Moves what fits into `out`; returns how much.
    pub fn give(&mut self, out: &mut [u8]) -> usize {
        let n = out.len().min(self.bytes.len() - self.at);
        out[..n].copy_from_slice(&self.bytes[self.at..self.at + n]);
        self.at += n;
        if self.is_empty() {
            *self = Leftover::default();
        }
        n
    }

    /// Drops what is kept (the watch reads and drops).
    pub fn clear(&mut self) {
        *self = Leftover::default();
    }
}

/// Where decrypted application data goes: `out[n..]`, then `leftover`.
pub struct PlainSink<'a> {
    pub out: &'a mut [u8],
    pub n: usize,
    pub leftover: &'a mut Leftover,
}

impl PlainSink<'_> {
    fn put(&mut self, payload: &[u8]) {
        let room = (self.out.len() - self.n).min(payload.len());
        if self.leftover.is_empty() {
            self.out[self.n..self.n + room].copy_from_slice(&payload[..room]);
            self.n += room;
            self.leftover.bytes.extend_from_slice(&payload[room..]);
        } else {
            self.leftover.bytes.extend_from_slice(payload);
        }
    }
}

/// The connection's TLS state and the bytes around it, as one pass
/// needs them.
pub struct Records<'a> {
    pub tls: &'a mut UnbufferedServerConnection,
    pub received: &'a mut Received,
    pub unsent: &'a mut Unsent,
    /// Set when the peer's `close_notify` is seen.
    pub peer_closed: &'a mut bool,
}

impl Records<'_> {
    /// Processes the received bytes until rustls needs more of them, or
    /// may send application data (then `encrypt`, if given, runs once).
    /// Handshake records to send, and alerts, join the unsent records.
    pub fn process(
        &mut self,
        sink: &mut PlainSink<'_>,
        mut encrypt: Option<Encrypt<'_>>,
    ) -> Result<(), rustls::Error> {
        loop {
            let UnbufferedStatus { discard, state } =
                self.tls.process_tls_records(self.received.bytes());
            let mut done = false;
            match state {
                Err(e) => {
                    self.received.discard(discard);
                    return Err(e);
                }
                Ok(ConnectionState::ReadTraffic(mut read)) => {
                    while let Some(record) = read.next_record() {
                        sink.put(record?.payload);
                    }
                }
                Ok(ConnectionState::EncodeTlsData(encode)) => encode_into(encode, self.unsent),
                // Sent with the connection's next flush, in order.
                Ok(ConnectionState::TransmitTlsData(transmit)) => transmit.done(),
                Ok(ConnectionState::PeerClosed) => *self.peer_closed = true,
                Ok(ConnectionState::Closed) => {
                    *self.peer_closed = true;
                    done = true;
                }
                Ok(ConnectionState::WriteTraffic(mut write)) => {
                    if let Some(encrypt) = encrypt.take() {
                        encrypt(&mut write, self.unsent).map_err(encrypt_error)?;
                    }
                    done = true;
                }
                // BlockedHandshake; early data is never accepted.
                Ok(_) => done = true,
            }
            self.received.discard(discard);
            if done {
                return Ok(());
            }
        }
    }
}

impl Records<'_> {
    /// After a failure: the alert rustls made joins the unsent records.
    /// Nothing received is processed again (it would fail again).
    pub fn encode_alerts(&mut self) {
        while self.tls.wants_write() {
            let UnbufferedStatus { state, .. } = self.tls.process_tls_records(&mut []);
            match state {
                Ok(ConnectionState::EncodeTlsData(encode)) => encode_into(encode, self.unsent),
                Ok(ConnectionState::ReadTraffic(mut read)) => while read.next_record().is_some() {},
                _ => break,
            }
        }
    }
}

/// Copies a handshake record or alert into `unsent`, making room.
fn encode_into(mut encode: EncodeTlsData<'_, ServerConnectionData>, unsent: &mut Unsent) {
    let mut needed = 0;
    loop {
        match encode.encode(unsent.spare(needed)) {
            Ok(n) => return unsent.filled(n),
            Err(EncodeError::InsufficientSize(e)) => needed = e.required_size,
            Err(EncodeError::AlreadyEncoded) => return,
        }
    }
}

fn encrypt_error(e: EncryptError) -> rustls::Error {
    rustls::Error::General(e.to_string())
}
