//! Request body framing (RFC 9112 §6–§7) as an explicit state machine:
//! bytes go in as they arrive, split anywhere; body bytes come out into a
//! sink (kept for the echo route, or only counted); the decoder says when
//! the body is complete so the next pipelined request starts at the right
//! byte. Chunk extensions are ignored and trailers read and discarded.

use super::RequestError;

/// Hex digits a chunk size may have before it is refused as an overflow.
const MAX_CHUNK_SIZE_DIGITS: u32 = 15;

/// Where decoded body bytes go.
pub struct BodySink<'a> {
    /// `Some` keeps the bytes (the echo route); `None` discards them.
    pub keep: Option<&'a mut Vec<u8>>,
    /// Bytes decoded so far, kept or not.
    pub received: &'a mut u64,
    pub limit: u64,
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
        if let Some(keep) = self.keep.as_deref_mut() {
            keep.extend_from_slice(bytes);
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
    /// Chunked transfer coding, at this point of its grammar.
    Chunked(Chunked),
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

impl BodyDecoder {
    pub fn chunked() -> Self {
        BodyDecoder::Chunked(Chunked::Size { size: 0, digits: 0 })
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
            BodyDecoder::Chunked(state) => decode_chunked(state, input, sink),
        }
    }
}

fn decode_chunked(
    state: &mut Chunked,
    input: &[u8],
    sink: &mut BodySink<'_>,
) -> Result<BodyProgress, RequestError> {
    let mut at = 0;
    while at < input.len() && *state != Chunked::Done {
        if let Chunked::Data { remaining } = state {
            let take = (input.len() - at).min(usize::try_from(*remaining).unwrap_or(usize::MAX));
            sink.take(&input[at..at + take])?;
            at += take;
            *remaining -= take as u64;
            if *remaining == 0 {
                *state = Chunked::DataCr;
            }
            continue;
        }
        *state = step(*state, input[at])?;
        at += 1;
        if let Chunked::Data { remaining } = *state {
            // Refuse a chunk over the limit at its size line, not after
            // waiting for (and reading) the bytes it announces.
            sink.announce(remaining)?;
        }
    }
    Ok(BodyProgress {
        consumed: at,
        done: *state == Chunked::Done,
    })
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
        Data { .. } | Done => unreachable!("handled by decode_chunked"),
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
                keep: Some(&mut body),
                received: &mut received,
                limit: 1 << 20,
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
            let (body, rest) = decode_in_pieces(BodyDecoder::chunked(), input, step).unwrap();
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
                decode_in_pieces(BodyDecoder::chunked(), bad, 64).is_err(),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn whitespace_after_the_size_is_tolerated() {
        let input = b"5 \r\nhello\r\n5\t ;x\r\nworld\r\n0\r\n\r\n";
        let (body, rest) = decode_in_pieces(BodyDecoder::chunked(), input, 1).unwrap();
        assert_eq!(body, b"helloworld");
        assert_eq!(rest, 0);
    }

    #[test]
    fn chunk_over_the_limit_is_413_at_its_size_line() {
        let mut received = 0;
        let mut sink = BodySink {
            keep: None,
            received: &mut received,
            limit: 3,
        };
        let result = BodyDecoder::chunked().decode(b"5\r\n", &mut sink);
        assert_eq!(result, Err(RequestError::BodyTooLarge));
    }

    #[test]
    fn body_over_the_limit_is_413() {
        let mut received = 0;
        let mut sink = BodySink {
            keep: None,
            received: &mut received,
            limit: 3,
        };
        let result = BodyDecoder::chunked().decode(b"5\r\nhello\r\n0\r\n\r\n", &mut sink);
        assert_eq!(result, Err(RequestError::BodyTooLarge));
    }
}
