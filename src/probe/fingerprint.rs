//! What a service says of itself, for the other hop's advice
//! ([`crate::advice::servers`]): the first response's `Server` field and
//! `Keep-Alive` timeout, and over plain HTTP one more request whose head is
//! read whole, for the fields' order and values a server without a
//! `Server` field is told by.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use super::target::Target;
use crate::advice::servers::Head;
use crate::measure::response::ResponseHead;

/// The most of a head read.
const MAX_HEAD: usize = 16 * 1024;
/// Fields parsed at most.
const MAX_FIELDS: usize = 64;

/// The head `promise` (the first response) with, over plain HTTP, the
/// field names and values of a fresh response; just `promise` when that
/// response cannot be had.
pub fn head(target: &Target, promise: &ResponseHead, timeout: Duration) -> Head {
    with_promise(fields(target, timeout), promise)
}

/// Over plain HTTP, the field names and values of a fresh response (an
/// empty head when it cannot be had): asked for early by a check that may
/// outlive the service (the guard's, whose COMMAND may stop it).
pub fn fields(target: &Target, timeout: Duration) -> Head {
    let mut head = Head::default();
    if let Some(raw) = target
        .tls
        .is_none()
        .then(|| raw_head(target, timeout))
        .flatten()
    {
        parse_into(&raw, &mut head);
    }
    head
}

/// `fields` completed with what the first response (`promise`) said of
/// the server: its `Server` field and `Keep-Alive` timeout.
pub fn with_promise(fields: Head, promise: &ResponseHead) -> Head {
    Head {
        server: promise.server.clone(),
        keep_alive_timeout: promise.keep_alive_timeout,
        ..fields
    }
}

/// Whether the service answers a request on a fresh connection with a
/// whole response head within `timeout`: still serving, not stopped or
/// draining (whose listener may still complete a connect).
pub fn answers(target: &Target, timeout: Duration) -> bool {
    let Some(raw) = raw_head(target, timeout) else {
        return false;
    };
    let mut fields = [httparse::EMPTY_HEADER; MAX_FIELDS];
    matches!(
        httparse::Response::new(&mut fields).parse(&raw),
        Ok(httparse::Status::Complete(_))
    )
}

/// One request on a fresh connection, and the response head's bytes.
fn raw_head(target: &Target, timeout: Duration) -> Option<Vec<u8>> {
    let mut stream = TcpStream::connect_timeout(&target.addr, timeout).ok()?;
    stream.set_read_timeout(Some(timeout)).ok()?;
    stream.write_all(&target.request).ok()?;
    let mut raw = Vec::new();
    let mut chunk = [0u8; 4096];
    while !raw.windows(4).any(|w| w == b"\r\n\r\n") && raw.len() < MAX_HEAD {
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => raw.extend_from_slice(&chunk[..n]),
        }
    }
    Some(raw)
}

/// Fills `head`'s field names, type and `X-Powered-By` from `raw`.
fn parse_into(raw: &[u8], head: &mut Head) {
    let mut fields = [httparse::EMPTY_HEADER; MAX_FIELDS];
    let mut response = httparse::Response::new(&mut fields);
    if !matches!(response.parse(raw), Ok(httparse::Status::Complete(_))) {
        return;
    }
    for field in response.headers.iter() {
        let name = field.name.to_ascii_lowercase();
        let value = String::from_utf8_lossy(field.value).trim().to_owned();
        match name.as_str() {
            "content-type" => head.content_type = Some(value),
            "x-powered-by" => head.powered_by = Some(value),
            _ => {}
        }
        head.field_names.push(name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_head_gives_its_field_order_and_values() {
        let mut head = Head::default();
        parse_into(
            b"HTTP/1.1 200 OK\r\nDate: x\r\nContent-Length: 2\r\n\
              Content-Type: text/plain; charset=utf-8\r\nX-Powered-By: Express\r\n\r\nhi",
            &mut head,
        );
        assert_eq!(
            head.field_names,
            ["date", "content-length", "content-type", "x-powered-by"]
        );
        assert_eq!(
            head.content_type.as_deref(),
            Some("text/plain; charset=utf-8")
        );
        assert_eq!(head.powered_by.as_deref(), Some("Express"));
        let mut partial = Head::default();
        parse_into(b"HTTP/1.1 200 OK\r\nDate: x\r\n", &mut partial);
        assert!(partial.field_names.is_empty());
    }
}
