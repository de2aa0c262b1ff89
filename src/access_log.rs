//! The access log (`--access-log PATH`, `-` for standard output): one line
//! per response in nginx's `combined` format, then the request time in
//! seconds (ms resolution), the connection id, unique over the process's
//! life, and the idle gap: ms since the previous response on the
//! connection (`-` for its first request), so one line shows a reuse that
//! came close to the idle timeout:
//!
//! ```text
//! 127.0.0.1 - - [22/Nov/2026:10:13:58 +0000] "GET / HTTP/1.1" 200 13 "-" "curl/8.5.0" 0.000 17 1503
//! ```
//!
//! Over TLS (`--tls-cert`) the line ends with the protocol version, as
//! nginx's `$ssl_protocol` names it (` TLSv1.3`); the combined prefix is
//! the same, so log analysers that read it read these lines too.
//!
//! Quoted fields escape `"`, `\` and bytes outside printable ASCII as
//! `\xHH`, as nginx does; an empty field is `-`. A request refused before
//! its head was complete shows what of its request line had arrived. The
//! time is the Date cache's second, in UTC.
//!
//! Each worker formats its lines into its own [`AccessLog`] buffer (no
//! allocation once it has grown, no system call per request) and writes
//! the buffer to the shared [`AccessLogSink`] when it passes [`FLUSH_AT`],
//! at the Date cache's one-second tick (which every logged response arms,
//! so a line waits at most a second and an idle server never wakes for
//! the log), and when the worker stops. SIGUSR1 reopens the file, for
//! logrotate. Diagnostics (`RUST_LOG`) have nothing to do with it.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::net::IpAddr;
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, UNIX_EPOCH};

use crate::config::AccessLogTarget;
use crate::date::DATE_LEN;
use crate::http::response::push_decimal;
use crate::timers::Micros;
use crate::tls::TlsVersion;

/// A worker writes its buffered lines out once they pass this size.
pub const FLUSH_AT: usize = 64 * 1024;
/// Record fields that grew past this are freed when their buffers go back
/// to the pool.
const KEEP_FIELD_CAPACITY: usize = 4096;

/// What the log needs of one request, kept while it is answered (in the
/// connection's pooled buffers, so reused from request to request).
#[derive(Debug, Default)]
pub struct AccessRecord {
    /// The request line as received, without its line end.
    pub request_line: Vec<u8>,
    pub referer: Vec<u8>,
    pub user_agent: Vec<u8>,
    /// When its first byte was seen.
    pub started: Option<Micros>,
}

impl AccessRecord {
    /// The request's first bytes are in: its time starts now (once).
    pub fn begin(&mut self, now: Micros) {
        self.started.get_or_insert(now);
    }

    /// Keeps the request line and the Referer and User-Agent fields of a
    /// complete, parsed head.
    pub fn remember_head(&mut self, head: &[u8]) {
        let mut lines = head
            .split(|&b| b == b'\n')
            .map(|line| line.strip_suffix(b"\r").unwrap_or(line))
            .skip_while(|line| line.is_empty());
        copy(&mut self.request_line, lines.next().unwrap_or_default());
        self.referer.clear();
        self.user_agent.clear();
        // Field names are checked by their first byte before anything else:
        // most fields are neither of the two.
        for line in lines {
            let (field, name): (&mut Vec<u8>, &[u8]) = match line.first().map(|b| b | 0x20) {
                Some(b'r') => (&mut self.referer, b"referer:"),
                Some(b'u') => (&mut self.user_agent, b"user-agent:"),
                _ => continue,
            };
            if line.len() >= name.len() && line[..name.len()].eq_ignore_ascii_case(name) {
                copy(field, line[name.len()..].trim_ascii());
            }
        }
    }

    /// A request refused before its head was parsed: keeps what of its
    /// request line has arrived, unless a line is remembered already.
    pub fn remember_partial(&mut self, input: &[u8]) {
        if !self.request_line.is_empty() {
            return;
        }
        let line = input.trim_ascii_start();
        let end = line
            .iter()
            .position(|&b| matches!(b, b'\r' | b'\n'))
            .unwrap_or(line.len());
        copy(&mut self.request_line, &line[..end]);
    }

    /// Ready for the next request (capacity kept).
    pub fn clear(&mut self) {
        self.request_line.clear();
        self.referer.clear();
        self.user_agent.clear();
        self.started = None;
    }

    /// Cleared, and freed of any field that grew unusually large.
    pub fn reset(&mut self) {
        self.clear();
        for field in [
            &mut self.request_line,
            &mut self.referer,
            &mut self.user_agent,
        ] {
            if field.capacity() > KEEP_FIELD_CAPACITY {
                *field = Vec::new();
            }
        }
    }

