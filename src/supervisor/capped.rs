//! The agent's stdout on disk (`stageN.jsonl`), bounded: at most `cap` bytes, its head and its
//! tail, with one marker line where the middle was cut — a chatty agent can no longer fill a
//! small `/tmp` and wedge every later run.
//!
//! The one decision a reader must know: memory stays bounded too. The head (half the cap) goes
//! straight into the file; after it, the stream is written to two tail segments beside it
//! (`stageN.jsonl.tail0`/`.tail1`, a quarter of the cap each), the older dropped whenever the
//! newer is full. [`CappedFile::finish`] appends the marker and the surviving tail (from its
//! first whole line) to the file and removes the segments. A kern killed mid-stream leaves the
//! head in place and the segments beside it, which the next iteration clears.

use std::fs::{self, File};
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

const BUFFER: usize = 256 * 1024;

/// A stream file with a size cap.
pub(crate) struct CappedFile {
    path: PathBuf,
    head: BufWriter<File>,
    head_left: u64,
    segment_cap: u64,
    /// The current tail segment (index 0 or 1) and how much it holds.
    tail: Option<(usize, BufWriter<File>, u64)>,
    /// Bytes dropped with older tail segments.
    dropped: u64,
    /// Bytes written after the head, in the segments still on disk.
    in_tail: [u64; 2],
}

impl CappedFile {
    /// Creates (or truncates) `path`, keeping at most `cap` bytes of what is written.
    pub(crate) fn create(path: &Path, cap: u64) -> io::Result<CappedFile> {
        for i in 0..2 {
            let _ = fs::remove_file(segment(path, i));
        }
        Ok(CappedFile {
            path: path.to_path_buf(),
            head: BufWriter::with_capacity(BUFFER, crate::private_file::create(path)?),
            head_left: cap / 2,
            segment_cap: (cap / 4).max(1),
            tail: None,
            dropped: 0,
            in_tail: [0, 0],
        })
    }

    /// Appends `bytes`.
    pub(crate) fn write_all(&mut self, mut bytes: &[u8]) -> io::Result<()> {
        if self.head_left > 0 {
            let take = usize::try_from(self.head_left)
                .unwrap_or(usize::MAX)
                .min(bytes.len());
            self.head.write_all(&bytes[..take])?;
            self.head_left -= take as u64;
            bytes = &bytes[take..];
        }
        let segment_cap = self.segment_cap;
        while !bytes.is_empty() {
            if !matches!(&self.tail, Some(t) if t.2 < segment_cap) {
                self.next_segment()?;
            }
            let Some((index, file, used)) = &mut self.tail else {
                break;
            };
            let take = usize::try_from(segment_cap - *used)
                .unwrap_or(usize::MAX)
                .min(bytes.len());
            file.write_all(&bytes[..take])?;
            *used += take as u64;
            self.in_tail[*index] += take as u64;
            bytes = &bytes[take..];
        }
        Ok(())
    }

    /// Flushes what is buffered, so a reader (`tail -f`) or a crash sees it.
    pub(crate) fn flush(&mut self) -> io::Result<()> {
        self.head.flush()?;
        if let Some((_, file, _)) = &mut self.tail {
            file.flush()?;
        }
        Ok(())
    }

    /// Puts the kept tail after the head, with a marker line saying how much was cut.
    pub(crate) fn finish(mut self) -> io::Result<()> {
        self.flush()?;
        let Some((current, tail, _)) = self.tail.take() else {
            return Ok(());
        };
        drop(tail);
        let older = 1 - current;
        let mut order = Vec::new();
        if self.in_tail[older] > 0 {
            order.push(older);
        }
        order.push(current);
        // The kept tail starts at its first whole line.
        let mut first = Vec::new();
        crate::private_file::open(&segment(&self.path, order[0]))?.read_to_end(&mut first)?;
        let skip = first
            .iter()
            .position(|&b| b == b'\n')
            .map_or(first.len(), |i| i + 1);
        let cut = self.dropped + skip as u64;
        writeln!(
            self.head,
            "\n{{\"type\":\"kern\",\"subtype\":\"cut\",\"bytes_cut\":{cut},\"note\":\"kern keeps the head and the tail of a stream this long\"}}"
        )?;
        self.head.write_all(&first[skip..])?;
        drop(first);
        for &i in &order[1..] {
            io::copy(
                &mut crate::private_file::open(&segment(&self.path, i))?,
                &mut self.head,
            )?;
        }
        self.head.flush()?;
        for i in 0..2 {
            let _ = fs::remove_file(segment(&self.path, i));
        }
        Ok(())
    }

    /// Starts the next tail segment, dropping the older one when both are in use.
    fn next_segment(&mut self) -> io::Result<()> {
        let index = match &self.tail {
            None => 0,
            Some((i, _, _)) => 1 - *i,
        };
        if let Some((_, file, _)) = &mut self.tail {
            file.flush()?;
        }
        self.dropped += self.in_tail[index];
        self.in_tail[index] = 0;
        let file = BufWriter::with_capacity(
            BUFFER,
            crate::private_file::create(&segment(&self.path, index))?,
        );
        self.tail = Some((index, file, 0));
        Ok(())
    }
}

/// `<path>.tail0` or `<path>.tail1`.
pub(crate) fn segment(path: &Path, index: usize) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".tail{index}"));
    PathBuf::from(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(n: usize) -> Vec<u8> {
        (0..n)
            .flat_map(|i| format!("{{\"line\":{i:06}}}\n").into_bytes())
            .collect()
    }

    #[test]
    fn short_streams_are_kept_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("stage2.jsonl");
        let mut f = CappedFile::create(&path, 1000).unwrap();
        f.write_all(b"{\"a\":1}\n{\"b\":2}").unwrap();
        f.finish().unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"{\"a\":1}\n{\"b\":2}");
    }

    #[test]
    fn long_streams_keep_head_and_tail_within_the_cap_with_a_marker() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("stage2.jsonl");
        let data = lines(10_000); // 160,000 bytes
        let cap = 16_000;
        let mut f = CappedFile::create(&path, cap).unwrap();
        for chunk in data.chunks(777) {
            f.write_all(chunk).unwrap();
        }
        f.finish().unwrap();
        let kept = fs::read(&path).unwrap();
        assert!(kept.len() as u64 <= cap + 200, "{} bytes", kept.len());
        assert!(!segment(&path, 0).exists() && !segment(&path, 1).exists());
        assert!(kept.starts_with(&data[..8000]), "the head is kept");
        assert!(
            kept.ends_with(&data[data.len() - 4000..]),
            "the tail is kept"
        );
        let text = String::from_utf8(kept).unwrap();
        let marker = text
            .lines()
            .find(|l| l.contains("\"subtype\":\"cut\""))
            .unwrap();
        let v: serde_json::Value = serde_json::from_str(marker).unwrap();
        let cut = v["bytes_cut"].as_u64().unwrap();
        let body = text.len() - marker.len() - 2;
        assert_eq!(
            body as u64 + cut,
            data.len() as u64,
            "every byte is kept or counted"
        );
        // Whole lines after the marker.
        let after = text.split_once(marker).unwrap().1.trim_start_matches('\n');
        assert!(after.starts_with("{\"line\":"), "{}", &after[..40]);
    }
}
