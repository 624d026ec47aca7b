//! The JSON schemas of the three stage reports (DESIGN.md section 5), as the agents receive
//! them: Claude through `--json-schema`, Codex through `--output-schema`, a program through the
//! file named by `KERN_SCHEMA`.
//!
//! The one decision a reader must know: the schemas are *strict* in OpenAI's sense — every
//! object lists every property in `required`, optional ones are nullable
//! (`"type": ["string", "null"]`), and `additionalProperties` is false. Codex sends the schema
//! with `"strict": true`, and the Responses API rejects anything else with HTTP 400
//! `invalid_json_schema`; Claude Code accepts the same schemas (2.1.197 and 2.1.330, seen), so
//! both agents get one schema per stage. A model then answers `null` for what does not apply,
//! and the report parser reads `null` as absent.

/// The research report: notes, or a reason to skip (and what kind of skip).
pub(super) const RESEARCH: &str = r#"{"type":"object","properties":{"notes":{"type":"array","items":{"type":"string"},"description":"Concise notes a fresh context can implement the task from: files with line ranges, patterns to follow, constraints, references"},"skip_reason":{"type":["string","null"],"description":"Only when the task cannot or should not be done now: why. Otherwise null"},"skip_kind":{"type":["string","null"],"enum":["needs_person",null],"description":"needs_person when the skip waits on a person: a decision, credentials, an account, a manual step (skip_reason then asks the question). Otherwise null"},"must":{"type":["array","null"],"items":{"type":"string"},"description":"Mechanical checks that prove the task done, one per item: file <path>, file !<path>, grep <path> <regex>, grep! <path> <regex>, run <command>. kern runs them itself after implement. Null when the task already has a Must note or none fits"},"scope":{"type":["array","null"],"items":{"type":"string"},"description":"The paths and globs the task will change (src/parser.rs, src/parser/**); kern sets aside changes outside them. Null when the task already has a Scope note"}},"required":["notes","skip_reason","skip_kind","must","scope"],"additionalProperties":false}"#;

/// The tests step's report: the task's test files, written or named, and what was done.
pub(super) const TESTS: &str = r#"{"type":"object","properties":{"status":{"type":"string","enum":["SUCCESS","FAILED"]},"summary":{"type":"string","description":"What the tests check, in a few sentences"},"tests":{"type":"array","items":{"type":"string"},"description":"The test files that prove the task done, relative to the repository's top: the ones you wrote or changed, and existing ones that already test it. kern runs the test command with only these on the commit the task started from, where they must fail"},"attempt_note":{"type":["string","null"],"description":"With FAILED: what was tried and why no test could be written. Otherwise null"}},"required":["status","summary","tests","attempt_note"],"additionalProperties":false}"#;

/// The implement report: a status word and what was done.
pub(super) const IMPLEMENT: &str = r#"{"type":"object","properties":{"status":{"type":"string","enum":["SUCCESS","DECOMPOSED","SKIPPED","FAILED"]},"summary":{"type":"string","description":"What was done, in a few sentences"},"attempt_note":{"type":["string","null"],"description":"With FAILED: what was tried and why it failed, so the next attempt does not repeat it. Otherwise null"},"subtasks":{"type":["array","null"],"items":{"type":"string"},"description":"With DECOMPOSED: the smaller tasks, in order, each doable in one session. Otherwise null"},"learnings":{"type":["array","null"],"items":{"type":"string"},"description":"Durable facts about this codebase worth remembering for later tasks, or null"},"no_change_reason":{"type":["string","null"],"description":"With SUCCESS and no file changed: why the task needed no change (e.g. it was already done). Otherwise null"}},"required":["status","summary","attempt_note","subtasks","learnings","no_change_reason"],"additionalProperties":false}"#;

/// The review report: a verdict and the commit message.
pub(super) const REVIEW: &str = r#"{"type":"object","properties":{"verdict":{"type":"string","enum":["COMMIT","REJECT"]},"subject":{"type":"string","description":"The commit subject line, in the style of the recent commits"},"body":{"type":["string","null"],"description":"The commit body, or null"},"reason":{"type":["string","null"],"description":"With REJECT: what must change, precise enough for the implement stage to act on. Otherwise null"},"learnings":{"type":["array","null"],"items":{"type":"string"},"description":"Durable facts about this codebase worth remembering for later tasks, or null"}},"required":["verdict","subject","body","reason","learnings"],"additionalProperties":false}"#;

#[cfg(test)]
mod tests {
    use crate::stage::Stage;
    use serde_json::Value;

    /// The rules OpenAI's strict structured outputs enforce, checked on every object of a
    /// schema: `additionalProperties: false` and every property in `required`. Returns the
    /// violations as `path: problem`.
    fn strict_violations(schema: &Value, path: &str) -> Vec<String> {
        let mut found = Vec::new();
        let is_object = match &schema["type"] {
            Value::String(t) => t == "object",
            Value::Array(types) => types.iter().any(|t| t == "object"),
            _ => false,
        };
        if is_object {
            if schema["additionalProperties"] != Value::Bool(false) {
                found.push(format!("{path}: additionalProperties is not false"));
            }
            let required: Vec<&str> = schema["required"]
                .as_array()
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            if let Some(properties) = schema["properties"].as_object() {
                for (name, property) in properties {
                    if !required.contains(&name.as_str()) {
                        found.push(format!("{path}: `{name}` is not in required"));
                    }
                    found.extend(strict_violations(property, &format!("{path}.{name}")));
                }
            }
        }
        if schema.get("items").is_some() {
            found.extend(strict_violations(&schema["items"], &format!("{path}[]")));
        }
        found
    }

    #[test]
    fn every_schema_is_strict() {
        for stage in Stage::ALL {
            let schema: Value = serde_json::from_str(stage.schema()).unwrap();
            assert_eq!(
                strict_violations(&schema, "$"),
                Vec::<String>::new(),
                "{stage}"
            );
        }
        // The check itself finds what the real API rejects.
        let loose: Value = serde_json::from_str(
            r#"{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"object","properties":{"c":{"type":"string"}}}},"required":["a"],"additionalProperties":false}"#,
        )
        .unwrap();
        assert_eq!(
            strict_violations(&loose, "$"),
            vec![
                "$: `b` is not in required",
                "$.b: additionalProperties is not false",
                "$.b: `c` is not in required",
            ]
        );
    }

    #[test]
    fn optional_fields_are_nullable() {
        let table = [
            (
                Stage::Research,
                vec!["skip_reason", "skip_kind", "must", "scope"],
            ),
            (Stage::Tests, vec!["attempt_note"]),
            (
                Stage::Implement,
                vec!["attempt_note", "subtasks", "learnings", "no_change_reason"],
            ),
            (Stage::Review, vec!["body", "reason", "learnings"]),
        ];
        for (stage, optional) in table {
            let schema: Value = serde_json::from_str(stage.schema()).unwrap();
            for (name, property) in schema["properties"].as_object().unwrap() {
                let nullable = property["type"]
                    .as_array()
                    .is_some_and(|t| t.iter().any(|t| t == "null"));
                assert_eq!(
                    nullable,
                    optional.contains(&name.as_str()),
                    "{stage}: {name}"
                );
            }
        }
        let research: Value = serde_json::from_str(Stage::Research.schema()).unwrap();
        assert_eq!(
            research["properties"]["skip_kind"]["enum"],
            serde_json::json!(["needs_person", null])
        );
    }
}
