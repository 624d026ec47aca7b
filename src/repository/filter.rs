//! Filter drivers from `.gitattributes` (`filter=<driver>`): Git LFS, git-crypt and the like.
//!
//! The one decision a reader must know: kern runs a driver's `clean` command exactly as git
//! does — through `sh -c` in the work tree top, `%f` replaced by the quoted path, the file's
//! content on stdin — and what it prints is the blob; the `smudge` command, the other way, when
//! an audit puts a file back. The long-running `process` protocol is not spoken: a driver that
//! has only `process` is run the way git runs it without one (content stored as it is), unless
//! it is `required`, which kern cannot honour and so refuses before any agent runs. A failing
//! clean of a required driver stops the commit, as it stops `git add`; of another driver, the
//! content is stored as it is, as git does. Output goes through temporary files, never memory.
//! libgit2's own text/eol conversion is left to libgit2.

use std::collections::BTreeSet;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::Duration;

use git2::{AttrCheckFlags, AttrValue, Config};

use super::Repository;
use crate::error::{Error, Result};
use crate::supervisor::probe::{self, Probe};

/// A filter driver as git config defines it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FilterDriver {
    /// The name in `filter=<name>`.
    pub name: String,
    /// `filter.<name>.clean`.
    pub clean: Option<String>,
    /// `filter.<name>.smudge`.
    pub smudge: Option<String>,
    /// `filter.<name>.process`.
    pub process: Option<String>,
    /// `filter.<name>.required`.
    pub required: bool,
}

impl FilterDriver {
    /// Reads `filter.<name>.*` from `config`.
    pub(crate) fn from_config(config: &Config, name: &str) -> FilterDriver {
        let get = |key: &str| {
            config
                .get_string(&format!("filter.{name}.{key}"))
                .ok()
                .filter(|v| !v.trim().is_empty())
        };
        FilterDriver {
            name: name.to_string(),
            clean: get("clean"),
            smudge: get("smudge"),
            process: get("process"),
            required: config
                .get_bool(&format!("filter.{name}.required"))
                .unwrap_or(false),
        }
    }

    /// Why kern cannot run this driver when it is required; `None` when it can (or when it
    /// is not required, so git's fallback applies).
    pub(crate) fn unusable(&self) -> Option<String> {
        if !self.required {
            return None;
        }
        match &self.clean {
            None if self.process.is_some() => Some(format!(
                "it has only `filter.{}.process`, which kern does not speak — set `filter.{}.clean` too",
                self.name, self.name
            )),
            None => Some(format!(
                "`filter.{}.clean` is not set — configure the driver (for Git LFS: `git lfs install`)",
                self.name
            )),
            Some(clean) => missing_program(clean).map(|program| {
                format!(
                    "its clean command needs `{program}`, which is not on PATH — install it (for Git LFS: `apt-get install git-lfs`)"
                )
            }),
        }
    }
}

/// What a clean filter made of a file.
pub(super) enum Cleaned {
    /// The blob content, in a temporary file.
    Blob(tempfile::NamedTempFile),
    /// Store the file as it is: no clean command, or a driver that is not required failed
    /// (the note says so, as git warns).
    AsIs(Option<String>),
}

impl Repository {
    /// The driver `filter=<name>` names for `rel`, or `None` (no attribute, `-filter`, or a
    /// name with no configuration at all, which git ignores).
    pub(super) fn filter_driver(
        &self,
        config: &Config,
        rel: &Path,
    ) -> Result<Option<FilterDriver>> {
        let value = self
            .repo
            .get_attr_bytes(rel, "filter", AttrCheckFlags::FILE_THEN_INDEX)
            .map_err(|e| Error::git(format!("reading the attributes of `{}`", rel.display()), e))?;
        let name = match AttrValue::from_bytes(value) {
            AttrValue::String(s) => s.to_string(),
            AttrValue::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
            _ => return Ok(None),
        };
        let driver = FilterDriver::from_config(config, &name);
        let configured = driver.clean.is_some()
            || driver.smudge.is_some()
            || driver.process.is_some()
            || driver.required;
        Ok(configured.then_some(driver))
    }

