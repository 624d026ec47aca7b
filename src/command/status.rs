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

use std::io::Write;

use serde_json::{Value, json};

use crate::error::{Error, Result};
use crate::settings::Settings;
use crate::spec::{self, Diagnostic, Document, TaskKind};
use crate::state::journal::{self, TaskStart};
use crate::state::lock::RunLock;
use crate::state::resume::{self, ResumePoint, StageFiles};
use crate::workspace::Workspace;

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

/// Adds what other tools' markers and closing headings mean for this file: the tasks held
/// elsewhere, the optional ones, the ones done by a heading, the warnings and the lines that
/// look like tasks without being list items.
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

/// The width human output fits titles into: the terminal's when stdout is one, else
/// `$COLUMNS` when set, else none (titles whole).
pub(crate) fn terminal_width() -> Option<usize> {
    let term = console::Term::stdout();
    if term.is_term()
        && let Some((_, width)) = term.size_checked()
    {
        return Some(width as usize);
    }
    std::env::var("COLUMNS").ok()?.trim().parse().ok()
}

/// `line` with `title` (quoted, once) cut so that the whole line fits `width` columns; the cut
/// ends in `…`. Without a width, or when even a short title would not fit, it is kept whole.
pub(crate) fn fit_title(line: &str, title: &str, width: Option<usize>) -> String {
    let title = &crate::text::clean(title);
    let quoted = spec::quote_title(title);
    let whole = line.replacen("{title}", &quoted, 1);
    let Some(width) = width else {
        return whole;
    };
    let others = console::measure_text_width(&line.replacen("{title}", "", 1));
    let room = width.saturating_sub(others);
    if console::measure_text_width(&whole) <= width || room < 8 {
        return whole;
    }
    let cut = console::truncate_str(title, room.saturating_sub(2), "…");
    line.replacen("{title}", &spec::quote_title(&cut), 1)
}

/// How many tasks held elsewhere the human summary lists one by one.
const HELD_SHOWN: usize = 8;

/// The running run's lines (empty when none runs): iteration, task, stage with its elapsed
/// time and the agent's last tool call, cost so far.
fn render_running(r: &Value) -> String {
    use crate::text::{cost, duration};
    use std::time::Duration;
    if !r.is_object() {
        return String::new();
    }
    let secs = |v: &Value| duration(Duration::from_secs(v.as_u64().unwrap_or(0)));
    let mut out = format!("running:   pid {}, for {}", r["pid"], secs(&r["elapsed_s"]));
    if let (Some(i), Some(n)) = (r["iteration"].as_u64(), r["iterations"].as_u64()) {
        out.push_str(&format!(", iteration {i} of {n}"));
    }
    out.push('\n');
    match r["tasks"].as_array().filter(|t| t.len() > 1) {
        // Parallel tasks (`-j`): one line each.
        Some(tasks) => {
            for t in tasks {
                out.push_str(&format!(
                    "  task:    {}",
                    crate::text::clean(t["task"].as_str().unwrap_or(""))
                ));
                if let Some(stage) = t["stage"].as_str() {
                    out.push_str(&format!(" — {stage}, for {}", secs(&t["stage_elapsed_s"])));
                    if let Some(tool) = t["last_tool"].as_str() {
                        out.push_str(&format!(", last tool call: {}", crate::text::clean(tool)));
                    }
                }
                out.push('\n');
            }
        }
        None => {
            if let Some(task) = r["task"].as_str() {
                out.push_str(&format!("  task:    {}\n", crate::text::clean(task)));
            }
            match r["stage"].as_str() {
                Some(stage) => {
                    out.push_str(&format!(
                        "  stage:   {stage}, for {}",
                        secs(&r["stage_elapsed_s"])
                    ));
                    if let Some(tool) = r["last_tool"].as_str() {
                        out.push_str(&format!(" — last tool call: {}", crate::text::clean(tool)));
                    }
                    out.push('\n');
                }
                None => out.push_str(&format!(
                    "  doing:   {}\n",
                    r["phase"].as_str().unwrap_or("?")
                )),
            }
        }
    }
    if let Some(beat) = r["beat"].as_object() {
        let moved =
            serde_json::from_value::<crate::state::lock::Heartbeat>(Value::Object(beat.clone()))
                .map(|b| b.moved.to_string())
                .unwrap_or_default();
        out.push_str(&format!(
            "  moved:   {} ago: {moved}\n",
            secs(&r["moved_s"])
        ));
    }
    let spent = cost(r["cost_usd"].as_f64().unwrap_or(0.0));
    match r["max_cost_usd"].as_f64() {
        Some(limit) => out.push_str(&format!("  cost:    {spent} so far, of {}\n", cost(limit))),
        None => out.push_str(&format!("  cost:    {spent} so far\n")),
    }
    out.push_str("  follow:  kern log -f\n");
    out
}

