//! The JSON schemas of the three stage reports (DESIGN.md section 5), as the agents receive
//! them: Claude through `--json-schema`, Codex through `--output-schema`, a program through the
//! file named by `KERN_SCHEMA`.

/// The research report: notes, or a reason to skip.
pub(super) const RESEARCH: &str = r#"{"type":"object","properties":{"notes":{"type":"array","items":{"type":"string"},"description":"Concise notes a fresh context can implement the task from: files with line ranges, patterns to follow, constraints, references"},"skip_reason":{"type":"string","description":"Set only when the task cannot or should not be done; says why"}},"required":["notes"],"additionalProperties":false}"#;

/// The implement report: a status word and what was done.
pub(super) const IMPLEMENT: &str = r#"{"type":"object","properties":{"status":{"type":"string","enum":["SUCCESS","DECOMPOSED","SKIPPED","FAILED"]},"summary":{"type":"string","description":"What was done, in a few sentences"},"attempt_note":{"type":"string","description":"With FAILED: what was tried and why it failed, so the next attempt does not repeat it"},"subtasks":{"type":"array","items":{"type":"string"},"description":"With DECOMPOSED: the smaller tasks, in order, each doable in one session"},"learnings":{"type":"array","items":{"type":"string"},"description":"Durable facts about this codebase worth remembering for later tasks"}},"required":["status","summary"],"additionalProperties":false}"#;

/// The review report: a verdict and the commit message.
pub(super) const REVIEW: &str = r#"{"type":"object","properties":{"verdict":{"type":"string","enum":["COMMIT","REJECT"]},"subject":{"type":"string","description":"The commit subject line, in the style of the recent commits"},"body":{"type":"string","description":"The commit body, optional"},"reason":{"type":"string","description":"With REJECT: what must change, precise enough for the implement stage to act on"},"learnings":{"type":"array","items":{"type":"string"}}},"required":["verdict","subject"],"additionalProperties":false}"#;
