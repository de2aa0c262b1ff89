//! The probe's TLS client configuration: which certificates it trusts
//! (the system's roots, or one `--cacert` file, whose certificates are
//! also trusted as is when the server presents one of them, or none at
//! all with `--insecure`: the verifier is the `verify` module's), ALPN
//! `http/1.1`, and the server name it sends (SNI from the URL's host; an
//! IP address is verified but sends no SNI, as RFC 6066 forbids one).
//! What a failed exchange means, in words, is the `errors` module's.

mod errors;
mod verify;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, RootCertStore};

use verify::Verifier;

/// Whom the probe trusts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trust {
    /// The system's root certificates (/etc/ssl/certs and the like).
    System,
    /// The certificates in this PEM file, and no others (`--cacert`).
    File(std::path::PathBuf),
    /// Anyone (`--insecure`): the connection is encrypted, not
    /// authenticated. For test servers with throwaway certificates.
    Insecure,
}

/// A client configuration for `trust`; an error names the file or says
/// that the system has no roots.
pub fn config(trust: &Trust) -> Result<Arc<ClientConfig>, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS setup: {e}"))?;
    let mut config = match trust {
        Trust::Insecure => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(Verifier::any_certificate(provider)))
            .with_no_client_auth(),
        Trust::System => builder
            .with_root_certificates(system_roots()?)
            .with_no_client_auth(),
        Trust::File(path) => {
            let certs = file_certs(path)?;
            let mut roots = RootCertStore::empty();
            for cert in &certs {
                roots
                    .add(cert.clone())
                    .map_err(|e| format!("--cacert {}: {e}", path.display()))?;
            }
            let chain =
                WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                    .build()
                    .map_err(|e| format!("--cacert {}: {e}", path.display()))?;
            let verifier = Verifier::pinned_or_chain(certs, chain, provider);
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(verifier))
                .with_no_client_auth()
        }
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    // Every connection of the probe starts cold, as a pool's first does:
    // no resumption to make one connection differ from the next.
    config.resumption = rustls::client::Resumption::disabled();
    Ok(Arc::new(config))
}

/// The name sent as SNI and verified: the URL's host (brackets off an
/// IPv6 literal; rustls sends no SNI for an IP address).
pub fn server_name(host: &str) -> Result<ServerName<'static>, String> {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    ServerName::try_from(host.to_owned()).map_err(|e| format!("{host}: not a TLS server name: {e}"))
}

fn system_roots() -> Result<RootCertStore, String> {
    let found = rustls_native_certs::load_native_certs();
    let mut roots = RootCertStore::empty();
    let (added, _) = roots.add_parsable_certificates(found.certs);
    if added == 0 {
        return Err(
            "no root certificates found on this system: give --cacert PATH (or --insecure for a test server)"
                .to_owned(),
        );
    }
    Ok(roots)
}

/// The certificates in the `--cacert` file, at least one.
fn file_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let pem =
        std::fs::read(path).map_err(|e| format!("cannot read --cacert {}: {e}", path.display()))?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("--cacert {}: not PEM: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!("--cacert {}: no certificate in it", path.display()));
    }
    Ok(certs)
}

/// What a measuring connection needs to speak TLS to one server: the
/// client configuration and the name to send and verify.
#[derive(Debug, Clone)]
pub struct TlsTarget {
    pub config: Arc<ClientConfig>,
    pub name: ServerName<'static>,
    /// Whom the certificate must be vouched for by (for the words of an
    /// error).
    pub trust: Arc<Trust>,
}

impl TlsTarget {
    /// For the server at `host`, trusting `trust`.
    pub fn new(host: &str, trust: &Trust) -> Result<TlsTarget, String> {
        Ok(TlsTarget {
            config: config(trust)?,
            name: server_name(host)?,
            trust: Arc::new(trust.clone()),
        })
    }

    /// `error`, met speaking to this server, as a sentence saying what
    /// happened and what to do.
    pub fn explain(&self, error: &rustls::Error) -> String {
        errors::explain(error, &self.trust)
    }

    /// An I/O error from a rustls stream, in words when TLS caused it.
    pub fn explain_io(&self, error: &std::io::Error) -> Option<String> {
        let tls = error.get_ref()?.downcast_ref::<rustls::Error>()?;
        Some(self.explain(tls))
    }

    /// A new client connection, its handshake not begun.
    pub fn connection(&self) -> std::io::Result<rustls::ClientConnection> {
        rustls::ClientConnection::new(Arc::clone(&self.config), self.name.clone())
            .map_err(std::io::Error::other)
    }
}

/// The words for a TLS hello answered in plain text.
pub use errors::plain_http;

/// Whether the server at `addr` answers a TLS hello with TLS (a handshake
/// or an alert record), within `timeout`: asked when a plain-HTTP request
/// was refused, to tell the user to use https://.
pub fn speaks_tls(addr: SocketAddr, timeout: Duration) -> bool {
    let answer = || -> std::io::Result<[u8; 2]> {
        let mut tcp = TcpStream::connect_timeout(&addr, timeout)?;
        tcp.set_read_timeout(Some(timeout))?;
        tcp.set_write_timeout(Some(timeout))?;
        let config = config(&Trust::Insecure).map_err(std::io::Error::other)?;
        let name = ServerName::IpAddress(addr.ip().into());
        let mut hello =
            rustls::ClientConnection::new(config, name).map_err(std::io::Error::other)?;
        let mut out = Vec::new();
        hello.write_tls(&mut out)?;
        tcp.write_all(&out)?;
        let mut first = [0u8; 2];
        tcp.read_exact(&mut first)?;
        Ok(first)
    };
    // A TLS record: handshake (22) or alert (21), version 3.x.
    matches!(answer(), Ok([21 | 22, 3]))
}
