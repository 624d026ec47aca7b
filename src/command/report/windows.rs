//! The report's words for the usage windows: each task's share of each window its agents
//! reported (or the cost and tokens that stand in where none did), and a totals row per window.
//!
//! The one decision a reader must know: a share is "at least" when some of the task's stages
//! had no earlier reading of the window, and "unknown" when none had, never a guess.

use super::text::totals_rows;
use crate::state::run_report::{RunReport, TaskReport};
use crate::text::{clean, cost};

/// A task's share of each usage window its agents reported ("this task used 7 % of claude's
/// 5-hour window"); where none reported any, what stands in: its dollars and tokens.
pub(super) fn window_lines(t: &TaskReport) -> Vec<String> {
    use crate::agent::stream::window::label;
    if t.windows.is_empty() {
        if t.stages.is_empty() {
            return Vec::new();
        }
        return vec![if t.tokens > 0 {
            format!(
                "usage window: none reported — cost and tokens stand in: {}, {} tokens",
                cost(t.cost_usd),
                t.tokens
            )
        } else {
            format!(
                "usage window: none reported — cost stands in: {}",
                cost(t.cost_usd)
            )
        }];
    }
    t.windows
        .iter()
        .map(|w| {
            let name = format!("{}'s {} window", clean(&w.agent), label(&w.kind));
            match (w.known_stages, w.unknown_stages) {
                (_, 0) => format!("this task used {} % of {name} (now {} %)", w.used, w.after),
                (0, _) => format!(
                    "{name} at {} % after this task (its share unknown: no earlier reading)",
                    w.after
                ),
                (_, n) => format!(
                    "this task used at least {} % of {name} (now {} %; {n} stage{} without an earlier reading)",
                    w.used,
                    w.after,
                    if n == 1 { "" } else { "s" }
                ),
            }
        })
        .collect()
}

/// A run's totals, then a row per usage window its tasks' agents reported: where it is now and
/// what the run's tasks used of it, where known.
pub(super) fn run_rows(run: &RunReport) -> Vec<(&'static str, String)> {
    use crate::agent::stream::window::label;
    let mut rows = totals_rows(&run.totals, run.max_cost_usd);
    let mut windows: Vec<(String, String, f64, f64, u32)> = Vec::new();
    for share in run.tasks.iter().flat_map(|t| &t.windows) {
        match windows
            .iter_mut()
            .find(|(a, k, ..)| *a == share.agent && *k == share.kind)
        {
            Some(w) => {
                w.2 += share.used;
                w.3 = share.after;
                w.4 += share.unknown_stages;
            }
            None => windows.push((
                share.agent.clone(),
                share.kind.clone(),
                share.used,
                share.after,
                share.unknown_stages,
            )),
        }
    }
    for (i, (agent, kind, used, after, unknown)) in windows.into_iter().enumerate() {
        let used = (used * 10.0).round() / 10.0;
        rows.push((
            if i == 0 { "usage windows" } else { "" },
            format!(
                "{}'s {} window now {after} %; the run's tasks used {}{used} % of it{}",
                clean(&agent),
                label(&kind),
                if unknown > 0 { "at least " } else { "" },
                if unknown > 0 {
                    format!(
                        " ({unknown} stage{} without an earlier reading)",
                        if unknown == 1 { "" } else { "s" }
                    )
                } else {
                    String::new()
                }
            ),
        ));
    }
    rows
}