    /// Runs `driver`'s clean command on the work-tree file `rel` (see the module docs).
    pub(super) fn clean(
        &self,
        driver: &FilterDriver,
        rel: &Path,
        timeout: Duration,
    ) -> Result<Cleaned> {
        let Some(command) = &driver.clean else {
            if let Some(why) = driver.unusable() {
                return Err(Error::FilterUnusable {
                    driver: driver.name.clone(),
                    why,
                });
            }
            return Ok(Cleaned::AsIs(None));
        };
        let full = self.top.join(rel);
        let input = File::open(&full).map_err(|e| Error::io(&full, e))?;
        let out = tempfile::NamedTempFile::new().map_err(|e| Error::io(std::env::temp_dir(), e))?;
        let stdout = out.reopen().map_err(|e| Error::io(out.path(), e))?;
        let ran = self.run_filter(command, rel, input, stdout, timeout);
        match ran {
            Ok(()) => Ok(Cleaned::Blob(out)),
            Err(output) if driver.required => Err(Error::FilterFailed {
                driver: driver.name.clone(),
                path: rel.display().to_string(),
                output,
            }),
            Err(output) => Ok(Cleaned::AsIs(Some(format!(
                "the `{}` clean filter failed on `{}`; stored as it is, as git does for a driver that is not required: {output}",
                driver.name,
                rel.display()
            )))),
        }
    }

    /// Runs `driver`'s smudge command on `blob` and returns the file content's temporary copy;
    /// `None` when the driver has no smudge command or it failed (the blob is then written as
    /// it is, as git does).
    pub(super) fn smudge(
        &self,
        driver: &FilterDriver,
        rel: &Path,
        blob: &[u8],
        timeout: Duration,
    ) -> Option<tempfile::NamedTempFile> {
        let command = driver.smudge.as_ref()?;
        let mut input = tempfile::tempfile().ok()?;
        std::io::Write::write_all(&mut input, blob).ok()?;
        std::io::Seek::rewind(&mut input).ok()?;
        let out = tempfile::NamedTempFile::new().ok()?;
        let stdout = out.reopen().ok()?;
        self.run_filter(command, rel, input, stdout, timeout).ok()?;
        Some(out)
    }

    /// The object id git would store for the work-tree file `rel`: its clean filter's output
    /// when a driver applies, its UTF-8 form when it has a `working-tree-encoding`, else its
    /// content.
    pub(super) fn work_tree_blob_id(
        &self,
        config: &Config,
        rel: &Path,
        timeout: Duration,
    ) -> Option<git2::Oid> {
        let full = self.top.join(rel);
        let format = self.repo.object_format();
        if let Ok(Some(driver)) = self.filter_driver(config, rel)
            && let Ok(Cleaned::Blob(out)) = self.clean(&driver, rel, timeout)
        {
            return git2::Oid::hash_file_ext(git2::ObjectType::Blob, out.path(), format).ok();
        }
        if let Some(encoded) = self.encoded(config, rel) {
            let utf8 = encoded.to_git(&std::fs::read(&full).ok()?).ok()?;
            return git2::Oid::hash_object_ext(git2::ObjectType::Blob, &utf8, format).ok();
        }
        git2::Oid::hash_file_ext(git2::ObjectType::Blob, &full, format).ok()
    }

    /// `sh -c <command with %f>` in the top, `input` on stdin, stdout into `stdout`; the
    /// output tail and how it ended when it did not exit 0.
    fn run_filter(
        &self,
        command: &str,
        rel: &Path,
        input: File,
        stdout: File,
        timeout: Duration,
    ) -> std::result::Result<(), String> {
        // `%f` is text in the script: a name that is not UTF-8 reaches the filter lossily.
        let script = command.replace("%f", &sh_quote(&rel.to_string_lossy()));
        let mut probe = Probe::shell(&script, &self.top, timeout);
        probe.stdin = Some(input);
        probe.stdout = Some(stdout);
        match probe::run(probe) {
            Ok(out) if out.end.success() => Ok(()),
            Ok(out) if out.output.is_empty() => Err(format!("({})", out.end.describe())),
            Ok(out) => Err(format!("{}\n({})", out.output, out.end.describe())),
            Err(e) => Err(format!("could not run `sh`: {e}")),
        }
    }

