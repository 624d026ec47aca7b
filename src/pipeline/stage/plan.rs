//! One stage's plan: the agents and their models, the tool policy, the rendered prompt, the
//! budget, the protected files, the fence of each agent and the stage's time limits —
//! everything a stage will run with, built by one function, [`StagePlan::new`], from the task, its discovery level, the
//! settings and the workspace.
//!
//! The one decision a reader must know: the run carries out exactly this plan and `kern -n`
//! prints exactly this plan (and `--prompts` writes its prompt), so the dry run cannot describe
//! a stage the run would not send. What only a run knows — the message a hook refused, the
//! must-haves kern verified, what the run has spent — is a field of [`PlanFor`] the dry run
//! leaves empty, not a second assembly. [`stages_left`] is the same one answer for which stages
//! a task still has to run.

use std::path::{Path, PathBuf};

use crate::agent::{Agent, Invocation, InvocationRequest, StageAgent, StageAgents};
use crate::error::Result;
use crate::settings::Settings;
use crate::spec::{Document, Edit, TaskState};
use crate::stage::record::TaskRef;
use crate::stage::{ImplementReport, Stage};
use crate::state::journal::TaskStart;
use crate::state::resume::ResumePoint;
use crate::workspace::Workspace;

use super::inputs::{RefusedMessage, StageInputs};

/// The model a level-3 task's research and review get on Claude when no model was chosen.
const STRONGEST_CLAUDE_MODEL: &str = "opus";

/// What a stage's plan is built from, beside the workspace and the settings.
pub(crate) struct PlanFor<'a> {
    /// SPEC.md as it is now.
    pub doc: &'a Document,
    /// The task's index in `doc`.
    pub task: usize,
    /// The stage.
    pub stage: Stage,
    /// The task's discovery level (0–3).
    pub level: u8,
    /// The task's start record (its diff base, left-out paths), when it has one.
    pub start: Option<&'a TaskStart>,
    /// What implement reported, for the review.
    pub implement: Option<&'a ImplementReport>,
    /// A message a hook refused: the review is asked for a new message only.
    pub refused: Option<&'a RefusedMessage>,
    /// What kern's own check of the must-haves found, for the review.
    pub verified: &'a [String],
    /// What kern's fence denied the task's processes so far, for the review.
    pub denied: &'a [String],
    /// What the run has spent so far, in USD (the stage gets what is left of `--max-cost`).
    pub spent: f64,
}

/// Everything one stage will run with.
#[derive(Debug, Clone)]
pub(crate) struct StagePlan {
    /// The stage.
    pub stage: Stage,
    /// The task, for the record and `KERN_TASK`.
    pub task: TaskRef,
    /// The agents the stage may run on, with their models.
    pub agents: StageAgents,
    /// The rendered prompt, exactly as it goes to the agent's stdin.
    pub prompt: String,
    /// One note per input cut to its budget.
    pub cuts: Vec<String>,
    /// Where the prompt's template came from.
    pub template: PathBuf,
    /// Which attempt at the task this is (1-based).
    pub attempt: u32,
    /// What is left of `--max-cost` when the stage starts (USD); each try gets what is left
    /// then as Claude's `--max-budget-usd`.
    pub budget_left: Option<f64>,
    /// Absolute paths no agent may edit: SPEC.md and LEARNINGS.md.
    pub protected: Vec<PathBuf>,
    /// Claude Code's own OS sandbox for the implement stage's shell commands
    /// (`--sandbox agent`).
    pub sandbox: bool,
    /// kern's fence for each agent the stage may run on (`--sandbox kern`; none otherwise):
    /// what its process may write, what is hidden from it, the hosts it may reach.
    pub fences: Vec<(Agent, crate::sandbox::Fence)>,
}

