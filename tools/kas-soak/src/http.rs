//! The one request sent on every connection, and the blocking warm-up
//! exchange (its response read by the server's measuring library).

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::time::Duration;

use keepalive_server::measure::response::{Fed, ResponseReader};

pub const REQUEST: &[u8] = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n";

pub fn warm_up(addr: SocketAddr) -> Result<(), String> {
    let mut stream =
        std::net::TcpStream::connect(addr).map_err(|e| format!("warm-up connect: {e}"))?;
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(|e| e.to_string())?;
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
