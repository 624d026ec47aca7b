//! `kern init`, `kern completions` and `kern man`, run as the real binary in temporary git
//! repositories: what is written, what is refused, and the exit codes.

use std::path::Path;

use kern::testing::command::init::{STARTER_LEARNINGS, STARTER_SPEC};

use crate::support::kern_in;
use crate::support::project::Ran;

const SPEC_EXISTS: &str = "kern: error: `SPEC.md` already exists — kern init never overwrites; \
                           edit it, or pass --spec PATH to start another list\n";

/// A temporary git repository with one subfolder, `sub`.
fn repository() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    git2::Repository::init(dir.path()).unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    dir
}

/// `kern <args>` in `cwd` (no `KERN_*` setting inherited from the caller), which must exit
/// with `code` and print `stderr`.
fn kern(cwd: &Path, args: &[&str], code: i32, stderr: &str) -> Ran {
    let ran = kern_in(cwd).args(args).expect(code);
    assert_eq!(ran.stderr, stderr, "kern {}", args.join(" "));
    ran
}

/// Every file below `root` except git's own, relative to it, sorted, with its content.
fn files(root: &Path) -> Vec<(String, String)> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, String)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.file_name().is_some_and(|n| n == ".git") {
                continue;
            }
            if path.is_dir() {
                walk(root, &path, out);
            } else {
                let name = path.strip_prefix(root).unwrap().display().to_string();
                out.push((name, std::fs::read_to_string(&path).unwrap()));
            }
        }
    }
    let mut out = Vec::new();
    walk(root, root, &mut out);
    out.sort();
    out
}

fn owned(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

#[test]
fn init_writes_spec_and_learnings_at_the_top_and_exits_0() {
    for cwd in [".", "sub"] {
        let repo = repository();
        let ran = kern(
            &repo.path().join(cwd),
            &["init"],
            0,
            "kern: wrote SPEC.md, LEARNINGS.md\n",
        );
        assert_eq!(ran.stdout, "");
        assert_eq!(
            files(repo.path()),
            owned(&[
                ("LEARNINGS.md", STARTER_LEARNINGS),
                ("SPEC.md", STARTER_SPEC)
            ]),
            "from {cwd}"
        );
    }
}

#[test]
fn second_init_exits_2_naming_spec_and_changes_nothing() {
    let repo = repository();
    kern_in(repo.path()).args(["init"]).expect(0);
    std::fs::write(repo.path().join("SPEC.md"), "- [ ] my own task\n").unwrap();
    let before = files(repo.path());
    let ran = kern(repo.path(), &["init"], 2, SPEC_EXISTS);
    assert_eq!(ran.stdout, "");
    assert_eq!(files(repo.path()), before);
    // With --prompts the templates are written and the lists kept (rough_edges.rs).
}

#[test]
fn init_with_prompts_and_a_spec_path_writes_all_six() {
    let repo = repository();
    kern(
        repo.path(),
        &["init", "--prompts", "--spec", "docs/TODO.md"],
        0,
        "kern: wrote docs/TODO.md, docs/LEARNINGS.md, .kern/prompts/1_research.md, \
         .kern/prompts/2_tests.md, .kern/prompts/2_implement.md, .kern/prompts/3_commit.md\n\
         kern: commit them before a run (`git add .kern/prompts && git commit`): a new task starts only on a clean tree\n",
    );
    let names: Vec<String> = files(repo.path()).into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        names,
        [
            ".kern/prompts/1_research.md",
            ".kern/prompts/2_implement.md",
            ".kern/prompts/2_tests.md",
            ".kern/prompts/3_commit.md",
            "docs/LEARNINGS.md",
            "docs/TODO.md",
        ]
    );
}

#[test]
fn init_outside_a_repository_exits_2_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path().canonicalize().unwrap();
    kern(
        &cwd,
        &["init"],
        2,
        &format!(
            "kern: error: `{}` is not inside a git repository — run kern inside a git \
             repository, or `git init` first\n",
            cwd.display()
        ),
    );
    assert_eq!(files(&cwd), vec![]);
}

#[test]
fn completions_bash_exits_0_with_a_script() {
    let repo = repository();
    let ran = kern(repo.path(), &["completions", "bash"], 0, "");
    let script = ran.utf8_stdout();
    assert!(script.contains("complete -F _kern"), "{script}");
    assert!(script.contains("--dry-run"), "{script}");
}

#[test]
fn man_exits_0_with_the_page() {
    let repo = repository();
    let ran = kern(repo.path(), &["man"], 0, "");
    let page = ran.utf8_stdout();
    assert!(page.contains(".TH kern 1"), "{page}");
    assert!(page.contains(r"\-\-max\-attempts"), "{page}");
}
