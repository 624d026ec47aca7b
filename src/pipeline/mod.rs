//! The loop: lock, then per iteration select a task from a fresh read of SPEC.md, run the
//! stages that are due, apply their results, commit, clear the stage files and sleep.
//!
//! kern, not the agent, decides: it selects the task, writes every marker and note in SPEC.md,
//! and makes every commit. The agents only report (structured output); this file turns the
//! reports into edits deterministically. Every stage is audited afterwards: a read-only stage
//! that changed the work tree is reverted; moved refs are recorded (history is never
//! rewritten); a SPEC.md the agent corrupted is put back from kern's copy.
//!
//! Decisions a reader must know:
//! - Failed attempts: after `--max-attempts` failures the implement prompt demands
//!   decomposition; after twice that many, or when the last `--max-attempts` failures share one
//!   error signature, the task is blocked `[!]`.
//! - An implement stage that moved HEAD is a recorded violation, but its work still goes to
//!   review with the diff from the commit the task started at (the commit is kept as it is).
//! - "No progress": `MAX_IDLE_ITERATIONS` iterations in a row that only skipped tasks end the
//!   run (exit 4) rather than spin through the skipped tasks forever.
//! - The commit is journaled in `commit.json` before SPEC.md is marked done, so a crash between
//!   the two leads to exactly one commit on the next run.

pub mod check;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::error::{Error, Result};
use crate::learnings;
use crate::prompt::{self, PromptInputs, Templates};
use crate::reporter::{Reporter, StageLine, Summary};
use crate::repository::{CommitRequest, Repository};
use crate::settings::{MAX_IDLE_ITERATIONS, Settings};
use crate::spec::{self, Document, Edit, Severity, SpecFile, TaskState};
use crate::stage::record::{Outcome, TaskRef, WaitKind};
use crate::stage::runner::{self, StageContext, StageRequest, StageRun};
use crate::stage::{ImplementReport, ImplementStatus, ReviewReport, Stage, StageReport, Verdict};
use crate::state::StateDir;
use crate::state::lock::{RunLock, Takeover};
use crate::state::resume::{self, PendingCommit, ResumePoint, TaskStart};
use crate::state::run_log::RunLog;
use crate::supervisor::interrupt::Interrupt;
use check::CheckResult;

/// Everything fixed for the length of a run.
pub struct Workspace {
    /// The repository.
    pub repo: Repository,
    /// SPEC.md, absolute.
    pub spec_path: PathBuf,
    /// SPEC.md as shown in messages and prompts (relative to the top folder).
    pub spec_display: String,
    /// LEARNINGS.md, absolute (beside SPEC.md).
    pub learnings_path: PathBuf,
    /// The state folder.
    pub state_dir: StateDir,
    /// The prompt templates, checked.
    pub templates: Templates,
}

impl Workspace {
    /// Opens the repository from the current folder, resolves SPEC.md and the state folder,
    /// and loads the templates. Reads only.
    pub fn open(settings: &Settings) -> Result<Workspace> {
        let cwd = std::env::current_dir().map_err(|e| Error::io(".", e))?;
        let repo = Repository::discover(&cwd)?;
        let top = repo.top().to_path_buf();
        let spec_path = if settings.spec.is_absolute() {
            settings.spec.clone()
        } else {
            top.join(&settings.spec)
        };
        let spec_display = spec_path
            .strip_prefix(&top)
            .map(|p| p.display().to_string())
            .unwrap_or_else(|_| spec_path.display().to_string());
        let learnings_path = spec_path.with_file_name("LEARNINGS.md");
        let state_dir = StateDir::locate(&settings.state_root, &top, &repo.branch_folder()?);
        let templates = Templates::load(&top)?;
        Ok(Workspace {
            repo,
            spec_path,
            spec_display,
            learnings_path,
            state_dir,
            templates,
        })
    }

    /// Loads and validates SPEC.md: warnings are returned, errors are `Error::SpecRefused`.
    pub fn load_spec(&self) -> Result<(SpecFile, Document, Vec<String>)> {
        let (file, doc) = SpecFile::load_as(&self.spec_path, &self.spec_display)?;
        let diagnostics = spec::validate(&doc);
        let errors: Vec<spec::Diagnostic> = diagnostics
            .iter()
            .filter(|d| d.severity == Severity::Error)
            .cloned()
            .collect();
        if !errors.is_empty() {
            return Err(Error::SpecRefused {
                file: self.spec_display.clone(),
                diagnostics: errors,
            });
        }
        let warnings = diagnostics
            .iter()
            .filter(|d| d.severity == Severity::Warning)
            .map(|d| d.render(&self.spec_display))
            .collect();
        Ok((file, doc, warnings))
    }

    /// kern's own files, relative to the top folder: never part of the clean-tree rule and
    /// never reverted by an audit (a person may edit SPEC.md during any stage).
    pub fn own_files(&self) -> Vec<PathBuf> {
        [&self.spec_path, &self.learnings_path]
            .iter()
            .filter_map(|p| p.strip_prefix(self.repo.top()).ok().map(Path::to_path_buf))
            .collect()
    }
}

