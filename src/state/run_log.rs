//! `run.jsonl`: one JSON line per event of every run on this project and branch, kept across
//! iterations and runs (the stage files are not).
//!
//! Each line is written with a single `write` on a file opened for appending, so lines from a
//! crashed run are whole or absent. Writing the log never stops a run: an overnight run that
//! cannot append a log line still commits its work; the failure is traced at warn level.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::PathBuf;
use std::time::SystemTime;

use serde_json::{Map, Value, json};

/// The event log of one run.
pub struct RunLog {
    path: PathBuf,
    run_id: String,
}

impl RunLog {
    /// A log appending to `path`; `run_id` tells this run's lines from others'.
    pub fn new(path: PathBuf, run_id: String) -> RunLog {
        RunLog { path, run_id }
    }

    /// Appends `{"ts", "run", "event", ...fields}`.
    pub fn event(&self, event: &str, fields: Value) {
        let mut line = Map::new();
        line.insert(
            "ts".into(),
            json!(crate::stage::runner::rfc3339(SystemTime::now())),
        );
        line.insert("run".into(), json!(self.run_id));
        line.insert("event".into(), json!(event));
        if let Value::Object(extra) = fields {
            line.extend(extra);
        }
        let mut bytes = Value::Object(line).to_string().into_bytes();
        bytes.push(b'\n');
        let written = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .and_then(|mut f| f.write_all(&bytes));
        if let Err(error) = written {
            tracing::warn!(path = %self.path.display(), %error, "cannot append to run.jsonl");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appends_one_object_per_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.jsonl");
        let log = RunLog::new(path.clone(), "r1".into());
        log.event("run_start", json!({"iterations": 3}));
        log.event("commit", json!({"sha": "abc"}));
        let text = std::fs::read_to_string(path).unwrap();
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0]["event"], "run_start");
        assert_eq!(lines[0]["iterations"], 3);
        assert_eq!(lines[1]["sha"], "abc");
        assert_eq!(lines[1]["run"], "r1");
    }
}