    /// Heap bytes held.
    pub fn capacity(&self) -> usize {
        self.request_line.capacity() + self.referer.capacity() + self.user_agent.capacity()
    }
}

fn copy(into: &mut Vec<u8>, from: &[u8]) {
    into.clear();
    into.extend_from_slice(from);
}

/// One response to log.
pub struct Entry<'a> {
    pub peer: IpAddr,
    /// The time, as Unix seconds.
    pub unix_second: u64,
    pub record: &'a AccessRecord,
    pub status: u16,
    /// Body bytes of the response.
    pub bytes: u64,
    /// From the request's first byte to its response.
    pub micros: Micros,
    pub conn: u64,
    /// Since the previous response on the connection (`None`: the first).
    pub idle_gap_ms: Option<u64>,
    /// The TLS version the connection speaks (`None`: plain HTTP).
    pub tls: Option<TlsVersion>,
}

/// `dd/Mon/yyyy:HH:MM:SS +0000`
const CLF_TIME_LEN: usize = 26;
/// A line without its three quoted fields, at most: an IPv6 address, the
/// time, the status, three 20-digit numbers and the separators.
const LINE_FIXED: usize = 45 + CLF_TIME_LEN + 3 + 3 * 20 + 32;

/// One worker's buffered access-log lines.
#[derive(Debug, Default)]
pub struct AccessLog {
    buf: Vec<u8>,
    /// The second `time` was formatted for.
    second: Option<u64>,
    time: [u8; CLF_TIME_LEN],
    /// The last peer address and its text: formatting an address costs
    /// more than the rest of a line, and consecutive lines often share it
    /// (a proxy, a keep-alive client).
    peer: Option<IpAddr>,
    peer_text: Vec<u8>,
}

impl AccessLog {
    /// Appends one line.
    pub fn write(&mut self, entry: &Entry<'_>) {
        if self.second != Some(entry.unix_second) {
            self.time = clf_time(entry.unix_second);
            self.second = Some(entry.unix_second);
        }
        if self.peer != Some(entry.peer) {
            self.peer_text.clear();
            let _ = write!(self.peer_text, "{}", entry.peer);
            self.peer = Some(entry.peer);
        }
        let record = entry.record;
        let out = &mut self.buf;
        // Room for the line at once (an escaped byte takes four).
        let fields = record.request_line.len() + record.referer.len() + record.user_agent.len();
        out.reserve(LINE_FIXED + 4 * fields);
        out.extend_from_slice(&self.peer_text);
        out.extend_from_slice(b" - - [");
        out.extend_from_slice(&self.time);
        out.extend_from_slice(b"] ");
        quoted(out, &record.request_line);
        out.push(b' ');
        push_three_digits(out, entry.status.into());
        out.push(b' ');
        push_decimal(out, entry.bytes);
        out.push(b' ');
        quoted(out, &record.referer);
        out.push(b' ');
        quoted(out, &record.user_agent);
        out.push(b' ');
        let millis = entry.micros / 1000;
        push_decimal(out, millis / 1000);
        out.push(b'.');
        push_three_digits(out, millis % 1000);
        out.push(b' ');
        push_decimal(out, entry.conn);
        out.push(b' ');
        match entry.idle_gap_ms {
            Some(ms) => push_decimal(out, ms),
            None => out.push(b'-'),
        }
        if let Some(version) = entry.tls {
            out.push(b' ');
            out.extend_from_slice(version.label().as_bytes());
        }
        out.push(b'\n');
    }

    /// Whether the buffer should be written out now.
    pub fn is_full(&self) -> bool {
        self.buf.len() >= FLUSH_AT
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Writes the buffered lines to `sink` (whole lines, under its lock);
    /// the buffer keeps its capacity. Lines that cannot be written are
    /// dropped: the error is returned for the caller to report.
    pub fn flush(&mut self, sink: &AccessLogSink) -> io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let written = sink.write(&self.buf);
        self.buf.clear();
        written
    }

    /// The buffered text.
    #[cfg(test)]
    fn buffered(&self) -> &[u8] {
        &self.buf
    }
}

/// The bytes written as `\xHH`: `"`, `\` and all outside printable ASCII.
const ESCAPED: [bool; 256] = {
    let mut table = [true; 256];
    let mut byte = 0x20;
    while byte < 0x7f {
        table[byte] = byte == b'"' as usize || byte == b'\\' as usize;
        byte += 1;
    }
    table
};

/// Appends `n` as exactly three digits, zero-padded (a status code, the
/// milliseconds of a request time); above 999, `999`.
fn push_three_digits(out: &mut Vec<u8>, n: u64) {
    let n = n.min(999);
    out.extend_from_slice(&[
        b'0' + (n / 100) as u8,
        b'0' + (n / 10 % 10) as u8,
        b'0' + (n % 10) as u8,
    ]);
}

