//! Request body framing (RFC 9112 §6–§7) as an explicit state machine:
//! bytes go in as they arrive, split anywhere; body bytes come out into a
//! sink (gathered or streamed for the echo route, or only counted); the
//! decoder says when the body is complete so the next pipelined request
//! starts at the right byte.
//!
//! Everything a client sends is bounded, not only the data: a chunk-size
//! line (with its extensions, which are ignored) may take
//! [`MAX_CHUNK_LINE`] bytes and the trailer section (read and discarded)
//! counts against the head limit; both make the body malformed. The
//! class of Node's CVE-2024-22019, framing that dwarfs its data, is
//! refused as long as a status can still say so: until a response byte is
//! queued, size lines and CRLFs may not exceed [`FRAMING_ALLOWANCE`] plus
//! [`FRAMING_PER_DATA_BYTE`] per data byte, which any chunking passes whose
//! size lines carry no extensions (one-byte chunks take 5 framing bytes
//! each, 19 at most with 15 zero-padded digits). Once an echo has begun
//! streaming, only the per-line limits can end it: a body of N data bytes
//! then costs at most about 4 KiB × N on the wire (4 GiB under the default
//! 1 MiB `--max-body-size`), read at O(1) work a byte and cut by
//! `--request-timeout` (300 s by default).

use super::RequestError;
use super::response::push_chunk;

/// Hex digits a chunk size may have before it is refused as an overflow.
const MAX_CHUNK_SIZE_DIGITS: u32 = 15;
/// Longest chunk-size line, extensions and CRLF included.
pub const MAX_CHUNK_LINE: u32 = 4096;
/// Framing bytes (size lines and CRLFs) a chunked body may spend beyond
/// [`FRAMING_PER_DATA_BYTE`] per data byte, before its response begins.
pub const FRAMING_ALLOWANCE: u64 = 64 * 1024;
/// Framing bytes a chunked body may spend per data byte, beyond
/// [`FRAMING_ALLOWANCE`], before its response begins: more than the
/// longest chunk-size line without extensions (15 hex digits and CRLF)
/// and the CRLF after its data take for a one-byte chunk (19).
pub const FRAMING_PER_DATA_BYTE: u64 = 20;

/// Where decoded body bytes go.
pub enum BodyOut<'a> {
    /// Counted, then dropped.
    Discard,
    /// Appended as they are.
    Raw(&'a mut Vec<u8>),
    /// Appended as chunks of the chunked transfer coding: the body of a
    /// response streamed while the request body arrives.
    Chunks(&'a mut Vec<u8>),
}

/// Where decoded body bytes go, and how many may come.
pub struct BodySink<'a> {
    pub out: BodyOut<'a>,
    /// Bytes decoded so far, kept or not.
    pub received: &'a mut u64,
    pub limit: u64,
    /// A byte of the response is queued (a streamed echo has begun), so no
    /// status can refuse the body any more: its framing is no longer
    /// weighed against its data, and only what makes it malformed (a size
    /// line or trailers over their limits) ends it.
    pub response_begun: bool,
}

impl BodySink<'_> {
    /// `size` more bytes are announced: refuse them now if they cannot fit.
    fn announce(&self, size: u64) -> Result<(), RequestError> {
        if self.received.saturating_add(size) > self.limit {
            return Err(RequestError::BodyTooLarge);
        }
        Ok(())
    }

    fn take(&mut self, bytes: &[u8]) -> Result<(), RequestError> {
        *self.received += bytes.len() as u64;
        if *self.received > self.limit {
            return Err(RequestError::BodyTooLarge);
        }
        match &mut self.out {
            BodyOut::Discard => {}
            BodyOut::Raw(out) => out.extend_from_slice(bytes),
            BodyOut::Chunks(out) => push_chunk(out, bytes),
        }
        Ok(())
    }
}

/// What one call to [`BodyDecoder::decode`] achieved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyProgress {
    /// Input bytes consumed.
    pub consumed: usize,
    /// The body (and trailers) ended.
    pub done: bool,
}

/// Decoding state of one request body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyDecoder {
    /// Content-Length: this many bytes still to come.
    Length { remaining: u64 },
    /// Chunked transfer coding.
    Chunked(ChunkedDecoder),
}

/// A chunked body in progress: where its grammar stands and what its
/// framing has cost so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkedDecoder {
    state: Chunked,
    /// Bytes of the current chunk-size line.
    line: u32,
    /// Bytes of the trailer section so far.
    trailers: u32,
    /// Most bytes the trailer section may take (the head limit).
    trailer_limit: u32,
    /// Framing bytes so far: size lines and the CRLFs after chunk data
    /// (trailers have a limit of their own).
    framing: u64,
}

