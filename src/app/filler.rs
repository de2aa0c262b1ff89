//! The filler `/bytes/<n>` answers with: lines of `abc…xyzabc…k\n`. Each
//! worker keeps 1 MiB of it in an unnamed file ([`FillerFile`]) and sends
//! a body from there with `sendfile`, so the kernel copies from its own
//! pages and this process not at all; where no such file can be made, it
//! is written straight from one static block (a vectored write of slices
//! of it, as the socket takes them). Either way a body of any size costs
//! no memory per response.

use std::io::{self, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;

use rustix::fs::{MemfdFlags, Mode, OFlags, memfd_create, open, sendfile};

/// One line of filler, repeated.
const FILLER_LINE: usize = 64;
/// Filler per slice: 32 KiB, a whole number of lines, from any offset in
/// a line.
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

/// The most filler handed to one write: eight blocks (256 KiB).
pub const MAX_SLICES: usize = 8;

/// Fills `out` with slices of the one shared filler block that continue a
/// body of which `remaining` bytes are still owed, up to [`MAX_SLICES`]
/// blocks; returns how many slices it filled. Nothing is copied: every
/// slice points into the same static block. The filler is the same for
/// every body, so where a body stands in its line follows from how much of
/// it is left: the body ends on a full line, and every block but the last
/// is a whole number of lines, so each slice starts where the last ended.
pub fn slices<'a>(remaining: u64, out: &mut [std::io::IoSlice<'a>]) -> usize {
    let start = (FILLER_LINE - (remaining % FILLER_LINE as u64) as usize) % FILLER_LINE;
    let mut left = remaining;
    let mut filled = 0;
    while left > 0 && filled < out.len().min(MAX_SLICES) {
        let part = left.min(FILLER_BLOCK as u64) as usize;
        out[filled] = std::io::IoSlice::new(&FILLER[start..start + part]);
        left -= part as u64;
        filled += 1;
    }
    filled
}

/// Filler in the file: 1 MiB, a whole number of lines,
/// from any offset in a line.
const FILE_SPAN: usize = 32 * FILLER_BLOCK;

/// The filler as an unnamed file, made once per worker, so a generated
/// body goes to the socket with `sendfile`: the kernel copies from its own
/// pages, as nginx's `sendfile on` does from a file.
#[derive(Debug)]
pub struct FillerFile {
    fd: OwnedFd,
}

impl FillerFile {
    /// An unnamed file of filler in the temporary directory; see
    /// [`FillerFile::in_dir`].
    pub fn new() -> io::Result<FillerFile> {
        FillerFile::in_dir(&std::env::temp_dir())
    }

    /// An unnamed file holding 1 MiB of filler from any line offset: an
    /// `O_TMPFILE` in `dir`, or a memfd where that cannot be made. On a
    /// disk filesystem (ext4, xfs) the page cache holds the file in large
    /// folios, which a `sendfile` looks up a batch at a time; a memfd's
    /// pages (as a tmpfs's) are 4 KiB each, looked up one by one, 64 per
    /// 256 KiB: ~4.5 µs of a 256 KiB response's ~40 µs here.
    pub fn in_dir(dir: &Path) -> io::Result<FillerFile> {
        let fd = open(
            dir,
            OFlags::TMPFILE | OFlags::RDWR | OFlags::CLOEXEC,
            Mode::RUSR | Mode::WUSR,
        )
        .or_else(|_| memfd_create("keepalive-server-filler", MemfdFlags::CLOEXEC))?;
        let mut file = std::fs::File::from(fd);
        for _ in 0..FILE_SPAN / FILLER_BLOCK {
            file.write_all(&FILLER[..FILLER_BLOCK])?;
        }
        file.write_all(&FILLER[..FILLER_LINE])?;
        Ok(FillerFile { fd: file.into() })
    }

    /// Sends up to 1 MiB of the filler that continues a body of which
    /// `remaining` bytes are owed; returns how many went.
    pub fn send(&self, socket: impl AsFd, remaining: u64) -> io::Result<usize> {
        let start = (FILLER_LINE - (remaining % FILLER_LINE as u64) as usize) % FILLER_LINE;
        let mut offset = start as u64;
        let count = remaining.min(FILE_SPAN as u64) as usize;
        Ok(sendfile(socket, &self.fd, Some(&mut offset), count)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::IoSlice;

    /// The body of `n` bytes, taken `take` bytes at a time (as a socket
    /// that accepts only so much per write would).
    fn body(n: u64, take: usize) -> Vec<u8> {
        let mut all = Vec::new();
        let mut remaining = n;
        while remaining > 0 {
            let mut iov = [IoSlice::new(&[]); MAX_SLICES];
            let filled = slices(remaining, &mut iov);
            let bytes: Vec<u8> = iov[..filled]
                .iter()
                .flat_map(|s| s.iter().copied())
                .collect();
            assert!(bytes.len() as u64 <= remaining);
            let taken = bytes.len().min(take);
            all.extend_from_slice(&bytes[..taken]);
            remaining -= taken as u64;
        }
        all
    }

    #[test]
    fn a_body_ends_on_a_full_line_however_it_is_cut() {
        let whole = body(1000, usize::MAX);
        assert_eq!(whole.len(), 1000);
        assert!(
            whole.ends_with(b"abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijk\n")
        );
        assert_eq!(body(1000, 7), whole);
        let big = body(1_000_000, usize::MAX);
        assert_eq!(big.len(), 1_000_000);
        assert_eq!(body(1_000_000, 3 * FILLER_BLOCK + 5), big);
        assert_eq!(body(100_000, 1000), body(100_000, 99_999));
    }

    /// What `file` sends for bodies of several sizes is what the slices
    /// hold.
    fn sends_what_the_slices_hold(file: &FillerFile) {
        use std::io::Read;
        let (a, mut b) = std::os::unix::net::UnixStream::pair().unwrap();
        // What the socket takes at once, as a connection's non-blocking one.
        a.set_nonblocking(true).unwrap();
        for remaining in [1000u64, 64 * 1000 + 17, 3 << 20] {
            let sent = file.send(&a, remaining).unwrap();
            assert!(sent > 0, "{remaining}");
            let mut got = vec![0; sent];
            b.read_exact(&mut got).unwrap();
            let want = &body(remaining, usize::MAX)[..sent];
            assert_eq!(got, want, "{remaining}");
        }
    }

    #[test]
    fn the_filler_file_sends_what_the_slices_hold() {
        sends_what_the_slices_hold(&FillerFile::new().unwrap());
    }

    #[test]
    fn without_a_usable_directory_the_filler_is_a_memfd() {
        use std::os::fd::AsRawFd;
        let file = FillerFile::in_dir(Path::new("/nonexistent/keepalive-server")).unwrap();
        let target = std::fs::read_link(format!("/proc/self/fd/{}", file.fd.as_raw_fd())).unwrap();
        assert!(
            target.to_string_lossy().starts_with("/memfd:"),
            "{target:?}"
        );
        sends_what_the_slices_hold(&file);
    }
}