impl StagePlan {
    /// The plan of `what.stage` for task `what.task`.
    pub(crate) fn new(
        ws: &Workspace,
        settings: &Settings,
        what: &PlanFor<'_>,
    ) -> Result<StagePlan> {
        let stage = what.stage;
        let mut inputs = StageInputs::gather(
            ws,
            settings,
            what.doc,
            what.task,
            stage,
            what.start,
            what.implement,
        )?;
        if stage == Stage::Review {
            if let Some(refused) = what.refused {
                inputs.ask_for_message(refused);
            }
            inputs.add_verified(what.verified);
            inputs.add_denied(what.denied);
        }
        let template = ws.templates.get(stage);
        let mut rendered = template.render(&inputs.prompt_inputs());
        if let Some(note) = crate::prompt::level_note(what.level, stage) {
            rendered.text.push_str(note);
        }
        let task = &what.doc.tasks()[what.task];
        let agents = agents_at_level(
            stage_agents(settings, &ws.templates, stage),
            settings,
            stage,
            what.level,
        );
        let place = crate::pipeline::fence::Place::of(ws.repo.top(), &ws.state_dir.dir());
        let fences = std::iter::once(&agents.primary)
            .chain(agents.fallback.as_ref())
            .filter_map(|on| {
                crate::pipeline::fence::for_agent(settings, &place, &on.agent, stage)
                    .map(|fence| (on.agent.clone(), fence))
            })
            .collect();
        Ok(StagePlan {
            stage,
            task: TaskRef {
                title: task.title.clone(),
                identity: what.doc.identity(what.task),
                line: task.line,
            },
            agents,
            prompt: rendered.text,
            cuts: rendered.cuts,
            template: template.source.clone(),
            attempt: task.attempts() + 1,
            budget_left: settings.max_cost.map(|limit| limit - what.spent),
            protected: super::super::protected_files(ws),
            sandbox: settings.sandbox.mode == crate::sandbox::Mode::Agent,
            fences,
        })
    }

    /// kern's fence of `agent` running this stage (`None`: unfenced).
    pub(crate) fn fence(&self, agent: &Agent) -> Option<&crate::sandbox::Fence> {
        self.fences
            .iter()
            .find(|(a, _)| a == agent)
            .map(|(_, fence)| fence)
    }

    /// The process that runs this stage on `on`; `spent` is what earlier tries of the stage
    /// cost (taken off its budget), `files` where the prompt's schema and the state folder are.
    pub(crate) fn invocation(
        &self,
        on: &StageAgent,
        files: &PlanFiles<'_>,
        spent: f64,
    ) -> Invocation {
        let mut invocation = on.agent.invocation(InvocationRequest {
            stage: self.stage,
            model: on.model.as_deref(),
            prompt: self.prompt.clone().into_bytes(),
            cwd: files.cwd,
            schema_path: files.schema,
            state_dir: files.state_dir,
            task_title: &self.task.title,
            max_budget_usd: self.budget_left.map(|left| left - spent),
            sandbox: self.sandbox,
            protected: &self.protected,
        });
        invocation.fence = self.fence(&on.agent).cloned();
        invocation
    }
}

/// Where a stage's process works and finds its files.
pub(crate) struct PlanFiles<'a> {
    /// The work tree's top folder (the agent's working folder).
    pub cwd: &'a Path,
    /// The stage's JSON schema.
    pub schema: &'a Path,
    /// The state folder (`KERN_STATE_DIR`).
    pub state_dir: &'a Path,
}

/// Level 3: research and review on the strongest model, when the stage runs on Claude and no
/// model was chosen for it.
fn agents_at_level(
    mut agents: StageAgents,
    settings: &Settings,
    stage: Stage,
    level: u8,
) -> StageAgents {
    let chosen =
        settings.model.is_some() || (stage == Stage::Review && settings.review_model.is_some());
    if level == 3
        && matches!(stage, Stage::Research | Stage::Review)
        && agents.primary.agent == Agent::Claude
        && !chosen
    {
        agents.primary.model = Some(STRONGEST_CLAUDE_MODEL.to_string());
    }
    agents
}

