//! `kern -n`: what a run would do, with no side effects at all — no lock, no write to SPEC.md,
//! LEARNINGS.md, the state folder or `.git`, no agent, no sleep.
//!
//! It shows the repository, project id, branch, state folder, lock holder, task counts, the task
//! it would select and why, the resume point, and for each stage that would run: the exact argv,
//! the model, the tool policy and the prompt size; with `-v` the rendered prompts themselves.
//! Everything is computed by the same code a run uses (workspace, selection, templates), so the
//! dry run cannot drift from the run. The report is the command's output and goes to stdout;
//! warnings about SPEC.md go to stderr, as `kern status` prints them.

use std::fmt::Write as _;

use crate::agent::InvocationRequest;
use crate::command::status;
use crate::error::Result;
use crate::learnings;
use crate::pipeline::{attempts_text, model_for, task_text};
use crate::prompt::{self, PromptInputs};
use crate::settings::Settings;
use crate::spec;
use crate::stage::Stage;

/// `kern -n`: the report on stdout, warnings on stderr.
pub fn run(settings: &Settings) -> Result<()> {
    let (report, warnings) = report_with_warnings(settings, status::terminal_width())?;
    for w in &warnings {
        eprintln!("kern: {w}");
    }
    status::print_out(&report)
}

/// Builds the dry-run report (titles whole).
pub fn report(settings: &Settings) -> Result<String> {
    report_with_warnings(settings, None).map(|(report, _)| report)
}

/// The dry-run report with titles cut to `width`, and the warnings about SPEC.md.
fn report_with_warnings(
    settings: &Settings,
    width: Option<usize>,
) -> Result<(String, Vec<String>)> {
    let (ws, doc, status) = status::compute_with_spec(settings)?;
    let j = &status.json;
    let mut out = String::new();
    let _ = writeln!(out, "kern dry run: nothing will be changed");
    let _ = writeln!(out, "repository:  {}", ws.repo.top().display());
    let _ = writeln!(out, "project id:  {}", ws.state_dir.project_id());
    let _ = writeln!(out, "branch:      {}", ws.state_dir.branch());
    let _ = writeln!(out, "agent:       {}", settings.agent);
    out.push_str(&status::render_human(&status, width));
    let warnings = status.warnings.clone();

    let Some(selection) = spec::select_with(&doc, &settings.select_options()) else {
        let _ = writeln!(
            out,
            "\nNothing to do: every task is done, blocked or held elsewhere{}.",
            if settings.skip_optional {
                " (optional tasks left alone: --skip-optional)"
            } else {
                ""
            }
        );
        return Ok((out, warnings));
    };
    let task = &doc.tasks()[selection.task];
    let resume = j["resume"].as_str().unwrap_or("research");
    let stages: Vec<Stage> = match resume {
        "research" => Stage::ALL.to_vec(),
        "implement" => vec![Stage::Implement, Stage::Review],
        _ => vec![Stage::Review],
    };
    let line = format!(
        "\nwould take: {{title}} ({}:{}) — {}",
        ws.spec_display, task.line, selection.reason
    );
    let _ = writeln!(out, "{}", status::fit_title(&line, &task.title, width));
    let check = task
        .check_command()
        .map(str::to_string)
        .or_else(|| settings.check.clone());
    let _ = writeln!(
        out,
        "check gate: {}",
        check
            .map(|c| format!("`{c}`"))
            .unwrap_or_else(|| "none (no --check, no Check note)".into())
    );

    let text = task_text(&doc, selection.task);
    let learned = learnings::read(&ws.learnings_path)?;
    let commits = {
        let own = ws.own_files();
        let own: Vec<&std::path::Path> = own.iter().map(|p| p.as_path()).collect();
        ws.repo.recent_commits(10, &own, prompt::BUDGET_COMMITS)?
    };
    let attempts = attempts_text(task.attempts(), settings.max_attempts);
    let research = task
        .research()
        .map(|n| n.text.clone())
        .unwrap_or_else(|| "(the research stage's notes)".into());
    let own = ws.own_files();
    let exclude: Vec<&std::path::Path> = own.iter().map(|p| p.as_path()).collect();
    let diff = ws
        .repo
        .diff_since(ws.repo.head_oid(), &exclude, prompt::BUDGET_DIFF)?;
    for stage in stages {
        let mut inputs = PromptInputs {
            task: Some(&text),
            learnings: Some(&learned),
            commits: Some(&commits),
            spec_path: Some(&ws.spec_display),
            ..PromptInputs::default()
        };
        match stage {
            Stage::Research => {}
            Stage::Implement => {
                inputs.prev_result = Some(&research);
                inputs.attempts = Some(&attempts);
            }
            Stage::Review => {
                inputs.learnings = None;
                inputs.diff = Some(&diff);
                inputs.prev_result = Some("(the implement stage's summary)");
            }
        }
        let template = ws.templates.get(stage);
        let rendered = template.render(&inputs);
        let model = model_for(settings, &ws.templates, stage);
        let invocation = settings.agent.invocation(InvocationRequest {
            stage,
            model: model.as_deref(),
            prompt: Vec::new(),
            cwd: ws.repo.top(),
            schema_path: &ws.state_dir.stage_schema(stage),
            state_dir: &ws.state_dir.dir(),
            task_title: &task.title,
        });
        let _ = writeln!(out, "\nstage {} {}:", stage.number(), stage.name());
        let _ = writeln!(out, "  tools:   {}", stage.tools().as_str());
        let _ = writeln!(
            out,
            "  model:   {}",
            match (&settings.agent, model.as_deref()) {
                (crate::agent::Agent::Program(_), _) => "(program agents choose their own)",
                (_, Some(m)) => m,
                (_, None) => "(the agent's default)",
            }
        );
        let _ = writeln!(
            out,
            "  prompt:  {} bytes from {}",
            rendered.text.len(),
            template.source.display()
        );
        for cut in &rendered.cuts {
            let _ = writeln!(out, "           {cut}");
        }
        let argv: Vec<String> = std::iter::once(invocation.program.display().to_string())
            .chain(invocation.args.iter().map(|a| shell_quote(a)))
            .collect();
        let _ = writeln!(
            out,
            "  argv:    {} < {}",
            argv.join(" "),
            ws.state_dir.stage_prompt(stage).display()
        );
        for (k, v) in &invocation.env {
            let _ = writeln!(out, "  env:     {k}={}", shell_quote(v));
        }
        if settings.verbose > 0 {
            let _ = writeln!(
                out,
                "  ---- prompt ----\n{}\n  ---- end of prompt ----",
                rendered.text
            );
        }
    }
    Ok((out, warnings))
}

/// Quotes an argument for display when a shell would need it.
fn shell_quote(arg: &str) -> String {
    let plain = !arg.is_empty()
        && arg
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_=./,:@+%".contains(&b));
    if plain {
        arg.to_string()
    } else {
        format!("'{}'", arg.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_only_what_needs_it() {
        assert_eq!(shell_quote("--tools=Read,Grep"), "--tools=Read,Grep");
        assert_eq!(shell_quote("Bash(git commit *)"), "'Bash(git commit *)'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
    }
}
