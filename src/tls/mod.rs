//! TLS for the server's main listener and for the probe, with rustls on
//! the worker's own mio loop (no second runtime, no thread per handshake).
//!
//! rustls is sans-I/O, and its unbuffered API leaves every buffer to the
//! caller: the connection reads TLS bytes from the socket into a buffer
//! of its own, rustls processes them in place (handshake records to send
//! are copied out, application data decrypted into the session's input
//! buffer), and the session's output is encrypted straight into the
//! connection's unsent records, written to the socket from there. The
//! connection's transport (`conn::transport`, chosen at accept) drives it
//! exactly as the plain transport drives a socket (read until
//! `WouldBlock`, write until the socket is full), so everything above the
//! transport (the connection's lifecycle, the session, the timer lists,
//! the peer observer) does not know whether a connection is encrypted:
//!
//! ```text
//!   ┌──────────── the TLS transport, driving a TlsConn ────────────┐
//!   socket ──read──▶ received ──process──▶ input buffer ──▶ session
//!   socket ◀─send─── unsent ◀──encrypt──── output buffer ◀── session
//! ```
//!
//! The received and unsent bytes live in buffers the worker lends
//! (`buffers`) only while there are some, as nginx does with
//! `SSL_MODE_RELEASE_BUFFERS`: an idle TLS connection keeps rustls's keys
//! and session state (~3.4 KiB, see BENCHMARKS.md), no buffer.
//!
//! - [`ServerTls`]: the certificate and key as loaded (`--tls-cert`,
//!   `--tls-key`), checked to match, ALPN `http/1.1` and `http/1.0` (a
//!   client offering only others, `h2` alone, is refused and logged by
//!   what it offered: `LogsForeignAlpn`). It lives in the
//!   workers' settings, so a SIGHUP reload swaps it for new connections
//!   while each open connection keeps the one it shook hands with.
//! - [`TlsConn`] (`stream`): one connection's rustls state, boxed so that
//!   a plain connection pays one pointer for it, and the rustls side of
//!   what the transport asks of it, on the socket the transport lends:
//!   read through rustls, take plaintext and send its records, queue
//!   `close_notify`, and read during the watch after the idle close
//!   (`records` runs rustls's state machine over the bytes). The
//!   transport decides when (and sends the FIN), and counts the
//!   handshake's outcome.
//! - [`plain_http`]: plain HTTP sent to the TLS port, told by its first
//!   byte, and the cleartext `400` that answers it.
//! - [`TlsStats`]: handshakes by version, failures by reason.
//! - `client`: the probe's side (roots, `--cacert`, `--insecure`).

mod buffers;
pub mod client;
mod files;
pub mod plain_http;
mod records;
mod stream;

use std::io;
use std::path::Path;
use std::sync::Arc;

use rustls::ServerConfig;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use crate::tally::Counter;

pub use stream::{Plain, TlsConn, WatchRead};

/// The server's certificate chain and key, loaded and matched: what each
/// new TLS connection shakes hands with.
#[derive(Clone)]
pub struct ServerTls {
    config: Arc<ServerConfig>,
}

impl std::fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ServerTls")
    }
}

impl ServerTls {
    /// Loads a PEM certificate chain and private key (PKCS#8, PKCS#1 or
    /// SEC1) and checks that the key belongs to the first certificate.
    /// The error says which file is at fault and what to do, naming it.
    pub fn load(cert: &Path, key: &Path) -> Result<ServerTls, LoadError> {
        let at = |file| move |message| LoadError { file, message };
        let chain = files::read_chain(cert).map_err(at(TlsFile::Cert))?;
        let key_der = files::read_key(key).map_err(at(TlsFile::Key))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        files::check_pair(&provider, &chain, &key_der, (cert, key))?;
        let mut config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| at(TlsFile::Cert)(format!("TLS setup: {e}")))?
            .with_no_client_auth()
            .with_single_cert(chain, key_der)
            .map_err(|e| {
                at(TlsFile::Key)(format!(
                    "{} and {} do not make a usable pair: {e}",
                    key.display(),
                    cert.display()
                ))
            })?;
        // HTTP/1.1 and 1.0 are all this server speaks (curl --http1.0
        // offers `http/1.0` alone); a client offering only h2 fails the
        // handshake rather than being answered in a protocol it did not
        // ask for, and the log says what it offered.
        config.alpn_protocols = ALPN.iter().map(|p| p.to_vec()).collect();
        config.cert_resolver = Arc::new(LogsForeignAlpn(Arc::clone(&config.cert_resolver)));
        // Tickets let a client resume without a full handshake, as nginx
        // does by default; the ticketer rotates its key every 6 hours.
        if let Ok(ticketer) = rustls::crypto::ring::Ticketer::new() {
            config.ticketer = ticketer;
        }
        Ok(ServerTls {
            config: Arc::new(config),
        })
    }

    /// A new connection's TLS state, shaking hands with this identity.
    pub fn accept(&self) -> io::Result<Box<TlsConn>> {
        TlsConn::new(Arc::clone(&self.config)).map(Box::new)
    }
}