/// Where a chunked decoder stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Chunked {
    /// Reading hex digits of a chunk size (`digits` read so far).
    Size {
        size: u64,
        digits: u32,
    },
    /// Whitespace after the size digits: `;` or CR must follow.
    SizeBws {
        size: u64,
    },
    /// Inside the chunk extensions, up to CR.
    Extension {
        size: u64,
    },
    /// Saw CR after the size line; LF must follow.
    SizeLf {
        size: u64,
    },
    /// Inside chunk data.
    Data {
        remaining: u64,
    },
    /// After chunk data: CR must follow.
    DataCr,
    /// After chunk data and CR: LF must follow.
    DataLf,
    /// At the start of a trailer line (or the final empty line).
    TrailerStart,
    /// Inside a trailer field line, discarded.
    TrailerLine,
    /// Saw CR at the start of a line: LF ends the message.
    EndLf,
    /// Saw CR inside a trailer line.
    TrailerLf,
    Done,
}

impl Chunked {
    fn in_size_line(self) -> bool {
        matches!(
            self,
            Chunked::Size { .. }
                | Chunked::SizeBws { .. }
                | Chunked::Extension { .. }
                | Chunked::SizeLf { .. }
        )
    }

    fn in_trailers(self) -> bool {
        matches!(
            self,
            Chunked::TrailerStart | Chunked::TrailerLine | Chunked::TrailerLf | Chunked::EndLf
        )
    }
}

impl BodyDecoder {
    /// A chunked body whose trailer section may take `trailer_limit` bytes.
    pub fn chunked(trailer_limit: usize) -> Self {
        BodyDecoder::Chunked(ChunkedDecoder {
            state: Chunked::Size { size: 0, digits: 0 },
            line: 0,
            trailers: 0,
            trailer_limit: u32::try_from(trailer_limit).unwrap_or(u32::MAX),
            framing: 0,
        })
    }

    /// Consumes as much of `input` as belongs to this body.
    pub fn decode(
        &mut self,
        input: &[u8],
        sink: &mut BodySink<'_>,
    ) -> Result<BodyProgress, RequestError> {
        match self {
            BodyDecoder::Length { remaining } => {
                let take = input
                    .len()
                    .min(usize::try_from(*remaining).unwrap_or(usize::MAX));
                sink.take(&input[..take])?;
                *remaining -= take as u64;
                Ok(BodyProgress {
                    consumed: take,
                    done: *remaining == 0,
                })
            }
            BodyDecoder::Chunked(chunked) => chunked.decode(input, sink),
        }
    }

    /// Body bytes still to come, when the framing says so in advance.
    pub fn remaining_length(&self) -> Option<u64> {
        match *self {
            BodyDecoder::Length { remaining } => Some(remaining),
            BodyDecoder::Chunked(_) => None,
        }
    }
}

impl ChunkedDecoder {
    fn decode(
        &mut self,
        input: &[u8],
        sink: &mut BodySink<'_>,
    ) -> Result<BodyProgress, RequestError> {
        let mut at = 0;
        while at < input.len() && self.state != Chunked::Done {
            if let Chunked::Data { remaining } = &mut self.state {
                let take =
                    (input.len() - at).min(usize::try_from(*remaining).unwrap_or(usize::MAX));
                sink.take(&input[at..at + take])?;
                at += take;
                *remaining -= take as u64;
                if *remaining == 0 {
                    self.state = Chunked::DataCr;
                }
                continue;
            }
            self.count_framing_byte(sink)?;
            self.state = step(self.state, input[at])?;
            at += 1;
            if let Chunked::Data { remaining } = self.state {
                // Refuse a chunk over the limit at its size line, not after
                // waiting for (and reading) the bytes it announces.
                sink.announce(remaining)?;
            }
        }
        Ok(BodyProgress {
            consumed: at,
            done: self.state == Chunked::Done,
        })
    }

