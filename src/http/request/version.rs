//! HTTP-version work-arounds around httparse (RFC 9112 §2.3, §2.6).
//!
//! httparse accepts only `HTTP/1.0` and `HTTP/1.1` and refuses anything
//! else with one error. Two distinctions it does not make are made here:
//! `HTTP/1.x` with x > 1 is read as HTTP/1.1 (by rewriting the digit in
//! place and parsing again), and another major version by the grammar
//! (`HTTP/2.0`) is 505 where a malformed version is 400; until the request
//! line has ended, a version that could still become one of these waits
//! for more bytes, however the bytes split.

use super::leading_empty_lines;

/// Whether the third part of the request line (after `method SP target SP`)
/// is an HTTP-version by the grammar, `HTTP/` DIGIT `.` DIGIT (RFC 9112
/// §2.3), with a major version other than 1: only that is a version this
/// server does not support (505). Anything else there (`HTTP/01.1`,
/// `HTTP/1.77`, `http/1.1`, a space inside the target) is an invalid
/// request-line (400, RFC 9112 §3).
pub(super) fn names_another_major_version(input: &[u8]) -> bool {
    let version = version_token(input);
    let version = version.strip_suffix(b"\r").unwrap_or(version);
    version.len() == VERSION_SHAPE.len() && fits_version_shape(version) && version[5] != b'1'
}

/// `HTTP/` DIGIT `.` DIGIT, with `#` standing for a digit.
const VERSION_SHAPE: &[u8; 8] = b"HTTP/#.#";

/// Whether `bytes` could begin an HTTP-version.
fn fits_version_shape(bytes: &[u8]) -> bool {
    bytes.len() <= VERSION_SHAPE.len()
        && bytes
            .iter()
            .zip(VERSION_SHAPE)
            .all(|(&b, &shape)| match shape {
                b'#' => b.is_ascii_digit(),
                _ => b == shape,
            })
}

/// Whether the request line has not ended and what it has of a version
/// could still become a whole one.
pub(super) fn version_incomplete(input: &[u8]) -> bool {
    let line = &input[leading_empty_lines(input)..];
    if line.contains(&b'\n') {
        return false;
    }
    let version = version_token(line);
    match version.strip_suffix(b"\r") {
        Some(whole) => whole.len() == VERSION_SHAPE.len() && fits_version_shape(whole),
        None => fits_version_shape(version),
    }
}

/// The third part of the request line (after `method SP target SP`), up
/// to its LF.
fn version_token(input: &[u8]) -> &[u8] {
    let start = leading_empty_lines(input);
    let line = input[start..]
        .split(|&b| b == b'\n')
        .next()
        .unwrap_or_default();
    line.splitn(3, |&b| b == b' ').nth(2).unwrap_or_default()
}

/// Rewrites `HTTP/1.x` (x > 1) in the request line to `HTTP/1.1`, so a
/// later minor version is served as 1.1. Returns whether it did.
pub(super) fn patch_later_minor_version(input: &mut [u8]) -> bool {
    let start = input
        .iter()
        .take_while(|b| matches!(b, b'\r' | b'\n'))
        .count();
    let Some(line_len) = input[start..].iter().position(|&b| b == b'\n') else {
        return false;
    };
    let line_end = start + line_len;
    let line = &input[start..line_end];
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let later_minor = ends_in_later_minor_version(line);
    if later_minor {
        let digit_at = start + line.len() - 1;
        input[digit_at] = b'1';
    }
    later_minor
}

/// Whether the request line (ended or not) ends in ` HTTP/1.x`, x > 1.
pub(super) fn names_later_minor_version(input: &[u8]) -> bool {
    let line = &input[leading_empty_lines(input)..];
    let line = line.split(|&b| b == b'\n').next().unwrap_or_default();
    ends_in_later_minor_version(line.strip_suffix(b"\r").unwrap_or(line))
}

/// Whether the request line has not ended yet (no LF) and so far ends in
/// ` HTTP/1.x` (x > 1), perhaps with its CR.
pub(super) fn later_minor_version_line_incomplete(input: &[u8]) -> bool {
    let start = input
        .iter()
        .take_while(|b| matches!(b, b'\r' | b'\n'))
        .count();
    let line = &input[start..];
    if line.contains(&b'\n') {
        return false;
    }
    ends_in_later_minor_version(line.strip_suffix(b"\r").unwrap_or(line))
}

/// Whether `line` ends in ` HTTP/1.x` with a single digit x > 1.
fn ends_in_later_minor_version(line: &[u8]) -> bool {
    let Some(version) = line.len().checked_sub(9).map(|at| &line[at..]) else {
        return false;
    };
    version.starts_with(b" HTTP/1.") && version[8].is_ascii_digit() && version[8] > b'1'
}
