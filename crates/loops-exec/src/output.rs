//! Bounded capture of a child's stdout or stderr (SPEC §5.7 "Capture",
//! §9 items 22 and 23).
//!
//! A [`Capture`] is one stream: its pipe while it is open, read whenever the
//! supervisor's poll says it is ready, and the [`TailBuffer`] it fills.
//!
//! A [`TailBuffer`] keeps the last `cap` *bytes* a stream produced in a ring
//! buffer, so the runner's memory stays bounded however much a child prints,
//! and counts every byte it dropped. The bytes are decoded as UTF-8 once, at
//! the end, so a character split across two pipe reads is still whole.
//!
//! Fixed on purpose:
//! - the original counted bytes but cut by characters, and its marker
//!   reported only the last overflow (§9 item 22): here the marker
//!   `[truncated <n> bytes]\n` carries the total number of bytes dropped;
//! - the original decoded each chunk on its own (§9 item 23): here a cut that
//!   lands inside a multi-byte character also drops that character's
//!   leftover continuation bytes, and counts them as dropped.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsFd, OwnedFd};

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};

/// The default per-stream cap: 256 KiB.
pub const DEFAULT_MAX_OUTPUT_BYTES: usize = 262_144;

/// The last `cap` bytes of a stream and how many bytes came before them.
#[derive(Debug)]
pub(crate) struct TailBuffer {
    cap: usize,
    kept: VecDeque<u8>,
    dropped: u64,
}

impl TailBuffer {
    pub(crate) fn new(cap: usize) -> TailBuffer {
        TailBuffer {
            cap,
            // Grows with the output; a quiet child costs nothing up front.
            kept: VecDeque::new(),
            dropped: 0,
        }
    }

    /// Appends a chunk, dropping the oldest bytes beyond the cap.
    pub(crate) fn push(&mut self, chunk: &[u8]) {
        if chunk.len() >= self.cap {
            self.dropped += (self.kept.len() + chunk.len() - self.cap) as u64;
            self.kept.clear();
            self.kept.extend(&chunk[chunk.len() - self.cap..]);
            return;
        }
        let overflow = (self.kept.len() + chunk.len()).saturating_sub(self.cap);
        if overflow > 0 {
            self.kept.drain(..overflow);
            self.dropped += overflow as u64;
        }
        self.kept.extend(chunk);
    }

    /// The captured text: the kept tail decoded as UTF-8 (lossily), after
    /// `[truncated <n> bytes]\n` when anything was dropped.
    pub(crate) fn finish(mut self) -> String {
        let bytes = self.kept.make_contiguous();
        let mut start = 0;
        if self.dropped > 0 {
            // The cut may have landed inside a character: its remaining
            // continuation bytes (at most 3) cannot be decoded on their own.
            while start < bytes.len().min(3) && is_continuation(bytes[start]) {
                start += 1;
            }
        }
        let dropped = self.dropped + start as u64;
        let text = String::from_utf8_lossy(&bytes[start..]);
        if dropped > 0 {
            format!("[truncated {dropped} bytes]\n{text}")
        } else {
            text.into_owned()
        }
    }
}

/// One captured stream: the pipe while it is open, and the kept tail.
pub(crate) struct Capture {
    pub(crate) pipe: Option<File>,
    pub(crate) buf: TailBuffer,
}

impl Capture {
    pub(crate) fn new(fd: Option<OwnedFd>, cap: usize) -> Capture {
        Capture {
            pipe: fd.map(File::from),
            buf: TailBuffer::new(cap),
        }
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.pipe.is_none()
    }

    /// Reads once; closes the pipe at EOF. Only called when poll says the
    /// pipe is readable (or hung up), so the read does not block. Returns
    /// how many bytes it read into `buf` (and kept), for the run's log.
    pub(crate) fn read_once(&mut self, buf: &mut [u8]) -> usize {
        let Some(pipe) = &mut self.pipe else {
            return 0;
        };
        match pipe.read(buf) {
            Ok(0) => self.pipe = None,
            Ok(n) => {
                self.buf.push(&buf[..n]);
                return n;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => self.pipe = None,
        }
        0
    }

    /// Reads what is already in the pipe, without waiting for more, and
    /// hands each chunk to `seen`. Bounded, because a writer outside the
    /// group may still be writing.
    pub(crate) fn drain_available(&mut self, buf: &mut [u8], seen: &mut dyn FnMut(&[u8])) {
        for _ in 0..64 {
            let Some(pipe) = &self.pipe else {
                return;
            };
            let mut fds = [PollFd::new(pipe.as_fd(), PollFlags::POLLIN)];
            let ready = matches!(poll(&mut fds, PollTimeout::ZERO), Ok(n) if n > 0);
            if !ready {
                return;
            }
            let n = self.read_once(buf);
            seen(&buf[..n]);
        }
    }
}

fn is_continuation(byte: u8) -> bool {
    byte & 0b1100_0000 == 0b1000_0000
}

#[cfg(test)]
mod tests {
    use super::*;

    fn capture(cap: usize, chunks: &[&[u8]]) -> String {
        let mut buf = TailBuffer::new(cap);
        for chunk in chunks {
            buf.push(chunk);
        }
        buf.finish()
    }

    #[test]
    fn small_output_is_untouched() {
        assert_eq!(capture(10, &[b"hel", b"lo"]), "hello");
        assert_eq!(capture(5, &[b"hello"]), "hello");
        assert_eq!(capture(5, &[]), "");
    }

    #[test]
    fn the_marker_counts_every_dropped_byte() {
        // Three overflows of 2, 3 and 10 bytes: the original reported only the last.
        assert_eq!(
            capture(4, &[b"abcdef", b"ghi", b"0123456789"]),
            "[truncated 15 bytes]\n6789"
        );
        assert_eq!(
            capture(4, &[b"ab", b"cd", b"ef"]),
            "[truncated 2 bytes]\ncdef"
        );
    }

    #[test]
    fn a_character_split_across_chunks_decodes_whole() {
        let e = "é".as_bytes();
        assert_eq!(capture(16, &[b"a", &e[..1], &e[1..], b"b"]), "aéb");
        let euro = "€".as_bytes();
        assert_eq!(capture(16, &[&euro[..1], &euro[1..2], &euro[2..]]), "€");
    }

    #[test]
    fn a_cut_inside_a_character_drops_its_tail_bytes() {
        // "aéééé" is 9 bytes: `a`, then four 2-byte characters.
        let text = "aéééé".as_bytes();
        // A cap of 6 cuts between characters: nothing extra is dropped.
        assert_eq!(capture(6, &[text]), "[truncated 3 bytes]\nééé");
        // Caps of 7 and 5 cut inside a character: its second byte goes too.
        assert_eq!(capture(7, &[text]), "[truncated 3 bytes]\nééé");
        assert_eq!(
            capture(5, &[&text[..4], &text[4..]]),
            "[truncated 5 bytes]\néé"
        );
        // A 4-byte character cut after its first byte leaves 3 continuation bytes.
        let crab = "x🦀y".as_bytes();
        assert_eq!(capture(4, &[crab]), "[truncated 5 bytes]\ny");
    }

    #[test]
    fn a_zero_cap_keeps_only_the_marker() {
        assert_eq!(capture(0, &[b"abc", b"d"]), "[truncated 4 bytes]\n");
    }

    #[test]
    fn memory_stays_bounded() {
        let mut buf = TailBuffer::new(8);
        for _ in 0..10_000 {
            buf.push(&[b'x'; 1000]);
            assert!(buf.kept.len() <= 8);
        }
        assert!(buf.finish().starts_with("[truncated 9999992 bytes]\n"));
    }
}