    /// Accounts for one byte outside chunk data, refusing the body once its
    /// size line or its trailers grow too long, or, before its response
    /// has begun, its framing outweighs its data.
    fn count_framing_byte(&mut self, sink: &BodySink<'_>) -> Result<(), RequestError> {
        if self.state.in_size_line() {
            if matches!(self.state, Chunked::Size { digits: 0, .. }) {
                self.line = 0;
            }
            self.line += 1;
            if self.line > MAX_CHUNK_LINE {
                return Err(RequestError::BodyFramingTooLarge(
                    "chunk-size line (extensions) too long",
                ));
            }
        } else if self.state.in_trailers() {
            self.trailers += 1;
            if self.trailers > self.trailer_limit {
                return Err(RequestError::TrailersTooLarge);
            }
            return Ok(());
        }
        self.framing += 1;
        let allowed =
            FRAMING_ALLOWANCE.saturating_add(FRAMING_PER_DATA_BYTE.saturating_mul(*sink.received));
        if !sink.response_begun && self.framing > allowed {
            return Err(RequestError::BodyFramingTooLarge(
                "chunked framing outweighs its data",
            ));
        }
        Ok(())
    }
}

/// One byte of chunked framing outside chunk data.
fn step(state: Chunked, byte: u8) -> Result<Chunked, RequestError> {
    use Chunked::*;
    let bad = |why| Err(RequestError::Malformed(why));
    match state {
        Size { size, digits } => match hex_value(byte) {
            Some(value) if digits < MAX_CHUNK_SIZE_DIGITS => Ok(Size {
                size: size << 4 | value,
                digits: digits + 1,
            }),
            Some(_) => bad("chunk size overflows"),
            None if digits == 0 => bad("chunk size missing"),
            None => after_digits(size, byte),
        },
        SizeBws { size } => after_digits(size, byte),
        Extension { size } => after_size(size, byte),
        SizeLf { size: 0 } if byte == b'\n' => Ok(TrailerStart),
        SizeLf { size } if byte == b'\n' => Ok(Data { remaining: size }),
        SizeLf { .. } => bad("chunk size line must end in CRLF"),
        DataCr if byte == b'\r' => Ok(DataLf),
        DataLf if byte == b'\n' => Ok(Size { size: 0, digits: 0 }),
        DataCr | DataLf => bad("chunk data must end in CRLF"),
        TrailerStart if byte == b'\r' => Ok(EndLf),
        TrailerStart | TrailerLine if is_field_byte(byte) => Ok(TrailerLine),
        TrailerLine if byte == b'\r' => Ok(TrailerLf),
        TrailerLf if byte == b'\n' => Ok(TrailerStart),
        EndLf if byte == b'\n' => Ok(Done),
        TrailerStart | TrailerLine | TrailerLf | EndLf => bad("malformed trailer section"),
        Data { .. } | Done => unreachable!("handled by ChunkedDecoder::decode"),
    }
}

/// Right after the size digits (RFC 9112 §7.1: `chunk-size [ chunk-ext ]
/// CRLF`, `chunk-ext = *( BWS ";" ... )`): whitespace, then `;` or CRLF.
/// Anything else (`0x5`, `5zz`) is not a chunk size: reading it as one
/// (`0x5` as 0) would end the body where another parser would not.
fn after_digits(size: u64, byte: u8) -> Result<Chunked, RequestError> {
    match byte {
        b' ' | b'\t' => Ok(Chunked::SizeBws { size }),
        b';' => Ok(Chunked::Extension { size }),
        b'\r' => Ok(Chunked::SizeLf { size }),
        _ => Err(RequestError::Malformed(
            "chunk size must end in `;` or CRLF",
        )),
    }
}

/// Inside the extensions (ignored), up to CRLF.
fn after_size(size: u64, byte: u8) -> Result<Chunked, RequestError> {
    match byte {
        b'\r' => Ok(Chunked::SizeLf { size }),
        b'\n' => Err(RequestError::Malformed("chunk size line must end in CRLF")),
        byte if is_field_byte(byte) => Ok(Chunked::Extension { size }),
        _ => Err(RequestError::Malformed("control byte in chunk extension")),
    }
}

/// Visible bytes, space, tab and obs-text: what a field line may hold.
fn is_field_byte(byte: u8) -> bool {
    byte == b'\t' || (byte >= b' ' && byte != 0x7f)
}

