//! kern's own files (SPEC.md, wherever `--spec` puts it, and LEARNINGS.md beside it) and the
//! files editors leave beside them.
//!
//! The one decision a reader must know: an editor artefact is recognised by its name next to
//! an own file — vim's swap files (`.SPEC.md.swp`, `.swo`, … `.swa`, `.swx`), its undo file
//! (`.SPEC.md.un~`) and its write probe (`4913`, then 4913 + 123·n, in the same folder), backups
//! (`SPEC.md~`, `SPEC.md.~1~`), Emacs' lock and auto-save files (`.#SPEC.md`, `#SPEC.md#`) and
//! Kate's swap file. They hold the person's unsaved text, user name and paths: they never
//! count as uncommitted work, are never committed, and are never reverted by an audit.

use std::path::Path;

/// kern's own files, relative to the work tree top (`/`-separated).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct OwnFiles {
    files: Vec<String>,
}

impl OwnFiles {
    /// From paths relative to the top (`/`-separated).
    pub(crate) fn new(relative: impl IntoIterator<Item = String>) -> OwnFiles {
        OwnFiles {
            files: relative.into_iter().collect(),
        }
    }

    /// True when `rel` is one of the own files itself.
    pub(crate) fn is_own(&self, rel: &str) -> bool {
        self.files.iter().any(|f| f == rel.trim_end_matches('/'))
    }

    /// True when `rel` is an editor artefact of one of the own files.
    pub(crate) fn is_artefact(&self, rel: &str) -> bool {
        self.files.iter().any(|own| artefact_of(own, rel))
    }

    /// [`OwnFiles::is_own`] for a path of any bytes (one that is not UTF-8 is never own).
    pub(super) fn is_own_path(&self, rel: &Path) -> bool {
        rel.to_str().is_some_and(|r| self.is_own(r))
    }

    /// [`OwnFiles::is_artefact`] for a path of any bytes.
    pub(super) fn is_artefact_path(&self, rel: &Path) -> bool {
        rel.to_str().is_some_and(|r| self.is_artefact(r))
    }
}

/// True when `candidate` (relative) is an editor artefact of `own` (relative).
pub(super) fn artefact_of(own: &str, candidate: &str) -> bool {
    let (own_dir, own_name) = split(own);
    let (dir, name) = split(candidate.trim_end_matches('/'));
    if own_dir != dir || own_name.is_empty() {
        return false;
    }
    if let Some(rest) = name
        .strip_prefix('.')
        .and_then(|n| n.strip_prefix(own_name))
    {
        // `.SPEC.md.swp` … `.swa`, `.swx`; `.SPEC.md.un~`; Kate's `.SPEC.md.kate-swp`.
        if let Some(ext) = rest.strip_prefix(".sw")
            && ext.len() == 1
            && ext.bytes().all(|b| b.is_ascii_lowercase())
        {
            return true;
        }
        if rest == ".un~" || rest == ".kate-swp" {
            return true;
        }
    }
    if name.strip_prefix(".#") == Some(own_name) {
        return true;
    }
    if name.strip_prefix('#').and_then(|n| n.strip_suffix('#')) == Some(own_name) {
        return true;
    }
    if let Some(rest) = name.strip_prefix(own_name) {
        // `SPEC.md~` and Emacs' numbered backups `SPEC.md.~3~`.
        if rest == "~" {
            return true;
        }
        if let Some(n) = rest.strip_prefix(".~").and_then(|r| r.strip_suffix('~'))
            && !n.is_empty()
            && n.bytes().all(|b| b.is_ascii_digit())
        {
            return true;
        }
    }
    vim_write_probe(name)
}

/// vim tests whether it may write a folder with a file named `4913` (or 4913 + 123·n when
/// that exists), removed at once: a start or an audit may catch it in that moment.
fn vim_write_probe(name: &str) -> bool {
    name.len() <= 5
        && name.bytes().all(|b| b.is_ascii_digit())
        && name
            .parse::<u32>()
            .is_ok_and(|n| n >= 4913 && (n - 4913) % 123 == 0)
}

/// (folder, name) of a relative path; the folder is empty at the top.
fn split(rel: &str) -> (&str, &str) {
    match rel.rfind('/') {
        Some(i) => (&rel[..i], &rel[i + 1..]),
        None => ("", rel),
    }
}

/// Relative `/`-separated forms of `paths` that lie inside `top` (absolute or relative input).
pub(super) fn relative_paths(top: &Path, paths: &[impl AsRef<Path>]) -> Vec<String> {
    paths
        .iter()
        .filter_map(|p| {
            let p = p.as_ref();
            let rel = if p.is_absolute() {
                p.strip_prefix(top).ok()?
            } else {
                p
            };
            let parts: Vec<String> = rel
                .components()
                .filter_map(|c| match c {
                    std::path::Component::Normal(s) => Some(s.to_string_lossy().into_owned()),
                    _ => None,
                })
                .collect();
            (!parts.is_empty()).then(|| parts.join("/"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn editor_artefacts_are_recognised_beside_the_own_file_only() {
        let cases = [
            ("SPEC.md", ".SPEC.md.swp", true),
            ("SPEC.md", ".SPEC.md.swo", true),
            ("SPEC.md", ".SPEC.md.swx", true),
            ("SPEC.md", ".SPEC.md.swa", true),
            ("SPEC.md", ".SPEC.md.un~", true),
            ("SPEC.md", ".SPEC.md.kate-swp", true),
            ("SPEC.md", "SPEC.md~", true),
            ("SPEC.md", "SPEC.md.~12~", true),
            ("SPEC.md", ".#SPEC.md", true),
            ("SPEC.md", "#SPEC.md#", true),
            ("SPEC.md", "4913", true),
            ("SPEC.md", "5036", true),
            ("SPEC.md", "5037", false),
            ("SPEC.md", "4790", false),
            ("docs/PLAN.md", "docs/.PLAN.md.swp", true),
            ("docs/PLAN.md", "docs/4913", true),
            ("docs/PLAN.md", ".PLAN.md.swp", false),
            ("docs/PLAN.md", "4913", false),
            ("LEARNINGS.md", ".LEARNINGS.md.swp", true),
            ("SPEC.md", ".SPEC.md.swpx", false),
            ("SPEC.md", ".SPEC.md.sw1", false),
            ("SPEC.md", "SPEC.md.bak", false),
            ("SPEC.md", "SPEC.md", false),
            ("SPEC.md", ".OTHER.md.swp", false),
            ("SPEC.md", "#SPEC.md", false),
            ("SPEC.md", "SPEC.md.~~", false),
        ];
        for (own, candidate, want) in cases {
            assert_eq!(artefact_of(own, candidate), want, "{own} {candidate}");
        }
        let own = OwnFiles::new(["SPEC.md".to_string(), "LEARNINGS.md".to_string()]);
        assert!(own.is_own("SPEC.md"));
        assert!(!own.is_own(".SPEC.md.swp"));
        assert!(own.is_artefact(".LEARNINGS.md.swp"));
        assert!(!own.is_artefact("src/.main.rs.swp"));
    }

    #[test]
    fn paths_become_relative_to_the_top() {
        let top = Path::new("/r");
        let got = relative_paths(
            top,
            &[
                Path::new("/r/SPEC.md"),
                Path::new("docs/./PLAN.md"),
                Path::new("/elsewhere/x"),
            ],
        );
        assert_eq!(got, vec!["SPEC.md", "docs/PLAN.md"]);
    }
}
