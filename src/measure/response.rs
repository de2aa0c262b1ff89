//! Reading one HTTP/1.x response from bytes as they arrive, without the
//! socket: the head fields that say what the server promises (version,
//! `Connection`, `Keep-Alive: timeout, max`, `Server`), then the body skipped
//! by its framing (`Content-Length`, chunked, or until the close), so the
//! caller learns exactly where the response ends. Interim 1xx responses
//! are skipped, up to [`MAX_INTERIM`] of them (a server that sends
//! `100 Continue` without end is an error, not a wait without end). Memory
//! is bounded: the head is kept up to [`MAX_HEAD`], a body is counted,
//! never stored. [`ResponseReader::unfinished`] says, in words, how far an
//! incomplete response got, for the caller whose deadline ran out.

use std::fmt;

/// The largest response head accepted.
pub const MAX_HEAD: usize = 64 * 1024;
/// The longest chunk-size or trailer line accepted.
const MAX_LINE: usize = 4096;
/// Interim (1xx) responses accepted before the final one.
pub const MAX_INTERIM: u32 = 10;

/// What a response head says about the connection and the server.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResponseHead {
    /// The minor version: 1 for HTTP/1.1, 0 for HTTP/1.0.
    pub minor_version: u8,
    pub status: u16,
    /// `Connection: close`.
    pub close: bool,
    /// `Connection: keep-alive`.
    pub keep_alive: bool,
    /// `Keep-Alive: timeout=N`, seconds.
    pub keep_alive_timeout: Option<u64>,
    /// `Keep-Alive: max=N`.
    pub keep_alive_max: Option<u64>,
    /// The `Server` field.
    pub server: Option<String>,
}

impl ResponseHead {
    /// `HTTP/1.1` or `HTTP/1.0`.
    pub fn version(&self) -> &'static str {
        if self.minor_version == 0 {
            "HTTP/1.0"
        } else {
            "HTTP/1.1"
        }
    }

    /// Whether the server means to keep the connection open after this
    /// response (RFC 9112 section 9.3).
    pub fn persistent(&self) -> bool {
        if self.close {
            false
        } else {
            self.minor_version >= 1 || self.keep_alive
        }
    }
}

/// Why bytes are not a response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotHttp(pub String);

impl fmt::Display for NotHttp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Where the reader is.
#[derive(Debug, Clone)]
enum Stage {
    Head(Vec<u8>),
    Length(u64),
    ChunkSize(Vec<u8>),
    ChunkData(u64),
    /// The CRLF after a chunk's data: bytes still to skip.
    ChunkEnd(u8),
    /// Trailer lines after the last chunk, up to the empty line.
    Trailers(Vec<u8>),
    UntilClose,
    Done,
}

/// Reads one response; [`ResponseReader::feed`] it bytes, and
/// [`ResponseReader::eof`] when the peer closes.
#[derive(Debug, Clone)]
pub struct ResponseReader {
    /// The request was HEAD: no body, whatever the head says.
    head_request: bool,
    stage: Stage,
    head: Option<ResponseHead>,
    /// Interim responses read, and the status of the last.
    interim: u32,
    last_interim: u16,
    /// Bytes of the final response's body fed so far.
    body_bytes: u64,
}

/// The outcome of feeding bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fed {
    /// More bytes are needed.
    Partial,
    /// The response ended; `extra` bytes of the input came after it.
    Done { extra: usize },
}

impl ResponseReader {
    pub fn new(head_request: bool) -> ResponseReader {
        ResponseReader {
            head_request,
            stage: Stage::Head(Vec::new()),
            head: None,
            interim: 0,
            last_interim: 0,
            body_bytes: 0,
        }
    }

    /// The head, once it has been read.
    pub fn head(&self) -> Option<&ResponseHead> {
        self.head.as_ref()
    }

    /// Whether a response head has begun or been read (so an EOF now cuts a
    /// response short rather than closing an idle connection).
    pub fn started(&self) -> bool {
        !matches!(&self.stage, Stage::Head(bytes) if bytes.is_empty())
    }

    /// Ready for the next response on the same connection.
    pub fn reset(&mut self) {
        *self = ResponseReader::new(self.head_request);
    }

