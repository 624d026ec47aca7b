//! The reports the stages return, and reading them from what an agent printed: the
//! structured output first, then a JSON object or the last fenced `json` block of the result
//! text, then (implement only) a whole-line status word.
//!
//! The one decision a reader must know: an optional field reads the same whether it is
//! missing or `null` (what a strict schema makes a model send, `schema.rs`); lists read `null`
//! as empty.

use serde::{Deserialize, Deserializer, Serialize};

use super::Stage;

/// The research stage's report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct ResearchReport {
    /// The notes; kern writes them as the task's Research bullets.
    pub notes: Vec<String>,
    /// Set when the researcher thinks the task should be skipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skip_reason: Option<String>,
    /// What kind of skip: `needs_person` when it waits on a person (DESIGN.md section 5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skip_kind: Option<SkipKind>,
    /// Mechanical must-haves the researcher proposes (`file …`, `grep …`, `run …`): kern writes
    /// the ones it can read as the task's Must note when the person wrote none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub must: Option<Vec<String>>,
    /// The paths and globs the task will change: kern writes them as the task's Scope note
    /// when the person wrote none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<Vec<String>>,
}

/// Why a research skip cannot simply come back later.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum SkipKind {
    /// A decision, credentials, an account, a manual step: the task waits on a person.
    NeedsPerson,
}

/// The tests step's status word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub(crate) enum TestsStatus {
    /// The tests are written or named; kern runs them on the base commit next.
    Success,
    /// No test could be written; an Attempt note records why.
    Failed,
}

/// The tests step's report (a task tested first).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct TestsReport {
    /// What happened.
    pub status: TestsStatus,
    /// What the tests check.
    #[serde(default)]
    pub summary: String,
    /// The test files that prove the task, relative to the top: written, changed or named.
    /// Required, so that a stage record's implement report is never read as this one.
    pub tests: Vec<String>,
    /// With FAILED: what was tried and why no test could be written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt_note: Option<String>,
}

/// The implement stage's status word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub(crate) enum ImplementStatus {
    /// The work is done; go on to the check gate and review.
    Success,
    /// The task is too big; `subtasks` replace it.
    Decomposed,
    /// The task should not be done now; back to `[ ]` with a Skipped note.
    Skipped,
    /// The attempt failed; an Attempt note records why.
    Failed,
}

impl ImplementStatus {
    /// The word as written in the schema and in a plain-text result.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ImplementStatus::Success => "SUCCESS",
            ImplementStatus::Decomposed => "DECOMPOSED",
            ImplementStatus::Skipped => "SKIPPED",
            ImplementStatus::Failed => "FAILED",
        }
    }
}

/// The implement stage's report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct ImplementReport {
    /// What happened.
    pub status: ImplementStatus,
    /// What was done.
    #[serde(default)]
    pub summary: String,
    /// With FAILED: what was tried and why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt_note: Option<String>,
    /// With DECOMPOSED: the new subtasks.
    #[serde(
        default,
        deserialize_with = "null_as_empty",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub subtasks: Vec<String>,
    /// Facts worth keeping in LEARNINGS.md.
    #[serde(
        default,
        deserialize_with = "null_as_empty",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub learnings: Vec<String>,
    /// With SUCCESS and an unchanged work tree: why no change was needed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_change_reason: Option<String>,
}

/// The review verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub(crate) enum Verdict {
    /// Commit the work with `subject` and `body`.
    Commit,
    /// Do not commit; `reason` goes into an Attempt note.
    Reject,
}

/// The commit review stage's report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct ReviewReport {
    /// COMMIT or REJECT.
    pub verdict: Verdict,
    /// The commit subject.
    #[serde(default)]
    pub subject: String,
    /// The commit body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// With REJECT: what must change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Facts worth keeping in LEARNINGS.md.
    #[serde(
        default,
        deserialize_with = "null_as_empty",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub learnings: Vec<String>,
}

/// A list that may be missing (`default`) or `null`: both read as empty.
fn null_as_empty<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<String>, D::Error> {
    Ok(Option::<Vec<String>>::deserialize(deserializer)?.unwrap_or_default())
}

