//! The line index of a text: where each line starts, so that a byte offset becomes a line, a
//! column or the bounds of its line in a binary search. The parser builds it once and the
//! document keeps it, so every position kern reports and every splice it makes agree on lines.

/// Where each line of a text starts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct LineIndex {
    starts: Vec<usize>,
    len: usize,
}

impl LineIndex {
    /// The index of `text`'s lines.
    pub(crate) fn new(text: &str) -> LineIndex {
        let mut starts = vec![0];
        // Line indexing dominates parse time on big files: one pass over the bytes.
        starts.extend(
            text.bytes()
                .enumerate()
                .filter(|&(_, b)| b == b'\n')
                .map(|(i, _)| i + 1),
        );
        LineIndex {
            starts,
            len: text.len(),
        }
    }

    /// The start of every line, in order.
    pub(crate) fn starts(&self) -> &[usize] {
        &self.starts
    }

    /// The 1-based line holding `offset`.
    pub(crate) fn line_of(&self, offset: usize) -> usize {
        self.starts.partition_point(|&s| s <= offset)
    }

    /// The offset of the start of line `line` (1-based).
    pub(crate) fn start_of_line(&self, line: usize) -> usize {
        self.starts[line - 1]
    }

    /// The offset of the start of the line holding `offset`.
    pub(crate) fn line_start(&self, offset: usize) -> usize {
        self.start_of_line(self.line_of(offset))
    }

    /// Just past the line ending of the line holding `offset` (the text's end for a last line
    /// without one).
    pub(crate) fn next_line(&self, offset: usize) -> usize {
        self.starts
            .get(self.line_of(offset))
            .copied()
            .unwrap_or(self.len)
    }

    /// The end of the line holding `offset` in `text`, before its `\n` or `\r\n`.
    pub(crate) fn line_end(&self, text: &str, offset: usize) -> usize {
        let bytes = text.as_bytes();
        let mut end = self.next_line(offset);
        if end > offset && end > 0 && bytes[end - 1] == b'\n' {
            end -= 1;
            if end > offset && bytes[end - 1] == b'\r' {
                end -= 1;
            }
        }
        end
    }

    /// The 1-based column, in characters, of `offset` in `text`.
    pub(crate) fn column(&self, text: &str, offset: usize) -> usize {
        1 + text[self.line_start(offset)..offset].chars().count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_become_lines_columns_and_line_bounds() {
        let text = "ab\r\nçd\n\nlast";
        let lines = LineIndex::new(text);
        // (offset, line, start, end, next line, column)
        for (offset, line, start, end, next, column) in [
            (0, 1, 0, 2, 4, 1),
            (1, 1, 0, 2, 4, 2),
            (4, 2, 4, 7, 8, 1),
            (6, 2, 4, 7, 8, 2),
            (8, 3, 8, 8, 9, 1),
            (9, 4, 9, 13, 13, 1),
            (12, 4, 9, 13, 13, 4),
        ] {
            assert_eq!(lines.line_of(offset), line, "line of {offset}");
            assert_eq!(lines.line_start(offset), start, "start of {offset}");
            assert_eq!(lines.line_end(text, offset), end, "end of {offset}");
            assert_eq!(lines.next_line(offset), next, "next of {offset}");
            assert_eq!(lines.column(text, offset), column, "column of {offset}");
        }
        assert_eq!(LineIndex::new("").line_of(0), 1);
    }
}
