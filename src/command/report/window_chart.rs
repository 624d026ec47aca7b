//! The HTML report's chart of each usage window over the night (`kern report --html`): one
//! inline SVG (`svg.window-chart`) per window an agent reported, the window's use as a line
//! through each stage's reading, and each stage's share as a bar in its task's colour from
//! the use before it to the use after, with a legend of each task's share below.
//!
//! The one decision a reader must know: the chart draws only what the stages reported — a
//! stage without an earlier reading of the window has a point on the line but no bar (its
//! share is unknown, as the text says), and nothing is interpolated between readings.

use std::fmt::Write as _;

use super::text::html_escape;
use crate::state::run_report::RunReport;

/// The chart's size and its plot area, in SVG units.
const WIDTH: f64 = 1100.0;
const HEIGHT: f64 = 190.0;
const LEFT: f64 = 60.0;
const RIGHT: f64 = 1070.0;
const TOP: f64 = 16.0;
const BOTTOM: f64 = 166.0;

/// Each task's colour, in turn.
const COLOURS: [&str; 8] = [
    "#0969da", "#8250df", "#bf3989", "#1a7f37", "#9a6700", "#cf222e", "#0550ae", "#6639ba",
];

/// One stage's reading of a window: when the stage started and ended (ms on the run's clock),
/// the use before (when known) and after, its task and stage.
struct Point<'a> {
    from_ms: i64,
    to_ms: i64,
    before: Option<f64>,
    after: f64,
    task: usize,
    stage: &'a str,
}

/// The charts of `run`'s usage windows, with a heading; empty when no stage reported one.
pub(super) fn charts(run: &RunReport) -> String {
    let (placed, span_ms) = super::html::placed(run);
    let mut windows: Vec<((&str, &str), Vec<Point<'_>>)> = Vec::new();
    for (ti, t) in run.tasks.iter().enumerate() {
        for (si, st) in t.stages.iter().enumerate() {
            let from_ms = placed.get(&(ti, si)).copied().unwrap_or(0);
            let to_ms = from_ms + i64::try_from(st.duration_ms).unwrap_or(0);
            for w in &st.window {
                let point = Point {
                    from_ms,
                    to_ms,
                    before: w.used_before,
                    after: w.used_after,
                    task: ti,
                    stage: st.stage.name(),
                };
                let key = (w.agent.as_str(), w.kind.as_str());
                match windows.iter_mut().find(|(k, _)| *k == key) {
                    Some((_, points)) => points.push(point),
                    None => windows.push((key, vec![point])),
                }
            }
        }
    }
    if windows.is_empty() {
        return String::new();
    }
    let mut out = String::from("<h2>Usage windows</h2>\n");
    for ((agent, kind), mut points) in windows {
        points.sort_by_key(|p| (p.to_ms, p.from_ms));
        chart(&mut out, run, agent, kind, &points, span_ms);
    }
    out
}

#[allow(clippy::cast_precision_loss)]
fn chart(
    out: &mut String,
    run: &RunReport,
    agent: &str,
    kind: &str,
    points: &[Point<'_>],
    span_ms: f64,
) {
    let x = |ms: i64| LEFT + (ms as f64 / span_ms).clamp(0.0, 1.0) * (RIGHT - LEFT);
    let y = |percent: f64| BOTTOM - (percent.clamp(0.0, 100.0) / 100.0) * (BOTTOM - TOP);
    let name = format!(
        "{}'s {} window",
        crate::text::clean(agent),
        crate::agent::stream::window::label(kind)
    );
    let _ = writeln!(
        out,
        "<h3>{}</h3>\n<svg class=\"window-chart\" data-window=\"{}\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {WIDTH} {HEIGHT}\" role=\"img\" aria-label=\"use of {} over the run\">",
        html_escape(&name),
        html_escape(kind),
        html_escape(&name)
    );
    for percent in [0.0, 50.0, 100.0] {
        let _ = writeln!(
            out,
            "<line class=\"grid\" x1=\"{LEFT}\" x2=\"{RIGHT}\" y1=\"{0:.1}\" y2=\"{0:.1}\"/><text class=\"axis\" x=\"{1}\" y=\"{2:.1}\" text-anchor=\"end\">{percent} %</text>",
            y(percent),
            LEFT - 6.0,
            y(percent) + 4.0
        );
    }
    for p in points {
        let Some(before) = p.before else {
            continue;
        };
        let title = &run.tasks[p.task].title;
        let (low, high) = (before.min(p.after), before.max(p.after));
        let _ = writeln!(
            out,
            "<rect class=\"share\" data-task=\"{}\" x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{}\"><title>{} — {}: {before} → {} % ({} points)</title></rect>",
            html_escape(title),
            x(p.from_ms),
            y(high),
            (x(p.to_ms) - x(p.from_ms)).max(3.0),
            (y(low) - y(high)).max(2.0),
            COLOURS[p.task % COLOURS.len()],
            html_escape(title),
            p.stage,
            p.after,
            ((p.after - before).max(0.0) * 10.0).round() / 10.0
        );
    }
    let line: Vec<String> = points
        .iter()
        .map(|p| format!("{:.1},{:.1}", x(p.to_ms), y(p.after)))
        .collect();
    let _ = writeln!(
        out,
        "<polyline class=\"use\" fill=\"none\" stroke=\"#1d2330\" stroke-width=\"1.5\" points=\"{}\"/>",
        line.join(" ")
    );
    if let Some(last) = points.last() {
        let _ = writeln!(
            out,
            "<text class=\"now\" x=\"{:.1}\" y=\"{:.1}\">{} %</text>",
            (x(last.to_ms) + 4.0).min(WIDTH - 40.0),
            y(last.after) - 4.0,
            last.after
        );
    }
    out.push_str("</svg>\n<ul class=\"legend window-shares\">");
    for (ti, t) in run.tasks.iter().enumerate() {
        let Some(share) = t
            .windows
            .iter()
            .find(|w| w.agent == agent && w.kind == kind)
        else {
            continue;
        };
        let used = match (share.known_stages, share.unknown_stages) {
            (0, _) => "share unknown".to_string(),
            (_, 0) => format!("{} %", share.used),
            _ => format!("at least {} %", share.used),
        };
        let _ = write!(
            out,
            "<li><i style=\"background:{}\"></i>{}: {used}</li>",
            COLOURS[ti % COLOURS.len()],
            html_escape(&t.title)
        );
    }
    out.push_str("</ul>\n");
}