/// Appends `field` in double quotes, escaped as nginx does; empty is `"-"`.
/// Runs of bytes that need no escape are copied whole.
fn quoted(out: &mut Vec<u8>, field: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let escaped = |byte: u8| ESCAPED[usize::from(byte)];
    out.push(b'"');
    if field.is_empty() {
        out.push(b'-');
    }
    let mut rest = field;
    while let Some(at) = rest.iter().position(|&b| escaped(b)) {
        let byte = rest[at];
        out.extend_from_slice(&rest[..at]);
        out.extend_from_slice(&[
            b'\\',
            b'x',
            HEX[usize::from(byte >> 4)],
            HEX[usize::from(byte & 0xf)],
        ]);
        rest = &rest[at + 1..];
    }
    out.extend_from_slice(rest);
    out.push(b'"');
}

/// Common Log Format's time, in UTC: `06/Nov/1994:08:49:37 +0000`. The
/// calendar is httpdate's (the Date header's crate): its IMF-fixdate,
/// `Sun, 06 Nov 1994 08:49:37 GMT`, holds every field CLF needs at fixed
/// places, so only their order is ours.
fn clf_time(unix_second: u64) -> [u8; CLF_TIME_LEN] {
    // httpdate ends with 9999 (the Date cache, where the second comes
    // from, never passes it).
    const LAST_SECOND: u64 = 253_402_300_799;
    let wall = UNIX_EPOCH + Duration::from_secs(unix_second.min(LAST_SECOND));
    let mut imf = [0u8; DATE_LEN];
    let mut cursor = io::Cursor::new(&mut imf[..]);
    let written = write!(cursor, "{}", httpdate::HttpDate::from(wall));
    debug_assert!(written.is_ok() && cursor.position() as usize == DATE_LEN);
    let mut out = [0u8; CLF_TIME_LEN];
    out[0..2].copy_from_slice(&imf[5..7]); // day
    out[2] = b'/';
    out[3..6].copy_from_slice(&imf[8..11]); // month
    out[6] = b'/';
    out[7..11].copy_from_slice(&imf[12..16]); // year
    out[11] = b':';
    out[12..20].copy_from_slice(&imf[17..25]); // HH:MM:SS
    out[20..].copy_from_slice(b" +0000");
    out
}

/// Where every worker's lines go: the open file (or standard output),
/// shared by the workers and reopened on SIGUSR1.
#[derive(Debug, Default)]
pub struct AccessLogSink {
    path: Option<PathBuf>,
    file: Mutex<Option<File>>,
}

impl AccessLogSink {
    /// Opens `target`: a file for appending (created if missing), or a
    /// duplicate of standard output. `Off` opens nothing.
    pub fn open(target: &AccessLogTarget) -> io::Result<Self> {
        let (path, file) = match target {
            AccessLogTarget::Off => (None, None),
            AccessLogTarget::Stdout => {
                let stdout = io::stdout().as_fd().try_clone_to_owned()?;
                (None, Some(File::from(stdout)))
            }
            AccessLogTarget::File(path) => (Some(path.clone()), Some(append(path)?)),
        };
        Ok(AccessLogSink {
            path,
            file: Mutex::new(file),
        })
    }

    /// Writes whole lines.
    pub fn write(&self, lines: &[u8]) -> io::Result<()> {
        let mut file = self
            .file
            .lock()
            .map_err(|_| io::Error::other("access log lock poisoned"))?;
        match file.as_mut() {
            Some(file) => file.write_all(lines),
            None => Ok(()),
        }
    }

    /// Opens the file again at its path (after logrotate moved it away) and
    /// returns the path; `None` when the log is standard output or off.
    pub fn reopen(&self) -> io::Result<Option<&PathBuf>> {
        let Some(path) = &self.path else {
            return Ok(None);
        };
        let reopened = append(path)?;
        let mut file = self
            .file
            .lock()
            .map_err(|_| io::Error::other("access log lock poisoned"))?;
        *file = Some(reopened);
        Ok(Some(path))
    }
}

