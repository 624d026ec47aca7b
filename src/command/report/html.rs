//! `kern report --html FILE`: the night as one self-contained page — inline CSS and SVG, no
//! script, no font or image from anywhere, so it opens the same from a mail or an archive.
//!
//! The decision a reader must know: the timeline is drawn from the same model as the text
//! report, one SVG row (`g.task-row`) per task and one bar (`rect.stage`) per stage run,
//! placed by its start time on the run's clock and coloured by its outcome; usage-limit waits
//! and retry delays are hatched bars over it, so the shape of a night (where it waited, what
//! failed) shows at a glance. Under it, each usage window's use over the night with each
//! task's share ([`super::window_chart`]). Below come the same facts as the terminal page.
//! Every bit of outside text is escaped.

use std::fmt::Write as _;
use std::time::Duration;

use super::text::{self, html_escape};
use crate::stage::record::WaitKind;
use crate::state::run_report::{Report, RunReport, TaskEnd};
use crate::text::{cost, duration};

/// Width of the task labels, in SVG units.
const LABEL_W: f64 = 260.0;
/// Width of the time axis.
const AXIS_W: f64 = 760.0;
/// Width of the cost column.
const COST_W: f64 = 80.0;
/// Height of one task row.
const ROW_H: f64 = 28.0;
/// Height of the axis labels at the top.
const HEAD_H: f64 = 24.0;

