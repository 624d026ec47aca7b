//! `kern -n`: what a run would do, with no side effects at all — no lock, no write to SPEC.md,
//! LEARNINGS.md, the state folder or `.git`, no agent, no sleep. Its command lines read the
//! prompt and schema files a run writes to the state folder; `--prompts DIR` writes them to
//! DIR instead (the one write it makes, where the person asked) and names those, so that one
//! stage can be run by hand.
//!
//! It shows the repository, project id, branch, state folder, the git preflight (identity,
//! signing, an operation in progress, `index.lock`, filter drivers: what would stop the run's
//! commit), lock holder, task counts, the task it would select and why (and, when it would start
//! anew on uncommitted changes, that the run would stop there, naming them), the resume point, and
//! for each stage that would run: the exact argv, the model, the tool policy and the prompt
//! size — for the stage's own agent and, with `--fallback-agent`, for the agent it would move
//! to at a usage limit; with `-v` the rendered prompts themselves. A `program:` agent it would
//! run must exist and be executable, else it stops as the run would (exit 5).
//! The task, the resume point and every prompt come from the code a run uses (the workspace,
//! `spec::select_with`, `resume::infer`, the discovery level, the `StagePlan` a run carries
//! out), so what it shows is what the run would do; a level-0 task's implement is planned on
//! SPEC.md as kern's start of it leaves it (in progress). The report is the command's output and goes to stdout;
//! warnings about SPEC.md go to stderr, as `kern status` prints them. Control characters in
//! either (a title's escape sequence, a tab in a `-v` prompt) are shown escaped or as spaces
//! (`text::clean`), never sent to the terminal raw.

use std::fmt::Write as _;
use std::path::Path;

use crate::agent::{Agent, StageAgent};
use crate::command::status;
use crate::error::{Error, Result};
use crate::pipeline::stage::plan::{PlanFiles, PlanFor, StagePlan, stages_left};
use crate::pipeline::start::{StartTree, tree_at_start};
use crate::settings::Settings;
use crate::spec;
use crate::state::resume::ResumePoint;

/// `kern -n`: the report on stdout, warnings on stderr; with `prompts_dir` (`--prompts DIR`)
/// the prompts and schemas it shows written there.
pub(crate) fn run(settings: &Settings, prompts_dir: Option<&Path>) -> Result<()> {
    let prompts_dir = prompts_dir.map(|dir| settings.cwd.join(dir));
    let (report, warnings) =
        report_with_warnings(settings, status::terminal_width(), prompts_dir.as_deref())?;
    for w in &warnings {
        eprintln!("kern: {}", crate::text::clean(w));
    }
    // Titles, the person's Check commands and prompts come from outside kern.
    status::print_out(&crate::text::clean_lines(&report))
}

