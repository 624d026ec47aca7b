//! What each stage sees (DESIGN.md section 9), gathered in one place: the task block, the
//! learnings, recent commits, the diff, the previous stage's result and the attempt situation,
//! and the model each stage runs with.
//!
//! The one decision a reader must know: the loop and the dry run both call
//! [`StageInputs::gather`], so `kern -n` shows the prompt a run would send, not a look-alike.
//! What only a run can know (the implement summary, research notes not yet written) renders as
//! a placeholder naming it.

use std::path::{Path, PathBuf};

use super::PromptInputs;
use crate::agent::Agent;
use crate::error::Result;
use crate::settings::Settings;
use crate::spec::Document;
use crate::stage::Stage;
use crate::state::journal::TaskStart;
use crate::workspace::Workspace;

/// The research notes, before research ran.
const RESEARCH_PLACEHOLDER: &str = "(the research stage's notes)";
/// The implement summary, before implement ran.
const SUMMARY_PLACEHOLDER: &str = "(the implement stage's summary)";

/// Everything one stage's prompt is rendered from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StageInputs {
    task: String,
    learnings: Option<String>,
    commits: String,
    diff: Option<String>,
    prev_result: Option<String>,
    attempts: Option<String>,
    spec_path: String,
}

impl StageInputs {
    /// Gathers the inputs of `stage` for task `task` of `doc`. `start` is the task's start
    /// record (its diff base and left-out paths), when it has one; `implement_summary` is what
    /// implement said, when it ran.
    pub fn gather(
        ws: &Workspace,
        settings: &Settings,
        doc: &Document,
        task: usize,
        stage: Stage,
        start: Option<&TaskStart>,
        implement_summary: Option<&str>,
    ) -> Result<StageInputs> {
        let own = ws.own_files();
        let own: Vec<&Path> = own.iter().map(PathBuf::as_path).collect();
        let commits = ws.repo.recent_commits(10, &own, super::BUDGET_COMMITS)?;
        let t = &doc.tasks()[task];
        let mut inputs = StageInputs {
            task: task_text(doc, task),
            learnings: None,
            commits,
            diff: None,
            prev_result: None,
            attempts: None,
            spec_path: ws.spec_display.clone(),
        };
        match stage {
            Stage::Research => {
                inputs.learnings = Some(crate::learnings::read(&ws.learnings_path)?);
            }
            Stage::Implement => {
                inputs.learnings = Some(crate::learnings::read(&ws.learnings_path)?);
                inputs.prev_result = Some(
                    t.research()
                        .map_or_else(|| RESEARCH_PLACEHOLDER.to_string(), |n| n.text.clone()),
                );
                inputs.attempts = Some(attempts_text(t.attempts(), settings.max_attempts));
            }
            Stage::Review => {
                let base = match start {
                    Some(start) => start.base_oid(),
                    None => ws.repo.head_oid(),
                };
                let mut exclude = own;
                if let Some(start) = start {
                    exclude.extend(start.excluded.iter().map(PathBuf::as_path));
                }
                inputs.diff = Some(ws.repo.diff_since(base, &exclude, super::BUDGET_DIFF)?);
                inputs.prev_result =
                    Some(implement_summary.unwrap_or(SUMMARY_PLACEHOLDER).to_string());
            }
        }
        Ok(inputs)
    }

    /// The inputs as the template renders them.
    pub fn prompt_inputs(&self) -> PromptInputs<'_> {
        PromptInputs {
            task: Some(&self.task),
            learnings: self.learnings.as_deref(),
            commits: Some(&self.commits),
            diff: self.diff.as_deref(),
            prev_result: self.prev_result.as_deref(),
            attempts: self.attempts.as_deref(),
            spec_path: Some(&self.spec_path),
        }
    }
}

/// The model for a stage: `--model`, else the template's front matter. The front matter names
/// a Claude model, which means nothing to Codex: Codex gets a model only from `--model`
/// (DESIGN.md section 4), else its own default.
pub fn model_for(
    settings: &Settings,
    templates: &super::Templates,
    stage: Stage,
) -> Option<String> {
    settings.model.clone().or_else(|| match settings.agent {
        Agent::Codex => None,
        _ => templates.get(stage).model.clone(),
    })
}

/// The `{ATTEMPTS}` text for a task with `attempts` failures.
pub fn attempts_text(attempts: u32, max_attempts: u32) -> String {
    match attempts {
        0 => "This is the first attempt at this task.".to_string(),
        n if n < max_attempts => format!(
            "This task has failed {n} time{}. The Attempt notes in the task say what was tried and why it failed: do not repeat a failed approach.",
            if n == 1 { "" } else { "s" }
        ),
        n => format!(
            "This task has failed {n} times. Decomposition is required: do not attempt the whole task again. Return status DECOMPOSED with `subtasks`: smaller tasks, in order, each small enough to finish in one session."
        ),
    }
}

/// The task's text for the prompt: its parents' titles, then its item as written.
pub fn task_text(doc: &Document, task: usize) -> String {
    let ancestors = doc.ancestors(task);
    let mut text = String::new();
    if !ancestors.is_empty() {
        let titles: Vec<&str> = ancestors
            .iter()
            .rev() // root first, as a reader names a path
            .map(|&a| doc.tasks()[a].title.as_str())
            .collect();
        text.push_str(&format!("Part of: {}\n\n", titles.join(" › ")));
    }
    text.push_str(doc.task_block(task));
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::Cli;
    use clap::Parser;

    #[test]
    fn codex_gets_a_model_only_from_the_command_line() {
        let templates = super::super::Templates::load(Path::new("/nonexistent-kern-test")).unwrap();
        for (argv, expected) in [
            (vec!["kern"], Some("opus")),
            (vec!["kern", "--agent", "codex"], None),
            (
                vec!["kern", "--agent", "codex", "--model", "o3"],
                Some("o3"),
            ),
            (vec!["kern", "--model", "haiku"], Some("haiku")),
        ] {
            let cli = Cli::try_parse_from(&argv).unwrap();
            let settings = Settings::resolve(&cli, "/".into(), Vec::new(), &|_| None).unwrap();
            assert_eq!(
                model_for(&settings, &templates, Stage::Implement).as_deref(),
                expected,
                "{argv:?}"
            );
        }
    }

    #[test]
    fn attempts_text_asks_for_decomposition_at_the_limit() {
        assert_eq!(
            attempts_text(0, 3),
            "This is the first attempt at this task."
        );
        assert!(attempts_text(1, 3).starts_with("This task has failed 1 time."));
        assert!(attempts_text(2, 3).contains("do not repeat a failed approach"));
        assert!(attempts_text(3, 3).contains("Decomposition is required"));
        assert!(!attempts_text(2, 3).contains("Decomposition"));
    }

    #[test]
    fn task_text_names_the_parents_root_first() {
        let doc = Document::parse("- [ ] Root\n  - [ ] Middle\n    - [ ] Leaf\n");
        let leaf = doc.tasks().iter().position(|t| t.title == "Leaf").unwrap();
        assert!(
            task_text(&doc, leaf).starts_with("Part of: Root › Middle\n\n"),
            "{}",
            task_text(&doc, leaf)
        );
    }
}
