//! The human page of `kern status` (and of `kern -n`, which prints it too): the JSON report
//! rendered as aligned `label:` lines, the running run's lines, and titles fitted to the terminal.
//!
//! The one decision a reader must know: the page reads only [`StatusReport::json`] (and the local
//! clock, to show the watchdog's times), so it never says what `--json` does not. Titles are quoted as
//! written ([`crate::spec::quote_title`]) and cut with `…` to the terminal's width; long lists
//! show their first [`HELD_SHOWN`] entries and say how many more `--json` lists.

use serde_json::{Value, json};

use super::StatusReport;
use crate::spec;

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
    out.push_str(&crate::command::tracked::render(j, &|line, title| {
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
    out.push_str(&crate::command::running::watch_line(
        &j["watch"],
        j["lock"]["live"] == json!(true),
        &crate::command::running::local_clock,
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
}