    /// How far an unfinished response got, as the end of a sentence that
    /// begins "the server": what it sent before the caller stopped waiting;
    /// `None` when nothing of a response came.
    pub fn unfinished(&self) -> Option<String> {
        let interim = match self.interim {
            0 => String::new(),
            n => format!("{n} interim {} response(s), then ", self.last_interim),
        };
        Some(match (&self.stage, &self.head) {
            (Stage::Head(bytes), _) if bytes.is_empty() && self.interim == 0 => return None,
            (Stage::Head(bytes), _) if bytes.is_empty() => {
                format!("sent {interim}no final response")
            }
            (Stage::Head(bytes), _) => format!(
                "sent {interim}{} bytes of a response head without finishing it (trickling it)",
                bytes.len()
            ),
            (_, Some(head)) => format!(
                "sent {interim}a {} head and {} bytes of body without finishing the body \
                 (trickling it)",
                head.status, self.body_bytes
            ),
            _ => "sent an incomplete response".to_owned(),
        })
    }

    /// Consumes `bytes`; stops at the end of the response.
    pub fn feed(&mut self, mut bytes: &[u8]) -> Result<Fed, NotHttp> {
        loop {
            if matches!(self.stage, Stage::Done) {
                return Ok(Fed::Done { extra: bytes.len() });
            }
            if bytes.is_empty() {
                return Ok(Fed::Partial);
            }
            let in_body = self.head.is_some();
            let used = self.step(bytes)?;
            if in_body {
                self.body_bytes += used as u64;
            }
            bytes = &bytes[used..];
        }
    }

    /// The peer closed: the response is complete only if it was framed by
    /// the close.
    pub fn eof(&mut self) -> Result<(), NotHttp> {
        match self.stage {
            Stage::UntilClose | Stage::Done => {
                self.stage = Stage::Done;
                Ok(())
            }
            Stage::Head(ref bytes) if bytes.is_empty() => {
                Err(NotHttp("closed without sending a response".into()))
            }
            _ => Err(NotHttp("closed in the middle of a response".into())),
        }
    }

    /// Consumes a prefix of `bytes` (at least one byte unless done).
    fn step(&mut self, bytes: &[u8]) -> Result<usize, NotHttp> {
        match &mut self.stage {
            Stage::Head(buf) => {
                let before = buf.len();
                let take = bytes.len().min(MAX_HEAD + 1 - before);
                buf.extend_from_slice(&bytes[..take]);
                match parse_head(buf)? {
                    None if buf.len() > MAX_HEAD => Err(NotHttp(format!(
                        "response head larger than {} KiB",
                        MAX_HEAD / 1024
                    ))),
                    None => Ok(take),
                    Some((len, head, framing)) => {
                        let used = len - before;
                        self.stage = if (100..200).contains(&head.status) && head.status != 101 {
                            self.interim += 1;
                            self.last_interim = head.status;
                            if self.interim > MAX_INTERIM {
                                return Err(NotHttp(format!(
                                    "the server sent {} interim {} responses and no final one \
                                     (at most {MAX_INTERIM} are accepted)",
                                    self.interim, head.status
                                )));
                            }
                            Stage::Head(Vec::new())
                        } else {
                            self.head = Some(head);
                            framing
                        };
                        if self.head_request && self.head.is_some() {
                            self.stage = Stage::Done;
                        }
                        Ok(used)
                    }
                }
            }
            Stage::Length(left) => {
                let used = bytes
                    .len()
                    .min(usize::try_from(*left).unwrap_or(usize::MAX));
                *left -= used as u64;
                if *left == 0 {
                    self.stage = Stage::Done;
                }
                Ok(used)
            }
            Stage::ChunkSize(line) | Stage::Trailers(line) => {
                let Some(at) = bytes.iter().position(|&b| b == b'\n') else {
                    line.extend_from_slice(bytes);
                    return bounded_line(line).map(|()| bytes.len());
                };
                line.extend_from_slice(&bytes[..=at]);
                bounded_line(line)?;
                self.stage = self.after_line()?;
                Ok(at + 1)
            }
            Stage::ChunkData(left) => {
                let used = bytes
                    .len()
                    .min(usize::try_from(*left).unwrap_or(usize::MAX));
                *left -= used as u64;
                if *left == 0 {
                    self.stage = Stage::ChunkEnd(2);
                }
                Ok(used)
            }
            Stage::ChunkEnd(left) => {
                let expected: &[u8] = if *left == 2 { b"\r\n" } else { b"\n" };
                if bytes[0] != expected[0] {
                    return Err(NotHttp("chunk data not followed by CRLF".into()));
                }
                *left -= 1;
                if *left == 0 {
                    self.stage = Stage::ChunkSize(Vec::new());
                }
                Ok(1)
            }
            Stage::UntilClose => Ok(bytes.len()),
            Stage::Done => Ok(0),
        }
    }

