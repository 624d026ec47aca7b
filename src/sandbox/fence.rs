//! The fence's description (PURE): from where the process runs and what the person set, which
//! paths are writable, read-only, private, hidden or shown again, which temporary folders are
//! the process's own, which hosts are allowed and which secret-looking variables pass. The dry run prints it; the Linux setup and the macOS
//! profile build from it; nothing here touches the machine.
//!
//! The one decision a reader must know: the description is a set of paths, each with one
//! treatment, and the deeper path wins — the state root is hidden, this stage's own folder in
//! it shown again read-only, a `-j` task's work tree inside that writable again, its `.git`
//! read-only again. The Linux setup applies them shallow to deep; a path that does not exist
//! on the machine is left out there (nothing to hide, nothing to bind).

use std::path::{Path, PathBuf};

use super::hosts::{self, AgentKind, HostRule};
use super::secrets;
use super::{Network, Who};

/// What one fenced process may do (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Fence {
    /// Who runs in it: an agent's stage, the check or a git hook.
    pub who: Who,
    /// Its network.
    pub network: Network,
    /// The paths it may write (besides its private TMPDIR).
    pub writable: Vec<PathBuf>,
    /// Paths inside writable ones that stay read-only (`.git`).
    pub read_only: Vec<PathBuf>,
    /// Caches it may write through a private layer thrown away afterwards.
    pub private: Vec<PathBuf>,
    /// The machine's temporary folders (`/tmp`, `/var/tmp`, `/dev/shm`): each an empty folder of its own,
    /// writable and thrown away; what others keep there is out of sight, and what the process
    /// needs there (its work tree, its home, its program, its state folder) is bound in.
    #[serde(default)]
    pub temp: Vec<PathBuf>,
    /// Paths it finds empty: the person's secrets, kern's state root.
    pub hidden: Vec<PathBuf>,
    /// Paths inside hidden ones it may read again (this stage's own state folder).
    pub shown: Vec<PathBuf>,
    /// The hosts kern's proxy lets it reach (with [`Network::List`]).
    pub hosts: Vec<HostRule>,
    /// Secret-looking variables that pass all the same (the agent's own key, `pass_env`).
    pub pass_env: Vec<String>,
}

/// Everything the description is made from.
#[derive(Debug, Clone)]
pub(crate) struct FenceInput<'a> {
    /// Who runs in it.
    pub who: Who,
    /// `--sandbox-network`.
    pub network: Network,
    /// The home folder, when known.
    pub home: Option<&'a Path>,
    /// The work tree's top folder: writable, the process's working folder.
    pub top: &'a Path,
    /// The process runs a read-only stage (research, review): the work tree is a private
    /// layer (its writes thrown away with the stage), not writable.
    pub tree_private: bool,
    /// The work tree's git folder (`.git`, or `.git/worktrees/<name>` of a linked worktree).
    pub git_dir: &'a Path,
    /// The repository's common git folder (objects, refs, hooks, config).
    pub common_dir: &'a Path,
    /// The git folders of its submodules (`<common>/modules/<name>`): a submodule bump moves
    /// their HEAD and index, so they are writable but for their hooks and config.
    pub modules: &'a [PathBuf],
    /// kern's state root: hidden.
    pub state_root: &'a Path,
    /// This stage's own state folder (its schema, `KERN_STATE_DIR`): shown read-only.
    pub state_dir: &'a Path,
    /// Where versions before kept their state (`/tmp/claude/kern`): hidden.
    pub old_state_root: &'a Path,
    /// `[sandbox] hide`.
    pub hide: &'a [PathBuf],
    /// `[sandbox] write`.
    pub write: &'a [PathBuf],
    /// `[sandbox] allow_hosts`.
    pub allow_hosts: &'a [HostRule],
    /// `[sandbox] pass_env`.
    pub pass_env: &'a [String],
    /// Where the agent is pointed for its model API (`ANTHROPIC_BASE_URL`, Codex's provider
    /// `base_url`, …): allowed as its own API.
    pub agent_urls: &'a [String],
    /// The variable Codex's provider reads its key from (`env_key`), when configured.
    pub codex_env_key: Option<&'a str>,
    /// The folders named by cache variables (`PRE_COMMIT_HOME`, `XDG_CACHE_HOME`, …).
    pub cache_dirs: &'a [PathBuf],
    /// The agent's own folders given by variables (`CODEX_HOME`, `CLAUDE_CONFIG_DIR`).
    pub agent_dirs: &'a [PathBuf],
    /// Sockets and folders of the person's session given by variables (`SSH_AUTH_SOCK`'s,
    /// `XDG_RUNTIME_DIR`): hidden.
    pub session_paths: &'a [PathBuf],
}