/// The model for a stage: `--model`, else the template's front matter. The front matter names
/// a Claude model, which means nothing to Codex: Codex gets a model only from `--model`
/// (DESIGN.md section 4), else its own default.
pub fn model_for(settings: &Settings, templates: &Templates, stage: Stage) -> Option<String> {
    settings.model.clone().or_else(|| match settings.agent {
        crate::agent::Agent::Codex => None,
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

/// How one iteration ended.
#[derive(Debug, PartialEq)]
enum IterationEnd {
    /// Nothing is left to select.
    NothingLeft,
    /// The task was committed.
    Committed,
    /// Something changed (notes, subtasks, a block) but nothing was committed.
    Progressed,
    /// The task was skipped: no progress.
    Skipped,
}

impl IterationEnd {
    /// The name in `run.jsonl`.
    fn name(&self) -> &'static str {
        match self {
            IterationEnd::NothingLeft => "nothing_left",
            IterationEnd::Committed => "committed",
            IterationEnd::Progressed => "progressed",
            IterationEnd::Skipped => "skipped",
        }
    }
}

/// A run in progress: its counters and the things every iteration needs.
struct Run<'a> {
    settings: &'a Settings,
    ws: &'a Workspace,
    reporter: &'a Reporter,
    interrupt: &'a Interrupt,
    lock: RunLock,
    log: RunLog,
    summary: Summary,
    last_failed: bool,
    started: Instant,
}

/// Runs the loop. `Ok` is exit 0; the other ends are errors (see `error.rs`).
pub async fn run(settings: &Settings, reporter: &Reporter, interrupt: &Interrupt) -> Result<()> {
    let ws = Workspace::open(settings)?;
    ws.repo.ensure_no_operation_in_progress()?;
    ws.state_dir.create(ws.repo.top())?;
    let argv: Vec<String> = std::env::args().collect();
    let (lock, takeover) = RunLock::acquire(
        &ws.state_dir.lock_path(),
        &ws.state_dir.legacy_lock_dir(),
        &argv,
    )?;
    let run_id = format!(
        "{}-{}",
        std::process::id(),
        runner::rfc3339(std::time::SystemTime::now())
    );
    let log = RunLog::new(ws.state_dir.run_log(), run_id);
    let mut run = Run {
        settings,
        ws: &ws,
        reporter,
        interrupt,
        lock,
        log,
        summary: Summary {
            state_dir: ws.state_dir.dir(),
            ..Summary::default()
        },
        last_failed: false,
        started: Instant::now(),
    };
    run.recover(takeover)?;
    run.log.event("run_start", json!({"iterations": settings.iterations, "delay_s": settings.delay.as_secs(), "agent": settings.agent.to_string()}));
    let result = run.iterations().await;
    run.finish(result)
}

impl Run<'_> {
    /// Cleans up after a stale lock: stop an orphaned agent, remove kern's leftover temp
    /// files, recover git's index lock.
    fn recover(&mut self, takeover: Option<Takeover>) -> Result<()> {
        let mut stale_started = None;
        match takeover {
            Some(Takeover::Stale { record, why }) => {
                self.reporter.warn(&format!(
                    "recovered a stale lock left by kern pid {} ({why})",
                    record.pid
                ));
                if crate::state::lock::stop_orphaned_agent(&record) {
                    self.reporter.warn("stopped the agent that run left behind");
                }
                if record.phase == "committing" {
                    stale_started = humantime::parse_rfc3339(&record.started_at).ok();
                }
                self.log.event(
                    "lock_recovered",
                    json!({"pid": record.pid, "why": why, "phase": record.phase}),
                );
            }
            Some(Takeover::Unreadable { path }) => {
                self.reporter.warn(&format!(
                    "took over the lock `{}`: it held no readable record (a run killed while writing it)",
                    path.display()
                ));
            }
            Some(Takeover::LegacyDir { path }) => {
                self.reporter.warn(&format!(
                    "removed the original script's stale lock `{}`",
                    path.display()
                ));
            }
            None => {}
        }
        // A kern killed while writing SPEC.md or LEARNINGS.md leaves its temp file beside
        // them: in the work tree, where it would block a new task or land in a commit.
        if let Some(dir) = self.ws.spec_path.parent() {
            for path in crate::atomic_file::remove_leftovers(dir) {
                self.reporter.warn(&format!(
                    "removed `{}` left by a kern killed while writing",
                    path.display()
                ));
            }
        }
        if self.ws.repo.index_lock_present() {
            match stale_started {
                Some(started) => {
                    if let Some(path) = self.ws.repo.recover_index_lock(started)? {
                        self.reporter.warn(&format!(
                            "removed `{}` left by the crashed kern",
                            path.display()
                        ));
                    }
                }
                None => {
                    return Err(Error::IndexLocked {
                        path: self.ws.repo.git().path().join("index.lock"),
                    });
                }
            }
        }
        Ok(())
    }

    async fn iterations(&mut self) -> Result<()> {
        let total = self.settings.iterations;
        let mut idle = 0u32;
        for index in 1..=total {
            if let Some(signal) = self.interrupt.requested() {
                return Err(Error::Interrupted { signal });
            }
            self.summary.iterations = index;
            let end = self.iteration(index, total).await?;
            self.ws.state_dir.clear_iteration_files()?;
            match end {
                IterationEnd::NothingLeft => {
                    self.summary.iterations = index - 1;
                    self.summary.ended = "nothing left to do".into();
                    return Ok(());
                }
                IterationEnd::Skipped => idle += 1,
                IterationEnd::Committed | IterationEnd::Progressed => idle = 0,
            }
            if idle >= MAX_IDLE_ITERATIONS {
                return Err(Error::Unfinished(format!(
                    "{idle} iterations in a row changed nothing (every task left was skipped) — read the Skipped notes in {} and edit the tasks",
                    self.ws.spec_display
                )));
            }
            self.check_budget()?;
            if index < total && !self.settings.delay.is_zero() && self.has_work()? {
                self.lock.set_phase("sleeping")?;
                self.reporter.waiting("next iteration", self.settings.delay);
                if self.interrupt.sleep_or_interrupt(self.settings.delay).await {
                    return Err(Error::Interrupted {
                        signal: self.interrupt.requested().unwrap_or(2),
                    });
                }
            }
        }
        self.summary.ended = format!("all {total} iterations ran");
        Ok(())
    }

    /// `Err(BudgetSpent)` once the run has cost `--max-cost` or more.
    fn check_budget(&self) -> Result<()> {
        match self.settings.max_cost {
            Some(limit) if self.summary.cost_usd >= limit => Err(Error::BudgetSpent {
                spent: self.summary.cost_usd,
                limit,
            }),
            _ => Ok(()),
        }
    }

    fn has_work(&self) -> Result<bool> {
        let (_, doc, _) = self.ws.load_spec()?;
        Ok(spec::select_with(&doc, &self.settings.select_options()).is_some())
    }

    /// Prints the summary, logs the end, and decides the exit.
    fn finish(mut self, result: Result<()>) -> Result<()> {
        self.summary.elapsed = self.started.elapsed();
        let result = result.and_then(|()| {
            let (_, doc, _) = self.ws.load_spec()?;
            let blocked = doc.counts().blocked;
            if blocked > 0 {
                Err(Error::Unfinished(format!(
                    "{blocked} task{} blocked [!] — read the Blocked note{} in {}, fix, and set the task back to [ ]",
                    if blocked == 1 { " is" } else { "s are" },
                    if blocked == 1 { "" } else { "s" },
                    self.ws.spec_display
                )))
            } else if self.last_failed && spec::select_with(&doc, &self.settings.select_options()).is_some() {
                Err(Error::Unfinished("the last task failed; its Attempt note says why — run kern again to retry".into()))
            } else {
                Ok(())
            }
        });
        if let Err(e) = &result
            && self.summary.ended.is_empty()
        {
            self.summary.ended = e.to_string();
        }
        self.log.event(
            "run_end",
            json!({"ended": self.summary.ended, "cost_usd": self.summary.cost_usd, "exit_code": result.as_ref().map(|_| 0).unwrap_or_else(|e| e.exit_code())}),
        );
        self.reporter.finish();
        self.reporter.summary(&self.summary);
        result
    }

    async fn iteration(&mut self, index: u32, total: u32) -> Result<IterationEnd> {
        self.lock.set_phase("selecting")?;
        self.finish_pending_commit()?;
        let (_, doc, warnings) = self.ws.load_spec()?;
        for w in warnings {
            self.reporter.warn(&w);
        }
        let Some(selection) = spec::select_with(&doc, &self.settings.select_options()) else {
            resume::remove(&self.ws.state_dir.task_start());
            return Ok(IterationEnd::NothingLeft);
        };
        let task_index = selection.task;
        let task = &doc.tasks()[task_index];
        let identity = doc.identity(task_index);
        let identity_json =
            serde_json::to_value(&identity).map_err(|e| Error::Internal(e.to_string()))?;
        let (point, stale) = resume::infer(
            &self.ws.state_dir,
            &identity_json,
            task.research().is_some(),
        );
        for message in stale {
            self.reporter.info(&message);
        }
        tracing::debug!(task = %identity, line = task.line, reason = %selection.reason, resume = point.name(), "selected");
        self.reporter.iteration(index, total, &task.title);
        self.reporter.info(&format!(
            "task `{}` ({}:{}): {}; next stage: {}",
            task.title,
            self.ws.spec_display,
            task.line,
            selection.reason,
            point.name()
        ));
        self.log.event(
            "iteration_start",
            json!({"index": index, "task": task.title, "line": task.line, "resume": point.name()}),
        );
        let start = self.task_start(&doc, task_index, &identity_json)?;
        let mut it = TaskIteration {
            title: task.title.clone(),
            identity,
            identity_json,
            line: task.line,
            start,
        };
        let end = self.run_task(&mut it, point).await;
        if let Ok(e) = &end {
            self.log.event(
                "iteration_end",
                json!({"index": index, "task": it.title, "end": e.name()}),
            );
        }
        end
    }

    /// The task's start record: reused when it belongs to this task (or the decomposed task
    /// it is part of), else made now — which for a new task enforces the clean-tree rule.
    fn task_start(&mut self, doc: &Document, task: usize, identity: &Value) -> Result<TaskStart> {
        let path = self.ws.state_dir.task_start();
        if let Some(start) = resume::load::<TaskStart>(&path)
            && resume::is_same_or_ancestor(&start.identity, identity)
        {
            return Ok(start);
        }
        let chain_started = doc
            .ancestors(task)
            .iter()
            .any(|&a| doc.tasks()[a].state == TaskState::InProgress);
        let is_new = doc.tasks()[task].state == TaskState::Pending && !chain_started;
        let mut excluded = Vec::new();
        if is_new {
            let own = self.ws.own_files();
            let own_refs: Vec<&Path> = own.iter().map(PathBuf::as_path).collect();
            let dirty = self.ws.repo.dirty_paths(&own_refs)?;
            if !dirty.is_empty() {
                if !self.settings.allow_dirty {
                    return Err(Error::DirtyTree { files: dirty });
                }
                self.reporter.warn(&format!(
                    "--allow-dirty: these paths stay out of kern's commits: {}",
                    dirty.join(", ")
                ));
                excluded = dirty.into_iter().map(PathBuf::from).collect();
            }
        }
        let start = TaskStart {
            identity: identity.clone(),
            base_commit: self.ws.repo.head_oid().map(|o| o.to_string()),
            excluded,
        };
        resume::save(&path, &start)?;
        Ok(start)
    }

    async fn run_task(
        &mut self,
        it: &mut TaskIteration,
        point: ResumePoint,
    ) -> Result<IterationEnd> {
        let (implement_record, review_record) = match point {
            ResumePoint::Research => {
                let run = self.stage(it, Stage::Research).await?;
                match self.apply_research(it, &run)? {
                    Some(end) => return Ok(end),
                    None => (None, None),
                }
            }
            ResumePoint::ApplyResearch(record) => {
                let run = StageRun {
                    report: record.kern.report.clone(),
                    record: *record,
                    failure: None,
                    cost_usd: 0.0,
                };
                match self.apply_research(it, &run)? {
                    Some(end) => return Ok(end),
                    None => (None, None),
                }
            }
            ResumePoint::Implement => {
                self.reporter
                    .info("research: skipped, the task already has a Research note");
                (None, None)
            }
            ResumePoint::Review(i) => (Some(*i), None),
            ResumePoint::Commit(i, c) => (Some(*i), Some(*c)),
        };

        let implement = match implement_record {
            Some(record) => record,
            None => {
                let run = self.stage(it, Stage::Implement).await?;
                match self.apply_implement(it, &run)? {
                    Some(end) => return Ok(end),
                    None => run.record,
                }
            }
        };
        let implement_report = match &implement.kern.report {
            Some(StageReport::Implement(r)) => r.clone(),
            _ => {
                return Err(Error::Internal(
                    "implement record without an implement report".into(),
                ));
            }
        };

        let review = match review_record {
            Some(record) => record,
            None => {
                if let Some(end) = self.check_gate(it).await? {
                    return Ok(end);
                }
                let run = self
                    .stage_with_summary(it, Stage::Review, &implement_report.summary)
                    .await?;
                if let Some(end) = self.apply_review_failure(it, &run)? {
                    return Ok(end);
                }
                run.record
            }
        };
        let review_report = match &review.kern.report {
            Some(StageReport::Review(r)) => r.clone(),
            _ => {
                return Err(Error::Internal(
                    "review record without a review report".into(),
                ));
            }
        };
        self.commit(it, &implement_report, &review_report)
    }

    /// Renders the prompt and runs one stage, with audits.
    async fn stage(&mut self, it: &TaskIteration, stage: Stage) -> Result<StageRun> {
        self.stage_with_summary(it, stage, "").await
    }

    async fn stage_with_summary(
        &mut self,
        it: &TaskIteration,
        stage: Stage,
        implement_summary: &str,
    ) -> Result<StageRun> {
        // The budget stops the run after the stage that crossed it: its result is applied, the
        // next stage does not start, and the stage files stay for the next run to resume from.
        self.check_budget()?;
        let (_, doc, _) = self.ws.load_spec()?;
        let task = doc.find(&it.identity).ok_or_else(|| Error::SpecEdit {
            path: self.ws.spec_path.clone(),
            message: format!("task `{}` is gone from the file", it.title),
        })?;
        let attempts = doc.tasks()[task].attempts();
        let prompt = self.render(&doc, task, stage, implement_summary, it)?;
        let request = StageRequest {
            stage,
            model: model_for(self.settings, &self.ws.templates, stage),
            prompt: prompt.text,
            task: TaskRef {
                title: it.title.clone(),
                identity: it.identity_json.clone(),
                line: it.line,
            },
            attempt: attempts + 1,
        };
        for cut in &prompt.cuts {
            tracing::debug!(stage = stage.name(), cut = %cut, "prompt input cut to its budget");
        }
        let snapshot = self.ws.repo.snapshot()?;
        let refs_before = self.ws.repo.refs_snapshot()?;
        let spec_before = std::fs::read_to_string(&self.ws.spec_path)
            .map_err(|e| Error::io(&self.ws.spec_path, e))?;
        let ctx = StageContext {
            settings: self.settings,
            state_dir: &self.ws.state_dir,
            cwd: self.ws.repo.top(),
            reporter: self.reporter,
            interrupt: self.interrupt,
        };
        self.log.event(
            "stage_start",
            json!({"stage": stage.name(), "task": it.title, "prompt_bytes": request.prompt.len()}),
        );
        let result = runner::run_stage(&ctx, &mut self.lock, &request).await;
        let mut run = match result {
            Ok(run) => run,
            Err(e) => {
                self.log.event(
                    "stage_end",
                    json!({"stage": stage.name(), "error": e.to_string()}),
                );
                return Err(e);
            }
        };
        self.summary.cost_usd += run.cost_usd;
        self.summary.retries += run.record.kern.retries;
        for wait in run
            .record
            .kern
            .waits
            .iter()
            .filter(|w| w.kind == WaitKind::UsageLimit)
        {
            self.summary.waits += 1;
            self.summary.wait_time += Duration::from_millis(wait.duration_ms);
        }
        self.reporter.cost_so_far(self.summary.cost_usd);

        // Audits (DESIGN.md section 4).
        let mut violations = Vec::new();
        let mut reverted = Vec::new();
        let refs_after = self.ws.repo.refs_snapshot()?;
        if refs_after != refs_before {
            for moved in refs_before.diff(&refs_after) {
                violations.push(format!(
                    "{} stage moved {moved} (history left as it is)",
                    stage.name()
                ));
            }
        }
        if stage.tools().is_read_only() {
            let own = self.ws.own_files();
            let changed: Vec<String> = self
                .ws
                .repo
                .changes_since(&snapshot)?
                .into_iter()
                .filter(|p| !own.iter().any(|o| Path::new(p) == o))
                .collect();
            if !changed.is_empty() {
                let own_refs: Vec<&Path> = own.iter().map(PathBuf::as_path).collect();
                reverted = self.ws.repo.revert_to(&snapshot, &own_refs)?;
                violations.push(format!(
                    "{} stage is read-only but changed {} (reverted)",
                    stage.name(),
                    changed.join(", ")
                ));
            }
        }
        if let Some(v) = self.audit_spec(&spec_before, &it.identity)? {
            violations.push(v);
        }
        if !violations.is_empty() {
            for v in &violations {
                self.reporter.warn(&format!("violation: {v}"));
            }
            self.log.event(
                "violation",
                json!({"stage": stage.name(), "violations": violations, "reverted": reverted}),
            );
            run.record.kern.violations = violations;
            run.record.kern.reverted = reverted;
            if stage.tools().is_read_only() {
                run.record.kern.outcome = Outcome::Violated;
                run.failure = Some(run.record.kern.violations.join("; "));
                run.report = None;
            }
            run.record.write(&self.ws.state_dir.stage_record(stage))?;
        }
        let r = &run.record;
        self.reporter.stage_finished(
            stage,
            &StageLine {
                outcome: outcome_word(&run),
                duration: Duration::from_millis(r.kern.duration_ms),
                cost_usd: run.cost_usd,
                turns: r.agent_result.get("num_turns").and_then(Value::as_u64),
                note: run.failure.clone(),
            },
        );
        self.log.event(
            "stage_end",
            json!({"stage": stage.name(), "outcome": r.kern.outcome, "cost_usd": run.cost_usd, "duration_ms": r.kern.duration_ms, "retries": r.kern.retries, "failure": run.failure}),
        );
        Ok(run)
    }

    /// SPEC.md must still parse and hold the task; else kern's copy goes back.
    fn audit_spec(&self, before: &str, identity: &spec::TaskIdentity) -> Result<Option<String>> {
        let Ok(now) = std::fs::read(&self.ws.spec_path) else {
            crate::atomic_file::write(&self.ws.spec_path, before.as_bytes())?;
            return Ok(Some(format!(
                "{} was deleted (restored)",
                self.ws.spec_display
            )));
        };
        let broken = match Document::from_bytes(&now) {
            Err(_) => true,
            Ok(doc) => {
                spec::validate(&doc)
                    .iter()
                    .any(|d| d.severity == Severity::Error)
                    || doc.find(identity).is_none()
            }
        };
        if broken {
            crate::atomic_file::write(&self.ws.spec_path, before.as_bytes())?;
            return Ok(Some(format!(
                "{} no longer parsed or lost the task (kern's copy restored)",
                self.ws.spec_display
            )));
        }
        Ok(None)
    }

    fn render(
        &self,
        doc: &Document,
        task: usize,
        stage: Stage,
        implement_summary: &str,
        it: &TaskIteration,
    ) -> Result<prompt::Rendered> {
        let task_text = task_text(doc, task);
        let learnings = learnings::read(&self.ws.learnings_path)?;
        let commits = {
            let own = self.ws.own_files();
            let own: Vec<&Path> = own.iter().map(PathBuf::as_path).collect();
            self.ws
                .repo
                .recent_commits(10, &own, prompt::BUDGET_COMMITS)?
        };
        let attempts = attempts_text(doc.tasks()[task].attempts(), self.settings.max_attempts);
        let research = doc.tasks()[task]
            .research()
            .map(|n| n.text.clone())
            .unwrap_or_default();
        let diff;
        let mut inputs = PromptInputs {
            task: Some(&task_text),
            learnings: Some(&learnings),
            commits: Some(&commits),
            spec_path: Some(&self.ws.spec_display),
            ..PromptInputs::default()
        };
        match stage {
            Stage::Research => {}
            Stage::Implement => {
                inputs.prev_result = Some(&research);
                inputs.attempts = Some(&attempts);
            }
            Stage::Review => {
                let base = it
                    .start
                    .base_commit
                    .as_deref()
                    .and_then(|s| git2::Oid::from_str(s).ok());
                let mut exclude: Vec<&Path> =
                    it.start.excluded.iter().map(PathBuf::as_path).collect();
                let own = self.ws.own_files();
                exclude.extend(own.iter().map(PathBuf::as_path));
                diff = self
                    .ws
                    .repo
                    .diff_since(base, &exclude, prompt::BUDGET_DIFF)?;
                inputs.diff = Some(&diff);
                inputs.prev_result = Some(implement_summary);
                inputs.learnings = None;
            }
        }
        Ok(self.ws.templates.get(stage).render(&inputs))
    }

    /// Research done: write the notes and mark the task (and its chain) in progress. Returns
    /// an end when the iteration stops here.
    fn apply_research(
        &mut self,
        it: &mut TaskIteration,
        run: &StageRun,
    ) -> Result<Option<IterationEnd>> {
        let report = match &run.report {
            Some(StageReport::Research(r)) => r.clone(),
            _ => {
                let note = run
                    .failure
                    .clone()
                    .unwrap_or_else(|| "research gave no notes".into());
                return self.failed_attempt(it, &note).map(Some);
            }
        };
        if let Some(reason) = report.skip_reason.filter(|r| !r.trim().is_empty()) {
            self.edit(
                it,
                &[
                    Edit::SetState(TaskState::Pending),
                    Edit::AddSkipped(format!("research: {reason}")),
                ],
            )?;
            self.summary.skipped.push(it.title.clone());
            return Ok(Some(IterationEnd::Skipped));
        }
        let notes = if report.notes.is_empty() {
            vec!["(the research stage returned no notes)".to_string()]
        } else {
            report.notes
        };
        self.edit(
            it,
            &[
                Edit::AddResearch(notes),
                Edit::SetState(TaskState::InProgress),
            ],
        )?;
        self.mark_chain_in_progress(it)?;
        Ok(None)
    }

    fn mark_chain_in_progress(&mut self, it: &TaskIteration) -> Result<()> {
        let (_, doc, _) = self.ws.load_spec()?;
        let Some(task) = doc.find(&it.identity) else {
            return Ok(());
        };
        for ancestor in doc.ancestors(task) {
            if doc.tasks()[ancestor].state == TaskState::Pending {
                let id = doc.identity(ancestor);
                let (mut file, _) = SpecFile::load_as(&self.ws.spec_path, &self.ws.spec_display)?;
                file.apply(&id, &[Edit::SetState(TaskState::InProgress)])?;
            }
        }
        Ok(())
    }

    /// Implement done: SUCCESS goes on (None); every other status ends the iteration.
    fn apply_implement(
        &mut self,
        it: &mut TaskIteration,
        run: &StageRun,
    ) -> Result<Option<IterationEnd>> {
        let report: ImplementReport = match &run.report {
            Some(StageReport::Implement(r)) => r.clone(),
            _ => {
                let note = run
                    .failure
                    .clone()
                    .unwrap_or_else(|| "implement gave no status".into());
                return self.failed_attempt(it, &note).map(Some);
            }
        };
        match report.status {
            ImplementStatus::Success => Ok(None),
            ImplementStatus::Decomposed => {
                let subtasks: Vec<String> = report
                    .subtasks
                    .iter()
                    .map(|s| s.trim().to_string())
                    .filter(|s| !s.is_empty())
                    .collect();
                if subtasks.is_empty() {
                    return self
                        .failed_attempt(it, "implement said DECOMPOSED but gave no subtasks")
                        .map(Some);
                }
                self.reporter
                    .info(&format!("decomposed into {} subtasks", subtasks.len()));
                self.edit(it, &[Edit::InsertSubtasks(subtasks)])?;
                self.log.event(
                    "decomposed",
                    json!({"task": it.title, "subtasks": report.subtasks}),
                );
                Ok(Some(IterationEnd::Progressed))
            }
            ImplementStatus::Skipped => {
                let reason = report
                    .attempt_note
                    .filter(|s| !s.trim().is_empty())
                    .unwrap_or(report.summary);
                self.edit(
                    it,
                    &[Edit::SetState(TaskState::Pending), Edit::AddSkipped(reason)],
                )?;
                self.summary.skipped.push(it.title.clone());
                Ok(Some(IterationEnd::Skipped))
            }
            ImplementStatus::Failed => {
                let note = report
                    .attempt_note
                    .filter(|s| !s.trim().is_empty())
                    .unwrap_or(report.summary);
                self.failed_attempt(it, &note).map(Some)
            }
        }
    }

    /// Runs the check gate; Some(end) when it failed.
    async fn check_gate(&mut self, it: &mut TaskIteration) -> Result<Option<IterationEnd>> {
        let (_, doc, _) = self.ws.load_spec()?;
        let own = doc
            .find(&it.identity)
            .and_then(|t| doc.tasks()[t].check_command().map(str::to_string));
        let Some(command) = own.or_else(|| self.settings.check.clone()) else {
            return Ok(None);
        };
        self.lock.set_phase("check")?;
        self.reporter.info(&format!("check: `{command}`"));
        let result = check::run(
            &command,
            self.ws.repo.top(),
            self.settings.check_timeout,
            &self.ws.state_dir.check_log(),
            self.interrupt,
        )
        .await?;
        self.log.event(
            "check",
            json!({"command": command, "passed": result == CheckResult::Passed}),
        );
        match result {
            CheckResult::Passed => {
                self.reporter.info("check passed");
                Ok(None)
            }
            CheckResult::Failed(note) => {
                self.reporter
                    .warn(note.lines().next().unwrap_or("check failed"));
                self.failed_attempt(it, &note).map(Some)
            }
        }
    }

    /// A review that did not say COMMIT ends the iteration with an Attempt note.
    fn apply_review_failure(
        &mut self,
        it: &mut TaskIteration,
        run: &StageRun,
    ) -> Result<Option<IterationEnd>> {
        match &run.report {
            Some(StageReport::Review(r)) if r.verdict == Verdict::Commit => Ok(None),
            Some(StageReport::Review(r)) => {
                let reason = r
                    .reason
                    .clone()
                    .filter(|s| !s.trim().is_empty())
                    .unwrap_or_else(|| r.subject.clone());
                self.failed_attempt(it, &format!("review rejected the change: {reason}"))
                    .map(Some)
            }
            _ => {
                let note = run
                    .failure
                    .clone()
                    .unwrap_or_else(|| "review gave no verdict".into());
                self.failed_attempt(it, &note).map(Some)
            }
        }
    }

    /// Appends an Attempt note; blocks the task when its attempts are exhausted.
    fn failed_attempt(&mut self, it: &mut TaskIteration, note: &str) -> Result<IterationEnd> {
        self.summary.failed_attempts += 1;
        self.last_failed = true;
        let doc = self.edit(it, &[Edit::AddAttempt(note.to_string())])?;
        let Some(task) = doc.find(&it.identity) else {
            return Ok(IterationEnd::Progressed);
        };
        let t = &doc.tasks()[task];
        let attempts = t.attempts();
        let max = self.settings.max_attempts;
        let signatures: Vec<String> = t
            .notes
            .iter()
            .filter(|n| matches!(n.kind, spec::NoteKind::Attempt(_)))
            .map(|n| error_signature(&n.text))
            .collect();
        let repeated = signatures.len() >= max as usize
            && signatures[signatures.len() - max as usize..]
                .windows(2)
                .all(|w| w[0] == w[1]);
        let why = if attempts >= 2 * max {
            Some(format!(
                "{attempts} failed attempts, decomposition included — a person must look"
            ))
        } else if repeated {
            Some(format!(
                "the last {max} attempts failed the same way — a person must look"
            ))
        } else {
            None
        };
        if let Some(why) = why {
            self.edit(
                it,
                &[
                    Edit::SetState(TaskState::Blocked),
                    Edit::AddBlocked(why.clone()),
                    Edit::BlockParents,
                ],
            )?;
            self.reporter
                .warn(&format!("blocked `{}`: {why}", it.title));
            self.summary.blocked.push(it.title.clone());
            self.log
                .event("blocked", json!({"task": it.title, "why": why}));
            resume::remove(&self.ws.state_dir.task_start());
        } else {
            self.reporter.warn(&format!(
                "attempt {attempts} of `{}` failed: {}",
                it.title,
                note.lines().next().unwrap_or("")
            ));
        }
        Ok(IterationEnd::Progressed)
    }

    /// Applies edits to SPEC.md (re-read, re-located, verified, atomic).
    fn edit(&self, it: &TaskIteration, edits: &[Edit]) -> Result<Document> {
        let (mut file, _) = SpecFile::load_as(&self.ws.spec_path, &self.ws.spec_display)?;
        file.apply(&it.identity, edits)
    }

    /// COMMIT: mark done, append learnings, commit — journaled so a crash commits once.
    fn commit(
        &mut self,
        it: &mut TaskIteration,
        implement: &ImplementReport,
        review: &ReviewReport,
    ) -> Result<IterationEnd> {
        self.lock.set_phase("committing")?;
        let mut message = review.subject.trim().to_string();
        if message.is_empty() {
            message = it.title.clone();
        }
        if let Some(body) = review
            .body
            .as_deref()
            .map(str::trim)
            .filter(|b| !b.is_empty())
        {
            message = format!("{message}\n\n{body}\n");
        }
        let pending = PendingCommit {
            identity: it.identity_json.clone(),
            title: it.title.clone(),
            message: message.clone(),
            head_before: self.ws.repo.head_oid().map(|o| o.to_string()),
        };
        resume::save(&self.ws.state_dir.pending_commit(), &pending)?;
        self.edit(
            it,
            &[Edit::SetState(TaskState::Done), Edit::CompleteParents],
        )?;
        let learned: Vec<String> = implement
            .learnings
            .iter()
            .chain(review.learnings.iter())
            .cloned()
            .collect();
        let date = chrono::Local::now().format("%Y-%m-%d").to_string();
        let learnings_before =
            learnings::append(&self.ws.learnings_path, &date, &it.title, &learned)?;
        match self.make_commit(it, &message) {
            Ok(sha) => {
                resume::remove(&self.ws.state_dir.pending_commit());
                resume::remove(&self.ws.state_dir.task_start());
                self.last_failed = false;
                Ok(sha)
            }
            Err(Error::HookFailed { hook, output }) => {
                resume::remove(&self.ws.state_dir.pending_commit());
                if let Some(before) = learnings_before {
                    crate::atomic_file::write(&self.ws.learnings_path, before.as_bytes())?;
                }
                let tail: Vec<&str> = output
                    .lines()
                    .rev()
                    .take(20)
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev()
                    .collect();
                self.edit(it, &[Edit::SetState(TaskState::InProgress)])?;
                self.failed_attempt(
                    it,
                    &format!("the `{hook}` hook refused the commit:\n{}", tail.join("\n")),
                )
            }
            Err(e) => Err(e),
        }
    }

    fn make_commit(&mut self, it: &TaskIteration, message: &str) -> Result<IterationEnd> {
        let outcome = self.ws.repo.commit(&CommitRequest {
            message,
            exclude: &it.start.excluded,
            no_verify: self.settings.no_verify,
        })?;
        for left in &outcome.left_out {
            self.reporter.warn(&format!(
                "left out of the commit: `{}` ({})",
                left.path, left.reason
            ));
        }
        let left_out: Vec<Value> = outcome
            .left_out
            .iter()
            .map(|l| json!({"path": l.path, "reason": l.reason}))
            .collect();
        match outcome.sha {
            Some(sha) => {
                let short = sha.to_string()[..7].to_string();
                self.reporter.info(&format!(
                    "committed {short} {}",
                    message.lines().next().unwrap_or("")
                ));
                self.summary.committed.push((it.title.clone(), short));
                self.log.event(
                    "commit",
                    json!({"task": it.title, "sha": sha.to_string(), "left_out": left_out}),
                );
                Ok(IterationEnd::Committed)
            }
            None => Err(Error::Internal(
                "the commit holds no change, not even SPEC.md".into(),
            )),
        }
    }

    /// A crash between marking the task done and committing: finish the commit, exactly once.
    fn finish_pending_commit(&mut self) -> Result<()> {
        let path = self.ws.state_dir.pending_commit();
        let Some(pending) = resume::load::<PendingCommit>(&path) else {
            return Ok(());
        };
        let head = self.ws.repo.head_oid().map(|o| o.to_string());
        if head != pending.head_before {
            resume::remove(&path);
            return Ok(());
        }
        // The lock must say so: a kill inside this commit can leave `.git/index.lock`, which
        // the next run removes only when the dead run's phase was `committing`.
        self.lock.set_phase("committing")?;
        self.reporter.info(&format!(
            "finishing the commit of `{}` that the last run could not make",
            pending.title
        ));
        let identity: spec::TaskIdentity = serde_json::from_value(pending.identity.clone())
            .map_err(|e| Error::Internal(e.to_string()))?;
        let start = resume::load::<TaskStart>(&self.ws.state_dir.task_start())
            .filter(|s| resume::is_same_or_ancestor(&s.identity, &pending.identity))
            .unwrap_or(TaskStart {
                identity: pending.identity.clone(),
                base_commit: None,
                excluded: Vec::new(),
            });
        let it = TaskIteration {
            title: pending.title.clone(),
            identity,
            identity_json: pending.identity.clone(),
            line: 0,
            start,
        };
        let (_, doc, _) = self.ws.load_spec()?;
        if let Some(task) = doc.find(&it.identity)
            && doc.tasks()[task].state != TaskState::Done
        {
            self.edit(
                &it,
                &[Edit::SetState(TaskState::Done), Edit::CompleteParents],
            )?;
        }
        self.make_commit(&it, &pending.message)?;
        resume::remove(&path);
        resume::remove(&self.ws.state_dir.task_start());
        self.ws.state_dir.clear_iteration_files()?;
        Ok(())
    }
}

