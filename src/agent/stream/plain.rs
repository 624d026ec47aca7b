//! Plain text: a `program:` agent whose first non-empty line is not a JSON event. The whole
//! stdout is the result.
//!
//! Decisions a reader must know:
//! - Only the last [`RESULT_CAP`] bytes are kept, because the end of an output is where a
//!   report, a JSON block or a status word is.
//! - Plain text has no result event, so the caller may say what a finished report looks like
//!   ([`ReportCheck`]: the stage's schema). Once the whole stdout so far is one JSON object
//!   that is the stage's report — exactly what the report is read from when the program
//!   exits — the result is *reported*: the supervisor gets [`LineSignal::ResultSeen`] and
//!   gives the program `--result-grace` to exit, as it does for a stream's result event, and
//!   what the program prints after it is no longer part of the result (it stays in
//!   `stageN.jsonl`). Nothing less counts: not a JSON block among other text, not a status
//!   word, not a JSON object that is not the report — an agent that prints a plan as JSON and
//!   goes on working keeps its idle timeout. When that timeout ends a program that went
//!   silent, the stage runner reads its output as at an exit (`stage::extract_report`, the
//!   last fenced block and the status word included): a report there is the stage's result. The check runs only on a line that ends with `}`
//!   while the output is at most [`REPORT_CHECK_CAP`] bytes, so a long output costs nothing.
//! - A plain-text run failed when it exited with anything but 0 (it has no result event to say
//!   so); after a reported result, being stopped by a signal (the grace ran out) is no failure.

use super::{AgentOutput, LineSignal, RESULT_CAP, TailText};

/// The most of a plain-text output that is still checked for a finished report: a report is
/// small, and checking a long output at every line would cost time.
pub(crate) const REPORT_CHECK_CAP: usize = 64 << 10;

/// True when a plain-text output is a finished report of the stage (see the module docs).
pub(crate) struct ReportCheck(Box<dyn Fn(&str) -> bool + Send + Sync>);

impl ReportCheck {
    /// The check `is_report`.
    pub(crate) fn new(is_report: impl Fn(&str) -> bool + Send + Sync + 'static) -> ReportCheck {
        ReportCheck(Box::new(is_report))
    }
}

impl std::fmt::Debug for ReportCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ReportCheck")
    }
}

/// The output so far (its tail), and whether it already holds the report.
#[derive(Debug)]
pub(super) struct PlainText {
    pub(super) tail: TailText,
    reported: bool,
}

impl PlainText {
    pub(super) fn new() -> PlainText {
        PlainText {
            tail: TailText::new(RESULT_CAP),
            reported: false,
        }
    }

    /// Appends a line; [`LineSignal::ResultSeen`] once the output is the finished report.
    pub(super) fn push_line(&mut self, line: &str, check: Option<&ReportCheck>) -> LineSignal {
        if self.reported {
            return LineSignal::Continue;
        }
        self.tail.push_line(line);
        let Some(check) = check else {
            return LineSignal::Continue;
        };
        let text = &self.tail.text;
        if line.trim_end().ends_with('}')
            && self.tail.dropped == 0
            && text.len() <= REPORT_CHECK_CAP
            && text.trim_start().starts_with('{')
            && (check.0)(text)
        {
            self.reported = true;
            return LineSignal::ResultSeen;
        }
        LineSignal::Continue
    }

    pub(super) fn finish(self, out: &mut AgentOutput) {
        let (text, dropped) = self.tail.finish();
        out.result_text = text;
        out.result_truncated_bytes = dropped;
        out.saw_result = self.reported;
        out.is_error = if self.reported {
            matches!(out.exit_code, Some(code) if code != 0)
        } else {
            out.exit_code != Some(0)
        };
    }
}

#[cfg(test)]
mod tests {
    use crate::agent::stream::fixture::parse_lines;
    use crate::agent::stream::{
        LineSignal, Mode, RESULT_CAP, ReportCheck, StreamFormat, StreamParser,
    };

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

    /// A check that takes any object with a string `status`: the shape of a report.
    fn status_check() -> ReportCheck {
        ReportCheck::new(|text| {
            serde_json::from_str::<serde_json::Value>(text.trim())
                .is_ok_and(|v| v["status"].is_string())
        })
    }

    #[test]
    fn plain_text_reports_once_its_whole_output_is_the_report() {
        // (lines, the index of the line that reports, the result text)
        let cases: Vec<(Vec<&str>, Option<usize>, &str)> = vec![
            (
                vec![r#"{"status":"SUCCESS"}"#, "later chatter"],
                Some(0),
                r#"{"status":"SUCCESS"}"#,
            ),
            // Pretty-printed, after blank lines.
            (
                vec!["", "{", r#"  "status": "FAILED""#, "}"],
                Some(3),
                "\n{\n  \"status\": \"FAILED\"\n}",
            ),
            // An object that is not the report keeps going.
            (
                vec![r#"{"plan":"x"}"#, "working"],
                None,
                "{\"plan\":\"x\"}\nworking",
            ),
            // A report after other text is not the whole output.
            (
                vec!["working", r#"{"status":"SUCCESS"}"#],
                None,
                "working\n{\"status\":\"SUCCESS\"}",
            ),
            // A status word alone is no report here.
            (vec!["SUCCESS"], None, "SUCCESS"),
        ];
        for (lines, reports, text) in cases {
            let mut parser =
                StreamParser::new(StreamFormat::Detect).with_report_check(status_check());
            let signals: Vec<LineSignal> = lines.iter().map(|l| parser.push_line(l)).collect();
            let seen: Vec<usize> = signals
                .iter()
                .enumerate()
                .filter(|(_, s)| **s == LineSignal::ResultSeen)
                .map(|(i, _)| i)
                .collect();
            assert_eq!(seen, reports.into_iter().collect::<Vec<_>>(), "{lines:?}");
            // Stopped by the grace (a signal): a reported result is no failure.
            let out = parser.finish(None, "");
            assert_eq!(out.result_text, text, "{lines:?}");
            assert_eq!(out.saw_result, reports.is_some(), "{lines:?}");
            assert_eq!(out.is_error, reports.is_none(), "{lines:?}");
        }
        // Without a check plain text never reports.
        let mut parser = StreamParser::new(StreamFormat::Detect);
        assert_eq!(
            parser.push_line(r#"{"status":"SUCCESS"}"#),
            LineSignal::Continue
        );
        // A report that exits with an error code is still an error.
        let mut parser = StreamParser::new(StreamFormat::Detect).with_report_check(status_check());
        parser.push_line(r#"{"status":"SUCCESS"}"#);
        assert!(parser.finish(Some(3), "").is_error);
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
                assert!(plain.tail.text.len() <= 2 * RESULT_CAP + 101);
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
