//! The two streams an agent's output is read through with bounded memory: stdout split into
//! lines for the caller's callback, stderr reduced to its last bytes.
//!
//! The one decision a reader must know: **memory is capped, never the line count**. A stdout
//! line longer than its cap reaches the callback cut to its first `cap` bytes (the stage file
//! keeps it whole), every line still arrives, and a last line without a newline is handed over
//! at the end; the stderr tail holds at most twice its cap while reading and drops a UTF-8
//! character the cut broke.

use super::READ_CHUNK;

/// Splits a byte stream into lines, holding at most `cap` bytes of an unfinished line.
pub(super) struct LineSplitter {
    partial: Vec<u8>,
    cap: usize,
}

impl LineSplitter {
    pub(super) fn new(cap: usize) -> LineSplitter {
        LineSplitter {
            partial: Vec::new(),
            cap,
        }
    }

    /// Hands every line completed by `chunk` to `emit` (without `\n` or `\r\n`), cut to `cap`.
    pub(super) fn feed(&mut self, mut chunk: &[u8], emit: &mut dyn FnMut(&[u8])) {
        while let Some(i) = chunk.iter().position(|&b| b == b'\n') {
            let line = &chunk[..i];
            if self.partial.is_empty() {
                emit(strip_cr(&line[..line.len().min(self.cap)]));
            } else {
                self.keep(line);
                emit(strip_cr(&self.partial));
                self.partial.clear();
            }
            chunk = &chunk[i + 1..];
        }
        self.keep(chunk);
    }

    /// Hands over a last line that had no newline.
    pub(super) fn finish(&mut self, emit: &mut dyn FnMut(&[u8])) {
        if !self.partial.is_empty() {
            emit(strip_cr(&self.partial));
            self.partial.clear();
        }
    }

    fn keep(&mut self, bytes: &[u8]) {
        let room = self.cap.saturating_sub(self.partial.len());
        self.partial
            .extend_from_slice(&bytes[..bytes.len().min(room)]);
    }
}

fn strip_cr(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// The last `cap` bytes of a stream.
pub(super) struct Tail {
    bytes: Vec<u8>,
    cap: usize,
}

impl Tail {
    pub(super) fn new(cap: usize) -> Tail {
        Tail {
            bytes: Vec::new(),
            cap,
        }
    }

    pub(super) fn push(&mut self, chunk: &[u8]) {
        self.bytes.extend_from_slice(chunk);
        // Trim only once the buffer holds twice the cap, so trimming stays amortised O(1).
        if self.bytes.len() > self.cap.saturating_mul(2).max(READ_CHUNK) {
            let cut = self.bytes.len() - self.cap;
            self.bytes.drain(..cut);
        }
    }

    /// The kept tail; when it was cut inside a UTF-8 character, the broken start is dropped.
    pub(super) fn into_bytes(mut self) -> Vec<u8> {
        if self.bytes.len() > self.cap {
            let mut cut = self.bytes.len() - self.cap;
            while cut < self.bytes.len() && cut > 0 && (self.bytes[cut] & 0xC0) == 0x80 {
                cut += 1;
            }
            self.bytes.drain(..cut);
        }
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A table row: a cap, the chunks fed in, and what comes out.
    type Case<Out> = (usize, Vec<&'static [u8]>, Out);

    fn split(cap: usize, chunks: &[&[u8]]) -> Vec<Vec<u8>> {
        let mut splitter = LineSplitter::new(cap);
        let mut lines = Vec::new();
        for chunk in chunks {
            splitter.feed(chunk, &mut |line| lines.push(line.to_vec()));
        }
        splitter.finish(&mut |line| lines.push(line.to_vec()));
        lines
    }

    #[test]
    fn lines_are_split_across_chunks_and_capped() {
        let cases: Vec<Case<Vec<&[u8]>>> = vec![
            (100, vec![b"a\nb\n"], vec![b"a", b"b"]),
            (100, vec![b"ab", b"c\nd"], vec![b"abc", b"d"]),
            (100, vec![b"a\r\n", b"\n"], vec![b"a", b""]),
            (3, vec![b"abcdef\n", b"gh"], vec![b"abc", b"gh"]),
            (3, vec![b"ab", b"cdef", b"g\nxy\n"], vec![b"abc", b"xy"]),
            (100, vec![b"", b"x"], vec![b"x"]),
            (100, vec![b"\n\n"], vec![b"", b""]),
        ];
        for (cap, chunks, expected) in cases {
            let expected: Vec<Vec<u8>> = expected.iter().map(|l| l.to_vec()).collect();
            assert_eq!(split(cap, &chunks), expected, "{chunks:?}");
        }
    }

    #[test]
    fn the_tail_keeps_the_last_bytes_and_drops_a_broken_character() {
        let cases: Vec<Case<&[u8]>> = vec![
            (4, vec![b"abcdef"], b"cdef"),
            (10, vec![b"abc", b"def"], b"abcdef"),
            (0, vec![b"abc"], b""),
            (3, vec!["xé".as_bytes(), b"ab"], b"ab"),
            (4, vec!["xé".as_bytes(), b"ab"], "éab".as_bytes()),
        ];
        for (cap, chunks, expected) in cases {
            let mut tail = Tail::new(cap);
            for chunk in &chunks {
                tail.push(chunk);
            }
            assert_eq!(tail.into_bytes(), expected.to_vec(), "{chunks:?} cap {cap}");
        }
    }

    #[test]
    fn a_long_stream_keeps_only_a_bounded_tail() {
        let mut tail = Tail::new(10);
        for i in 0..100_000u32 {
            tail.push(format!("{i:08}\n").as_bytes());
            assert!(tail.bytes.len() <= 2 * READ_CHUNK);
        }
        assert_eq!(tail.into_bytes(), b"\n00099999\n".to_vec());
    }
}