/// The fence for `input`.
pub(crate) fn describe(input: &FenceInput<'_>) -> Fence {
    let kind = input.who.agent_kind();
    let home_path = |rel: &str| input.home.map(|h| h.join(rel));
    let expand = |p: &PathBuf| expand(p, input.home, input.top);

    // A read-only stage's tree is a layer of its own: `cargo test` may write `target/`, and
    // nothing it writes reaches the tree (kern's audit after it finds nothing to undo).
    let layered: Vec<PathBuf> = if input.tree_private {
        vec![input.top.to_path_buf()]
    } else {
        Vec::new()
    };
    let mut writable = if input.tree_private {
        Vec::new()
    } else {
        vec![input.top.to_path_buf()]
    };
    writable.extend(
        secrets::agent_home_folders(kind)
            .iter()
            .filter_map(|rel| home_path(rel)),
    );
    if matches!(kind, AgentKind::Claude | AgentKind::Codex) {
        writable.extend(input.agent_dirs.iter().cloned());
    }
    writable.extend(input.write.iter().filter_map(expand));

    let mut read_only = Vec::new();
    match input.who {
        // A hook commits: it writes the index, COMMIT_EDITMSG and (lint-staged) a backup
        // stash. Its hooks and config stay read-only, so that nothing it runs plants a hook
        // or a `core.fsmonitor` command for the person's own next `git commit`.
        Who::Hook => {
            writable.push(input.git_dir.to_path_buf());
            writable.push(input.common_dir.to_path_buf());
            for dir in [input.common_dir, input.git_dir] {
                read_only.push(dir.join("hooks"));
                read_only.push(dir.join("config"));
                read_only.push(dir.join("config.worktree"));
            }
        }
        Who::Agent { .. } | Who::Check => {
            read_only.push(input.top.join(".git"));
            read_only.push(input.git_dir.to_path_buf());
            read_only.push(input.common_dir.to_path_buf());
        }
    }
    if !input.modules.is_empty() && input.who != Who::Hook && !input.tree_private {
        writable.push(input.common_dir.join("modules"));
    }
    for module in input.modules {
        read_only.push(module.join("hooks"));
        read_only.push(module.join("config"));
    }
    // A read-only path matters only inside a writable one (or the tree's layer).
    read_only.retain(|p| {
        writable
            .iter()
            .chain(&layered)
            .any(|w| p.starts_with(w) && p != w)
    });

    let mut private: Vec<PathBuf> = secrets::HOME_CACHES
        .iter()
        .filter_map(|rel| home_path(rel))
        .collect();
    private.extend(layered.iter().cloned());
    private.extend(input.cache_dirs.iter().cloned());
    // Tools and agents write `/tmp` whatever TMPDIR says (Codex's daemon folder, a script the
    // agent writes to `/tmp/x.py`): each temporary folder is an empty one of the process's own,
    // so they can, nothing reaches the machine's, and others' files there (which may hold
    // secrets) are not seen.
    let temp: Vec<PathBuf> = secrets::SYSTEM_TEMP.iter().map(PathBuf::from).collect();

    let mut hidden: Vec<PathBuf> = secrets::HOME_SECRETS
        .iter()
        .filter_map(|rel| home_path(rel))
        .collect();
    hidden.extend(secrets::SYSTEM_SECRETS.iter().map(PathBuf::from));
    hidden.extend(input.session_paths.iter().cloned());
    hidden.push(input.state_root.to_path_buf());
    hidden.push(input.old_state_root.to_path_buf());
    hidden.extend(input.hide.iter().filter_map(expand));
    // What the person made writable on purpose is not hidden from it (`write = ["~/.npmrc"]`).
    hidden.retain(|h| !writable.contains(h));

    let mut shown = vec![input.state_dir.to_path_buf()];
    // What the process reads that lives in a temporary folder is bound into its own empty one
    // (a test's home, a repository or worktree under `/tmp`): the home folder, the git folders
    // outside the work tree.
    let reach = input
        .home
        .into_iter()
        .chain([input.git_dir, input.common_dir])
        .map(Path::to_path_buf)
        .chain(input.modules.iter().cloned());
    for path in reach {
        if in_temp(&temp, &path) && !writable.iter().chain(&layered).any(|w| path.starts_with(w)) {
            shown.push(path);
        }
    }

    let hosts = match input.network {
        Network::List => {
            let mut hosts = hosts::agent_hosts(kind, input.agent_urls);
            for rule in input.allow_hosts {
                if !hosts.contains(rule) {
                    hosts.push(rule.clone());
                }
            }
            hosts
        }
        Network::None | Network::Open => Vec::new(),
    };

    let mut pass_env = secrets::agent_keys(kind, input.codex_env_key);
    pass_env.extend(input.pass_env.iter().cloned());

    Fence {
        who: input.who,
        network: input.network,
        writable: distinct(writable),
        read_only: distinct(read_only),
        private: distinct(private),
        temp,
        hidden: distinct(hidden),
        shown: distinct(shown),
        hosts,
        pass_env: distinct(pass_env),
    }
}

