//! `kern init`: writes a starter SPEC.md and LEARNINGS.md (and, with `--prompts`, the built-in
//! prompt templates into `.kern/prompts/` for editing).
//!
//! With `--prompts` in a project that already has its task list, only the templates are
//! written: SPEC.md and LEARNINGS.md are the person's and stay exactly as they are.
//!
//! The one decision a reader must know: **init never overwrites, and never half-writes**. Every
//! file it would write is checked up front; if any of them exists (a dangling symlink counts),
//! nothing at all is written and the error names the file. The check and the writes are not one
//! atomic step: a file created by someone else in between is replaced. That window is a person
//! running two `kern init`s at once, and the price is losing a file they just wrote, so it is
//! accepted rather than giving up [`atomic_file::write`]'s crash safety.
//!
//! The starter SPEC.md explains kern's format in an HTML comment at the top, then shows two
//! example tasks whose titles start with `Example:`: kern never takes those, and a run on a
//! starter where they are all there is to take stops (exit 2) saying to replace them. The
//! SPEC parser
//! ignores HTML blocks, but the comment still holds no line that looks like a task item, so
//! that `grep '^- \[ \]'` and other grep-style readers are not fooled either.

use std::path::{Path, PathBuf};

use crate::atomic_file;
use crate::error::{Error, Result};
use crate::prompt::Templates;
use crate::stage::Stage;

/// The name of the learnings file, written beside SPEC.md.
pub(crate) const LEARNINGS_NAME: &str = "LEARNINGS.md";

/// The starter SPEC.md: the format explained in a comment, then two example tasks that kern
/// never takes (their titles start with `Example:`; see `spec::dialect::title_is_example`).
pub const STARTER_SPEC: &str = r#"<!--
How kern reads this file. This comment is not a task; delete it whenever you like.

A task is a list item whose text starts with a box. The box is the task's state:
    [ ]   pending: kern will take it
    [~]   in progress: kern is working on it, or was when a run stopped (it resumes there)
    [x]   done: kern committed it
    [!]   blocked: kern gave up after repeated failed attempts, or the task waits on a
          decision of yours; read its notes, do what they say, and set the box back to [ ]
Other tools' boxes are read too ([-] and [/] are left alone, [ ]* is optional and taken
last): docs/spec-format.md in kern's repository says how.

kern takes the first pending task from the top, runs the agent on it (research, implement,
review) and commits the result. A task with subtasks (task items indented under it) is done
through its subtasks, first to last; kern ticks the parent with the last one.

Everything you write inside a task (the lines under its first line, nested lists, code) is
passed to the agent as part of the task: say what "done" looks like.

Notes are blockquote lines inside a task. kern writes these itself:
    > **Research:**     what the research stage found
    > **Attempt N:**    why attempt N failed
    > **Skipped:**      why the agent skipped the task
    > **Blocked:**      why kern gave up, or the question it waits on you for
    > **Review:**       with --review: the branch the task's commit waits on
