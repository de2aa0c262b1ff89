//! For the TLS tests: a self-signed certificate made fresh for each test
//! (rcgen; nothing checked in), written to a temporary directory for the
//! flags and config keys that take paths, and a blocking rustls client
//! that trusts exactly that certificate.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};

use super::client::{READ_TIMEOUT, find};
use super::files::TempDir;
use super::server::TestServer;

/// A certificate for `localhost` and 127.0.0.1 with its key, as PEM files
/// in a directory of their own (removed when dropped).
pub struct TestCert {
    /// Where the files are (removed with it).
    dir: TempDir,
    pub cert: PathBuf,
    pub key: PathBuf,
    pub cert_pem: String,
}

impl TestCert {
    pub fn new() -> TestCert {
        let made = rcgen::generate_simple_self_signed(vec![
            "localhost".to_owned(),
            "127.0.0.1".to_owned(),
        ])
        .expect("rcgen makes a certificate");
        let dir = TempDir::new();
        let cert_pem = made.cert.pem();
        let cert = dir.file("cert.pem", cert_pem.as_bytes());
        let key = dir.file("key.pem", made.signing_key.serialize_pem().as_bytes());
        TestCert {
            dir,
            cert,
            key,
            cert_pem,
        }
    }

    /// A file of the test's own beside the pair (removed with it).
    pub fn file(&self, name: &str, contents: &[u8]) -> PathBuf {
        self.dir.file(name, contents)
    }

    /// The private key, as PEM.
    pub fn key_pem(&self) -> String {
        std::fs::read_to_string(&self.key).unwrap()
    }

    /// A server ([`super::server::start`]) serving HTTPS with this
    /// certificate, after `tweak`.
    pub fn serve(&self, tweak: impl FnOnce(&mut keepalive_server::Config)) -> TestServer {
        let tls = keepalive_server::tls::ServerTls::load(&self.cert, &self.key)
            .expect("the test certificate loads");
        super::server::start(|config| {
            config.tls = Some(tls);
            tweak(config);
        })
    }

    /// Paths as flag values.
    pub fn cert_arg(&self) -> &str {
        self.cert.to_str().unwrap()
    }

    pub fn key_arg(&self) -> &str {
        self.key.to_str().unwrap()
    }

    /// A client configuration trusting this certificate alone.
    pub fn client_config(&self) -> Arc<ClientConfig> {
        self.client_config_offering(&[b"http/1.1"])
    }

    /// The same, offering `alpn` (none at all when empty).
    pub fn client_config_offering(&self, alpn: &[&[u8]]) -> Arc<ClientConfig> {
        let mut roots = RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(self.cert_pem.as_bytes()) {
            roots.add(cert.unwrap()).unwrap();
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        Arc::new(config)
    }

    /// A TLS connection to `addr` as `localhost`, handshake done.
    pub fn connect(&self, addr: SocketAddr) -> TlsClient {
        self.try_connect(addr).expect("handshake")
    }

    /// The same, or why the handshake failed (a certificate this one does
    /// not vouch for, say).
    pub fn try_connect(&self, addr: SocketAddr) -> std::io::Result<TlsClient> {
        self.try_connect_offering(addr, &[b"http/1.1"])
    }

    /// The same, offering `alpn` in the handshake.
    pub fn try_connect_offering(
        &self,
        addr: SocketAddr,
        alpn: &[&[u8]],
    ) -> std::io::Result<TlsClient> {
        let tcp = TcpStream::connect(addr)?;
        tcp.set_read_timeout(Some(READ_TIMEOUT))?;
        let name = ServerName::try_from("localhost").unwrap();
        let conn = ClientConnection::new(self.client_config_offering(alpn), name).unwrap();
        let mut stream = StreamOwned::new(conn, tcp);
        while stream.conn.is_handshaking() {
            stream.conn.complete_io(&mut stream.sock)?;
        }
        Ok(TlsClient { stream })
    }

    /// Writes this certificate and key over `other`'s files.
    pub fn copy_over(&self, other: &TestCert) {
        std::fs::write(&other.cert, std::fs::read(&self.cert).unwrap()).unwrap();
        std::fs::write(&other.key, std::fs::read(&self.key).unwrap()).unwrap();
    }
}

/// A CA's certificate and a certificate for `localhost` it signed, with
/// the latter's key: PEM texts `(ca, leaf, leaf_key)`.
pub fn ca_and_leaf() -> (String, String, String) {
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let ca = rcgen::CertifiedIssuer::self_signed(ca_params, ca_key).unwrap();
    let leaf_key = rcgen::KeyPair::generate().unwrap();
    let leaf = rcgen::CertificateParams::new(vec!["localhost".to_owned()])
        .unwrap()
        .signed_by(&leaf_key, &ca)
        .unwrap();
    (ca.pem(), leaf.pem(), leaf_key.serialize_pem())
}

/// How a TLS read ended.
#[derive(Debug, PartialEq, Eq)]
pub enum End {
    /// `close_notify`, then (checked on the socket) TCP EOF.
    CloseNotify,
    /// TCP EOF without `close_notify`.
    Fin,
    /// A reset.
    Reset,
    /// Bytes arrived instead.
    Data,
}

/// A blocking TLS client over one connection.
pub struct TlsClient {
    pub stream: StreamOwned<ClientConnection, TcpStream>,
}

impl TlsClient {
    pub fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).unwrap();
        self.stream.flush().unwrap();
    }

    /// Reads one response with a Content-Length body (enough for `/`):
    /// its head and its body, as text.
    pub fn read_response(&mut self) -> (String, String) {
        let mut got = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            if let Some(end) = find(&got, b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&got[..end]).into_owned();
                let length = head
                    .lines()
                    .find_map(|l| {
                        let (name, value) = l.split_once(':')?;
                        name.eq_ignore_ascii_case("content-length")
                            .then(|| value.trim().parse::<usize>().ok())?
                    })
                    .unwrap_or(0);
                if got.len() >= end + 4 + length {
                    let body = String::from_utf8_lossy(&got[end + 4..end + 4 + length]);
                    return (head, body.into_owned());
                }
            }
            let n = self.stream.read(&mut chunk).expect("a response");
            assert!(n > 0, "the server closed before a whole response");
            got.extend_from_slice(&chunk[..n]);
        }
    }

    /// One keep-alive GET of `path`: its head and body.
    pub fn get(&mut self, path: &str) -> (String, String) {
        self.send(format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n").as_bytes());
        self.read_response()
    }

    /// Waits for the server's end of the connection and says how it came.
    pub fn read_end(&mut self) -> End {
        let mut buf = [0u8; 256];
        match self.stream.read(&mut buf) {
            Ok(0) => {
                // close_notify: the socket itself must then be at EOF.
                match self.stream.sock.read(&mut buf) {
                    Ok(0) => End::CloseNotify,
                    Ok(_) => End::Data,
                    Err(e) => panic!("after close_notify: {e}"),
                }
            }
            Ok(_) => End::Data,
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => End::Fin,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => End::Reset,
            Err(e) => panic!("waiting for the close: {e}"),
        }
    }
}
