//! Plain text: a `program:` agent whose first non-empty line is not a JSON event. The whole
//! stdout is the result.
//!
//! The one decision a reader must know: only the last [`RESULT_CAP`] bytes are kept, because
//! the end of an output is where a report, a JSON block or a status word is; a plain-text run
//! failed when it exited with anything but 0 (it has no result event to say so).

use super::{AgentOutput, RESULT_CAP, TailText};

/// The output so far (its tail).
#[derive(Debug)]
pub(super) struct PlainText(pub(super) TailText);

impl PlainText {
    pub(super) fn new() -> PlainText {
        PlainText(TailText::new(RESULT_CAP))
    }

    pub(super) fn push_line(&mut self, line: &str) {
        self.0.push_line(line);
    }

    pub(super) fn finish(self, out: &mut AgentOutput) {
        let (text, dropped) = self.0.finish();
        out.result_text = text;
        out.result_truncated_bytes = dropped;
        out.is_error = out.exit_code != Some(0);
    }
}

#[cfg(test)]
mod tests {
    use crate::agent::stream::fixture::parse_lines;
    use crate::agent::stream::{LineSignal, Mode, RESULT_CAP, StreamFormat, StreamParser};

    #[test]
    fn plain_text_is_the_whole_output() {
        let (signals, out) = parse_lines(
            [
                "",
                "working…",
                "```json",
                r#"{"notes":["a"]}"#,
                "```",
                "SUCCESS\r",
            ],
            StreamFormat::Detect,
            Some(0),
            "",
        );
        assert!(signals.iter().all(|s| *s == LineSignal::Continue));
        assert_eq!(
            out.result_text,
            "\nworking…\n```json\n{\"notes\":[\"a\"]}\n```\nSUCCESS"
        );
        assert!(!out.saw_result && !out.is_error);
        assert_eq!(out.malformed_lines, 0);
        assert_eq!(out.structured_output, None);

        let (_, failed) = parse_lines(["oops"], StreamFormat::Detect, Some(3), "");
        assert!(failed.is_error);
        let (_, empty) = parse_lines([], StreamFormat::Detect, Some(0), "");
        assert_eq!(empty.result_text, "");
        assert!(!empty.is_error);
    }

    #[test]
    fn a_json_first_line_without_type_is_plain_text() {
        let (_, out) = parse_lines(
            [r#"{"status":"SUCCESS","summary":"s"}"#],
            StreamFormat::Detect,
            Some(0),
            "",
        );
        assert_eq!(out.result_text, r#"{"status":"SUCCESS","summary":"s"}"#);
        assert_eq!(out.malformed_lines, 0);
    }

    #[test]
    fn huge_plain_output_keeps_a_bounded_tail() {
        let mut parser = StreamParser::new(StreamFormat::Detect);
        let line = "0123456789".repeat(10); // 100 bytes
        let lines = 50_000; // 5 MB with the newlines
        for i in 0..lines {
            parser.push_line(&line);
            // The buffer never grows past twice its cap plus one line.
            if i % 1000 == 0 {
                let Mode::Plain(plain) = &parser.mode else {
                    panic!("not plain text")
                };
                assert!(plain.0.text.len() <= 2 * RESULT_CAP + 101);
            }
        }
        parser.push_line("the end");
        let out = parser.finish(Some(0), "");
        assert!(out.result_text.len() <= RESULT_CAP);
        assert!(out.result_text.len() > RESULT_CAP - 101);
        assert!(out.result_text.ends_with("\nthe end"));
        let total = (lines * 101 + "the end".len()) as u64;
        assert_eq!(
            out.result_truncated_bytes + out.result_text.len() as u64,
            total
        );
    }

    #[test]
    fn one_huge_line_keeps_its_tail() {
        let mut parser = StreamParser::new(StreamFormat::Detect);
        let mut line = "é".repeat(RESULT_CAP); // 2 MiB, two bytes per char
        line.push_str("END");
        parser.push_line(&line);
        let out = parser.finish(Some(0), "");
        assert!(out.result_text.len() <= RESULT_CAP);
        assert!(out.result_text.ends_with("éEND"));
        assert_eq!(
            out.result_truncated_bytes + out.result_text.len() as u64,
            line.len() as u64
        );
    }
}