/// A stage's parsed report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub(crate) enum StageReport {
    /// From research.
    Research(ResearchReport),
    /// From the tests step (before implement: read untagged, it is tried first).
    Tests(TestsReport),
    /// From implement.
    Implement(ImplementReport),
    /// From commit review.
    Review(ReviewReport),
}

/// The stage's report from what the agent returned (DESIGN.md section 5), trying in order:
///
/// 1. `structured` (Claude's `structured_output`, Codex's parsed final message), if it fits
///    the stage's report;
/// 2. `result_text` itself, when it is exactly one JSON object that fits (a program printing
///    its report as plain text; Claude's `result` also holds the same JSON as text);
/// 3. the **last** fenced `json` block of `result_text`, if it fits;
/// 4. implement only: the last non-empty line of `result_text` being exactly one of
///    `SUCCESS`, `DECOMPOSED`, `SKIPPED`, `FAILED` (surrounding spaces aside, a whole-line
///    match, never a substring); the summary is then empty.
///
/// `Err` is the reason, for the Attempt note and the stage record.
pub(crate) fn extract_report(
    stage: Stage,
    structured: Option<&serde_json::Value>,
    result_text: &str,
) -> Result<StageReport, String> {
    let mut problem: Option<String> = None;
    if let Some(value) = structured.filter(|v| !v.is_null()) {
        match report_from_value(stage, value.clone()) {
            Ok(report) => return Ok(report),
            Err(e) => {
                problem = Some(format!(
                    "the structured output does not match the {stage} schema: {e}"
                ));
            }
        }
    }
    let trimmed = result_text.trim();
    if trimmed.starts_with('{')
        && let Ok(value) = serde_json::from_str::<serde_json::Value>(trimmed)
        && let Ok(report) = report_from_value(stage, value)
    {
        return Ok(report);
    }
    if let Some(block) = last_json_block(result_text) {
        let parsed = serde_json::from_str::<serde_json::Value>(block)
            .map_err(|e| e.to_string())
            .and_then(|v| report_from_value(stage, v));
        match parsed {
            Ok(report) => return Ok(report),
            Err(e) => {
                problem.get_or_insert(format!(
                    "the last JSON block in the result does not match the {stage} schema: {e}"
                ));
            }
        }
    }
    if stage == Stage::Implement
        && let Some(status) = last_status_word(result_text)
    {
        return Ok(StageReport::Implement(ImplementReport {
            status,
            summary: String::new(),
            attempt_note: None,
            subtasks: Vec::new(),
            learnings: Vec::new(),
            no_change_reason: None,
        }));
    }
    Err(problem.unwrap_or_else(|| {
        if stage == Stage::Implement {
            "no structured output, no JSON block and no status word in the result".to_string()
        } else {
            "no structured output and no JSON block in the result".to_string()
        }
    }))
}

/// True when `text` is exactly one JSON object that is `stage`'s report — what
/// [`extract_report`] reads from a plain-text program's whole output. A plain-text agent has
/// reported its result once its output is this (`agent::stream::ReportCheck`).
pub(crate) fn is_report(stage: Stage, text: &str) -> bool {
    let trimmed = text.trim();
    trimmed.starts_with('{')
        && serde_json::from_str::<serde_json::Value>(trimmed)
            .is_ok_and(|value| report_from_value(stage, value).is_ok())
}

/// `value` as `stage`'s report.
fn report_from_value(stage: Stage, value: serde_json::Value) -> Result<StageReport, String> {
    let report = match stage {
        Stage::Research => serde_json::from_value(value).map(StageReport::Research),
        Stage::Tests => serde_json::from_value(value).map(StageReport::Tests),
        Stage::Implement => serde_json::from_value(value).map(StageReport::Implement),
        Stage::Review => serde_json::from_value(value).map(StageReport::Review),
    };
    report.map_err(|e| e.to_string())
}

