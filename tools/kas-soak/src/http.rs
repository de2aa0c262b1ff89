//! The one request sent on every connection, and the blocking warm-up
//! exchange (its response read by the server's measuring library), over
//! TLS too with `--tls`.

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::time::Duration;

use keepalive_server::measure::response::{Fed, ResponseReader};
use keepalive_server::tls::client::TlsTarget;

/// A connection to the server, plain or TLS.
trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}

pub const REQUEST: &[u8] = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n";

pub fn warm_up(addr: SocketAddr, tls: Option<&TlsTarget>) -> Result<(), String> {
    let tcp = std::net::TcpStream::connect(addr).map_err(|e| format!("warm-up connect: {e}"))?;
    tcp.set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(|e| e.to_string())?;
    let mut stream: Box<dyn ReadWrite> = match tls {
        None => Box::new(tcp),
        Some(tls) => {
            let client = tls.connection().map_err(|e| format!("warm-up TLS: {e}"))?;
            Box::new(rustls::StreamOwned::new(client, tcp))
        }
    };
    stream
        .write_all(REQUEST)
        .map_err(|e| format!("warm-up write: {e}"))?;
    let mut reader = ResponseReader::new(false);
    let mut chunk = [0u8; 1024];
    loop {
        let n = match stream.read(&mut chunk) {
            Ok(0) => return Err("warm-up: server closed before responding".into()),
            Ok(n) => n,
            Err(e) => return Err(format!("warm-up read: {e}")),
        };
        match reader.feed(&chunk[..n]) {
            Ok(Fed::Done { .. }) => break,
            Ok(Fed::Partial) => {}
            Err(why) => return Err(format!("warm-up response: {why}")),
        }
    }
    match reader.head().map(|head| head.status) {
        Some(200) => Ok(()),
        status => Err(format!("warm-up response: status {status:?}")),
    }
}