/// The dry-run report with titles cut to `width`, and the warnings about SPEC.md.
fn report_with_warnings(
    settings: &Settings,
    width: Option<usize>,
    prompts_dir: Option<&Path>,
) -> Result<(String, Vec<String>)> {
    let (ws, doc, status) = status::compute_with_spec(settings)?;
    let mut out = String::new();
    let _ = writeln!(out, "kern dry run: nothing will be changed");
    let _ = writeln!(out, "repository:  {}", ws.repo.top().display());
    let _ = writeln!(out, "project id:  {}", ws.state_dir.project_id());
    let _ = writeln!(out, "branch:      {}", ws.state_dir.branch());
    let _ = writeln!(out, "agent:       {}", settings.agent);
    let took = crate::pipeline::fence::preflight(settings, ws.repo.top())?;
    let _ = writeln!(out, "sandbox:     {}", sandbox_line(settings, took));
    for origin in &settings.origins {
        let _ = writeln!(
            out,
            "setting:     {} = {} ({})",
            origin.name,
            crate::text::clean(&origin.value),
            origin.source
        );
    }
    for check in ws.repo.preflight() {
        let _ = match check.result {
            Ok(detail) => writeln!(out, "git:         ✓ {}: {detail}", check.name),
            Err(e) => writeln!(out, "git:         ✗ {}: {e}", check.name),
        };
    }
    if let Some(review) = &settings.review_agent {
        let _ = writeln!(out, "review by:   {review}");
    }
    if let Some(fallback) = &settings.fallback_agent {
        let _ = writeln!(
            out,
            "fallback:    {fallback}, for a stage whose agent hits a usage limit that resets later than {}",
            crate::text::duration(settings.retry.fallback_after)
        );
    }
    out.push_str(&status::render_human(&status, width));
    let warnings = status.warnings.clone();

    let Some(selection) = spec::select_with(&doc, &ws.select_options(settings, &doc)) else {
        if doc.has_pending_examples() {
            let _ = writeln!(
                out,
                "\nNothing to do: replace the example tasks in {} with your own (kern never takes a task whose title starts with `Example:`).",
                ws.spec_display
            );
            return Ok((out, warnings));
        }
        let _ = writeln!(
            out,
            "\nNothing to do: every task is done, blocked, held elsewhere or deferred{}.",
            if settings.skip_optional {
                " (optional tasks left alone: --skip-optional)"
            } else {
                ""
            }
        );
        return Ok((out, warnings));
    };
    if settings.jobs > 1 || settings.review {
        let together = crate::pipeline::schedule::pick(
            &doc,
            &[],
            settings.jobs as usize,
            &ws.select_options(settings, &doc),
        );
        let titles: Vec<String> = together
            .iter()
            .map(|s| crate::spec::quote_title(&doc.tasks()[s.task].title))
            .collect();
        let _ = writeln!(
            out,
            "\nwould run together (-j {}): {} — each in its own worktree on a branch kern/<task>{}",
            settings.jobs,
            titles.join(", "),
            if settings.review {
                ", its commit left there for review (--review)"
            } else {
                ", committed here one at a time"
            }
        );
    }
    let task = &doc.tasks()[selection.task];
    let top = ws.repo.top();
    let level = crate::pipeline::discovery::level(
        &doc,
        selection.task,
        &|p| top.join(p).exists(),
        settings.level,
    )
    .level;
    let identity = doc.identity(selection.task);
    let tests_step =
        crate::pipeline::tests_first::step_due(task, status.start.as_ref(), &identity, settings);
    let stages = stages_left(status.resume.as_ref(), level, tests_step);
    // A level-0 task starts without research: kern marks it in progress before implement,
    // so implement's prompt shows it so.
    let started = if stages.first() == Some(&crate::stage::Stage::Implement)
        && task.state == spec::TaskState::Pending
    {
        let identity = doc.identity(selection.task);
        let edits = crate::pipeline::stage::plan::start_without_research();
        Some(
            spec::apply_edits(&doc, &identity, &edits)
                .map_err(|e| Error::Internal(format!("cannot plan the start of the task: {e}")))?
                .document,
        )
    } else {
        None
    };
    let planned = started.as_ref().unwrap_or(&doc);
    let implement = match &status.resume {
        Some(ResumePoint::Review(r) | ResumePoint::Commit(r, _)) => Some(r),
        _ => None,
    };
    let line = format!(
        "\nwould take: {{title}} ({}:{}) — {}",
        ws.spec_display, task.line, selection.reason
    );
    let _ = writeln!(out, "{}", status::fit_title(&line, &task.title, width));
    if let StartTree::Dirty(paths) = tree_at_start(&ws, &doc, selection.task)? {
        let _ = if settings.allow_dirty {
            writeln!(
                out,
                "left out:   {} — uncommitted before the task, so never in kern's commits (--allow-dirty)",
                crate::error::dirty_names(&paths).join(", ")
            )
        } else {
            writeln!(
                out,
                "would stop: {} (exit 2, before any agent)",
                Error::dirty_tree(&paths)
            )
        };
    }
    let check = task
        .check_command()
        .map(str::to_string)
        .or_else(|| settings.check.clone());
    if settings.tests_read_only {
        let _ = writeln!(
            out,
            "tests:      read-only — changing or deleting an existing test file fails the attempt"
        );
    }
    let fenced_checks = crate::pipeline::fence::for_checks(
        settings,
        &crate::pipeline::fence::Place::of(ws.repo.top(), &ws.state_dir.dir()),
        crate::sandbox::Who::Check,
    );
    let _ = writeln!(
        out,
        "check gate: {}{}",
        check.map_or_else(
            || "none (no --check, no Check note)".into(),
            |c| format!("`{c}`")
        ),
        match (&fenced_checks, settings.sandbox.mode) {
            (Some(_), _) =>
                " — in the fence: the check, `run` must-haves and hooks run code the agent wrote",
            (None, crate::sandbox::Mode::Kern) =>
                " — outside the fence ([sandbox] checks = \"outside\")",
            (None, _) => "",
        }
    );
    if settings.tracker.is_some() {
        let gh = crate::supervisor::awake::find("gh", settings.path_var.as_deref());
        let _ = writeln!(
            out,
            "tracker:    {}",
            super::tracked::dry_run_line(task.issue().as_ref(), gh.as_deref())
        );
    }
    if let Some(dir) = prompts_dir {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let _ = writeln!(
            out,
            "prompts:    written to {} (stageN.prompt.md, stageN.schema.json)",
            dir.display()
        );
    }
    for stage in stages {
        let plan = StagePlan::new(
            &ws,
            settings,
            &PlanFor {
                doc: planned,
                task: selection.task,
                stage,
                level,
                start: status.start.as_ref(),
                implement,
                refused: None,
                verified: &[],
                denied: &[],
                spent: 0.0,
            },
        )?;
        let agents = &plan.agents;
        // A program the run could not start stops the dry run the same way (exit 5).
        for on in std::iter::once(&agents.primary).chain(agents.fallback.as_ref()) {
            if let Agent::Program(path) = &on.agent {
                crate::agent::program::locate(path, ws.repo.top())?;
            }
        }
        let _ = writeln!(out, "\nstage {} {}:", stage.number(), stage.name());
        let _ = writeln!(out, "  tools:   {}", stage.tools().as_str());
        let _ = writeln!(
            out,
            "  prompt:  {} bytes from {}",
            plan.prompt.len(),
            plan.template.display()
        );
        for cut in &plan.cuts {
            let _ = writeln!(out, "           {cut}");
        }
        // Where the command lines read the prompt and the schema: the state folder a run
        // writes them to, or the folder `--prompts` wrote them to just now.
        let (prompt_file, schema_path) = match prompts_dir {
            Some(dir) => {
                let prompt = dir.join(format!("{}.prompt.md", stage.file_stem()));
                let schema = dir.join(format!("{}.schema.json", stage.file_stem()));
                std::fs::write(&prompt, &plan.prompt).map_err(|e| Error::io(&prompt, e))?;
                std::fs::write(&schema, stage.schema()).map_err(|e| Error::io(&schema, e))?;
                (prompt, schema)
            }
            None => (
                ws.state_dir.stage_prompt(stage),
                ws.state_dir.stage_schema(stage),
            ),
        };
        let invocation = |on: &StageAgent| {
            plan.invocation(
                on,
                &PlanFiles {
                    cwd: ws.repo.top(),
                    schema: &schema_path,
                    state_dir: &ws.state_dir.dir(),
                },
                0.0,
            )
        };
        agent_lines(
            &mut out,
            "  ",
            &agents.primary,
            &invocation(&agents.primary),
            &prompt_file,
        );
        match plan.fence(&agents.primary.agent) {
            Some(fence) => fence_lines(&mut out, "  ", fence, settings.sandbox.home.as_deref()),
            None => {
                let _ = writeln!(out, "  fence:   none (--sandbox {})", settings.sandbox.mode);
            }
        }
        if let Some(fallback) = &agents.fallback {
            let _ = writeln!(
                out,
                "  at a far usage limit of {}, on {}:",
                agents.primary.agent, fallback.agent
            );
            agent_lines(
                &mut out,
                "    ",
                fallback,
                &invocation(fallback),
                &prompt_file,
            );
        }
        if settings.verbose > 0 {
            let _ = writeln!(
                out,
                "  ---- prompt ----\n{}\n  ---- end of prompt ----",
                plan.prompt
            );
        }
    }
    Ok((out, warnings))
}