/// True when `path` is inside one of the temporary folders `temp` (not one of them itself).
pub(crate) fn in_temp(temp: &[PathBuf], path: &Path) -> bool {
    temp.iter().any(|t| path.starts_with(t) && path != t)
}

/// What of `programs` (files) and `path_dirs` (the PATH's folders) lies in one of the fence's
/// temporary folders and no bind of the fence reaches already: each program's folder (a link
/// in a `bin` folder keeps its link), or the program alone when that folder is a temporary
/// folder itself; each PATH folder.
pub(crate) fn reach_in_temp(
    fence: &Fence,
    programs: &[PathBuf],
    path_dirs: &[PathBuf],
) -> Vec<PathBuf> {
    let wanted = programs
        .iter()
        .map(|p| match p.parent() {
            Some(dir) if in_temp(&fence.temp, dir) => dir.to_path_buf(),
            _ => p.clone(),
        })
        .chain(path_dirs.iter().filter(|d| d.is_absolute()).cloned());
    let mut out: Vec<PathBuf> = Vec::new();
    for path in wanted {
        let reached = fence
            .writable
            .iter()
            .chain(&fence.private)
            .chain(&fence.shown)
            .chain(&out)
            .any(|r| path.starts_with(r));
        if in_temp(&fence.temp, &path) && !reached {
            out.push(path);
        }
    }
    out
}

/// `~/x` in the home folder, a relative path from the work tree's top, an absolute one as it
/// is; `None` for `~/x` without a home folder.
fn expand(path: &Path, home: Option<&Path>, top: &Path) -> Option<PathBuf> {
    match path.strip_prefix("~") {
        Ok(rest) => home.map(|h| h.join(rest)),
        Err(_) if path.is_absolute() => Some(path.to_path_buf()),
        Err(_) => Some(top.join(path)),
    }
}