You may write these yourself:
    > **Check:** cargo test          a command that must pass before the task is committed
    > **After:** <a title>           start this task only once that one is done
    > **Must:** grep src/a.rs ^fn x  what kern itself checks is true (file, grep, run)
    > **Scope:** src/parser/**       the only paths the task may change
    > **Tests:** first cargo test    a test that fails before the change and passes after
    > **Level:** 1                   how much research the task earns, 0 (none) to 3
docs/spec-format.md in kern's repository says what each takes.

kern changes only the boxes and its own notes, byte for byte. Edit anything else freely,
even while kern runs. `kern -n` shows what the next run would do, and changes nothing.

The two tasks below are examples of the format. kern never takes a task whose title starts
with "Example:" (nor its subtasks): replace them with your own tasks, then commit this file
and LEARNINGS.md (git add SPEC.md LEARNINGS.md && git commit -m "Add the task list").
-->

# Tasks

- [ ] Example: Add a `--json` flag to the `report` command
  Print the same report as one JSON object on stdout. Without the flag the text output stays
  exactly as it is. Add a test for each form.

- [ ] Example: Read the settings from a `config.toml` file
  - [ ] Load `config.toml` from the working folder when it exists, else keep today's defaults
  - [ ] Let the environment variables override the file, and document both in the README
"#;

/// The starter LEARNINGS.md.
pub const STARTER_LEARNINGS: &str = "# Learnings

kern appends what the agents learn here, dated, one section per task; edit or prune it freely.
";

/// What `kern init` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Written {
    /// The files written, relative to the top folder, in the order written.
    pub files: Vec<PathBuf>,
    /// The task list kept as it was (`--prompts` in a project that has one).
    pub kept: Option<PathBuf>,
}

/// Writes the starter files into `top`, the repository's top folder. `spec` is the SPEC.md path
/// as given by `--spec`, relative to `top`; LEARNINGS.md goes beside it. With `prompts`, the
/// three built-in templates go to `top/.kern/prompts/` — and when the task list already
/// exists, only they: the project is there, its SPEC.md and LEARNINGS.md are left as they are.
///
/// If any of the files to write exists, nothing is written and the error (exit 2) names it.
pub(crate) fn run(top: &Path, spec: &Path, prompts: bool) -> Result<Written> {
    if spec.file_name().is_none() {
        return Err(Error::Usage(format!(
            "`{}` is not a file name — pass --spec PATH naming the task list, e.g. --spec SPEC.md",
            spec.display()
        )));
    }
    let existing_project = prompts
        && match std::fs::symlink_metadata(top.join(spec)) {
            Ok(_) => true,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
            Err(e) => return Err(Error::io(top.join(spec), e)),
        };
    let mut files: Vec<(PathBuf, &'static str, String)> = Vec::new();
    if !existing_project {
        files.push((
            spec.to_path_buf(),
            STARTER_SPEC,
            "edit it, or pass --spec PATH to start another list".to_string(),
        ));
        files.push((
            spec.with_file_name(LEARNINGS_NAME),
            STARTER_LEARNINGS,
            "edit it, or pass --spec PATH in another folder to start another list".to_string(),
        ));
    }
    if prompts {
        for stage in Stage::ALL {
            files.push((
                Path::new(".kern/prompts").join(stage.template_name()),
                Templates::builtin(stage),
                "edit it, or run kern init without --prompts".to_string(),
            ));
        }
    }

    for (relative, _, fix) in &files {
        let path = top.join(relative);
        match std::fs::symlink_metadata(&path) {
            Ok(_) => {
                return Err(Error::Usage(format!(
                    "`{}` already exists — kern init never overwrites; {fix}",
                    relative.display()
                )));
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io(path, e)),
        }
    }

    let mut written = Vec::with_capacity(files.len());
    for (relative, text, _) in files {
        let path = top.join(&relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
        }
        atomic_file::write(&path, text.as_bytes())?;
        written.push(relative);
    }
    Ok(Written {
        files: written,
        kept: existing_project.then(|| spec.to_path_buf()),
    })
}

/// What to do with the `files` that `kern init --config` or `--prompts` wrote under `add`:
/// commit them, because they are not kern's own files (as SPEC.md and LEARNINGS.md are) and a
/// new task starts only on a clean tree — a run would stop on them (exit 2).
pub(crate) fn commit_advice(add: &Path, files: usize) -> String {
    format!(
        "kern: commit {} before a run (`git add {} && git commit`): a new task starts only on a clean tree",
        if files == 1 { "it" } else { "them" },
        add.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use pulldown_cmark::{Event, Options, Parser};

    fn read(path: PathBuf) -> String {
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    /// Every file below `root`, relative to it, sorted.
    fn tree(root: &Path) -> Vec<String> {
        fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    walk(root, &path, out);
                } else {
                    out.push(path.strip_prefix(root).unwrap().display().to_string());
                }
            }
        }
        let mut out = Vec::new();
        walk(root, root, &mut out);
        out.sort();
        out
    }

    #[test]
    fn the_starter_names_every_note_a_person_writes() {
        for note in ["Check", "After", "Must", "Scope", "Tests", "Level"] {
            assert!(
                STARTER_SPEC.contains(&format!("    > **{note}:** ")),
                "{note}"
            );
        }
    }

    #[test]
    fn writes_spec_and_learnings() {
        let cases = [
            ("SPEC.md", "LEARNINGS.md"),
            ("PLAN.md", "LEARNINGS.md"),
            ("docs/plan/SPEC.md", "docs/plan/LEARNINGS.md"),
        ];
        for (spec, learnings) in cases {
            let top = tempfile::tempdir().unwrap();
            let written = run(top.path(), Path::new(spec), false).unwrap().files;
            assert_eq!(
                written,
                vec![PathBuf::from(spec), PathBuf::from(learnings)],
                "{spec}"
            );
            assert_eq!(read(top.path().join(spec)), STARTER_SPEC, "{spec}");
            assert_eq!(
                read(top.path().join(learnings)),
                STARTER_LEARNINGS,
                "{spec}"
            );
            let mut expected = vec![spec.to_string(), learnings.to_string()];
            expected.sort();
            assert_eq!(tree(top.path()), expected, "{spec}");
        }
    }

    #[test]
    fn refuses_to_overwrite_and_then_writes_nothing() {
        let cases: [(&[&str], bool, &str); 5] = [
            (
                &["SPEC.md"],
                false,
                "`SPEC.md` already exists — kern init never overwrites; edit it, or pass --spec PATH to start another list",
            ),
            (
                &["LEARNINGS.md"],
                false,
                "`LEARNINGS.md` already exists — kern init never overwrites; edit it, or pass --spec PATH in another folder to start another list",
            ),
            (
                &["LEARNINGS.md", "SPEC.md"],
                false,
                "`SPEC.md` already exists — kern init never overwrites; edit it, or pass --spec PATH to start another list",
            ),
            (
                &[".kern/prompts/2_implement.md"],
                true,
                "`.kern/prompts/2_implement.md` already exists — kern init never overwrites; edit it, or run kern init without --prompts",
            ),
            (
                &["SPEC.md/"],
                false,
                "`SPEC.md` already exists — kern init never overwrites; edit it, or pass --spec PATH to start another list",
            ),
        ];
        for (existing, prompts, message) in cases {
            let top = tempfile::tempdir().unwrap();
            for name in existing {
                let path = top.path().join(name);
                if name.ends_with('/') {
                    std::fs::create_dir_all(&path).unwrap();
                } else {
                    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                    std::fs::write(&path, "mine\n").unwrap();
                }
            }
            let before = tree(top.path());
            let error = run(top.path(), Path::new("SPEC.md"), prompts).unwrap_err();
            assert_eq!(error.to_string(), message, "{existing:?}");
            assert_eq!(error.exit_code(), 2, "{existing:?}");
            assert_eq!(tree(top.path()), before, "{existing:?}: nothing written");
            for name in existing.iter().filter(|n| !n.ends_with('/')) {
                assert_eq!(read(top.path().join(name)), "mine\n", "{name}");
            }
        }
    }

    #[test]
    fn the_advice_names_what_to_add() {
        assert_eq!(
            commit_advice(Path::new(".kern/config.toml"), 1),
            "kern: commit it before a run (`git add .kern/config.toml && git commit`): a new task starts only on a clean tree"
        );
        assert_eq!(
            commit_advice(Path::new(".kern/prompts"), 3),
            "kern: commit them before a run (`git add .kern/prompts && git commit`): a new task starts only on a clean tree"
        );
    }

    #[test]
    fn a_dangling_symlink_counts_as_existing() {
        let top = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink("nowhere.md", top.path().join("SPEC.md")).unwrap();
        let error = run(top.path(), Path::new("SPEC.md"), false).unwrap_err();
        assert_eq!(error.exit_code(), 2);
        assert!(!top.path().join("LEARNINGS.md").exists());
        assert!(!top.path().join("nowhere.md").exists());
    }

    #[test]
    fn a_spec_path_without_a_file_name_is_a_usage_error() {
        let top = tempfile::tempdir().unwrap();
        let error = run(top.path(), Path::new(".."), false).unwrap_err();
        assert_eq!(
            error.to_string(),
            "`..` is not a file name — pass --spec PATH naming the task list, e.g. --spec SPEC.md"
        );
        assert_eq!(tree(top.path()), Vec::<String>::new());
    }

    #[test]
    fn prompts_are_written_and_load_back_as_overrides() {
        let top = tempfile::tempdir().unwrap();
        let written = run(top.path(), Path::new("SPEC.md"), true).unwrap();
        assert_eq!(written.kept, None);
        assert_eq!(
            written.files,
            [
                "SPEC.md",
                "LEARNINGS.md",
                ".kern/prompts/1_research.md",
                ".kern/prompts/2_tests.md",
                ".kern/prompts/2_implement.md",
                ".kern/prompts/3_commit.md",
            ]
            .map(PathBuf::from)
        );
        let templates = Templates::load(top.path()).unwrap();
        for stage in Stage::ALL {
            let relative = Path::new(".kern/prompts").join(stage.template_name());
            assert_eq!(read(top.path().join(&relative)), Templates::builtin(stage));
            assert_eq!(templates.get(stage).source, relative, "{stage}");
        }
    }

    #[test]
    fn prompts_in_an_existing_project_write_the_templates_only() {
        // (files there before, the task list kept)
        let cases: [(&[&str], &str); 3] = [
            (&["SPEC.md"], "SPEC.md"),
            (&["SPEC.md", "LEARNINGS.md"], "SPEC.md"),
            (&["docs/PLAN.md"], "docs/PLAN.md"),
        ];
        for (existing, spec) in cases {
            let top = tempfile::tempdir().unwrap();
            for name in existing {
                let path = top.path().join(name);
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                std::fs::write(&path, "mine\n").unwrap();
            }
            let written = run(top.path(), Path::new(spec), true).unwrap();
            assert_eq!(
                written,
                Written {
                    files: Stage::ALL
                        .iter()
                        .map(|s| Path::new(".kern/prompts").join(s.template_name()))
                        .collect(),
                    kept: Some(PathBuf::from(spec)),
                },
                "{existing:?}"
            );
            for name in existing {
                assert_eq!(read(top.path().join(name)), "mine\n", "{name}");
            }
            let mut expected: Vec<String> = existing.iter().map(ToString::to_string).collect();
            expected.extend(written.files.iter().map(|p| p.display().to_string()));
            expected.sort();
            assert_eq!(
                tree(top.path()),
                expected,
                "{existing:?}: nothing else written"
            );
        }
        // Without --prompts an existing SPEC.md is still refused.
        let top = tempfile::tempdir().unwrap();
        std::fs::write(top.path().join("SPEC.md"), "mine\n").unwrap();
        assert_eq!(
            run(top.path(), Path::new("SPEC.md"), false)
                .unwrap_err()
                .exit_code(),
            2
        );
    }

    /// The source line of every task item a CommonMark reader finds, in order.
    fn task_lines(text: &str) -> Vec<&str> {
        Parser::new_ext(text, Options::ENABLE_TASKLISTS)
            .into_offset_iter()
            .filter(|(event, _)| matches!(event, Event::TaskListMarker(_)))
            .map(|(_, range)| {
                let start = text[..range.start].rfind('\n').map_or(0, |i| i + 1);
                let end = text[range.start..]
                    .find('\n')
                    .map_or(text.len(), |i| range.start + i);
                &text[start..end]
            })
            .collect()
    }

    #[test]
    fn starter_spec_holds_two_example_tasks_one_with_subtasks_that_kern_never_takes() {
        assert_eq!(
            task_lines(STARTER_SPEC),
            [
                "- [ ] Example: Add a `--json` flag to the `report` command",
                "- [ ] Example: Read the settings from a `config.toml` file",
                "  - [ ] Load `config.toml` from the working folder when it exists, else keep today's defaults",
                "  - [ ] Let the environment variables override the file, and document both in the README",
            ]
        );
        let doc = crate::spec::Document::parse(STARTER_SPEC);
        assert_eq!(doc.tasks().len(), 4);
        assert!(doc.has_pending_examples());
        assert!(crate::spec::select(&doc).is_none());
        let mine = format!("{STARTER_SPEC}\n- [ ] Say hello\n");
        let doc = crate::spec::Document::parse(&mine);
        let taken = crate::spec::select(&doc).map(|s| doc.tasks()[s.task].title.clone());
        assert_eq!(taken.as_deref(), Some("Say hello"));
    }

    #[test]
    fn starter_spec_comment_explains_the_format_without_task_lookalikes() {
        let comment_end = STARTER_SPEC.find("-->").unwrap();
        let comment = &STARTER_SPEC[..comment_end];
        assert!(comment.starts_with("<!--\n"));
        for needle in [
            "[ ]",
            "[~]",
            "[x]",
            "[!]",
            "subtasks",
            "> **Research:**",
            "> **Attempt N:**",
            "> **Skipped:**",
            "> **Blocked:**",
            "> **Check:** cargo test",
            "passed to the agent",
        ] {
            assert!(comment.contains(needle), "{needle}");
        }
        let lookalike = regex::Regex::new(r"(?m)^[ \t]*([-*+]|[0-9]+[.)])[ \t]+\[").unwrap();
        assert_eq!(lookalike.find(comment).map(|m| m.as_str()), None);
    }
}
