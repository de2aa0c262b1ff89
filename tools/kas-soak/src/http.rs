//! The one request sent on every connection, the check of its response,
//! and the blocking warm-up exchange.

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::time::Duration;

pub const REQUEST: &[u8] = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n";
const EXPECTED_BODY: &[u8] = b"Hello, World!";

pub fn warm_up(addr: SocketAddr) -> Result<(), String> {
    let mut stream =
        std::net::TcpStream::connect(addr).map_err(|e| format!("warm-up connect: {e}"))?;
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(|e| e.to_string())?;
    stream
        .write_all(REQUEST)
        .map_err(|e| format!("warm-up write: {e}"))?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 1024];
    loop {
        match parse_response(&buf) {
            Parsed::Done { .. } => return Ok(()),
            Parsed::Bad(why) => return Err(format!("warm-up response: {why}")),
            Parsed::Partial => {}
        }
        match stream.read(&mut chunk) {
            Ok(0) => return Err("warm-up: server closed before responding".into()),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) => return Err(format!("warm-up read: {e}")),
        }
    }
}

pub enum Parsed {
    Partial,
    /// A whole, well-formed `200 Hello, World!` response of `len` bytes.
    Done {
        len: usize,
        close: bool,
    },
    Bad(String),
}

pub fn parse_response(buf: &[u8]) -> Parsed {
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut response = httparse::Response::new(&mut headers);
    let head_len = match response.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Parsed::Partial,
        Err(e) => return Parsed::Bad(format!("malformed response: {e}")),
    };
    if response.code != Some(200) {
        return Parsed::Bad(format!("status {:?}", response.code));
    }
    let mut content_length = None;
    let mut close = false;
    for h in response.headers.iter() {
        if h.name.eq_ignore_ascii_case("content-length") {
            content_length = std::str::from_utf8(h.value)
                .ok()
                .and_then(|v| v.trim().parse::<usize>().ok());
        } else if h.name.eq_ignore_ascii_case("connection") {
            close |= h.value.eq_ignore_ascii_case(b"close");
        }
    }
    let Some(body_len) = content_length else {
        return Parsed::Bad("no Content-Length".into());
    };
    if buf.len() < head_len + body_len {
        return Parsed::Partial;
    }
    if &buf[head_len..head_len + body_len] != EXPECTED_BODY {
        return Parsed::Bad("unexpected body".into());
    }
    Parsed::Done {
        len: head_len + body_len,
        close,
    }
}