/// The body of the last complete fenced code block whose info string is `json`.
fn last_json_block(text: &str) -> Option<&str> {
    let mut last = None;
    // (fence char, fence length, is json, body start offset)
    let mut open: Option<(char, usize, bool, usize)> = None;
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let start = offset;
        offset += line.len();
        let content = line.trim_end_matches(['\n', '\r']);
        let indent = content.len() - content.trim_start_matches(' ').len();
        if indent > 3 {
            continue;
        }
        let body = &content[indent..];
        let Some(fence_char) = body.chars().next().filter(|c| *c == '`' || *c == '~') else {
            continue;
        };
        let fence_len = body.chars().take_while(|c| *c == fence_char).count();
        if fence_len < 3 {
            continue;
        }
        let info = body[fence_len..].trim();
        match open {
            None => {
                let is_json = info
                    .split_whitespace()
                    .next()
                    .is_some_and(|word| word.eq_ignore_ascii_case("json"));
                open = Some((fence_char, fence_len, is_json, offset));
            }
            Some((c, len, is_json, body_start)) => {
                if fence_char == c && fence_len >= len && info.is_empty() {
                    if is_json {
                        last = Some(&text[body_start..start]);
                    }
                    open = None;
                }
            }
        }
    }
    last
}

/// The implement status named by the last non-empty line, when that line is exactly a word.
fn last_status_word(text: &str) -> Option<ImplementStatus> {
    let line = text.lines().map(str::trim).rfind(|l| !l.is_empty())?;
    [
        ImplementStatus::Success,
        ImplementStatus::Decomposed,
        ImplementStatus::Skipped,
        ImplementStatus::Failed,
    ]
    .into_iter()
    .find(|s| s.as_str() == line)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_is_one_json_object_of_the_stage() {
        let cases = [
            (Stage::Research, r#"{"notes": ["a"]}"#, true),
            (Stage::Research, "  {\"notes\": []}\n", true),
            (
                Stage::Research,
                r#"{"status": "SUCCESS", "summary": "s"}"#,
                false,
            ),
            (
                Stage::Implement,
                r#"{"status": "SUCCESS", "summary": "s"}"#,
                true,
            ),
            (Stage::Implement, r#"{"status": "MAYBE"}"#, false),
            (Stage::Implement, r#"{"status": "SUCCESS"} and more"#, false),
            (Stage::Implement, "SUCCESS", false),
            (
                Stage::Review,
                r#"{"verdict": "COMMIT", "subject": "Add x"}"#,
                true,
            ),
            (Stage::Review, r#"{"verdict": "COMMIT", "subject": "#, false),
        ];
        for (stage, text, want) in cases {
            assert_eq!(is_report(stage, text), want, "{stage} {text}");
        }
    }

    #[test]
    fn schemas_are_valid_json_objects() {
        for stage in Stage::ALL {
            let v: serde_json::Value = serde_json::from_str(stage.schema()).unwrap();
            assert_eq!(v["type"], "object", "{stage}");
        }
    }

    #[test]
    fn names_numbers_and_policies() {
        let table = [
            (Stage::Research, 1, "research", "read-only"),
            (Stage::Tests, 2, "tests", "full"),
            (Stage::Implement, 2, "implement", "full"),
            (Stage::Review, 3, "commit", "git-read"),
        ];
        for (stage, n, name, tools) in table {
            assert_eq!(stage.number(), n);
            assert_eq!(stage.name(), name);
            assert_eq!(Stage::from_name(name), Some(stage));
            assert_eq!(stage.tools().as_str(), tools);
        }
    }

    fn implement(status: ImplementStatus, summary: &str) -> StageReport {
        StageReport::Implement(ImplementReport {
            status,
            summary: summary.into(),
            attempt_note: None,
            subtasks: Vec::new(),
            learnings: Vec::new(),
            no_change_reason: None,
        })
    }

    fn research(notes: &[&str]) -> StageReport {
        StageReport::Research(ResearchReport {
            notes: notes.iter().map(std::string::ToString::to_string).collect(),
            skip_reason: None,
            skip_kind: None,
            must: None,
            scope: None,
        })
    }

    #[test]
    fn reports_are_extracted_in_the_documented_order() {
        use ImplementStatus::*;
        let review = StageReport::Review(ReviewReport {
            verdict: Verdict::Commit,
            subject: "Add x".into(),
            body: None,
            reason: None,
            learnings: Vec::new(),
        });
        /// What, stage, structured output, result text, expected.
        type Row = (
            &'static str,
            Stage,
            Option<serde_json::Value>,
            &'static str,
            Result<StageReport, String>,
        );
        let table: Vec<Row> = vec![
            (
                "structured output first",
                Stage::Implement,
                Some(serde_json::json!({"status": "SUCCESS", "summary": "from structured"})),
                "```json\n{\"status\":\"FAILED\",\"summary\":\"from block\"}\n```\nFAILED",
                Ok(implement(Success, "from structured")),
            ),
            (
                "structured output of the wrong stage falls back to the block",
                Stage::Implement,
                Some(serde_json::json!({"notes": ["n"]})),
                "```json\n{\"status\":\"FAILED\",\"summary\":\"from block\"}\n```",
                Ok(implement(Failed, "from block")),
            ),
            (
                "null structured output is none",
                Stage::Research,
                Some(serde_json::Value::Null),
                "```json\n{\"notes\":[\"a\"]}\n```",
                Ok(research(&["a"])),
            ),
            (
                "a result that is exactly the JSON object",
                Stage::Research,
                None,
                "  {\"notes\":[\"Files: out-1.txt does not exist yet\"]}\n",
                Ok(research(&["Files: out-1.txt does not exist yet"])),
            ),
            (
                "the last json block wins",
                Stage::Review,
                None,
                "First:\n```json\n{\"verdict\":\"REJECT\",\"subject\":\"no\"}\n```\nThen:\n```JSON\n{\"verdict\":\"COMMIT\",\"subject\":\"Add x\"}\n```\nDone.",
                Ok(review.clone()),
            ),
            (
                "a non-json block after the json block is ignored",
                Stage::Review,
                None,
                "```json\n{\"verdict\":\"COMMIT\",\"subject\":\"Add x\"}\n```\n```sh\ngit log\n```",
                Ok(review.clone()),
            ),
            (
                "a fence inside a longer fence is content",
                Stage::Review,
                None,
                "````json\n{\"verdict\":\"COMMIT\",\"subject\":\"Add x\"}\n````\n````md\n```json\n{\"verdict\":\"REJECT\",\"subject\":\"x\"}\n```\n````",
                Ok(review),
            ),
            (
                "an unclosed block is not a block",
                Stage::Research,
                None,
                "```json\n{\"notes\":[\"a\"]}\n",
                Err("no structured output and no JSON block in the result".into()),
            ),
            (
                "status word on the last non-empty line",
                Stage::Implement,
                None,
                "I wrote the file.\nSUCCESS\n\n  ",
                Ok(implement(Success, "")),
            ),
            (
                "status word with spaces around it",
                Stage::Implement,
                None,
                "Too big.\r\n  DECOMPOSED  \r\n",
                Ok(implement(Decomposed, "")),
            ),
            (
                "SKIPPED",
                Stage::Implement,
                None,
                "SKIPPED",
                Ok(implement(Skipped, "")),
            ),
            (
                "status word as a substring is not a status",
                Stage::Implement,
                None,
                "The build was a SUCCESS",
                Err("no structured output, no JSON block and no status word in the result".into()),
            ),
            (
                "status word not on the last line",
                Stage::Implement,
                None,
                "SUCCESS\nbut then I broke it",
                Err("no structured output, no JSON block and no status word in the result".into()),
            ),
            (
                "lower case is not a status word",
                Stage::Implement,
                None,
                "success",
                Err("no structured output, no JSON block and no status word in the result".into()),
            ),
            (
                "status words count only for implement",
                Stage::Review,
                None,
                "SUCCESS",
                Err("no structured output and no JSON block in the result".into()),
            ),
            (
                "an empty result",
                Stage::Research,
                None,
                "",
                Err("no structured output and no JSON block in the result".into()),
            ),
            (
                "a json block of the wrong shape says so",
                Stage::Research,
                None,
                "```json\n{\"note\":\"x\"}\n```",
                Err("the last JSON block in the result does not match the research schema: missing field `notes`".into()),
            ),
            (
                "a broken json block says so",
                Stage::Research,
                None,
                "```json\n{\"notes\": [\n```",
                Err("the last JSON block in the result does not match the research schema: EOF while parsing a list at line 2 column 0".into()),
            ),
            (
                "wrong structured output and nothing else",
                Stage::Implement,
                Some(serde_json::json!({"status": "DONE", "summary": "s"})),
                "",
                Err("the structured output does not match the implement schema: unknown variant `DONE`, expected one of `SUCCESS`, `DECOMPOSED`, `SKIPPED`, `FAILED`".into()),
            ),
            (
                "wrong structured output, then a status word",
                Stage::Implement,
                Some(serde_json::json!({"status": "DONE"})),
                "FAILED",
                Ok(implement(Failed, "")),
            ),
        ];
        for (what, stage, structured, text, expected) in table {
            assert_eq!(
                extract_report(stage, structured.as_ref(), text),
                expected,
                "{what}"
            );
        }
    }

    #[test]
    fn full_reports_keep_every_field() {
        let value = serde_json::json!({"status": "DECOMPOSED", "summary": "too big",
            "subtasks": ["a", "b"], "learnings": ["l"], "attempt_note": "n"});
        assert_eq!(
            extract_report(Stage::Implement, Some(&value), ""),
            Ok(StageReport::Implement(ImplementReport {
                status: ImplementStatus::Decomposed,
                summary: "too big".into(),
                attempt_note: Some("n".into()),
                subtasks: vec!["a".into(), "b".into()],
                learnings: vec!["l".into()],
                no_change_reason: None,
            }))
        );
    }

    #[test]
    fn null_reads_as_absent_in_every_optional_field() {
        let table = [
            (
                Stage::Research,
                serde_json::json!({"notes": ["n"], "skip_reason": null, "skip_kind": null}),
                research(&["n"]),
            ),
            (
                Stage::Research,
                serde_json::json!({"notes": [], "skip_reason": "who pays?", "skip_kind": "needs_person"}),
                StageReport::Research(ResearchReport {
                    notes: Vec::new(),
                    skip_reason: Some("who pays?".into()),
                    skip_kind: Some(SkipKind::NeedsPerson),
                    must: None,
                    scope: None,
                }),
            ),
            (
                Stage::Implement,
                serde_json::json!({"status": "SUCCESS", "summary": "s", "attempt_note": null,
                    "subtasks": null, "learnings": null, "no_change_reason": null}),
                implement(ImplementStatus::Success, "s"),
            ),
            (
                Stage::Implement,
                serde_json::json!({"status": "SUCCESS", "summary": "s", "attempt_note": null,
                    "subtasks": null, "learnings": null, "no_change_reason": "already done in abc123"}),
                StageReport::Implement(ImplementReport {
                    status: ImplementStatus::Success,
                    summary: "s".into(),
                    attempt_note: None,
                    subtasks: Vec::new(),
                    learnings: Vec::new(),
                    no_change_reason: Some("already done in abc123".into()),
                }),
            ),
            (
                Stage::Review,
                serde_json::json!({"verdict": "REJECT", "subject": "x", "body": null,
                    "reason": "no test", "learnings": null}),
                StageReport::Review(ReviewReport {
                    verdict: Verdict::Reject,
                    subject: "x".into(),
                    body: None,
                    reason: Some("no test".into()),
                    learnings: Vec::new(),
                }),
            ),
        ];
        for (stage, value, expected) in table {
            assert_eq!(
                extract_report(stage, Some(&value), ""),
                Ok(expected.clone()),
                "{value}"
            );
            // The same JSON as plain text (a program's stdout) reads the same.
            assert_eq!(
                extract_report(stage, None, &value.to_string()),
                Ok(expected),
                "{value} as text"
            );
        }
        let unknown_kind = serde_json::json!({"notes": [], "skip_kind": "later"});
        assert_eq!(
            extract_report(Stage::Research, Some(&unknown_kind), ""),
            Err("the structured output does not match the research schema: unknown variant `later`, expected `needs_person`".into())
        );
    }

    #[test]
    fn a_report_serialises_without_its_empty_fields() {
        let report = implement(ImplementStatus::Success, "s");
        assert_eq!(
            serde_json::to_value(&report).unwrap(),
            serde_json::json!({"status": "SUCCESS", "summary": "s"})
        );
    }
}
