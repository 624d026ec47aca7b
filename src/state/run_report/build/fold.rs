//! One run's lines → its tasks and run facts: [`Builder`] folds the `run.jsonl` events of a run,
//! in order, into [`TaskReport`]s and what the run said of itself (agent, iterations, budget,
//! end, baseline check, notices); `build` turns that into the [`RunReport`](super::super::RunReport).
//!
//! Decisions a reader must know:
//! - A task is known by its title. Events name their task (with parallel tasks, `-j`, they
//!   interleave); a stage, check, violation or hand-edit line of an older log that names none
//!   belongs to the task of the latest `iteration_start`. Tasks appear in the order the run
//!   first took them up; a check outside any task is the baseline check.
//! - A stage that started and has no end line ends as `unfinished`.
//! - A stage's agent time is its time without its waits; waits (usage-limit waits, retry
//!   delays, `--pace` pauses) are counted apart.

use crate::event::RunEvent;
use crate::stage::Stage;
use crate::stage::record::Outcome;
use crate::state::run_log::LoggedEvent;
use crate::state::run_report::{
    AttemptInfo, CheckInfo, CommitInfo, IssueInfo, SetAsideInfo, StageInfo, TaskEnd, TaskReport,
    TestsFirstInfo, ViolationInfo, WindowShare,
};
use crate::text;
use crate::timestamp::Timestamp;

/// Folds events into tasks and run facts.
#[derive(Default)]
pub(super) struct Builder {
    pub(super) tasks: Vec<TaskReport>,
    /// The task of the latest iteration: where the events of an older log that name no task
    /// go. With parallel tasks (`-j`) events name their task and interleave.
    current: Option<usize>,
    /// Each task's latest iteration.
    iteration_of: Vec<(usize, u32)>,
    /// The stages started and not yet ended, by task.
    open: Vec<(usize, OpenStage)>,
    pub(super) agent: String,
    pub(super) iterations_asked: u32,
    pub(super) iterations_run: u32,
    pub(super) max_cost: Option<f64>,
    pub(super) sandbox: Option<crate::sandbox::Mode>,
    pub(super) exit_code: Option<u8>,
    pub(super) ended: Option<String>,
    pub(super) deadline: Option<Timestamp>,
    pub(super) baseline_check: Option<CheckInfo>,
    pub(super) notices: Vec<String>,
    /// The tracker's failures by cause: gh's words, where its notice is among `notices`, what
    /// the notice says of the first call, and how many more calls failed so.
    tracker_failures: Vec<(String, usize, String, usize)>,
}

/// A stage that started: its kind, start, agent and model.
type OpenStage = (Stage, Timestamp, String, Option<String>);

impl Builder {
    /// The task an event is about: the one it names, else the current one (older logs).
    fn index_for(&mut self, named: Option<&str>) -> Option<usize> {
        match named {
            Some(title) => Some(self.index_named(title)),
            None => self.current,
        }
    }

    fn index_named(&mut self, title: &str) -> usize {
        match self.tasks.iter().position(|t| t.title == title) {
            Some(i) => i,
            None => {
                self.tasks.push(new_task(title, 0));
                self.tasks.len() - 1
            }
        }
    }

    fn task_named(&mut self, title: &str) -> &mut TaskReport {
        let index = self.index_named(title);
        &mut self.tasks[index]
    }

    fn iteration(&self, task: usize) -> u32 {
        self.iteration_of
            .iter()
            .find(|(t, _)| *t == task)
            .map_or(0, |(_, i)| *i)
    }

    fn take_open(&mut self, task: usize) -> Option<OpenStage> {
        let at = self.open.iter().position(|(t, _)| *t == task)?;
        Some(self.open.remove(at).1)
    }

    /// Every stage that started and has no end line: each ends as `unfinished`.
    pub(super) fn close_open_stages(&mut self) {
        let tasks: Vec<usize> = self.open.iter().map(|(t, _)| *t).collect();
        for task in tasks {
            self.close_open_stage(task);
        }
    }