/// The `sandbox:` line: kern's fence and that it can be made here (how long the trial took),
/// or what runs unfenced.
fn sandbox_line(settings: &Settings, took: Option<std::time::Duration>) -> String {
    match (settings.sandbox.mode, took) {
        (crate::sandbox::Mode::Kern, Some(took)) => format!(
            "kern — every agent and whatever runs its code fenced, network {} (✓ made here in {} ms)",
            settings.sandbox.network,
            took.as_millis()
        ),
        (crate::sandbox::Mode::Kern, None) => "kern".to_string(),
        (crate::sandbox::Mode::Agent, _) => {
            "agent — no fence of kern's: Claude Code's own sandbox for the implement stage's shell only".to_string()
        }
        (crate::sandbox::Mode::Off, _) => {
            "off — no fence: the agents run with your whole account (files, network, credentials)".to_string()
        }
    }
}

/// A path for the person: under `home` with `~`.
fn shown(path: &std::path::Path, home: Option<&std::path::Path>) -> String {
    match home.and_then(|h| path.strip_prefix(h).ok()) {
        Some(rest) if !rest.as_os_str().is_empty() => format!("~/{}", rest.display()),
        _ => path.display().to_string(),
    }
}

/// A stage's fence: what it may write, what stays read-only, what is hidden (those that exist
/// here), its private caches and the hosts it may reach.
fn fence_lines(
    out: &mut String,
    indent: &str,
    fence: &crate::sandbox::Fence,
    home: Option<&std::path::Path>,
) {
    let list = |paths: &[std::path::PathBuf], existing: bool| -> (Vec<String>, usize) {
        let (here, absent): (Vec<&std::path::PathBuf>, Vec<&std::path::PathBuf>) = paths
            .iter()
            .partition(|p| !existing || std::fs::symlink_metadata(p).is_ok());
        (here.iter().map(|p| shown(p, home)).collect(), absent.len())
    };
    let _ = writeln!(out, "{indent}fence:   kern, network {}", fence.network);
    let (writable, _) = list(&fence.writable, false);
    let _ = writeln!(
        out,
        "{indent}  writable:  {} and a private TMPDIR",
        writable.join(", ")
    );
    if !fence.read_only.is_empty() {
        let (read_only, _) = list(&fence.read_only, false);
        let _ = writeln!(out, "{indent}  read-only: {}", read_only.join(", "));
    }
    let (private, _) = list(&fence.private, true);
    if !private.is_empty() {
        let _ = writeln!(
            out,
            "{indent}  private:   {} (writes kept apart and thrown away)",
            private.join(", ")
        );
    }
    let (temp, _) = list(&fence.temp, true);
    if !temp.is_empty() {
        let _ = writeln!(
            out,
            "{indent}  temporary: {} (empty and the stage's own; what it needs there is bound in)",
            temp.join(", ")
        );
    }
    let (hidden, absent) = list(&fence.hidden, true);
    let _ = writeln!(
        out,
        "{indent}  hidden:    {}{}",
        if hidden.is_empty() {
            "nothing here".to_string()
        } else {
            hidden.join(", ")
        },
        if absent > 0 {
            format!(" (and {absent} more on the list, absent here)")
        } else {
            String::new()
        }
    );
    let hosts: Vec<String> = fence.hosts.iter().map(ToString::to_string).collect();
    let _ = writeln!(
        out,
        "{indent}  hosts:     {}",
        match fence.network {
            crate::sandbox::Network::List if hosts.is_empty() => "none".to_string(),
            crate::sandbox::Network::List => hosts.join(", "),
            crate::sandbox::Network::None => "none (--sandbox-network none)".to_string(),
            crate::sandbox::Network::Open => "any (--sandbox-network open)".to_string(),
        }
    );
    if !fence.pass_env.is_empty() {
        let _ = writeln!(
            out,
            "{indent}  env:       secrets kept back but {}",
            fence.pass_env.join(", ")
        );
    }
}

/// The agent, model, argv and environment of one agent running a stage.
fn agent_lines(
    out: &mut String,
    indent: &str,
    on: &StageAgent,
    invocation: &crate::agent::Invocation,
    prompt_file: &std::path::Path,
) {
    let _ = writeln!(out, "{indent}agent:   {}", on.agent);
    let _ = writeln!(
        out,
        "{indent}model:   {}",
        match (&on.agent, on.model.as_deref()) {
            (Agent::Program(_), _) => "(program agents choose their own)",
            (_, Some(m)) => m,
            (_, None) => "(the agent's default)",
        }
    );
    let argv: Vec<String> = std::iter::once(invocation.program.display().to_string())
        .chain(invocation.args.iter().map(|a| crate::text::shell_quote(a)))
        .collect();
    let _ = writeln!(
        out,
        "{indent}argv:    {} < {}",
        argv.join(" "),
        prompt_file.display()
    );
    for (k, v) in &invocation.env {
        let _ = writeln!(out, "{indent}env:     {k}={}", crate::text::shell_quote(v));
    }
}