const STYLE: &str = "
body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;margin:2rem auto;max-width:1120px;padding:0 1rem;color:#1d2330;background:#fff}
h1{font-size:1.25rem;margin:.2rem 0}h2{font-size:1.05rem;margin:1.6rem 0 .5rem}
.run{border-top:1px solid #d8dce3;padding-top:1rem;margin-top:1.5rem}
.meta{color:#5b6475;font-size:.9rem}
.finished h1{color:#1a7f37}.needs h1{color:#9a6700}.stopped h1{color:#cf222e}
svg.timeline,svg.window-chart{width:100%;height:auto;background:#fafbfc;border:1px solid #e3e6eb;border-radius:6px}
h3{font-size:.95rem;margin:1rem 0 .4rem}.share{opacity:.75}
ul.window-shares{list-style:none;padding:0;margin:.3rem 0}ul.window-shares li{display:inline-block;margin-right:1rem}
svg text{font:12px system-ui,sans-serif;fill:#1d2330}
svg .axis{fill:#8a93a3}svg .grid{stroke:#e3e6eb}
.stage{stroke:#fff;stroke-width:1}
.outcome-succeeded{fill:#2da44e}.outcome-failed,.outcome-error{fill:#cf222e}
.outcome-timed_out{fill:#e16f24}.outcome-violated{fill:#8250df}
.outcome-interrupted,.outcome-unfinished{fill:#8c959f}
.wait{fill:url(#hatch);opacity:.85}.retry{stroke:#1d2330;stroke-width:2}
.legend span{display:inline-block;margin-right:1rem}.legend i,.window-shares i{display:inline-block;width:.8rem;height:.8rem;margin-right:.3rem;vertical-align:-1px;border-radius:2px}
ul.needs li{margin:.2rem 0}
table{border-collapse:collapse;width:100%}td,th{text-align:left;vertical-align:top;padding:.35rem .5rem;border-bottom:1px solid #eef0f3}
th{font-weight:600;color:#5b6475}td.num{text-align:right;white-space:nowrap}
ul.details{margin:.2rem 0 0 0;padding-left:1.1rem;color:#3d4555;font-size:.88rem}
dl{display:grid;grid-template-columns:max-content auto;gap:.2rem 1rem}dt{color:#5b6475}dd{margin:0}
code{font:12.5px ui-monospace,SFMono-Regular,Menlo,monospace;background:#f3f4f6;padding:0 .2rem;border-radius:3px}
";

/// The whole page.
pub(super) fn page(report: &Report) -> String {
    let title = report
        .runs
        .last()
        .map(|r| r.headline.clone())
        .unwrap_or_default();
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\n<title>kern report — {}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n",
        html_escape(&title)
    );
    for run in &report.runs {
        run_section(&mut out, run);
    }
    for w in &report.watches {
        out.push_str("<section class=\"watch\">\n<h2>Watched</h2>\n<ul>\n");
        for (symbol, line) in super::night::watch_lines(w) {
            let _ = writeln!(
                out,
                "<li>{} {}</li>",
                html_escape(symbol),
                html_escape(&line)
            );
        }
        out.push_str("</ul>\n</section>\n");
    }
    out.push_str("</body>\n</html>\n");
    out
}

fn run_section(out: &mut String, run: &RunReport) {
    let class = match (run.end, run.exit_code) {
        (
            crate::state::run_report::EndState::Finished
            | crate::state::run_report::EndState::AtDeadline,
            Some(0),
        ) => "finished",
        (
            crate::state::run_report::EndState::Finished
            | crate::state::run_report::EndState::AtDeadline
            | crate::state::run_report::EndState::Running
            | crate::state::run_report::EndState::Restarted,
            _,
        ) => "needs",
        _ => "stopped",
    };
    let _ = writeln!(
        out,
        "<section class=\"run {class}\" data-run=\"{}\">\n<h1>{}</h1>",
        html_escape(&run.run),
        html_escape(&run.headline)
    );
    let _ = writeln!(
        out,
        "<p class=\"meta\">run <code>{}</code> · {} · {} → {} · {} of {} iterations · {}</p>",
        html_escape(&run.run),
        html_escape(&run.agent),
        run.started_at.map(|t| t.to_string()).unwrap_or_default(),
        run.last_at.map(|t| t.to_string()).unwrap_or_default(),
        run.iterations_run,
        run.iterations_asked,
        cost(run.totals.cost_usd)
    );
    timeline(out, run);
    out.push_str(&super::window_chart::charts(run));
    if !run.needs_you.is_empty() {
        out.push_str("<h2>Needs you</h2>\n<ul class=\"needs\">\n");
        for a in &run.needs_you {
            let _ = writeln!(out, "<li>{}</li>", code_spans(&a.text));
        }
        out.push_str("</ul>\n");
    }
    out.push_str("<h2>Tasks</h2>\n<table class=\"tasks\">\n<tr><th>task</th><th>what happened</th><th>cost</th><th>time</th></tr>\n");
    for t in &run.tasks {
        let _ = write!(
            out,
            "<tr class=\"task end-{}\"><td>{}{}</td><td>{}<ul class=\"details\">",
            end_name(t.end),
            html_escape(&t.title),
            t.issue.as_ref().map_or_else(String::new, |i| format!(
                " <a class=\"issue\" href=\"{}\">{}</a>",
                html_escape(&i.url),
                html_escape(&i.name)
            )),
            code_spans(&text::task_summary_plain(t))
        );
        for line in text::task_details(t) {
            let _ = write!(out, "<li>{}</li>", code_spans(&line));
        }
        let _ = writeln!(
            out,
            "</ul></td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
            cost(t.cost_usd),
            duration(Duration::from_millis(t.agent_ms + t.wait_ms))
        );
    }
    out.push_str("</table>\n<h2>Totals</h2>\n<dl class=\"totals\">\n");
    for (label, value) in super::windows::run_rows(run) {
        let _ = writeln!(
            out,
            "<dt>{}</dt><dd>{}</dd>",
            html_escape(label),
            code_spans(&value)
        );
    }
    for notice in &run.notices {
        let _ = writeln!(out, "<dt>note</dt><dd>{}</dd>", code_spans(notice));
    }
    out.push_str("</dl>\n</section>\n");
}

/// The time axis of a run `span_ms` long: at most five ticks from 0, a round step apart (1,
/// 2 or 5 times a power of ten below a second; whole seconds, minutes and hours above), each
/// labelled with its exact time — so no two labels read the same, however short the run.
fn ticks(span_ms: f64) -> Vec<(i64, String)> {
    const STEPS: [i64; 28] = [
        1,
        2,
        5,
        10,
        20,
        50,
        100,
        200,
        500,
        1_000,
        2_000,
        5_000,
        10_000,
        15_000,
        30_000,
        60_000,
        120_000,
        300_000,
        600_000,
        900_000,
        1_800_000,
        3_600_000,
        7_200_000,
        10_800_000,
        21_600_000,
        43_200_000,
        86_400_000,
        172_800_000,
    ];
    let span = span_ms.max(1.0);
    let step = STEPS
        .into_iter()
        .find(|&step| span / step as f64 <= 4.0)
        .unwrap_or(STEPS[STEPS.len() - 1]);
    let decimals = match step {
        1..=9 => 3,
        10..=99 => 2,
        100..=999 => 1,
        _ => 0,
    };
    (0..)
        .map(|i| i * step)
        .take_while(|&at| at as f64 <= span)
        .map(|at| {
            let label = match (at, decimals) {
                (0, _) => "0".to_string(),
                (_, 0) => duration(Duration::from_millis(u64::try_from(at).unwrap_or(0))),
                (_, d) => format!("{:.d$}s", at as f64 / 1000.0),
            };
            (at, label)
        })
        .collect()
}

/// Where each stage (task index, stage index) starts on the run's clock, in milliseconds
/// from the run's start, and how long the run's clock is. Timestamps are whole seconds, so
/// each stage starts at its timestamp or where the stage before it (in time) ended, whichever
/// is later: a fast run still shows its stages one after another.
pub(super) fn placed(run: &RunReport) -> (std::collections::HashMap<(usize, usize), i64>, f64) {
    let start_ms = run
        .started_at
        .map_or(0, crate::timestamp::Timestamp::epoch_seconds)
        * 1000;
    let mut order: Vec<(i64, usize, usize)> = Vec::new();
    for (ti, t) in run.tasks.iter().enumerate() {
        for (si, st) in t.stages.iter().enumerate() {
            let at = st.started_at.map_or(start_ms, |t| t.epoch_seconds() * 1000);
            order.push((at, ti, si));
        }
    }
    order.sort_by_key(|&(at, ti, si)| (at, run.tasks[ti].stages[si].iteration, ti, si));
    let mut placed: std::collections::HashMap<(usize, usize), i64> =
        std::collections::HashMap::new();
    let mut cursor = start_ms;
    for &(at, ti, si) in &order {
        let begin = at.max(cursor);
        placed.insert((ti, si), begin - start_ms);
        cursor = begin + i64::try_from(run.tasks[ti].stages[si].duration_ms).unwrap_or(0);
    }
    let last_ms = run.last_at.map_or(start_ms, |t| t.epoch_seconds() * 1000);
    (placed, (last_ms.max(cursor) - start_ms).max(1) as f64)
}

/// The SVG timeline: one row per task, one bar per stage, waits hatched, retries ticked.
fn timeline(out: &mut String, run: &RunReport) {
    let (placed, span_ms) = placed(run);
    let start_ms = run
        .started_at
        .map_or(0, crate::timestamp::Timestamp::epoch_seconds)
        * 1000;
    let x_of = |ms: i64| LABEL_W + (ms as f64 / span_ms).clamp(0.0, 1.0) * AXIS_W;
    let w_of = |ms: u64| (ms as f64 / span_ms * AXIS_W).max(3.0);
    let height = HEAD_H + ROW_H * run.tasks.len().max(1) as f64 + 8.0;
    let width = LABEL_W + AXIS_W + COST_W;
    let _ = writeln!(
        out,
        "<svg class=\"timeline\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {width} {height}\" role=\"img\" aria-label=\"timeline of the run\">"
    );
    out.push_str("<defs><pattern id=\"hatch\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"#f6e7b0\"/><line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#bf8700\" stroke-width=\"2\"/></pattern></defs>\n");
    for (i, (at_ms, label)) in ticks(span_ms).into_iter().enumerate() {
        let x = x_of(at_ms);
        let anchor = if i == 0 {
            "start"
        } else if x > LABEL_W + AXIS_W - 30.0 {
            "end"
        } else {
            "middle"
        };
        let _ = writeln!(
            out,
            "<line class=\"grid\" x1=\"{x:.1}\" y1=\"{HEAD_H}\" x2=\"{x:.1}\" y2=\"{height}\"/><text class=\"axis\" x=\"{x:.1}\" y=\"16\" text-anchor=\"{anchor}\">{label}</text>"
        );
    }
    let _ = writeln!(
        out,
        "<text class=\"axis\" x=\"{:.1}\" y=\"16\" text-anchor=\"end\">cost</text>",
        width - 6.0
    );
    for (row, t) in run.tasks.iter().enumerate() {
        let y = HEAD_H + ROW_H * row as f64;
        let _ = writeln!(
            out,
            "<g class=\"task-row end-{}\" data-task=\"{}\">",
            end_name(t.end),
            html_escape(&t.title)
        );
        let _ = writeln!(
            out,
            "<text x=\"6\" y=\"{:.1}\">{}</text>",
            y + ROW_H / 2.0 + 4.0,
            html_escape(&crate::text::truncate(&t.title, 36))
        );
        for (si, s) in t.stages.iter().enumerate() {
            let at = placed.get(&(row, si)).copied().unwrap_or(0);
            let _ = writeln!(
                out,
                "<rect class=\"stage outcome-{}\" data-stage=\"{}\" data-outcome=\"{}\" x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" rx=\"3\"><title>{} · {} · {} · {}{}</title></rect>",
                html_escape(&s.outcome),
                s.stage.name(),
                html_escape(&s.outcome),
                x_of(at),
                y + 5.0,
                w_of(s.duration_ms),
                ROW_H - 10.0,
                s.stage.name(),
                html_escape(&s.outcome),
                duration(Duration::from_millis(s.duration_ms)),
                cost(s.cost_usd),
                s.note
                    .as_deref()
                    .map(|n| format!(" — {}", html_escape(&crate::text::first_line(n))))
                    .unwrap_or_default()
            );
            for w in &s.waits {
                let w_at = (w.started_at.epoch_seconds() * 1000 - start_ms).max(at);
                let kind = match w.kind {
                    WaitKind::UsageLimit => "usage_limit",
                    WaitKind::Retry => "retry",
                };
                let _ = writeln!(
                    out,
                    "<rect class=\"wait {kind}\" x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\"><title>{} {} — {}</title></rect>",
                    x_of(w_at),
                    y + 8.0,
                    w_of(w.duration_ms),
                    ROW_H - 16.0,
                    if kind == "retry" {
                        "retry delay"
                    } else {
                        "usage-limit wait"
                    },
                    duration(Duration::from_millis(w.duration_ms)),
                    html_escape(&w.reason)
                );
                if w.kind == WaitKind::Retry {
                    let x = x_of(w_at);
                    let _ = writeln!(
                        out,
                        "<line class=\"retry\" x1=\"{x:.1}\" y1=\"{:.1}\" x2=\"{x:.1}\" y2=\"{:.1}\"/>",
                        y + 2.0,
                        y + ROW_H - 2.0
                    );
                }
            }
        }
        let _ = writeln!(
            out,
            "<text class=\"cost\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>\n</g>",
            width - 6.0,
            y + ROW_H / 2.0 + 4.0,
            cost(t.cost_usd)
        );
    }
    out.push_str("</svg>\n<p class=\"legend meta\"><span><i style=\"background:#2da44e\"></i>succeeded</span><span><i style=\"background:#cf222e\"></i>failed</span><span><i style=\"background:#e16f24\"></i>timed out</span><span><i style=\"background:#8250df\"></i>violation</span><span><i style=\"background:#8c959f\"></i>interrupted / unfinished</span><span><i style=\"background:#f6e7b0;border:1px solid #bf8700\"></i>waiting (usage limit, retry delay)</span></p>\n");
}

fn end_name(end: TaskEnd) -> String {
    serde_json::to_value(end)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// Escaped text whose kern `code` spans (between backticks) become `<code>`.
fn code_spans(text: &str) -> String {
    let mut out = String::new();
    for (i, part) in text.split('`').enumerate() {
        if i % 2 == 1 {
            let _ = write!(out, "<code>{}</code>", html_escape(part));
        } else {
            out.push_str(&html_escape(part));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::run_report::tests::night;

    #[test]
    fn the_time_axis_has_round_ticks_whose_labels_never_repeat() {
        let labels = |span_ms: f64| -> Vec<String> {
            ticks(span_ms).into_iter().map(|(_, label)| label).collect()
        };
        let cases: &[(f64, &[&str])] = &[
            (0.0, &["0", "0.001s"]),
            (12.0, &["0", "0.005s", "0.010s"]),
            (30.0, &["0", "0.01s", "0.02s", "0.03s"]),
            (240.0, &["0", "0.1s", "0.2s"]),
            (1_570.0, &["0", "0.5s", "1.0s", "1.5s"]),
            (4_500.0, &["0", "2s", "4s"]),
            (9_000.0, &["0", "5s"]),
            (130_000.0, &["0", "1m", "2m"]),
            (5_400_000.0, &["0", "30m", "1h", "1h 30m"]),
            (36_000_000.0, &["0", "3h", "6h", "9h"]),
        ];
        for (span, want) in cases {
            assert_eq!(labels(*span), *want, "{span}");
        }
        for span in [
            1.0,
            3.0,
            7.0,
            33.0,
            999.0,
            1_001.0,
            59_999.0,
            3_600_001.0,
            9e7,
        ] {
            let all = labels(span);
            let mut unique = all.clone();
            unique.dedup();
            assert_eq!(all, unique, "{span}");
            assert!((2..=5).contains(&all.len()), "{span}: {all:?}");
        }
    }

    #[test]
    fn the_page_has_one_row_per_task_and_one_bar_per_stage() {
        let report = night();
        let page = page(&report);
        let run = report.runs.last().unwrap();
        let rows = page.matches("<g class=\"task-row").count();
        let bars = page.matches("<rect class=\"stage ").count();
        let tasks: usize = report.runs.iter().map(|r| r.tasks.len()).sum();
        let stages: usize = report
            .runs
            .iter()
            .flat_map(|r| &r.tasks)
            .map(|t| t.stages.len())
            .sum();
        assert_eq!((rows, bars), (tasks, stages));
        assert_eq!(run.tasks.len(), 5);
        assert!(page.contains("class=\"wait usage_limit\""));
        assert!(!page.contains("<script"));
        assert!(
            !page.contains("http://")
                || page.matches("http://").count()
                    == page.matches("xmlns=\"http://www.w3.org/2000/svg\"").count()
        );
    }

    #[test]
    fn outside_text_is_escaped() {
        assert_eq!(
            code_spans("a <b> `c&d`"),
            "a &lt;b&gt; <code>c&amp;d</code>"
        );
    }
}