/// `items` in their first order, each once.
fn distinct<T: PartialEq>(items: Vec<T>) -> Vec<T> {
    let mut out: Vec<T> = Vec::with_capacity(items.len());
    for item in items {
        if !out.contains(&item) {
            out.push(item);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::Network;

    struct Paths {
        hide: Vec<PathBuf>,
        write: Vec<PathBuf>,
        allow: Vec<HostRule>,
        pass: Vec<String>,
        urls: Vec<String>,
        caches: Vec<PathBuf>,
        agent_dirs: Vec<PathBuf>,
        session: Vec<PathBuf>,
    }

    fn paths() -> Paths {
        Paths {
            hide: vec!["~/secret".into(), "private/keys".into(), "/srv/x".into()],
            write: vec!["~/.cache/mytool".into(), "~/.npmrc".into()],
            allow: vec!["registry.npmjs.org".parse().unwrap()],
            pass: vec!["NPM_TOKEN".into()],
            urls: vec!["http://127.0.0.1:4000/v1".into()],
            caches: vec!["/home/me/pc".into()],
            agent_dirs: vec!["/home/me/codex-home".into()],
            session: vec!["/run/user/1000".into()],
        }
    }

    fn input<'a>(
        who: Who,
        p: &'a Paths,
        top: &'a Path,
        git: (&'a Path, &'a Path),
    ) -> FenceInput<'a> {
        FenceInput {
            who,
            network: Network::List,
            home: Some(Path::new("/home/me")),
            top,
            tree_private: false,
            git_dir: git.0,
            common_dir: git.1,
            modules: &[],
            state_root: Path::new("/home/me/.local/state/kern"),
            state_dir: Path::new("/home/me/.local/state/kern/proj/main"),
            old_state_root: Path::new("/tmp/claude/kern"),
            hide: &p.hide,
            write: &p.write,
            allow_hosts: &p.allow,
            pass_env: &p.pass,
            agent_urls: &p.urls,
            codex_env_key: None,
            cache_dirs: &p.caches,
            agent_dirs: &p.agent_dirs,
            session_paths: &p.session,
        }
    }

    fn strings(paths: &[PathBuf]) -> Vec<String> {
        paths.iter().map(|p| p.display().to_string()).collect()
    }

    #[test]
    fn an_implement_stage_writes_its_tree_and_its_own_folders_only() {
        let p = paths();
        let top = Path::new("/home/me/proj");
        let git = (
            Path::new("/home/me/proj/.git"),
            Path::new("/home/me/proj/.git"),
        );
        let claude = Who::Agent {
            kind: AgentKind::Claude,
        };
        let fence = describe(&input(claude, &p, top, git));
        assert_eq!(
            strings(&fence.writable),
            [
                "/home/me/proj",
                "/home/me/.claude",
                "/home/me/.claude.json",
                "/home/me/.config/claude",
                "/home/me/.cache/claude",
                "/home/me/codex-home",
                "/home/me/.cache/mytool",
                "/home/me/.npmrc",
            ]
        );
        assert_eq!(strings(&fence.read_only), ["/home/me/proj/.git"]);
        assert_eq!(
            strings(&fence.shown),
            ["/home/me/.local/state/kern/proj/main"]
        );
        let hidden = strings(&fence.hidden);
        for path in [
            "/home/me/.ssh",
            "/home/me/.aws",
            "/home/me/.config/gh",
            "/home/me/.git-credentials",
            "/home/me/.local/state/kern",
            "/tmp/claude/kern",
            "/run/user/1000",
            "/etc/shadow",
            "/home/me/secret",
            "/home/me/proj/private/keys",
            "/srv/x",
        ] {
            assert!(hidden.contains(&path.to_string()), "{path}: {hidden:?}");
        }
        assert!(
            !hidden.contains(&"/home/me/.npmrc".to_string()),
            "written on purpose"
        );
        assert!(strings(&fence.private).contains(&"/home/me/.cache".to_string()));
        assert!(strings(&fence.private).contains(&"/home/me/pc".to_string()));
        let hosts: Vec<String> = fence.hosts.iter().map(ToString::to_string).collect();
        assert_eq!(hosts[0], "api.anthropic.com");
        assert!(hosts.contains(&"127.0.0.1:4000".to_string()));
        assert!(hosts.contains(&"registry.npmjs.org".to_string()));
        assert!(fence.pass_env.contains(&"ANTHROPIC_API_KEY".to_string()));
        assert!(fence.pass_env.contains(&"NPM_TOKEN".to_string()));
    }

    #[test]
    fn programs_checks_and_hooks_get_no_agent_folders_and_hooks_write_git() {
        let p = paths();
        let top = Path::new("/w/proj");
        let git = (Path::new("/w/proj/.git"), Path::new("/w/proj/.git"));
        let program = describe(&input(
            Who::Agent {
                kind: AgentKind::Program,
            },
            &p,
            top,
            git,
        ));
        assert_eq!(
            strings(&program.writable),
            ["/w/proj", "/home/me/.cache/mytool", "/home/me/.npmrc"]
        );
        assert!(program.pass_env == ["NPM_TOKEN"]);
        let check = describe(&input(Who::Check, &p, top, git));
        assert_eq!(
            strings(&check.writable),
            ["/w/proj", "/home/me/.cache/mytool", "/home/me/.npmrc"]
        );
        assert_eq!(strings(&check.read_only), ["/w/proj/.git"]);
        let hook = describe(&input(Who::Hook, &p, top, git));
        assert_eq!(
            strings(&hook.writable),
            [
                "/w/proj",
                "/home/me/.cache/mytool",
                "/home/me/.npmrc",
                "/w/proj/.git"
            ]
        );
        assert_eq!(
            strings(&hook.read_only),
            [
                "/w/proj/.git/hooks",
                "/w/proj/.git/config",
                "/w/proj/.git/config.worktree"
            ]
        );
    }

    #[test]
    fn a_linked_worktree_reads_its_git_folder_elsewhere_without_binding_it() {
        let p = paths();
        let top = Path::new("/home/me/.local/state/kern/proj/main/jobs/t/tree");
        let git = (
            Path::new("/home/me/proj/.git/worktrees/tree"),
            Path::new("/home/me/proj/.git"),
        );
        let fence = describe(&input(
            Who::Agent {
                kind: AgentKind::Codex,
            },
            &p,
            top,
            git,
        ));
        // The git folders are outside every writable path: read-only as all the rest.
        assert_eq!(
            strings(&fence.read_only),
            ["/home/me/.local/state/kern/proj/main/jobs/t/tree/.git"]
        );
        assert_eq!(fence.writable[0], top);
        assert!(fence.writable.contains(&PathBuf::from("/home/me/.codex")));
    }

    #[test]
    fn a_submodules_git_folder_is_writable_but_its_hooks_and_config() {
        let p = paths();
        let top = Path::new("/w");
        let git = (Path::new("/w/.git"), Path::new("/w/.git"));
        let modules = [PathBuf::from("/w/.git/modules/lib")];
        let mut i = input(Who::Check, &p, top, git);
        i.modules = &modules;
        let fence = describe(&i);
        assert!(fence.writable.contains(&PathBuf::from("/w/.git/modules")));
        assert_eq!(
            strings(&fence.read_only),
            [
                "/w/.git",
                "/w/.git/modules/lib/hooks",
                "/w/.git/modules/lib/config"
            ]
        );
    }

    #[test]
    fn no_network_means_no_hosts() {
        let p = paths();
        let top = Path::new("/w");
        let git = (Path::new("/w/.git"), Path::new("/w/.git"));
        for network in [Network::None, Network::Open] {
            let mut i = input(Who::Check, &p, top, git);
            i.network = network;
            assert!(describe(&i).hosts.is_empty(), "{network:?}");
        }
    }

    #[test]
    fn a_read_only_stage_gets_its_tree_as_a_private_layer_with_git_still_read_only() {
        let p = paths();
        let top = Path::new("/home/me/proj");
        let git = (
            Path::new("/home/me/proj/.git"),
            Path::new("/home/me/proj/.git"),
        );
        let modules = [PathBuf::from("/home/me/proj/.git/modules/lib")];
        let mut i = input(
            Who::Agent {
                kind: AgentKind::Claude,
            },
            &p,
            top,
            git,
        );
        i.tree_private = true;
        i.modules = &modules;
        let fence = describe(&i);
        assert!(
            !fence.writable.iter().any(|w| w.starts_with(top)),
            "{fence:?}"
        );
        assert!(fence.private.contains(&top.to_path_buf()));
        assert_eq!(
            strings(&fence.read_only),
            [
                "/home/me/proj/.git",
                "/home/me/proj/.git/modules/lib/hooks",
                "/home/me/proj/.git/modules/lib/config"
            ]
        );
    }

    #[test]
    fn the_temporary_folders_are_the_processs_own_and_what_it_needs_there_is_shown() {
        let p = paths();
        // A home, a work tree and a repository all under `/tmp` (a CI machine's, a test's).
        let top = Path::new("/tmp/w/tree");
        let git = (
            Path::new("/tmp/repo/.git/worktrees/tree"),
            Path::new("/tmp/repo/.git"),
        );
        let mut i = input(Who::Check, &p, top, git);
        i.home = Some(Path::new("/tmp/home"));
        let fence = describe(&i);
        assert_eq!(strings(&fence.temp), ["/tmp", "/var/tmp", "/dev/shm"]);
        assert!(!fence.private.contains(&PathBuf::from("/tmp")), "{fence:?}");
        assert_eq!(
            strings(&fence.shown),
            [
                "/home/me/.local/state/kern/proj/main",
                "/tmp/home",
                "/tmp/repo/.git/worktrees/tree",
                "/tmp/repo/.git"
            ]
        );
        // Nothing of a home or repository elsewhere is shown again.
        let fence = describe(&input(
            Who::Check,
            &p,
            Path::new("/w"),
            (Path::new("/w/.git"), Path::new("/w/.git")),
        ));
        assert_eq!(
            strings(&fence.shown),
            ["/home/me/.local/state/kern/proj/main"]
        );
    }

    #[test]
    fn a_program_and_path_folders_in_a_temporary_folder_are_reached_unless_bound_already() {
        let fence = Fence {
            who: Who::Check,
            network: Network::None,
            writable: vec!["/tmp/repo".into()],
            read_only: vec![],
            private: vec![],
            temp: vec!["/tmp".into(), "/var/tmp".into(), "/dev/shm".into()],
            hidden: vec![],
            shown: vec!["/tmp/home".into()],
            hosts: vec![],
            pass_env: vec![],
        };
        let programs: Vec<PathBuf> = [
            "/tmp/bin/codex",
            "/tmp/agent.sh",
            "/tmp/repo/scripts/agent.sh",
            "/tmp/home/.local/bin/claude",
            "/usr/bin/kern",
            "/tmp/bin/other",
        ]
        .iter()
        .map(PathBuf::from)
        .collect();
        let path: Vec<PathBuf> = ["/tmp/tools/bin", "/usr/bin", "relative", "/tmp/bin"]
            .iter()
            .map(PathBuf::from)
            .collect();
        assert_eq!(
            strings(&reach_in_temp(&fence, &programs, &path)),
            ["/tmp/bin", "/tmp/agent.sh", "/tmp/tools/bin"]
        );
    }
}
