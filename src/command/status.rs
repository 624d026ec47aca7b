//! `kern status`: tasks by state (and the tasks other tools hold, the optional ones, the ones a
//! heading closed), the next task, the resume point, the lock holder and the state folder — for
//! a person or, with `--json`, for a script (with `last_dir` and `runs_dir`, where the ended
//! iterations' records are kept). `--dir` prints only the state folder, so
//! `jq .result "$(kern status --dir)/last/stage2.json"` works. Reads only: status never writes,
//! locks or runs anything.
//!
//! The one decision a reader must know: the report is the command's output, so it goes to
//! stdout (`kern status | grep next`); warnings go to stderr. `--json` prints one JSON object on
//! stdout in every case: on an error it is `{"error": {"message", "file", "line", "column",
//! "fix"}}` (and `diagnostics` with every problem of a refused SPEC.md), with the same exit code
//! as without `--json`. Human output quotes titles so that their own backticks show
//! ([`crate::spec::quote_title`]) and cuts them to the terminal's width with `…`; JSON keeps
//! them whole. Control characters in human output (a title's `ESC]0;…BEL`) are shown escaped
//! (`text::clean`), never sent to the terminal raw.
//!
//! This file computes the report and prints it; `human` renders the human page from its JSON.

use std::io::Write;

use serde_json::{Value, json};

use crate::error::{Error, Result};
use crate::settings::Settings;
use crate::spec::{self, Diagnostic, Document, TaskKind};
use crate::state::journal::{self, TaskStart};
use crate::state::lock::RunLock;
use crate::state::resume::{self, ResumePoint, StageFiles};
use crate::workspace::Workspace;

mod human;

pub(crate) use human::{fit_title, render_human, terminal_width};

/// Everything `kern status` reports, computed once.
pub(crate) struct StatusReport {
    /// The JSON object of `kern status --json`.
    pub json: Value,
    /// Warnings from validation, rendered.
    pub warnings: Vec<String>,
    /// Where the next task resumes, when there is one (the same inference a run makes).
    pub resume: Option<ResumePoint>,
    /// The next task's start record, when it has one (its diff base for the review).
    pub start: Option<TaskStart>,
}

/// Computes the status of the repository the settings name.
pub(crate) fn compute(settings: &Settings) -> Result<(Workspace, StatusReport)> {
    let (ws, _, report) = compute_with_spec(settings)?;
    Ok((ws, report))
}