/// The agents of a stage and their models. The stage's own agent is `--agent`, or for the
/// review `--review-agent`; its fallback is `--fallback-agent`, unless that is the stage's own
/// agent. Models: `--model` for `--agent`, `--review-model` for the review (and `--model` when
/// the review runs on `--agent`), `--fallback-model` for the fallback; without one, the
/// template's front matter — which names a Claude model and means nothing to Codex, so Codex
/// then uses its own default (DESIGN.md section 4).
pub(crate) fn stage_agents(
    settings: &Settings,
    templates: &crate::prompt::Templates,
    stage: Stage,
) -> StageAgents {
    // The model the agent is given, and so the one the records name: a program agent is given
    // none (it chooses its own), Codex only an explicit one (the templates' are Claude's).
    let with_model = |agent: &Agent, explicit: Option<&String>| StageAgent {
        agent: agent.clone(),
        model: match agent {
            Agent::Program(_) => None,
            Agent::Codex => explicit.cloned(),
            Agent::Claude => explicit
                .cloned()
                .or_else(|| templates.get(stage).model.clone()),
        },
    };
    let primary = match (&settings.review_agent, stage) {
        (Some(agent), Stage::Review) => with_model(agent, settings.review_model.as_ref()),
        (None, Stage::Review) => with_model(
            &settings.agent,
            settings.review_model.as_ref().or(settings.model.as_ref()),
        ),
        _ => with_model(&settings.agent, settings.model.as_ref()),
    };
    let fallback = settings
        .fallback_agent
        .as_ref()
        .filter(|agent| **agent != primary.agent)
        .map(|agent| with_model(agent, settings.fallback_model.as_ref()));
    StageAgents { primary, fallback }
}

/// kern's edits that start a task whose research is skipped (discovery level 0), as research
/// would have started it: the task and its parents in progress. The run makes them before
/// implement; the dry run plans implement on SPEC.md as they leave it.
pub(crate) fn start_without_research() -> [Edit; 2] {
    [Edit::SetState(TaskState::InProgress), Edit::StartParents]
}

