//! `parse_head` and `BodyDecoder` on their own: no panic, results that
//! respect the limits, and the same answer however the bytes are split
//! (a head that parses whole must be "incomplete" at every shorter prefix,
//! and a body decodes alike in one piece or byte by byte).
//!
//! Input layout: byte 0 picks the limits (bits 0-1 max header size, 2-3
//! max body size, 5-6 max header fields) and bit 4 also decodes the rest
//! as a bare chunked body;
//! byte 1 seeds the split of the body; the rest is the request bytes.

#![no_main]

use keepalive_server::http::body::{BodyOut, BodySink};
use keepalive_server::http::{BodyDecoder, Framing, HeadLimits, RequestError, parse_head};
use libfuzzer_sys::fuzz_target;

type Decoded = Result<(usize, bool, Vec<u8>), RequestError>;

/// Decodes `input` handing the decoder pieces of the sizes `sizes` cycles
/// through, keeping unconsumed bytes for the next call as a connection does.
fn decode(mut decoder: BodyDecoder, input: &[u8], sizes: &[usize], limit: u64) -> Decoded {
    let mut body = Vec::new();
    let mut received = 0u64;
    let mut buffered: Vec<u8> = Vec::new();
    let mut consumed = 0;
    let mut offered = 0;
    let mut sizes = sizes.iter().cycle();
    loop {
        let size = *sizes.next().unwrap_or(&usize::MAX);
        let take = size.min(input.len() - offered);
        buffered.extend_from_slice(&input[offered..offered + take]);
        offered += take;
        let mut sink = BodySink {
            out: BodyOut::Raw(&mut body),
            received: &mut received,
            limit,
            response_begun: false,
        };
        let progress = decoder.decode(&buffered, &mut sink)?;
        assert!(progress.consumed <= buffered.len());
        buffered.drain(..progress.consumed);
        consumed += progress.consumed;
        if progress.done {
            return Ok((consumed, true, body));
        }
        assert!(
            buffered.is_empty(),
            "an unfinished body left input unconsumed"
        );
        if offered == input.len() {
            return Ok((consumed, false, body));
        }
    }
}

/// The same body, whole, byte by byte, and in pieces from `seed`.
fn check_body(decoder: BodyDecoder, input: &[u8], seed: u8, limit: u64) {
    let whole = decode(decoder, input, &[usize::MAX], limit);
    if let Ok((consumed, done, body)) = &whole {
        assert!(*consumed <= input.len());
        assert!(body.len() as u64 <= limit);
        if let BodyDecoder::Length { remaining } = decoder {
            assert_eq!(*done, *consumed as u64 == remaining);
            assert_eq!(body, &input[..*consumed]);
        }
    }
    let pieces = [
        vec![1],
        vec![usize::from(seed % 7) + 1, usize::from(seed / 7 % 13) + 1, 2],
    ];
    for sizes in pieces {
        let split = decode(decoder, input, &sizes, limit);
        match (&whole, &split) {
            (Ok(a), Ok(b)) => assert_eq!(a, b, "split {sizes:?} changed the body"),
            // What was kept before the error may differ; the error may not.
            (Err(a), Err(b)) => assert_eq!(a, b, "split {sizes:?} changed the error"),
            _ => panic!("split {sizes:?}: whole {whole:?}, split {split:?}"),
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let [limits, seed, input @ ..] = data else {
        return;
    };
    let max_header = [16 * 1024, 64, 300, 2048][usize::from(limits & 3)];
    let max_body = [1 << 20, 0, 10, 200][usize::from(limits >> 2 & 3)];
    let max_fields = [2000, 0, 3, 65][usize::from(limits >> 5 & 3)];
    let head_limits = HeadLimits {
        head_size: max_header,
        header_fields: max_fields,
        body_size: max_body,
    };

    let mut bytes = input.to_vec();
    let result = parse_head(&mut bytes, head_limits);
    match result {
        Ok(Some((head, len))) => {
            assert!(
                len <= input.len() && len <= max_header,
                "head of {len} bytes"
            );
            assert!(head.minor_version <= 1);
            assert!(!head.expect_continue || head.minor_version == 1);
            match head.framing {
                Framing::Length(n) => assert!(n > 0 && n <= max_body as u64),
                Framing::Chunked => assert_eq!(head.minor_version, 1),
                Framing::None => {}
            }
            // The head alone parses the same.
            let mut alone = input[..len].to_vec();
            assert_eq!(parse_head(&mut alone, head_limits), result);
            // Every shorter prefix is only incomplete: a connection may
            // receive the head cut anywhere.
            for cut in 0..len {
                let mut prefix = input[..cut].to_vec();
                let partial = parse_head(&mut prefix, head_limits);
                assert_eq!(
                    partial,
                    Ok(None),
                    "prefix of {cut} bytes of a {len}-byte head: {:?}",
                    String::from_utf8_lossy(&input[..cut])
                );
            }
            let decoder = match head.framing {
                Framing::None => None,
                Framing::Length(remaining) => Some(BodyDecoder::Length { remaining }),
                Framing::Chunked => Some(BodyDecoder::chunked(max_header)),
            };
            if let Some(decoder) = decoder {
                check_body(decoder, &input[len..], *seed, max_body as u64);
            }
        }
        Ok(None) => assert!(input.len() < max_header, "incomplete past the limit"),
        Err(_) => {
            // More bytes never make a refused head acceptable.
            for more in [&b"\r\n\r\n"[..], b"\n\n", b"Host: a\r\n\r\n"] {
                let mut longer = [input, more].concat();
                assert!(
                    parse_head(&mut longer, head_limits).is_err(),
                    "refused, then accepted with {more:?} appended"
                );
            }
        }
    }
    if limits & 0x10 != 0 {
        check_body(BodyDecoder::chunked(max_header), input, *seed, max_body as u64);
    }
});