/// [`compute`], also handing back the parsed SPEC.md, so that the dry run does not parse a
/// large file a second time.
pub(crate) fn compute_with_spec(
    settings: &Settings,
) -> Result<(Workspace, Document, StatusReport)> {
    let ws = Workspace::open(settings)?;
    let (_, doc, warnings) = ws.load_spec()?;
    let counts = doc.counts();
    let options = ws.select_options(settings, &doc);
    let selection = spec::select_with(&doc, &options);
    let next = selection.as_ref().map(|sel| {
        let task = &doc.tasks()[sel.task];
        let parents: Vec<&str> = doc
            .ancestors(sel.task)
            .iter()
            .rev() // root first
            .map(|&a| doc.tasks()[a].title.as_str())
            .collect();
        let top = ws.repo.top().to_path_buf();
        let level = crate::pipeline::discovery::level(
            &doc,
            sel.task,
            &|p| top.join(p).exists(),
            settings.level,
        );
        let attempt_notes: Vec<String> = task
            .notes
            .iter()
            .filter(|n| matches!(n.kind, spec::NoteKind::Attempt(_)))
            .map(|n| n.text.clone())
            .collect();
        let research = crate::pipeline::error_research::analyse(&attempt_notes).map(|r| r.status());
        let must: Vec<String> = spec::parse_must(&task.must_text())
            .into_iter()
            .filter_map(|m| m.ok().map(|m| m.to_string()))
            .collect();
        json!({
            "title": task.title,
            "line": task.line,
            "state": task.state.as_str(),
            "parents": parents,
            "reason": sel.reason.to_string(),
            "must": must,
            "scope": task.scope(),
            "tests_read_only": task.tests_read_only(),
            "level": level.level,
            "level_why": level.why,
            "error_research": research,
            "issue": super::tracked::issue_json(task),
        })
    });
    // The loop's own inference, read-only: stale files are named by the run, not removed here.
    let (resume, start, next_stage) = match &selection {
        Some(sel) => {
            let identity = doc.identity(sel.task);
            let files = StageFiles::read(&ws.state_dir, &identity);
            let has_research = doc.tasks()[sel.task].research().is_some();
            let start = journal::load::<TaskStart>(&ws.state_dir.task_start())
                .filter(|s| s.covers(&identity));
            let point = resume::infer(&files, has_research);
            // The stage that runs next, as the run's plan has it: a level-0 task skips
            // research, a task tested first has its tests step.
            let level = next
                .as_ref()
                .and_then(|n| n["level"].as_u64())
                .and_then(|l| u8::try_from(l).ok())
                .unwrap_or(2);
            let tests_step = crate::pipeline::tests_first::step_due(
                &doc.tasks()[sel.task],
                start.as_ref(),
                &identity,
                settings,
            );
            let next_stage =
                crate::pipeline::stage::plan::stages_left(Some(&point), level, tests_step)
                    .first()
                    .map_or(point.name(), |s| s.name());
            (Some(point), start, Some(next_stage))
        }
        None => (None, None, None),
    };
    let inspected = RunLock::inspect(&ws.repo.run_lock_path());
    let lock = inspected.as_ref().map(|(record, live)| {
        let mut v = serde_json::to_value(record).unwrap_or(Value::Null);
        if let Value::Object(map) = &mut v {
            map.insert("live".into(), json!(live));
        }
        v
    });
    let saved = ws.repo.refs_under(crate::repository::KERN_REFS)?.len();
    // A live run: what it does now (task, stage, elapsed, last tool call, cost so far).
    let running = inspected
        .as_ref()
        .filter(|(_, live)| *live)
        .map(|(record, _)| super::running::read(record, &ws.state_dir));
    // The usage windows now: the latest reading of each in run.jsonl.
    let now = crate::timestamp::Timestamp::now().epoch_seconds();
    let windows: Vec<Value> = crate::state::run_log::read_all(&ws.state_dir.run_log())
        .map(|events| crate::pipeline::pace::latest_windows(&events))
        .unwrap_or_default()
        .iter()
        .map(|w| {
            let mut v = serde_json::to_value(w).unwrap_or(Value::Null);
            if let Value::Object(map) = &mut v {
                map.insert(
                    "line".into(),
                    json!(crate::pipeline::pace::window_now_line(w, now)),
                );
            }
            v
        })
        .collect();
    let json = json!({
        "windows": windows,
        "saved_refs": saved,
        "spec": ws.spec_display,
        "counts": counts,
        "next": next,
        "resume": next_stage,
        "lock": lock,
        "running": running,
        "watch": super::running::watch(&ws.state_dir),
        "state_dir": ws.state_dir.dir().display().to_string(),
        "last_dir": ws.state_dir.last_dir().display().to_string(),
        "runs_dir": ws.state_dir.runs_dir().display().to_string(),
    });
    let mut warnings = warnings;
    if let Some(here) = ws.task_list_here(settings) {
        let told = crate::event::RunEvent::Told(crate::event::Told::SpecElsewhere {
            spec: ws.spec_display.clone(),
            here,
        });
        warnings.extend(
            crate::reporter::voice::said(&told)
                .into_iter()
                .map(|said| match said {
                    crate::reporter::voice::Said::Info(t) => t,
                    crate::reporter::voice::Said::Warn(t) => format!("warning: {t}"),
                }),
        );
    }
    warnings.extend(
        doc.unlisted_tasks()
            .iter()
            .map(|d| d.render(&ws.spec_display)),
    );
    let mut json = json;
    if let Some(sel) = &selection {
        let (task, identity) = (&doc.tasks()[sel.task], doc.identity(sel.task));
        let tested =
            crate::pipeline::tests_first::status(task, &identity, start.as_ref(), settings);
        if let (Some(tested), Some(next)) = (tested, json["next"].as_object_mut()) {
            next.insert("tests_first".into(), tested);
        }
    }
    add_dialects(&mut json, &doc, &ws.spec_display, &options);
    add_stale_learnings(&mut json, ws.repo.top(), &ws.learnings_path);
    super::tracked::add_json(&mut json, &doc);
    Ok((
        ws,
        doc,
        StatusReport {
            json,
            warnings,
            resume,
            start,
        },
    ))
}

/// Adds the LEARNINGS.md entries that name a path that no longer exists: they are left out of
/// the prompts, never deleted from the file.
fn add_stale_learnings(json: &mut Value, top: &std::path::Path, path: &std::path::Path) {
    let stale: Vec<Value> = crate::learnings::read(path)
        .map(|text| {
            crate::learnings::stale(&text, &|p| top.join(p).exists())
                .iter()
                .map(|e| json!({"line": e.line, "text": e.text}))
                .collect()
        })
        .unwrap_or_default();
    if let Value::Object(map) = json {
        map.insert("stale_learnings".into(), json!(stale));
    }
}