/// The task currently being worked on.
struct TaskIteration {
    title: String,
    identity: spec::TaskIdentity,
    identity_json: Value,
    line: usize,
    start: TaskStart,
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

/// The error signature of an attempt note: lower case, digits and punctuation folded, so that
/// "timed out after 61m" and "timed out after 60m" are the same failure.
fn error_signature(note: &str) -> String {
    note.chars()
        .filter(|c| c.is_alphabetic() || c.is_whitespace())
        .collect::<String>()
        .split_whitespace()
        .take(16)
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

fn outcome_word(run: &StageRun) -> String {
    match (&run.report, &run.record.kern.outcome) {
        (Some(StageReport::Implement(r)), _) => r.status.as_str().to_string(),
        (Some(StageReport::Review(r)), _) => match r.verdict {
            Verdict::Commit => "COMMIT".into(),
            Verdict::Reject => "REJECT".into(),
        },
        (Some(StageReport::Research(r)), _) => format!(
            "{} note{}",
            r.notes.len(),
            if r.notes.len() == 1 { "" } else { "s" }
        ),
        (None, outcome) => serde_json::to_value(outcome)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codex_gets_a_model_only_from_the_command_line() {
        use clap::Parser;
        let templates = Templates::load(Path::new("/nonexistent-kern-test")).unwrap();
        for (argv, expected) in [
            (vec!["kern"], Some("opus")),
            (vec!["kern", "--agent", "codex"], None),
            (
                vec!["kern", "--agent", "codex", "--model", "o3"],
                Some("o3"),
            ),
            (vec!["kern", "--model", "haiku"], Some("haiku")),
        ] {
            let cli = crate::cli::Cli::try_parse_from(&argv).unwrap();
            let settings = Settings::from_cli(&cli).unwrap();
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

    #[test]
    fn error_signatures_fold_numbers() {
        assert_eq!(
            error_signature("agent timed out after 60m"),
            error_signature("Agent timed out after 61m")
        );
        assert_ne!(
            error_signature("tests fail: parser"),
            error_signature("tests fail: lexer")
        );
    }
}
