//! What the probe reports of an https server beyond what it measures over
//! plain HTTP: the TLS version, and how the server ends an idle TLS
//! connection, which decides the error a pool meets when it reuses one
//! the server has just closed.
//!
//! - `close_notify` then FIN: the orderly close. A TLS client reads it as
//!   a clean end of stream: a pool that checks before reuse drops the
//!   connection quietly; a request that crossed it reads EOF.
//! - a bare FIN: TLS calls this a truncation. OpenSSL reports "unexpected
//!   eof while reading", rustls `UnexpectedEof`, Go "EOF"; clients that
//!   treat it as an error log it as one even for an idle connection.
//! - a reset: no alert, no FIN: the next read or write on the reused
//!   connection fails with ECONNRESET, and a request in flight is lost.

use serde::Serialize;

use super::idle::Idle;
use crate::tls::TlsVersion;

/// How an https server ends an idle connection, by the majority of the
/// closes the probe saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsClose {
    CloseNotify,
    Fin,
    Rst,
}

impl TlsClose {
    /// As the JSON's `tls.idle_close` names it.
    pub fn label(self) -> &'static str {
        match self {
            TlsClose::CloseNotify => "close_notify",
            TlsClose::Fin => "fin",
            TlsClose::Rst => "rst",
        }
    }

    /// What a pool in front of such a server meets, one sentence.
    pub fn advice(self) -> &'static str {
        match self {
            TlsClose::CloseNotify => {
                "Over TLS it says close_notify before its FIN: a pool that checks a connection \
                 before reuse sees a clean end of stream and drops it; a request that crosses \
                 the close reads EOF in place of a response."
            }
            TlsClose::Fin => {
                "Over TLS it closes with a bare FIN, no close_notify: TLS clients report a \
                 truncated stream (OpenSSL \"unexpected eof while reading\", rustls \
                 UnexpectedEof) and some log it as an error even on an idle connection."
            }
            TlsClose::Rst => {
                "Over TLS it resets without a close_notify: a reused connection fails with \
                 ECONNRESET on its next read or write, even when the pool checks it first."
            }
        }
    }
}

/// The JSON's `tls` object (https only).
#[derive(Debug, Serialize)]
pub struct TlsJson {
    pub version: Option<&'static str>,
    pub idle_close: Option<&'static str>,
}

impl Idle {
    /// How the server ends an idle TLS connection (`None`: none closed).
    pub fn tls_close(&self) -> Option<TlsClose> {
        match (self.fins, self.resets) {
            (0, 0) => None,
            (fins, resets) if resets > fins => Some(TlsClose::Rst),
            (fins, _) if 2 * self.close_notifies >= fins => Some(TlsClose::CloseNotify),
            _ => Some(TlsClose::Fin),
        }
    }

    /// The JSON's `tls` object for an https server.
    pub fn tls_json(&self) -> TlsJson {
        TlsJson {
            version: self.tls_version.map(TlsVersion::label),
            idle_close: self.tls_close().map(TlsClose::label),
        }
    }
}