    /// The stage of `task` that started and has no end line: it ends as `unfinished`.
    fn close_open_stage(&mut self, index: usize) {
        if let Some((stage, started, agent, model)) = self.take_open(index) {
            let iteration = self.iteration(index);
            {
                let task = &mut self.tasks[index];
                task.stages.push(StageInfo {
                    iteration,
                    stage,
                    agent,
                    model,
                    started_at: Some(started),
                    duration_ms: 0,
                    cost_usd: 0.0,
                    outcome: "unfinished".into(),
                    note: None,
                    retries: 0,
                    turns: None,
                    waits: Vec::new(),
                    window: Vec::new(),
                });
            }
        }
    }

    pub(super) fn event(&mut self, e: &LoggedEvent) {
        match &e.event {
            RunEvent::RunStart {
                iterations,
                agent,
                max_cost_usd,
                sandbox,
                ..
            } => {
                self.iterations_asked = *iterations;
                self.agent.clone_from(agent);
                self.max_cost = *max_cost_usd;
                self.sandbox = *sandbox;
            }
            RunEvent::Denied {
                task,
                by,
                denied,
                more,
            } => {
                let mut lines: Vec<String> = denied
                    .iter()
                    .map(|d| format!("{by}: {}", d.sentence(None)))
                    .collect();
                if *more > 0 {
                    lines.push(format!("{by}: {more} more denied attempts"));
                }
                match self.index_for(task.as_deref()) {
                    Some(i) => self.tasks[i].denied.extend(lines),
                    None => self.notices.extend(lines),
                }
            }
            // Told, never recorded: a log holds none of them.
            RunEvent::Told(_) => {}
            // A watchdog's lines are its own run's (`watch.rs` reads them).
            RunEvent::WatchStart { .. }
            | RunEvent::WatchRun { .. }
            | RunEvent::WatchRestart { .. }
            | RunEvent::WatchEnd { .. } => {}
            RunEvent::Paced { task, line, .. } => match self.index_for(task.as_deref()) {
                Some(index) if task.is_some() => self.tasks[index].paced.push(line.clone()),
                _ => self.notices.push(line.clone()),
            },
            RunEvent::Resumed {
                task,
                stage,
                waited_ms,
                ..
            } => {
                if let Some(index) = self.index_for(task.as_deref()) {
                    // A pause is time the task waited, as a usage-limit wait is.
                    self.tasks[index].wait_ms += waited_ms;
                    self.tasks[index].paced.push(format!(
                        "--pace: went on with the {} stage after {}",
                        stage.name(),
                        crate::text::duration(std::time::Duration::from_millis(*waited_ms))
                    ));
                }
            }
            RunEvent::LockRecovered { pid, why, phase } => self.notices.push(format!(
                "took over the lock of run {pid} ({why}; it was {phase})"
            )),
            RunEvent::AgentSwitch {
                stage,
                from,
                to,
                reason,
                ..
            } => self.notices.push(format!(
                "the {} stage moved from {from} to {to}: {reason}",
                stage.name()
            )),
            RunEvent::TrackerFailed {
                issue, action, why, ..
            } => {
                // One notice per cause, naming the first call and counting the rest: a rate
                // limit hit by every call is one line.
                match self.tracker_failures.iter_mut().find(|(w, ..)| w == why) {
                    Some((_, at, first, more)) => {
                        *more += 1;
                        let calls = if *more == 1 { "call" } else { "calls" };
                        if let Some(notice) = self.notices.get_mut(*at) {
                            *notice = format!("{first} (and {more} more {calls} like it)");
                        }
                    }
                    None => {
                        let first = format!("the tracker: {action} on {issue} failed: {why}");
                        self.tracker_failures.push((
                            why.clone(),
                            self.notices.len(),
                            first.clone(),
                            0,
                        ));
                        self.notices.push(first);
                    }
                }
            }
            RunEvent::Hangup {} => self.notices.push(format!(
                "the terminal went away at {} (SIGHUP); the run went on, its output is in run.log",
                e.ts
            )),
            RunEvent::IterationStart {
                index,
                task,
                line,
                issue,
                ..
            } => {
                self.iterations_run = self.iterations_run.max(*index);
                let i = match self.tasks.iter().position(|t| t.title == *task) {
                    Some(i) => i,
                    None => {
                        self.tasks.push(new_task(task, *line));
                        self.tasks.len() - 1
                    }
                };
                if let Some(found) = issue.as_deref().and_then(crate::spec::IssueRef::parse) {
                    self.tasks[i].issue = Some(IssueInfo {
                        name: found.to_string(),
                        url: found.url(),
                    });
                }
                self.close_open_stage(i);
                self.tasks[i].iterations.push(*index);
                self.iteration_of.retain(|(t, _)| *t != i);
                self.iteration_of.push((i, *index));
                self.current = Some(i);
            }
            RunEvent::StageStart {
                stage,
                task,
                agent,
                model,
                ..
            } => {
                let agent = if agent.is_empty() {
                    self.agent.clone()
                } else {
                    agent.clone()
                };
                let i = self.index_named(task);
                self.close_open_stage(i);
                self.open.push((i, (*stage, e.ts, agent, model.clone())));
            }
            RunEvent::StageEnd {
                task,
                stage,
                outcome,
                cost_usd,
                duration_ms,
                retries,
                failure,
                error,
                agent,
                model,
                turns,
                waits,
                window,
                tokens,
                ..
            } => {
                let Some(index) = self.index_for(task.as_deref()) else {
                    return;
                };
                let (started, agent, model) = match self.take_open(index) {
                    Some((s, ts, a, m)) if s == *stage => (Some(ts), a, model.clone().or(m)),
                    _ => (None, agent.clone(), model.clone()),
                };
                let outcome = match (outcome, error) {
                    (Some(o), _) => outcome_name(*o),
                    (None, _) => "error".to_string(),
                };
                let wait_ms: u64 = waits.iter().map(|w| w.duration_ms).sum();
                let iteration = self.iteration(index);
                let task = &mut self.tasks[index];
                task.cost_usd += cost_usd;
                task.agent_ms += duration_ms.saturating_sub(wait_ms);
                task.wait_ms += wait_ms;
                task.tokens += tokens.unwrap_or(0);
                for used in window {
                    WindowShare::add(&mut task.windows, used);
                }
                task.stages.push(StageInfo {
                    iteration,
                    stage: *stage,
                    agent,
                    model,
                    started_at: started,
                    duration_ms: *duration_ms,
                    cost_usd: *cost_usd,
                    outcome,
                    note: failure.clone().or_else(|| error.clone()),
                    retries: *retries,
                    turns: *turns,
                    waits: waits.clone(),
                    window: window.clone(),
                });
            }
            RunEvent::Violation {
                task,
                stage,
                violations,
                reverted,
                saved,
            } => {
                if let Some(i) = self.index_for(task.as_deref()) {
                    self.tasks[i].violations.push(ViolationInfo {
                        stage: *stage,
                        what: violations.clone(),
                        reverted: reverted.clone(),
                        saved: saved.clone(),
                    });
                }
            }
            RunEvent::SharedRef { moved, .. } => self.notices.extend(moved.iter().cloned()),
            RunEvent::BranchMoved { commits, .. } => self.notices.extend(commits.iter().cloned()),
            RunEvent::Level { task, level, why } => {
                self.task_named(task).level = Some(format!("{level} ({why})"));
            }
            RunEvent::Must { task, findings, .. } => {
                self.task_named(task).must.extend(findings.iter().cloned());
            }
            RunEvent::TestsRed {
                task,
                command,
                tests,
                failed,
                ..
            } => {
                let info =
                    TestsFirstInfo::heard(&mut self.task_named(task).tests_first, command, tests);
                info.red = Some(*failed);
                info.green = None;
            }
            RunEvent::TestsGreen {
                task,
                command,
                tests,
                passed,
                ..
            } => {
                let info =
                    TestsFirstInfo::heard(&mut self.task_named(task).tests_first, command, tests);
                info.green = Some(*passed);
            }
            RunEvent::HandEdit { task, changes, .. } => {
                if let Some(i) = self.index_for(task.as_deref()) {
                    self.tasks[i].hand_edits.extend(changes.iter().cloned());
                }
            }
            RunEvent::SetAside {
                task,
                git_ref,
                paths,
                why,
            } => self.task_named(task).set_aside.push(SetAsideInfo {
                git_ref: git_ref.clone(),
                paths: paths.clone(),
                why: why.clone(),
            }),
            RunEvent::NoCommit { task, why } => {
                self.task_named(task).no_commit = Some(why.clone());
            }
            RunEvent::Check {
                task,
                command,
                passed,
                ..
            } => {
                let check = CheckInfo {
                    command: command.clone(),
                    passed: *passed,
                };
                // A check outside any task is the baseline check, before any agent.
                match self.index_for(task.as_deref()) {
                    Some(i) => self.tasks[i].checks.push(check),
                    None => self.baseline_check = Some(check),
                }
            }
            RunEvent::Decomposed { task, subtasks } => {
                let t = self.task_named(task);
                t.subtasks.extend(subtasks.iter().cloned());
                t.end = TaskEnd::Decomposed;
            }
            RunEvent::Skipped { task, reason, .. } => {
                let t = self.task_named(task);
                t.skipped.push(reason.clone());
                t.end = TaskEnd::Skipped;
            }
            RunEvent::AttemptFailed {
                task,
                attempt,
                note,
                ..
            } => {
                let t = self.task_named(task);
                t.attempts.push(AttemptInfo {
                    attempt: *attempt,
                    reason: text::first_line(note),
                });
                t.end = TaskEnd::Failed;
            }
            RunEvent::Conflict {
                task,
                paths,
                attempt,
                ..
            } => {
                let t = self.task_named(task);
                t.attempts.push(AttemptInfo {
                    attempt: *attempt,
                    reason: format!(
                        "its work conflicted with the branch in {}",
                        paths.join(", ")
                    ),
                });
                t.end = TaskEnd::Failed;
            }
            RunEvent::Blocked { task, why, .. } => {
                self.task_named(task).blocked = Some(why.clone());
            }
            RunEvent::Commit {
                task,
                sha,
                subject,
                left_out,
                review_branch,
            } => {
                self.task_named(task).commit = Some(CommitInfo {
                    sha: sha.clone(),
                    subject: subject.clone(),
                    left_out: left_out.clone(),
                    review_branch: review_branch.clone(),
                    review: None,
                });
            }
            RunEvent::IterationEnd { task, .. } => {
                let i = self.index_named(task);
                self.close_open_stage(i);
                if self.current == Some(i) {
                    self.current = None;
                }
            }
            RunEvent::RunEnd {
                ended,
                exit_code,
                iterations,
                deadline,
                ..
            } => {
                self.close_open_stages();
                self.exit_code = Some(*exit_code);
                self.ended = Some(ended.clone());
                self.deadline = *deadline;
                self.iterations_run = self.iterations_run.max(*iterations);
            }
        }
    }
}

/// A task as the run first heard of it: its title and SPEC.md line, nothing happened yet.
pub(super) fn new_task(title: &str, line: usize) -> TaskReport {
    TaskReport {
        title: title.to_string(),
        line,
        end: TaskEnd::InProgress,
        iterations: Vec::new(),
        commit: None,
        subtasks: Vec::new(),
        skipped: Vec::new(),
        blocked: None,
        attempts: Vec::new(),
        stages: Vec::new(),
        checks: Vec::new(),
        must: Vec::new(),
        tests_first: None,
        level: None,
        issue: None,
        violations: Vec::new(),
        denied: Vec::new(),
        hand_edits: Vec::new(),
        set_aside: Vec::new(),
        no_commit: None,
        cost_usd: 0.0,
        agent_ms: 0,
        wait_ms: 0,
        windows: Vec::new(),
        tokens: 0,
        paced: Vec::new(),
    }
}

fn outcome_name(outcome: Outcome) -> String {
    serde_json::to_value(outcome)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}