/// The ALPN protocols this server speaks, in its order of preference.
pub const ALPN: [&[u8]; 2] = [b"http/1.1", b"http/1.0"];

/// The certificate resolver, wrapped to log a client whose ALPN offer
/// names none of [`ALPN`]: rustls refuses it with `no_application_protocol`
/// right after resolving the certificate, and says nothing of what was
/// offered. One scan of a few short names per handshake; a line only for
/// the refused.
#[derive(Debug)]
struct LogsForeignAlpn(Arc<dyn ResolvesServerCert>);

impl ResolvesServerCert for LogsForeignAlpn {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        // No ALPN at all is fine (HTTP/1.1 is assumed); an offer, even an
        // empty one, with none of ours is refused.
        if hello
            .alpn()
            .is_some_and(|mut offered| offered.all(|p| !ALPN.contains(&p)))
        {
            let offered: Vec<String> = hello
                .alpn()
                .into_iter()
                .flatten()
                .map(|p| String::from_utf8_lossy(p).into_owned())
                .collect();
            tracing::info!(
                offered = %offered.join(","),
                sni = hello.server_name().unwrap_or("-"),
                "TLS client refused: it offers only ALPN protocols this server does \
                 not speak (it speaks http/1.1 and http/1.0)"
            );
        }
        self.0.resolve(hello)
    }
}

/// Which of the two files a load failed on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsFile {
    Cert,
    Key,
}

/// Why the certificate and key did not load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadError {
    /// The file at fault (the key, when the two do not match).
    pub file: TlsFile,
    /// One sentence naming the file.
    pub message: String,
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// A negotiated protocol version, as logs and metrics name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsVersion {
    Tls12,
    Tls13,
}

impl TlsVersion {
    pub const ALL: [TlsVersion; 2] = [TlsVersion::Tls12, TlsVersion::Tls13];

    /// As nginx's `$ssl_protocol` and OpenSSL name it: `TLSv1.3`.
    pub fn label(self) -> &'static str {
        match self {
            TlsVersion::Tls12 => "TLSv1.2",
            TlsVersion::Tls13 => "TLSv1.3",
        }
    }

    pub fn of(version: rustls::ProtocolVersion) -> Option<TlsVersion> {
        match version {
            rustls::ProtocolVersion::TLSv1_2 => Some(TlsVersion::Tls12),
            rustls::ProtocolVersion::TLSv1_3 => Some(TlsVersion::Tls13),
            _ => None,
        }
    }
}

/// Why a handshake did not complete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandshakeFailure {
    /// The peer sent something that is not TLS, or TLS that fails
    /// (no shared cipher suite or protocol, a bad record).
    Error,
    /// The headers deadline from accept passed first.
    Timeout,
    /// The connection ended first: the peer closed or reset it, or the
    /// server closed it (shutdown, eviction).
    Closed,
    /// The peer spoke plain HTTP, and was answered with a cleartext 400
    /// (see `plain_http`).
    PlainHttp,
}

impl HandshakeFailure {
    pub const ALL: [HandshakeFailure; 4] = [
        HandshakeFailure::Error,
        HandshakeFailure::Timeout,
        HandshakeFailure::Closed,
        HandshakeFailure::PlainHttp,
    ];

    pub fn label(self) -> &'static str {
        match self {
            HandshakeFailure::Error => "error",
            HandshakeFailure::Timeout => "timeout",
            HandshakeFailure::Closed => "closed",
            HandshakeFailure::PlainHttp => "plain_http",
        }
    }
}

/// One worker's TLS counters (it alone writes them).
#[derive(Debug, Default)]
pub struct TlsStats {
    handshakes: [Counter; TlsVersion::ALL.len()],
    failures: [Counter; HandshakeFailure::ALL.len()],
}

impl TlsStats {
    pub fn handshake(&self, version: TlsVersion) {
        self.handshakes[version as usize].add(1);
    }

    pub fn failure(&self, why: HandshakeFailure) {
        self.failures[why as usize].add(1);
    }

    pub fn handshakes(&self, version: TlsVersion) -> u64 {
        self.handshakes[version as usize].get()
    }

    pub fn failures(&self, why: HandshakeFailure) -> u64 {
        self.failures[why as usize].get()
    }
}