fn hex_value(byte: u8) -> Option<u64> {
    (byte as char).to_digit(16).map(u64::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TRAILER_LIMIT: usize = 1024;

    /// Decodes `input` fed in pieces of `step` bytes; returns the body and
    /// the bytes left over after it.
    fn decode_in_pieces(
        mut decoder: BodyDecoder,
        input: &[u8],
        step: usize,
    ) -> Result<(Vec<u8>, usize), RequestError> {
        let mut body = Vec::new();
        let mut received = 0;
        let mut at = 0;
        while at < input.len() {
            let end = (at + step).min(input.len());
            let mut sink = BodySink {
                out: BodyOut::Raw(&mut body),
                received: &mut received,
                limit: 1 << 20,
                response_begun: false,
            };
            let progress = decoder.decode(&input[at..end], &mut sink)?;
            at += progress.consumed;
            if progress.done {
                return Ok((body, input.len() - at));
            }
            if progress.consumed == 0 {
                break;
            }
        }
        Err(RequestError::Malformed("incomplete"))
    }

    #[test]
    fn content_length_stops_at_the_boundary() {
        let (body, rest) =
            decode_in_pieces(BodyDecoder::Length { remaining: 5 }, b"helloGET", 3).unwrap();
        assert_eq!(body, b"hello");
        assert_eq!(rest, 3);
    }

    #[test]
    fn chunked_with_extensions_and_trailers_split_anywhere() {
        let input = b"5;name=value\r\nhello\r\n7 ; x\r\n, world\r\n0\r\nTrailer: yes\r\n\r\nNEXT";
        for step in 1..input.len() {
            let (body, rest) =
                decode_in_pieces(BodyDecoder::chunked(TRAILER_LIMIT), input, step).unwrap();
            assert_eq!(body, b"hello, world", "step {step}");
            assert_eq!(rest, 4, "step {step}");
        }
    }

    #[test]
    fn bad_chunked_framing_is_refused() {
        for bad in [
            &b"x\r\n"[..],
            b"5\r\nhelloXX",
            b"5\nhello\r\n0\r\n\r\n",
            b"ffffffffffffffffff\r\n",
            b"0\r\nbad\x01trailer\r\n\r\n",
            b"5;\x00\r\n",
            b"0x5\r\nhello\r\n0\r\n\r\n",
            b"5zz\r\nhello\r\n0\r\n\r\n",
            b"5 x\r\nhello\r\n0\r\n\r\n",
        ] {
            assert!(
                decode_in_pieces(BodyDecoder::chunked(TRAILER_LIMIT), bad, 64).is_err(),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn whitespace_after_the_size_is_tolerated() {
        let input = b"5 \r\nhello\r\n5\t ;x\r\nworld\r\n0\r\n\r\n";
        let (body, rest) = decode_in_pieces(BodyDecoder::chunked(TRAILER_LIMIT), input, 1).unwrap();
        assert_eq!(body, b"helloworld");
        assert_eq!(rest, 0);
    }

    #[test]
    fn chunk_over_the_limit_is_413_at_its_size_line() {
        let mut received = 0;
        let mut sink = BodySink {
            out: BodyOut::Discard,
            received: &mut received,
            limit: 3,
            response_begun: false,
        };
        let result = BodyDecoder::chunked(TRAILER_LIMIT).decode(b"5\r\n", &mut sink);
        assert_eq!(result, Err(RequestError::BodyTooLarge));
    }

    #[test]
    fn body_over_the_limit_is_413() {
        let mut received = 0;
        let mut sink = BodySink {
            out: BodyOut::Discard,
            received: &mut received,
            limit: 3,
            response_begun: false,
        };
        let result =
            BodyDecoder::chunked(TRAILER_LIMIT).decode(b"5\r\nhello\r\n0\r\n\r\n", &mut sink);
        assert_eq!(result, Err(RequestError::BodyTooLarge));
    }

    #[test]
    fn a_long_chunk_extension_is_refused_at_the_limit() {
        let mut line = b"5;".to_vec();
        line.resize(MAX_CHUNK_LINE as usize - 2, b'x');
        line.extend_from_slice(b"\r\nhello\r\n0\r\n\r\n");
        let (body, _) = decode_in_pieces(BodyDecoder::chunked(TRAILER_LIMIT), &line, 7).unwrap();
        assert_eq!(body, b"hello", "a line of exactly the limit is fine");

        let mut flood = b"5;".to_vec();
        flood.resize(1 << 20, b'x');
        let result = decode_counting(TRAILER_LIMIT, &flood, false);
        assert!(
            matches!(result, Err(RequestError::BodyFramingTooLarge(_))),
            "{result:?}"
        );
    }

    #[test]
    fn trailers_count_against_the_head_limit() {
        let mut big_field = b"0\r\nX: ".to_vec();
        big_field.resize(TRAILER_LIMIT + 10, b'a');
        big_field.extend_from_slice(b"\r\n\r\n");
        let mut many_lines = b"0\r\n".to_vec();
        for _ in 0..TRAILER_LIMIT {
            many_lines.extend_from_slice(b"a\r\n");
        }
        many_lines.extend_from_slice(b"\r\n");
        for input in [big_field, many_lines] {
            let result = decode_in_pieces(BodyDecoder::chunked(TRAILER_LIMIT), &input, 100);
            assert_eq!(result, Err(RequestError::TrailersTooLarge));
        }
    }

    #[test]
    fn framing_may_not_outgrow_its_data() {
        // One-byte chunks, each with a 4 KiB extension: little data, much framing.
        let mut ext = b"1;".to_vec();
        ext.resize(4000, b'e');
        let mut input = Vec::new();
        for _ in 0..100 {
            input.extend_from_slice(&ext);
            input.extend_from_slice(b"\r\nz\r\n");
        }
        let result = decode_in_pieces(BodyDecoder::chunked(TRAILER_LIMIT), &input, 4096);
        assert!(
            matches!(result, Err(RequestError::BodyFramingTooLarge(_))),
            "{result:?}"
        );
        // Ordinary framing of a large body stays well inside the allowance.
        let mut ordinary = Vec::new();
        for _ in 0..256 {
            ordinary.extend_from_slice(b"1000\r\n");
            ordinary.resize(ordinary.len() + 4096, b'd');
            ordinary.extend_from_slice(b"\r\n");
        }
        ordinary.extend_from_slice(b"0\r\n\r\n");
        let (body, _) =
            decode_in_pieces(BodyDecoder::chunked(TRAILER_LIMIT), &ordinary, 1000).unwrap();
        assert_eq!(body.len(), 1 << 20);
    }

    /// `chunks` chunks of one byte, each size line written `size_line`
    /// (`1`, `01`, `1;ext`...), then the last chunk.
    fn one_byte_chunks(chunks: usize, size_line: &str) -> Vec<u8> {
        let chunk = format!("{size_line}\r\nz\r\n");
        let mut input = chunk.repeat(chunks).into_bytes();
        input.extend_from_slice(b"0\r\n\r\n");
        input
    }

    /// Decodes `input` as a whole chunked body (trailers of up to
    /// `trailer_limit` bytes) into a sink that counts, with the response
    /// begun or not; the data bytes decoded.
    fn decode_counting(
        trailer_limit: usize,
        input: &[u8],
        response_begun: bool,
    ) -> Result<u64, RequestError> {
        let mut received = 0;
        let mut sink = BodySink {
            out: BodyOut::Discard,
            received: &mut received,
            limit: 1 << 20,
            response_begun,
        };
        let progress = BodyDecoder::chunked(trailer_limit).decode(input, &mut sink)?;
        assert!(progress.done && progress.consumed == input.len());
        Ok(received)
    }

    #[test]
    fn any_chunk_size_line_without_extensions_passes_the_framing_guard() {
        // 5, 6 and 19 framing bytes per data byte, far past 64 KiB of them.
        for size_line in ["1", "01", "000000000000001"] {
            let input = one_byte_chunks(100_000, size_line);
            assert_eq!(
                decode_counting(TRAILER_LIMIT, &input, false),
                Ok(100_000),
                "{size_line}"
            );
        }
    }

    #[test]
    fn extensions_that_dwarf_their_data_are_413_only_before_the_response() {
        let input = one_byte_chunks(10_000, &format!("1;x={}", "e".repeat(40)));
        assert!(matches!(
            decode_counting(TRAILER_LIMIT, &input, false),
            Err(RequestError::BodyFramingTooLarge(_))
        ));
        // Once an echo has begun, only a malformed body can end it.
        assert_eq!(decode_counting(TRAILER_LIMIT, &input, true), Ok(10_000));
    }

    #[test]
    fn trailers_are_weighed_against_the_head_limit_not_the_data() {
        let mut input = b"0\r\n".to_vec();
        for _ in 0..(FRAMING_ALLOWANCE / 64 + 10) {
            input.extend_from_slice(format!("X: {}\r\n", "t".repeat(59)).as_bytes());
        }
        input.extend_from_slice(b"\r\n");
        // 70 KiB of trailers, within a 1 MiB head limit.
        assert_eq!(decode_counting(1 << 20, &input, false), Ok(0));
    }

    #[test]
    fn streamed_data_comes_out_as_chunks() {
        let mut out = Vec::new();
        let mut received = 0;
        let mut sink = BodySink {
            out: BodyOut::Chunks(&mut out),
            received: &mut received,
            limit: 1 << 20,
            response_begun: false,
        };
        let mut decoder = BodyDecoder::Length { remaining: 20 };
        decoder.decode(b"0123456789", &mut sink).unwrap();
        decoder.decode(b"abcdefghij", &mut sink).unwrap();
        assert_eq!(out, b"a\r\n0123456789\r\na\r\nabcdefghij\r\n");
    }
}