/// Adds what other tools' markers and closing headings mean for this file: the tasks held
/// elsewhere, the optional ones, the ones done by a heading, the warnings and the lines that
/// look like tasks without being list items.
fn add_dialects(json: &mut Value, doc: &Document, file: &str, options: &spec::SelectOptions) {
    let skip_optional = options.skip_optional;
    let tasks = doc.tasks();
    let held: Vec<Value> = tasks
        .iter()
        .filter_map(|t| match t.kind {
            TaskKind::HeldElsewhere(c) => Some(json!({
                "title": t.title, "line": t.line, "marker": format!("[{c}]"),
            })),
            _ => None,
        })
        .collect();
    let optional: Vec<Value> = tasks
        .iter()
        .filter(|t| t.is_optional() && t.closed_by.is_none())
        .map(|t| json!({"title": t.title, "line": t.line, "state": t.state.as_str()}))
        .collect();
    let closed: Vec<Value> = tasks
        .iter()
        .filter_map(|t| {
            t.closed_by
                .map(|h| json!({"title": t.title, "line": t.line, "heading_line": h}))
        })
        .collect();
    let mut warnings: Vec<Value> = spec::validate(doc)
        .iter()
        .filter(|d| !d.is_error())
        .map(|d| diagnostic_json(d, file))
        .collect();
    warnings.extend(
        doc.unlisted_tasks()
            .iter()
            .map(|d| diagnostic_json(d, file)),
    );
    let unlisted: Vec<usize> = doc.unlisted_tasks().iter().map(|d| d.line).collect();
    let deferred: Vec<Value> = tasks
        .iter()
        .filter(|t| t.deferred && t.closed_by.is_none())
        .map(|t| json!({"title": t.title, "line": t.line}))
        .collect();
    let not_taken = spec::why_not_taken(doc, options);
    if let Value::Object(map) = json {
        map.insert("deferred".into(), json!(deferred));
        map.insert("not_taken".into(), json!(not_taken));
        map.insert("held_elsewhere".into(), json!(held));
        map.insert("optional".into(), json!(optional));
        map.insert("skip_optional".into(), json!(skip_optional));
        map.insert("closed_by_heading".into(), json!(closed));
        map.insert("unlisted_tasks".into(), json!(unlisted));
        map.insert("warnings".into(), json!(warnings));
    }
}

/// One diagnostic as JSON: message, file, line, column, fix.
fn diagnostic_json(d: &Diagnostic, file: &str) -> Value {
    json!({"message": d.message_in(file), "file": file, "line": d.line, "column": d.column, "fix": d.fix_in(file)})
}

/// The JSON `kern status --json` prints for an error: `{"error": {message, file, line, column,
/// fix}}`, plus every problem of a refused SPEC.md under `diagnostics`.
pub(crate) fn error_json(error: &Error) -> Value {
    match error {
        Error::SpecRefused { file, diagnostics } => {
            let all: Vec<Value> = diagnostics
                .iter()
                .map(|d| diagnostic_json(d, file))
                .collect();
            json!({
                "error": all.first().cloned().unwrap_or_else(|| json!({"message": error.to_string()})),
                "diagnostics": all,
            })
        }
        other => {
            let text = other.to_string();
            let (message, fix) = match text.split_once(" — ") {
                Some((m, f)) => (m.to_string(), Value::from(f)),
                None => (text.clone(), Value::Null),
            };
            let file = match other {
                Error::SpecMissing { path } => Value::from(path.display().to_string()),
                _ => Value::Null,
            };
            json!({"error": {
                "message": message, "file": file, "line": null, "column": null, "fix": fix,
            }})
        }
    }
}

/// `kern status`: the report on stdout (human or `--json`), warnings on stderr; with `--dir`
/// only the state folder. With `--json`, an error is printed as JSON too.
pub(crate) fn run(settings: &Settings, json: bool, dir: bool) -> Result<()> {
    if dir {
        let ws = Workspace::open(settings)?;
        return print_out(&format!("{}\n", ws.state_dir.dir().display()));
    }
    match compute(settings) {
        Ok((_, report)) if json => print_out(&format!("{}\n", report.json)),
        Ok((_, report)) => {
            for w in &report.warnings {
                eprintln!("kern: {}", crate::text::clean(w));
            }
            print_out(&crate::text::clean_lines(&render_human(
                &report,
                terminal_width(),
            )))
        }
        Err(e) => {
            if json {
                print_out(&format!("{}\n", error_json(&e)))?;
            }
            Err(e)
        }
    }
}

/// Writes the command's output to stdout; a reader that closed the pipe early (`| head`) is
/// not an error.
pub(crate) fn print_out(text: &str) -> Result<()> {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(Error::io("stdout", e)),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_as_json() {
        let refused = Error::SpecRefused {
            file: "SPEC.md".into(),
            diagnostics: vec![Diagnostic {
                severity: spec::Severity::Error,
                line: 3,
                column: 5,
                message: "malformed task marker `[]`".into(),
                fix: "write `[ ]`".into(),
            }],
        };
        assert_eq!(
            error_json(&refused),
            json!({
                "error": {"message": "malformed task marker `[]`", "file": "SPEC.md", "line": 3, "column": 5, "fix": "write `[ ]`"},
                "diagnostics": [{"message": "malformed task marker `[]`", "file": "SPEC.md", "line": 3, "column": 5, "fix": "write `[ ]`"}],
            })
        );
        let missing = Error::SpecMissing {
            path: "SPEC.md".into(),
        };
        assert_eq!(
            error_json(&missing),
            json!({"error": {
                "message": "`SPEC.md` not found",
                "file": "SPEC.md", "line": null, "column": null,
                "fix": "run `kern init` to write a starter SPEC.md, or pass --spec PATH",
            }})
        );
        assert_eq!(
            error_json(&Error::Usage("bad flag".into())),
            json!({"error": {"message": "bad flag", "file": null, "line": null, "column": null, "fix": null}})
        );
    }
}
