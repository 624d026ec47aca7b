//! Which fence each process of a task runs in — an agent's stage, the check, a `run`
//! must-have, the commit's hooks — from the settings and where the task works: the one place
//! that feeds `sandbox::describe`, for the run and for `kern -n` alike.
//!
//! The one decision a reader must know: only `--sandbox kern` fences (`agent` leaves it to
//! Claude Code, `off` to no one), and the check, must-haves and hooks run in the fence of the
//! implement stage unless `[sandbox] checks = "outside"` — they run code the agent wrote — with
//! the project's `allow_hosts` as their network and no agent's folders or key.

use std::path::{Path, PathBuf};

use crate::agent::Agent;
use crate::pipeline::Cx;
use crate::pipeline::teller::Teller;
use crate::sandbox::{self, AgentKind, ChecksPlace, Fence, FenceInput, Mode, Who};
use crate::settings::Settings;

/// Where a fenced process works.
#[derive(Debug, Clone)]
pub(crate) struct Place {
    /// The work tree's top folder.
    pub top: PathBuf,
    /// Its git folder.
    pub git_dir: PathBuf,
    /// The repository's common git folder.
    pub common_dir: PathBuf,
    /// The stage's state folder (`KERN_STATE_DIR`).
    pub state_dir: PathBuf,
    /// The git folders of the repository's submodules.
    pub modules: Vec<PathBuf>,
}

impl Place {
    /// The place of the work tree at `top` whose state folder is `state_dir`; the git folders
    /// are asked of the repository (the top's own `.git` when it cannot be opened).
    pub(crate) fn of(top: &Path, state_dir: &Path) -> Place {
        let (git_dir, common_dir) = crate::repository::git_folders(top)
            .unwrap_or_else(|| (top.join(".git"), top.join(".git")));
        let mut modules = Vec::new();
        submodule_git_dirs(&common_dir.join("modules"), &mut modules);
        Place {
            top: top.to_path_buf(),
            git_dir,
            common_dir,
            state_dir: state_dir.to_path_buf(),
            modules,
        }
    }
}

/// The submodules' git folders under `dir` (`<common>/modules`): a folder holding `HEAD` is
/// one (its own `modules/` holds its submodules'); any other is part of a name with slashes.
fn submodule_git_dirs(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if !entry.file_type().is_ok_and(|t| t.is_dir()) || out.len() >= 256 {
            continue;
        }
        if path.join("HEAD").is_file() {
            submodule_git_dirs(&path.join("modules"), out);
            out.push(path);
        } else {
            submodule_git_dirs(&path, out);
        }
    }
}

/// The fence kind of `agent`.
pub(crate) fn kind(agent: &Agent) -> AgentKind {
    match agent {
        Agent::Claude => AgentKind::Claude,
        Agent::Codex => AgentKind::Codex,
        Agent::Program(_) => AgentKind::Program,
    }
}

/// The fence of an agent running `stage` at `place`; `None` unless `--sandbox kern`. A
/// read-only stage (research, review) gets the work tree as a private layer.
pub(crate) fn for_agent(
    settings: &Settings,
    place: &Place,
    agent: &Agent,
    stage: crate::stage::Stage,
) -> Option<Fence> {
    fence(
        settings,
        place,
        Who::Agent { kind: kind(agent) },
        stage.tools().is_read_only(),
    )
}

/// The fence of the check and `run` must-haves (`Who::Check`) or of the commit's hooks
/// (`Who::Hook`) at `place`; `None` unless `--sandbox kern` and `checks` inside.
pub(crate) fn for_checks(settings: &Settings, place: &Place, who: Who) -> Option<Fence> {
    if settings.sandbox.checks == ChecksPlace::Outside {
        return None;
    }
    fence(settings, place, who, false)
}

fn fence(settings: &Settings, place: &Place, who: Who, tree_private: bool) -> Option<Fence> {
    let s = &settings.sandbox;
    if s.mode != Mode::Kern {
        return None;
    }
    let (agent_urls, codex_env_key, agent_dirs): (Vec<String>, Option<String>, Vec<PathBuf>) =
        match who.agent_kind() {
            AgentKind::Claude => (
                s.claude_urls.clone(),
                None,
                s.claude_dir.iter().cloned().collect(),
            ),
            AgentKind::Codex => {
                let config = s
                    .codex_home
                    .as_ref()
                    .and_then(|h| std::fs::read_to_string(h.join("config.toml")).ok());
                let provider = crate::agent::codex_provider::provider(config.as_deref()).ok();
                let url = provider.as_ref().and_then(|p| p.base_url.clone());
                let key = provider.and_then(|p| match p.credential {
                    crate::agent::codex_provider::Credential::EnvKey(name) => Some(name),
                    _ => None,
                });
                (
                    url.into_iter().collect(),
                    key,
                    s.codex_home.iter().cloned().collect(),
                )
            }
            AgentKind::Program | AgentKind::None => (Vec::new(), None, Vec::new()),
        };
    let old_state_root = settings.old_state_root.clone();
    // A `program:` agent may be the scripted agent, which keeps the books of a scenario inside
    // the work tree in its stage's state folder: that one folder of it is writable (the run
    // makes it before the stage, `pipeline::stage::attempt`).
    let mut write = s.write.clone();
    if who
        == (Who::Agent {
            kind: AgentKind::Program,
        })
    {
        write.push(place.state_dir.join(crate::scripted_agent::BOOKS_FOLDER));
    }
    let mut session_paths = s.session_paths.clone();
    session_paths.extend(sandbox::session::temp_sessions());
    let input = FenceInput {
        who,
        network: s.network,
        home: s.home.as_deref(),
        top: &place.top,
        tree_private,
        git_dir: &place.git_dir,
        common_dir: &place.common_dir,
        modules: &place.modules,
        state_root: &settings.state_root,
        state_dir: &place.state_dir,
        old_state_root: &old_state_root,
        hide: &s.hide,
        write: &write,
        allow_hosts: &s.allow_hosts,
        pass_env: &s.pass_env,
        agent_urls: &agent_urls,
        codex_env_key: codex_env_key.as_deref(),
        cache_dirs: &s.cache_dirs,
        agent_dirs: &agent_dirs,
        session_paths: &session_paths,
    };
    Some(sandbox::describe(&input))
}