    /// The stage after a complete chunk-size or trailer line.
    fn after_line(&mut self) -> Result<Stage, NotHttp> {
        match &self.stage {
            Stage::ChunkSize(line) => match httparse::parse_chunk_size(line) {
                Ok(httparse::Status::Complete((_, 0))) => Ok(Stage::Trailers(Vec::new())),
                Ok(httparse::Status::Complete((_, size))) => Ok(Stage::ChunkData(size)),
                _ => Err(NotHttp("malformed chunk size".into())),
            },
            Stage::Trailers(line) if line == b"\r\n" || line == b"\n" => Ok(Stage::Done),
            _ => Ok(Stage::Trailers(Vec::new())),
        }
    }
}

fn bounded_line(line: &[u8]) -> Result<(), NotHttp> {
    if line.len() > MAX_LINE {
        Err(NotHttp("chunk-size or trailer line too long".into()))
    } else {
        Ok(())
    }
}

/// Parses a complete head: its length, the fields, and how the body is framed.
fn parse_head(buf: &[u8]) -> Result<Option<(usize, ResponseHead, Stage)>, NotHttp> {
    let mut fields = [httparse::EMPTY_HEADER; 100];
    let mut response = httparse::Response::new(&mut fields);
    let len = match response.parse(buf) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return Ok(None),
        // A TLS record (handshake 22 or alert 21, version 3.x): the
        // server speaks TLS and refused a plain request.
        Err(_) if matches!(buf, [21 | 22, 3, ..]) => {
            return Err(NotHttp(
                "the server answered in TLS, not plain HTTP: it speaks HTTPS on this port; use \
                 https:// in place of http://"
                    .into(),
            ));
        }
        Err(e) => return Err(NotHttp(format!("not an HTTP/1.x response ({e})"))),
    };
    let mut head = ResponseHead {
        minor_version: response.version.unwrap_or(1),
        status: response.code.unwrap_or(0),
        ..ResponseHead::default()
    };
    let mut content_length = None;
    let mut chunked = false;
    for field in response.headers.iter() {
        let value = String::from_utf8_lossy(field.value);
        let name = field.name;
        if name.eq_ignore_ascii_case("connection") {
            for token in value.split(',').map(str::trim) {
                head.close |= token.eq_ignore_ascii_case("close");
                head.keep_alive |= token.eq_ignore_ascii_case("keep-alive");
            }
        } else if name.eq_ignore_ascii_case("keep-alive") {
            for param in value.split(',').map(str::trim) {
                let Some((key, number)) = param.split_once('=') else {
                    continue;
                };
                let number = number.trim().trim_matches('"').parse().ok();
                match key.trim().to_ascii_lowercase().as_str() {
                    "timeout" => head.keep_alive_timeout = number,
                    "max" => head.keep_alive_max = number,
                    _ => {}
                }
            }
        } else if name.eq_ignore_ascii_case("server") {
            head.server = Some(value.trim().to_owned());
        } else if name.eq_ignore_ascii_case("content-length") {
            let length = value
                .trim()
                .parse::<u64>()
                .map_err(|_| NotHttp(format!("bad Content-Length: {value}")))?;
            if content_length.is_some_and(|earlier| earlier != length) {
                return Err(NotHttp("conflicting Content-Length fields".into()));
            }
            content_length = Some(length);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            chunked = value
                .rsplit(',')
                .next()
                .is_some_and(|last| last.trim().eq_ignore_ascii_case("chunked"));
        }
    }
    let no_body = head.status == 204 || head.status == 304 || (100..200).contains(&head.status);
    let framing = if no_body {
        Stage::Done
    } else if chunked {
        Stage::ChunkSize(Vec::new())
    } else {
        match content_length {
            Some(0) => Stage::Done,
            Some(length) => Stage::Length(length),
            None => Stage::UntilClose,
        }
    };
    Ok(Some((len, head, framing)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(reader: &mut ResponseReader, bytes: &[u8], step: usize) -> Result<Fed, NotHttp> {
        let mut last = Fed::Partial;
        for piece in bytes.chunks(step) {
            last = reader.feed(piece)?;
            if let Fed::Done { .. } = last {
                break;
            }
        }
        Ok(last)
    }

    #[test]
    fn content_length_response_ends_exactly_in_any_pieces() {
        let bytes = b"HTTP/1.1 200 OK\r\nServer: nginx/1.22.1\r\nConnection: keep-alive\r\nKeep-Alive: timeout=2, max=99\r\nContent-Length: 5\r\n\r\nhelloEXTRA";
        for step in [1, 3, bytes.len()] {
            let mut reader = ResponseReader::new(false);
            let fed = read_all(&mut reader, bytes, step).unwrap();
            assert!(matches!(fed, Fed::Done { .. }), "step {step}: {fed:?}");
            let head = reader.head().unwrap();
            assert_eq!(head.keep_alive_timeout, Some(2));
            assert_eq!(head.keep_alive_max, Some(99));
            assert_eq!(head.server.as_deref(), Some("nginx/1.22.1"));
            assert!(head.persistent());
        }
        let mut reader = ResponseReader::new(false);
        assert_eq!(reader.feed(bytes).unwrap(), Fed::Done { extra: 5 });
    }

    #[test]
    fn chunked_body_with_trailers_is_skipped() {
        let bytes = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n3;x=y\r\nabc\r\n0\r\nT: v\r\n\r\n";
        for step in [1, 2, bytes.len()] {
            let mut reader = ResponseReader::new(false);
            assert_eq!(
                read_all(&mut reader, bytes, step).unwrap(),
                Fed::Done { extra: 0 }
            );
        }
    }

    #[test]
    fn head_request_and_interim_responses() {
        let mut reader = ResponseReader::new(true);
        let bytes = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.0 200 OK\r\nContent-Length: 10\r\n\r\n";
        assert_eq!(reader.feed(bytes).unwrap(), Fed::Done { extra: 0 });
        let head = reader.head().unwrap();
        assert_eq!((head.status, head.version()), (200, "HTTP/1.0"));
        assert!(!head.persistent());
    }

    #[test]
    fn close_delimited_body_ends_at_eof() {
        let mut reader = ResponseReader::new(false);
        let fed = reader
            .feed(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nbody")
            .unwrap();
        assert_eq!(fed, Fed::Partial);
        assert!(reader.eof().is_ok());
        let mut cut = ResponseReader::new(false);
        cut.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nbody")
            .unwrap();
        assert!(cut.eof().is_err());
    }

    #[test]
    fn not_http_and_oversized_heads_are_errors() {
        let mut reader = ResponseReader::new(false);
        assert!(reader.feed(b"SSH-2.0-OpenSSH_9.2\r\n").is_err());
        let mut huge = ResponseReader::new(false);
        let mut bytes = b"HTTP/1.1 200 OK\r\nX: ".to_vec();
        bytes.resize(MAX_HEAD + 10, b'a');
        assert!(huge.feed(&bytes).is_err());
        let mut reader = ResponseReader::new(false);
        let bad = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n";
        assert!(reader.feed(bad).is_err());
    }

    #[test]
    fn interim_responses_are_capped_and_an_unfinished_response_is_described() {
        let mut reader = ResponseReader::new(false);
        assert_eq!(reader.unfinished(), None);
        let interim = b"HTTP/1.1 100 Continue\r\n\r\n";
        for _ in 0..MAX_INTERIM {
            assert_eq!(reader.feed(interim).unwrap(), Fed::Partial);
        }
        let said = reader.unfinished().unwrap();
        assert!(said.contains("10 interim 100"), "{said}");
        let error = reader.feed(interim).unwrap_err();
        assert!(error.0.contains("11 interim 100 responses"), "{error}");

        let mut head = ResponseReader::new(false);
        head.feed(b"HTTP/1.1 200").unwrap();
        let said = head.unfinished().unwrap();
        assert!(said.contains("12 bytes of a response head"), "{said}");
        let mut body = ResponseReader::new(false);
        body.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nabc")
            .unwrap();
        let said = body.unfinished().unwrap();
        assert!(said.contains("a 200 head and 3 bytes of body"), "{said}");
    }
}
