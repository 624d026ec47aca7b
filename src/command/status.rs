//! `kern status`: tasks by state, the next task, the resume point, the lock holder and the
//! state folder — for a person (stderr) or, with `--json`, for a script (one object on stdout).
//! `--dir` prints only the state folder, so `jq .result "$(kern status --dir)/stage2.json"`
//! works. Reads only: status never writes, locks or runs anything.

use serde_json::{Value, json};

use crate::error::Result;
use crate::settings::Settings;
use crate::spec::{self, Document};
use crate::state::journal::{self, TaskStart};
use crate::state::lock::RunLock;
use crate::state::resume::{self, ResumePoint, StageFiles};
use crate::workspace::Workspace;

/// Everything `kern status` reports, computed once.
pub struct StatusReport {
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
pub fn compute(settings: &Settings) -> Result<(Workspace, StatusReport)> {
    let (ws, _, report) = compute_with_spec(settings)?;
    Ok((ws, report))
}

/// [`compute`], also handing back the parsed SPEC.md, so that the dry run does not parse a
/// large file a second time.
pub fn compute_with_spec(settings: &Settings) -> Result<(Workspace, Document, StatusReport)> {
    let ws = Workspace::open(settings)?;
    let (_, doc, warnings) = ws.load_spec()?;
    let counts = doc.counts();
    let selection = spec::select(&doc);
    let next = selection.as_ref().map(|sel| {
        let task = &doc.tasks()[sel.task];
        let parents: Vec<&str> = doc
            .ancestors(sel.task)
            .iter()
            .rev() // root first
            .map(|&a| doc.tasks()[a].title.as_str())
            .collect();
        json!({
            "title": task.title,
            "line": task.line,
            "state": task.state.as_str(),
            "parents": parents,
            "reason": sel.reason.to_string(),
        })
    });
    // The loop's own inference, read-only: stale files are named by the run, not removed here.
    let (resume, start) = match &selection {
        Some(sel) => {
            let identity = doc.identity(sel.task);
            let files = StageFiles::read(&ws.state_dir, &identity);
            let has_research = doc.tasks()[sel.task].research().is_some();
            let start = journal::load::<TaskStart>(&ws.state_dir.task_start())
                .filter(|s| s.covers(&identity));
            (Some(resume::infer(&files, has_research)), start)
        }
        None => (None, None),
    };
    let inspected = RunLock::inspect(&ws.repo.run_lock_path());
    let lock = inspected.as_ref().map(|(record, live)| {
        let mut v = serde_json::to_value(record).unwrap_or(Value::Null);
        if let Value::Object(map) = &mut v {
            map.insert("live".into(), json!(live));
        }
        v
    });
    // A live run: what it does now (task, stage, elapsed, last tool call, cost so far).
    let running = inspected
        .as_ref()
        .filter(|(_, live)| *live)
        .map(|(record, _)| crate::state::running::read(record, &ws.state_dir));
    let json = json!({
        "spec": ws.spec_path.display().to_string(),
        "counts": counts,
        "next": next,
        "resume": resume.as_ref().map(ResumePoint::name),
        "lock": lock,
        "running": running,
        "state_dir": ws.state_dir.dir().display().to_string(),
    });
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

/// The running run's lines (empty when none runs): iteration, task, stage with its elapsed
/// time and the agent's last tool call, cost so far.
fn render_running(r: &Value) -> String {
    use crate::reporter::text::{cost, duration};
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
    if let Some(task) = r["task"].as_str() {
        out.push_str(&format!(
            "  task:    {}\n",
            crate::reporter::text::clean(task)
        ));
    }
    match r["stage"].as_str() {
        Some(stage) => {
            out.push_str(&format!(
                "  stage:   {stage}, for {}",
                secs(&r["stage_elapsed_s"])
            ));
            if let Some(tool) = r["last_tool"].as_str() {
                out.push_str(&format!(
                    " — last tool call: {}",
                    crate::reporter::text::clean(tool)
                ));
            }
            out.push('\n');
        }
        None => out.push_str(&format!(
            "  doing:   {}\n",
            r["phase"].as_str().unwrap_or("?")
        )),
    }
    let spent = cost(r["cost_usd"].as_f64().unwrap_or(0.0));
    match r["max_cost_usd"].as_f64() {
        Some(limit) => out.push_str(&format!("  cost:    {spent} so far, of {}\n", cost(limit))),
        None => out.push_str(&format!("  cost:    {spent} so far\n")),
    }
    out.push_str("  follow:  kern log -f\n");
    out
}

/// Renders the human summary.
pub fn render_human(report: &StatusReport) -> String {
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
            out.push_str(&format!(
                "next:      line {}: {}{path} — {}\n",
                next["line"],
                next["title"].as_str().unwrap_or(""),
                next["reason"].as_str().unwrap_or("")
            ));
            out.push_str(&format!(
                "resume at: {}\n",
                j["resume"].as_str().unwrap_or("research")
            ));
        }
        None => out.push_str("next:      nothing left to do\n"),
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
    out.push_str(&format!(
        "state:     {}\n",
        j["state_dir"].as_str().unwrap_or("")
    ));
    out
}