    /// The drivers that attribute files name: every tracked `.gitattributes` (read from the
    /// work tree, else the index), `info/attributes` and `core.attributesFile`. Sorted.
    pub fn filter_drivers_in_use(&self) -> Vec<String> {
        let mut names = BTreeSet::new();
        let mut texts: Vec<Vec<u8>> = Vec::new();
        if let Ok(index) = self.repo.index() {
            for entry in index.iter() {
                let path = String::from_utf8_lossy(&entry.path);
                if path == ".gitattributes" || path.ends_with("/.gitattributes") {
                    match std::fs::read(self.top.join(&*path)) {
                        Ok(bytes) => texts.push(bytes),
                        Err(_) => {
                            if let Ok(blob) = self.repo.find_blob(entry.id) {
                                texts.push(blob.content().to_vec());
                            }
                        }
                    }
                }
            }
        }
        if let Ok(bytes) = std::fs::read(self.top.join(".gitattributes")) {
            texts.push(bytes);
        }
        let mut files: Vec<PathBuf> = vec![self.repo.commondir().join("info/attributes")];
        if let Ok(config) = self.repo.config()
            && let Ok(path) = config.get_path("core.attributesFile")
        {
            files.push(path);
        } else if let Some(home) = std::env::var_os("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))
        {
            files.push(home.join("git/attributes"));
        }
        for file in files {
            if let Ok(bytes) = std::fs::read(file) {
                texts.push(bytes);
            }
        }
        for text in texts {
            names.extend(drivers_named(&String::from_utf8_lossy(&text)));
        }
        names.into_iter().collect()
    }
}

/// The `filter=<name>` values in one attributes file.
fn drivers_named(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .flat_map(|l| l.split_whitespace().skip(1))
        .filter_map(|attr| attr.strip_prefix("filter="))
        .filter(|name| !name.is_empty())
        .map(str::to_string)
        .collect()
}

/// The program a shell command starts, when it is not found (on PATH or as a path); `None`
/// when it is found or cannot be told (a shell construct).
fn missing_program(command: &str) -> Option<String> {
    let word = command
        .split_whitespace()
        .find(|w| !w.contains('=') || w.starts_with('='))?
        .trim_matches(|c| c == '\'' || c == '"');
    if word.is_empty() || word.contains(['$', '`', '(', '{', ';', '|', '&']) {
        return None;
    }
    let found = if word.contains('/') {
        Path::new(word).is_file()
    } else {
        const BUILTINS: &[&str] = &["exec", "env", "cat", "true", ":", "command", "test", "["];
        BUILTINS.contains(&word)
            || std::env::var_os("PATH").is_some_and(|path| {
                std::env::split_paths(&path).any(|dir| dir.join(word).is_file())
            })
    };
    (!found).then(|| word.to_string())
}

/// Single-quotes `text` for `sh`, as git's `sq_quote_buf` does.
fn sh_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attribute_files_name_their_drivers() {
        let text = "# comment\n*.bin filter=lfs diff=lfs merge=lfs -text\nsecrets/** filter=git-crypt diff=git-crypt\n*.txt text\n*.x -filter\n";
        assert_eq!(drivers_named(text), vec!["lfs", "git-crypt"]);
    }

    #[test]
    fn a_required_driver_kern_cannot_run_says_why() {
        let driver = |clean: Option<&str>, process: Option<&str>, required| FilterDriver {
            name: "lfs".into(),
            clean: clean.map(str::to_string),
            smudge: None,
            process: process.map(str::to_string),
            required,
        };
        assert_eq!(
            driver(None, Some("git-lfs filter-process"), false).unusable(),
            None
        );
        assert_eq!(
            driver(None, Some("git-lfs filter-process"), true).unusable(),
            Some("it has only `filter.lfs.process`, which kern does not speak — set `filter.lfs.clean` too".into())
        );
        assert_eq!(
            driver(None, None, true).unusable(),
            Some("`filter.lfs.clean` is not set — configure the driver (for Git LFS: `git lfs install`)".into())
        );
        assert_eq!(
            driver(Some("kern-no-such-program clean -- %f"), None, true).unusable(),
            Some("its clean command needs `kern-no-such-program`, which is not on PATH — install it (for Git LFS: `apt-get install git-lfs`)".into())
        );
        assert_eq!(driver(Some("sh -c 'cat'"), None, true).unusable(), None);
        assert_eq!(driver(Some("GIT_TRACE=0 cat"), None, true).unusable(), None);
    }

    #[test]
    fn paths_are_quoted_for_the_shell() {
        assert_eq!(sh_quote("a b"), "'a b'");
        assert_eq!(sh_quote("it's"), r"'it'\''s'");
    }
}