fn append(path: &PathBuf) -> io::Result<File> {
    OpenOptions::new().create(true).append(true).open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(record: &AccessRecord, status: u16, micros: Micros) -> String {
        let mut log = AccessLog::default();
        log.write(&Entry {
            peer: "192.0.2.7".parse().unwrap(),
            unix_second: 784_111_777,
            record,
            status,
            bytes: 13,
            micros,
            conn: 42,
            idle_gap_ms: Some(1_503),
            tls: None,
        });
        String::from_utf8(log.buffered().to_vec()).unwrap()
    }

    #[test]
    fn lines_are_nginx_combined_then_time_connection_and_idle_gap() {
        let mut record = AccessRecord::default();
        record.remember_head(
            b"GET /a?b=c HTTP/1.1\r\nHost: x\r\nUser-Agent: curl/8.5.0\r\nreferer:  http://r/ \r\n\r\n",
        );
        assert_eq!(
            line(&record, 200, 1_234_567),
            "192.0.2.7 - - [06/Nov/1994:08:49:37 +0000] \"GET /a?b=c HTTP/1.1\" 200 13 \
             \"http://r/\" \"curl/8.5.0\" 1.234 42 1503\n"
        );
    }

    #[test]
    fn each_line_has_its_own_peer() {
        let record = AccessRecord::default();
        let mut log = AccessLog::default();
        for peer in ["192.0.2.7", "192.0.2.7", "2001:db8::1", "192.0.2.8"] {
            log.write(&Entry {
                peer: peer.parse().unwrap(),
                unix_second: 0,
                record: &record,
                status: 200,
                bytes: 0,
                micros: 0,
                conn: 1,
                idle_gap_ms: None,
                tls: None,
            });
        }
        let text = String::from_utf8(log.buffered().to_vec()).unwrap();
        assert!(
            text.lines().all(|l| l.ends_with(" 1 -")),
            "a first request: {text}"
        );
        let peers: Vec<&str> = text.lines().map(|l| l.split(' ').next().unwrap()).collect();
        assert_eq!(
            peers,
            ["192.0.2.7", "192.0.2.7", "2001:db8::1", "192.0.2.8"]
        );
    }

    #[test]
    fn quotes_backslashes_and_control_bytes_are_escaped_as_nginx_does() {
        let mut record = AccessRecord::default();
        record.remember_head(b"GET /\"q\\\x01\xff HTTP/1.1\r\nUser-Agent: a\"b\r\n\r\n");
        let logged = line(&record, 200, 0);
        assert!(
            logged.contains("\"GET /\\x22q\\x5C\\x01\\xFF HTTP/1.1\""),
            "{logged}"
        );
        assert!(logged.contains("\"-\" \"a\\x22b\" 0.000 42"), "{logged}");
    }

    #[test]
    fn a_refused_request_keeps_what_of_its_line_arrived() {
        let mut record = AccessRecord::default();
        record.remember_partial(b"\r\nGET /slow HT");
        assert!(
            line(&record, 408, 60_000_000).contains("\"GET /slow HT\" 408 13 \"-\" \"-\" 60.000")
        );
        let empty = AccessRecord::default();
        assert!(line(&empty, 408, 0).contains("] \"-\" 408"));
        // A remembered head is not replaced by the partial input after it.
        record.remember_head(b"POST / HTTP/1.1\r\n\r\n");
        record.remember_partial(b"body bytes");
        assert_eq!(record.request_line, b"POST / HTTP/1.1");
    }

    #[test]
    fn clf_time_is_utc_day_month_year() {
        assert_eq!(&clf_time(0), b"01/Jan/1970:00:00:00 +0000");
        assert_eq!(&clf_time(951_782_400), b"29/Feb/2000:00:00:00 +0000");
        assert_eq!(&clf_time(1_795_342_438), b"22/Nov/2026:10:13:58 +0000");
        assert_eq!(&clf_time(4_102_444_799), b"31/Dec/2099:23:59:59 +0000");
        assert_eq!(&clf_time(4_107_542_400), b"01/Mar/2100:00:00:00 +0000");
        assert_eq!(&clf_time(u64::MAX), b"31/Dec/9999:23:59:59 +0000");
    }

    #[test]
    fn the_buffer_fills_to_the_flush_mark_and_empties_into_the_sink() {
        let path = std::env::temp_dir().join(format!("kas-access-{}.log", std::process::id()));
        let sink = AccessLogSink::open(&AccessLogTarget::File(path.clone())).unwrap();
        let mut log = AccessLog::default();
        let record = AccessRecord::default();
        let entry = Entry {
            peer: "::1".parse().unwrap(),
            unix_second: 0,
            record: &record,
            status: 404,
            bytes: 0,
            micros: 0,
            conn: 1,
            idle_gap_ms: None,
            tls: None,
        };
        let mut lines = 0;
        while !log.is_full() {
            log.write(&entry);
            lines += 1;
        }
        log.flush(&sink).unwrap();
        assert!(log.is_empty());
        let written = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(written.lines().count(), lines);
        assert!(written.starts_with("::1 - - [01/Jan/1970:00:00:00 +0000] \"-\" 404 0"));
    }
}