/// Renders the human summary; titles are cut to `width` columns when given.
pub(crate) fn render_human(report: &StatusReport, width: Option<usize>) -> String {
    let j = &report.json;
    let c = &j["counts"];
    let mut out = String::new();
    out.push_str(&format!(
        "spec:      {}\n",
        j["spec"].as_str().unwrap_or("")
    ));
    out.push_str(&format!(
        "tasks:     {} pending, {} in progress, {} done, {} blocked\n",
        c["pending"], c["in_progress"], c["done"], c["blocked"]
    ));
    let list = |key: &str| j[key].as_array().cloned().unwrap_or_default();
    let held = list("held_elsewhere");
    for (k, t) in held.iter().take(HELD_SHOWN).enumerate() {
        let label = if k == 0 { "held:" } else { "" };
        let line = format!(
            "{label:<11}line {} {} {{title}} (another tool holds it; kern leaves it)",
            t["line"],
            t["marker"].as_str().unwrap_or("")
        );
        out.push_str(&fit_title(&line, t["title"].as_str().unwrap_or(""), width));
        out.push('\n');
    }
    if held.len() > HELD_SHOWN {
        out.push_str(&format!(
            "           … and {} more (`kern status --json` lists them all)\n",
            held.len() - HELD_SHOWN
        ));
    }
    out.push_str(&super::tracked::render(j, &|line, title| {
        fit_title(line, title, width)
    }));
    let stale = list("stale_learnings");
    for (k, e) in stale.iter().take(HELD_SHOWN).enumerate() {
        let label = if k == 0 { "stale:" } else { "" };
        out.push_str(&format!(
            "{label:<11}LEARNINGS.md:{} names a path that no longer exists; left out of prompts: {}\n",
            e["line"],
            e["text"].as_str().unwrap_or("")
        ));
    }
    let deferred = list("deferred");
    for (k, t) in deferred.iter().take(HELD_SHOWN).enumerate() {
        let label = if k == 0 { "deferred:" } else { "" };
        let line = format!(
            "{label:<11}line {} {{title}} (its title says it waits; kern leaves it)",
            t["line"]
        );
        out.push_str(&fit_title(&line, t["title"].as_str().unwrap_or(""), width));
        out.push('\n');
    }
    if deferred.len() > HELD_SHOWN {
        out.push_str(&format!(
            "           … and {} more (`kern status --json` lists them all)\n",
            deferred.len() - HELD_SHOWN
        ));
    }
    let optional = list("optional");
    let open = optional
        .iter()
        .filter(|t| t["state"] == "pending" || t["state"] == "in_progress")
        .count();
    if !optional.is_empty() {
        let how = if j["skip_optional"] == json!(true) {
            "left alone (--skip-optional)"
        } else {
            "taken after every other task"
        };
        out.push_str(&format!(
            "optional:  {} optional task{} ([ ]*), {open} open: {how}\n",
            optional.len(),
            if optional.len() == 1 { "" } else { "s" }
        ));
    }
    let closed = list("closed_by_heading");
    if !closed.is_empty() {
        let mut headings: Vec<u64> = closed
            .iter()
            .filter_map(|t| t["heading_line"].as_u64())
            .collect();
        headings.dedup();
        let lines: Vec<String> = headings.iter().map(u64::to_string).collect();
        out.push_str(&format!(
            "closed:    {} task{} done by a heading marked [x] or ✅ (line{} {})\n",
            closed.len(),
            if closed.len() == 1 { "" } else { "s" },
            if lines.len() == 1 { "" } else { "s" },
            lines.join(", ")
        ));
    }
    match j["next"].as_object() {
        Some(next) => {
            let parents: Vec<&str> = next["parents"]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let path = if parents.is_empty() {
                String::new()
            } else {
                format!(" (in {})", parents.join(" › "))
            };
            let line = format!(
                "next:      line {}: {{title}}{path} — {}",
                next["line"],
                next["reason"].as_str().unwrap_or("")
            );
            out.push_str(&fit_title(
                &line,
                next["title"].as_str().unwrap_or(""),
                width,
            ));
            out.push('\n');
            let joined = |key: &str| {
                next[key]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(Value::as_str)
                            .collect::<Vec<_>>()
                            .join("; ")
                    })
                    .unwrap_or_default()
            };
            if let Some(issue) = next["issue"].as_object() {
                out.push_str(&format!(
                    "issue:     {} ({})\n",
                    issue["name"].as_str().unwrap_or(""),
                    issue["url"].as_str().unwrap_or("")
                ));
            }
            for (label, key) in [("must:", "must"), ("scope:", "scope")] {
                let text = joined(key);
                if !text.is_empty() {
                    out.push_str(&format!("{label:<11}{text}\n"));
                }
            }
            if let Some(level) = next["level"].as_u64() {
                out.push_str(&format!(
                    "level:     {level} — {}{}\n",
                    next["level_why"].as_str().unwrap_or(""),
                    match level {
                        0 => "; no research stage",
                        1 => "; a short research",
                        3 => "; research and review go deep",
                        _ => "",
                    }
                ));
            }
            if let Some(r) = next["error_research"].as_object() {
                let n = |key: &str| r.get(key).and_then(Value::as_u64).unwrap_or(0);
                let tried = r.get("tried").and_then(Value::as_array).map_or(0, Vec::len);
                out.push_str(&format!(
                    "errors:    {}, {} so far, {} tried — {}\n",
                    r.get("what").and_then(Value::as_str).unwrap_or(""),
                    crate::text::count(n("seen") as usize, "attempt", "attempts"),
                    crate::text::count(tried, "approach", "approaches"),
                    if r.get("saturated") == Some(&json!(true)) {
                        "saturated: all standard approaches exhausted, decomposition next"
                    } else {
                        "the next attempt is told which are not tried yet"
                    }
                ));
            }
            if next["tests_read_only"] == json!(true) {
                out.push_str("tests:     read-only (its Tests note)\n");
            }
            if let Some(tested) = next.get("tests_first") {
                out.push_str(&crate::pipeline::tests_first::status_line(tested));
            }
            out.push_str(&format!(
                "resume at: {}\n",
                j["resume"].as_str().unwrap_or("research")
            ));
        }
        None => {
            let unlisted = list("unlisted_tasks");
            let not_taken = list("not_taken");
            let open = c["pending"].as_u64().unwrap_or(0) + c["in_progress"].as_u64().unwrap_or(0);
            if unlisted.is_empty() && open > 0 && !not_taken.is_empty() {
                out.push_str(&format!(
                    "next:      nothing kern may take; {open} open task{} wait{}:\n",
                    if open == 1 { "" } else { "s" },
                    if open == 1 { "s" } else { "" }
                ));
                for why in not_taken.iter().take(HELD_SHOWN) {
                    out.push_str(&format!("             {}\n", why.as_str().unwrap_or("")));
                }
                if not_taken.len() > HELD_SHOWN {
                    out.push_str(&format!(
                        "             … and {} more (`kern status --json` lists them all)\n",
                        not_taken.len() - HELD_SHOWN
                    ));
                }
            } else if unlisted.is_empty() {
                out.push_str("next:      nothing left to do\n");
            } else {
                let lines: Vec<String> = unlisted.iter().map(Value::to_string).collect();
                out.push_str(&format!(
                    "next:      nothing left to do — but line{} {} look{} like tasks without being list items: write `- ` before the box\n",
                    if lines.len() == 1 { "" } else { "s" },
                    lines.join(", "),
                    if lines.len() == 1 { "s" } else { "" },
                ));
            }
        }
    }
    match j["lock"].as_object() {
        Some(lock) if lock["live"] == json!(true) => out.push_str(&format!(
            "lock:      held by kern pid {} since {} (phase: {})\n",
            lock["pid"],
            lock["started_at"].as_str().unwrap_or("?"),
            lock["phase"].as_str().unwrap_or("?")
        )),
        Some(lock) => out.push_str(&format!(
            "lock:      stale (pid {} is gone); the next run takes it over\n",
            lock["pid"]
        )),
        None => out.push_str("lock:      free\n"),
    }
    out.push_str(&render_running(&j["running"]));
    for (k, w) in list("windows").iter().enumerate() {
        let label = if k == 0 { "window:" } else { "" };
        out.push_str(&format!(
            "{label:<11}{}\n",
            crate::text::clean(w["line"].as_str().unwrap_or(""))
        ));
    }
    out.push_str(&super::running::watch_line(
        &j["watch"],
        j["lock"]["live"] == json!(true),
        &super::running::local_clock,
    ));
    out.push_str(&format!(
        "state:     {}\n",
        j["state_dir"].as_str().unwrap_or("")
    ));
    let saved = j["saved_refs"].as_u64().unwrap_or(0);
    if saved > 0 {
        out.push_str(&format!(
            "saved:     {saved} ref{} of work kern set aside — list them with `git for-each-ref refs/kern`\n",
            if saved == 1 { "" } else { "s" }
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn titles_are_quoted_as_written_and_cut_to_the_width() {
        let cases: &[(&str, &str, Option<usize>, &str)] = &[
            (
                "next: {title} — why",
                "Add it",
                None,
                "next: `Add it` — why",
            ),
            (
                "next: {title} — why",
                "run `gh repo create` first",
                None,
                "next: \"run `gh repo create` first\" — why",
            ),
            (
                "next: {title} — why",
                "a title that is far too long for this narrow terminal",
                Some(40),
                "next: `a title that is far too l…` — why",
            ),
            (
                "next: {title} — why",
                "short",
                Some(40),
                "next: `short` — why",
            ),
            (
                "next: {title} — why",
                "no room for a title at all here",
                Some(12),
                "next: `no room for a title at all here` — why",
            ),
        ];
        for (line, title, width, expected) in cases {
            let got = fit_title(line, title, *width);
            assert_eq!(got, *expected, "{title:?} {width:?}");
            if let Some(w) = width
                && got.contains('…')
            {
                assert!(console::measure_text_width(&got) <= *w, "{got}");
            }
        }
    }

    #[test]
    fn many_held_tasks_are_summed_up() {
        let held: Vec<Value> = (1..=10)
            .map(|k| json!({"title": format!("t{k}"), "line": k, "marker": "[-]"}))
            .collect();
        let report = StatusReport {
            json: json!({"spec": "SPEC.md", "counts": {"pending": 0, "in_progress": 0, "done": 0, "blocked": 0},
                         "held_elsewhere": held, "next": null, "lock": null, "state_dir": "/s"}),
            warnings: Vec::new(),
            resume: None,
            start: None,
        };
        let text = render_human(&report, None);
        assert!(
            text.contains("held:      line 1 [-] `t1` (another tool holds it; kern leaves it)\n"),
            "{text}"
        );
        assert!(text.contains("           line 8 [-] `t8`"), "{text}");
        assert!(!text.contains("`t9`"), "{text}");
        assert!(
            text.contains("           … and 2 more (`kern status --json` lists them all)\n"),
            "{text}"
        );
    }

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