/// Stops before any agent when `--sandbox kern` and the fence cannot be made in `top`
/// (`sandbox::preflight`): exit 2 naming what is missing and the ways out. `Ok` with the time
/// the trial fence took, or `None` when kern does not fence.
pub(crate) fn preflight(
    settings: &Settings,
    top: &Path,
) -> crate::error::Result<Option<std::time::Duration>> {
    if settings.sandbox.mode != Mode::Kern {
        return Ok(None);
    }
    match sandbox::preflight::check(settings.sandbox.network, top) {
        sandbox::preflight::Preflight::Works(took) => Ok(Some(took)),
        sandbox::preflight::Preflight::Unavailable { missing, fix } => {
            Err(crate::error::Error::SandboxUnavailable { missing, fix })
        }
    }
}

/// Puts the commit's hooks of the workspace `ws` in their fence.
pub(crate) fn fence_hooks(settings: &Settings, ws: &crate::workspace::Workspace) {
    let place = Place::of(ws.repo.top(), &ws.state_dir.dir());
    ws.repo
        .set_hook_fence(for_checks(settings, &place, Who::Hook));
}

/// The fence of the check and `run` must-haves in the run's work tree (`cx`'s workspace).
pub(super) fn checks_fence(cx: Cx) -> Option<Fence> {
    let place = Place::of(cx.ws.repo.top(), &cx.ws.state_dir.dir());
    for_checks(cx.settings, &place, Who::Check)
}

/// Records what a fence denied `by` (a stage's name, `check`, …) in `task`: a `Denied`
/// event for the person, `run.jsonl` and the report, told through `teller`. Returns the
/// sentences, for the task's
/// review (`TaskRun::denied`).
pub(super) fn fence_denied(
    cx: Cx,
    teller: &Teller,
    task: Option<&str>,
    by: &str,
    report: Option<&sandbox::FenceReport>,
) -> Vec<String> {
    let Some(report) = report.filter(|r| r.total() > 0) else {
        return Vec::new();
    };
    let home = cx.settings.sandbox.home.clone();
    let said = report
        .denied
        .iter()
        .map(|d| format!("{by}: {}", d.sentence(home.as_deref())))
        .collect();
    teller.emit(crate::event::RunEvent::Denied {
        task: task.map(str::to_string),
        by: by.to_string(),
        denied: report.denied.clone(),
        more: report.more,
    });
    said
}

/// Records what the fence denied the commit's hooks since the last call, in `task`.
pub(super) fn hooks_denied(cx: Cx, teller: &Teller, task: &str) {
    let denied = cx.ws.repo.take_hook_denied();
    fence_denied(cx, teller, Some(task), "hook", denied.as_ref());
}

impl crate::pipeline::TaskRun {
    /// Keeps what the fence denied for the review, each once.
    pub(super) fn heard_denied(&mut self, said: Vec<String>) {
        for s in said {
            if !self.denied.contains(&s) {
                self.denied.push(s);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_submodules_git_folder_is_one_holding_head_nested_ones_and_slashed_names_included() {
        let dir = tempfile::tempdir().unwrap();
        let modules = dir.path().join("modules");
        for folder in [
            "lib/HEAD",
            "lib/modules/inner/HEAD",
            "vendor/deps/json/HEAD",
        ] {
            let path = modules.join(folder);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, "ref: refs/heads/main\n").unwrap();
        }
        std::fs::create_dir_all(modules.join("empty")).unwrap();
        let mut found = Vec::new();
        submodule_git_dirs(&modules, &mut found);
        found.sort();
        assert_eq!(
            found,
            vec![
                modules.join("lib"),
                modules.join("lib/modules/inner"),
                modules.join("vendor/deps/json"),
            ]
        );
        let mut none = Vec::new();
        submodule_git_dirs(&dir.path().join("missing"), &mut none);
        assert!(none.is_empty());
    }

    #[test]
    fn each_agent_has_its_fence_kind() {
        assert!(matches!(kind(&Agent::Claude), AgentKind::Claude));
        assert!(matches!(kind(&Agent::Codex), AgentKind::Codex));
    }
}