/// The stages a task still runs from `resume` (`None`: a task not started) at discovery level
/// `level`: level 0 starts at implement; a task resumed after research, at implement; one
/// whose implement is done, at the review. `tests_step`: the tests step comes before
/// implement (a task tested first whose tests were not seen red yet,
/// `pipeline::tests_first::step_due`).
pub(crate) fn stages_left(resume: Option<&ResumePoint>, level: u8, tests_step: bool) -> Vec<Stage> {
    let from = match resume {
        None | Some(ResumePoint::Research) if level == 0 => Stage::Implement,
        None | Some(ResumePoint::Research) => Stage::Research,
        Some(ResumePoint::ApplyResearch(_) | ResumePoint::Implement) => Stage::Implement,
        Some(ResumePoint::Review(_) | ResumePoint::Commit(..)) => Stage::Review,
    };
    let from = if tests_step && from == Stage::Implement {
        Stage::Tests
    } else {
        from
    };
    Stage::ALL
        .into_iter()
        .filter(|s| *s >= from && (*s != Stage::Tests || tests_step))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::Cli;
    use clap::Parser;

    fn agents(argv: &[&str], stage: Stage) -> StageAgents {
        let templates =
            crate::prompt::Templates::load(Path::new("/nonexistent-kern-test")).unwrap();
        let cli = Cli::try_parse_from(argv).unwrap();
        let settings = Settings::resolve(&cli, "/".into(), Vec::new(), &|_| None).unwrap();
        stage_agents(&settings, &templates, stage)
    }

    fn on(agent: Agent, model: Option<&str>) -> StageAgent {
        StageAgent {
            agent,
            model: model.map(str::to_string),
        }
    }

    #[test]
    fn codex_gets_a_model_only_from_the_command_line() {
        for (argv, expected) in [
            (vec!["kern"], Some("opus")),
            (vec!["kern", "--agent", "codex"], None),
            (
                vec!["kern", "--agent", "codex", "--model", "o3"],
                Some("o3"),
            ),
            (vec!["kern", "--model", "haiku"], Some("haiku")),
        ] {
            assert_eq!(
                agents(&argv, Stage::Implement).primary.model.as_deref(),
                expected,
                "{argv:?}"
            );
        }
    }

    #[test]
    fn each_stage_has_its_agents_and_their_models() {
        let program = || Agent::Program(PathBuf::from("/bin/r"));
        // (argv, stage, primary, fallback); the built-in templates say opus for implement and
        // sonnet for review.
        let table: Vec<(Vec<&str>, Stage, StageAgent, Option<StageAgent>)> = vec![
            (
                vec!["kern", "--fallback-agent", "codex"],
                Stage::Implement,
                on(Agent::Claude, Some("opus")),
                Some(on(Agent::Codex, None)),
            ),
            (
                vec![
                    "kern",
                    "--fallback-agent",
                    "codex",
                    "--fallback-model",
                    "o3",
                    "--model",
                    "haiku",
                ],
                Stage::Research,
                on(Agent::Claude, Some("haiku")),
                Some(on(Agent::Codex, Some("o3"))),
            ),
            (
                vec!["kern", "--agent", "codex", "--fallback-agent", "claude"],
                Stage::Implement,
                on(Agent::Codex, None),
                Some(on(Agent::Claude, Some("opus"))),
            ),
            (
                vec!["kern", "--review-agent", "codex", "--model", "haiku"],
                Stage::Review,
                on(Agent::Codex, None),
                None,
            ),
            (
                vec!["kern", "--review-agent", "codex", "--review-model", "o3"],
                Stage::Review,
                on(Agent::Codex, Some("o3")),
                None,
            ),
            (
                vec!["kern", "--review-agent", "codex"],
                Stage::Implement,
                on(Agent::Claude, Some("opus")),
                None,
            ),
            (
                vec!["kern", "--review-model", "haiku", "--model", "opus"],
                Stage::Review,
                on(Agent::Claude, Some("haiku")),
                None,
            ),
            (
                vec!["kern", "--model", "opus"],
                Stage::Review,
                on(Agent::Claude, Some("opus")),
                None,
            ),
            // The review's fallback is the fallback agent unless that is the review agent.
            (
                vec![
                    "kern",
                    "--review-agent",
                    "codex",
                    "--fallback-agent",
                    "codex",
                ],
                Stage::Review,
                on(Agent::Codex, None),
                None,
            ),
            (
                vec![
                    "kern",
                    "--review-agent",
                    "program:/bin/r",
                    "--fallback-agent",
                    "codex",
                ],
                Stage::Review,
                on(program(), None),
                Some(on(Agent::Codex, None)),
            ),
        ];
        for (argv, stage, primary, fallback) in table {
            assert_eq!(
                agents(&argv, stage),
                StageAgents { primary, fallback },
                "{argv:?} {stage}"
            );
        }
    }

    #[test]
    fn the_stages_left_follow_the_resume_point_and_the_level() {
        let implement = ImplementReport {
            status: crate::stage::ImplementStatus::Success,
            summary: "done".into(),
            attempt_note: None,
            subtasks: Vec::new(),
            learnings: Vec::new(),
            no_change_reason: None,
        };
        let all = vec![Stage::Research, Stage::Implement, Stage::Review];
        let tested = Stage::ALL.to_vec();
        let from_implement = vec![Stage::Implement, Stage::Review];
        let from_tests = vec![Stage::Tests, Stage::Implement, Stage::Review];
        for (resume, level, tests_step, want) in [
            (None, 0, false, &from_implement),
            (None, 1, false, &all),
            (None, 3, false, &all),
            (Some(ResumePoint::Research), 0, false, &from_implement),
            (Some(ResumePoint::Research), 2, false, &all),
            (Some(ResumePoint::Implement), 2, false, &from_implement),
            (
                Some(ResumePoint::Review(implement.clone())),
                0,
                false,
                &vec![Stage::Review],
            ),
            // A task tested first, its tests not red yet: the tests step before implement.
            (None, 2, true, &tested),
            (None, 0, true, &from_tests),
            (Some(ResumePoint::Implement), 2, true, &from_tests),
            (
                Some(ResumePoint::Review(implement.clone())),
                2,
                true,
                &vec![Stage::Review],
            ),
        ] {
            assert_eq!(
                &stages_left(resume.as_ref(), level, tests_step),
                want,
                "{resume:?} at {level}, tests step {tests_step}"
            );
        }
    }
}
