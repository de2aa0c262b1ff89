//! The filler `/bytes/<n>` answers with: lines of `abc…xyzabc…k\n`,
//! generated into the output as it drains, so a body of any size costs no
//! more memory than the output's high-water mark.

/// One line of filler, repeated.
const FILLER_LINE: usize = 64;
/// Filler written per copy: a whole output high-water mark (32 KiB) from
/// any offset in a line, in one copy.
const FILLER_BLOCK: usize = 32 * 1024;
/// Filler lines, enough for [`FILLER_BLOCK`] from any offset in a line.
static FILLER: [u8; FILLER_BLOCK + FILLER_LINE] = filler();

const fn filler() -> [u8; FILLER_BLOCK + FILLER_LINE] {
    let mut bytes = [0; FILLER_BLOCK + FILLER_LINE];
    let mut i = 0;
    while i < bytes.len() {
        let column = i % FILLER_LINE;
        bytes[i] = if column == FILLER_LINE - 1 {
            b'\n'
        } else {
            b'a' + (column % 26) as u8
        };
        i += 1;
    }
    bytes
}

/// Appends filler to `out` until it holds `high_water` bytes, continuing
/// a body of which `remaining` bytes are still owed; returns what is still
/// owed. The filler is the same for every body, so where a body stands in
/// its line follows from how much of it is left: the body ends on a full
/// line.
pub fn generate(mut remaining: u64, out: &mut Vec<u8>, high_water: usize) -> u64 {
    let room = high_water.saturating_sub(out.len()) as u64;
    let mut take = remaining.min(room) as usize;
    while take > 0 {
        let part = take.min(FILLER_BLOCK);
        let start = (FILLER_LINE - (remaining % FILLER_LINE as u64) as usize) % FILLER_LINE;
        out.extend_from_slice(&FILLER[start..start + part]);
        remaining -= part as u64;
        take -= part;
    }
    remaining
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The body of `n` bytes, generated with at most `high_water` queued.
    fn body(n: u64, high_water: usize) -> Vec<u8> {
        let mut all = Vec::new();
        let mut out = Vec::new();
        let mut remaining = n;
        while remaining > 0 {
            remaining = generate(remaining, &mut out, high_water);
            assert!(out.len() <= high_water);
            all.append(&mut out);
        }
        all
    }

    #[test]
    fn a_body_ends_on_a_full_line_however_it_is_cut() {
        let whole = body(1000, 1 << 20);
        assert_eq!(whole.len(), 1000);
        assert!(
            whole.ends_with(b"abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijk\n")
        );
        assert_eq!(body(1000, 7), whole);
        assert_eq!(body(100_000, 3 * FILLER_BLOCK + 5), body(100_000, 1000));
    }
}
