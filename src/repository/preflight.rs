//! The git preflight: what would stop kern's commit, found before any agent runs (and shown by
//! `kern doctor` and `kern -n`).
//!
//! The one decision a reader must know: these are the commit's own conditions, checked with
//! the commit's own code — the identity libgit2 signs with, the signer `commit.gpgsign` asks
//! for (its key looked up, nothing signed), an operation in progress, git's `index.lock` and a
//! sparse index (which libgit2 cannot read), and
//! every filter driver the attribute files name (a required one kern cannot run). A run skips
//! the `index.lock` check here: a lock left by a crashed kern is recovered only after the run
//! lock is taken, and one held by someone else is waited for at commit time.

use super::Repository;
use crate::error::{Error, Result};

/// One preflight check: what it looked at, and what it found.
#[derive(Debug)]
pub struct PreflightCheck {
    /// `git identity`, `commit signing`, `git operation`, `git index`, `filter drivers`.
    pub name: &'static str,
    /// What was found, or the error a commit would meet.
    pub result: Result<String>,
}

impl Repository {
    /// Every check, in order (see the module docs).
    pub fn preflight(&self) -> Vec<PreflightCheck> {
        vec![
            self.identity_check(),
            self.signing_check(),
            PreflightCheck {
                name: "git operation",
                result: self
                    .ensure_no_operation_in_progress()
                    .map(|()| "no merge, rebase or other operation in progress".into()),
            },
            PreflightCheck {
                name: "git index",
                result: self.ensure_readable_index().and_then(|()| {
                    if self.index_lock_present() {
                        Err(Error::IndexLocked {
                            path: self.index_lock_path(),
                        })
                    } else {
                        Ok("no `index.lock`, not a sparse index".into())
                    }
                }),
            },
            self.filter_check(),
        ]
    }

    /// The checks a run makes before any agent: the first failure, else `Ok`.
    pub fn ensure_ready(&self) -> Result<()> {
        self.ensure_no_operation_in_progress()?;
        self.ensure_readable_index()?;
        for check in [
            self.identity_check(),
            self.filter_check(),
            self.signing_check(),
        ] {
            check.result?;
        }
        Ok(())
    }

    /// libgit2 cannot read a sparse index (`index.sparse`, the `sdir` extension).
    fn ensure_readable_index(&self) -> Result<()> {
        let sparse = self
            .repo
            .config()
            .and_then(|c| c.get_bool("index.sparse"))
            .unwrap_or(false);
        if sparse {
            return Err(Error::Repository(
                "the index is a sparse index (`index.sparse`), which libgit2 (and so kern) cannot read — run `git sparse-checkout init --no-sparse-index` (your sparse checkout stays as it is)".into(),
            ));
        }
        Ok(())
    }

    fn identity_check(&self) -> PreflightCheck {
        let result = self
            .author()
            .and_then(|author| self.committer().map(|_| author))
            .map(|me| {
                format!(
                    "{} <{}>",
                    String::from_utf8_lossy(me.name_bytes()),
                    String::from_utf8_lossy(me.email_bytes())
                )
            });
        PreflightCheck {
            name: "git identity",
            result,
        }
    }

    fn signing_check(&self) -> PreflightCheck {
        let result = match self.signer() {
            Ok(None) => Ok("off (`commit.gpgsign` is not set)".into()),
            Ok(Some(signer)) => signer.check(&self.top),
            Err(e) => Err(e),
        };
        PreflightCheck {
            name: "commit signing",
            result,
        }
    }

    fn filter_check(&self) -> PreflightCheck {
        let result = (|| {
            let names = self.filter_drivers_in_use();
            if names.is_empty() {
                return Ok("none named in .gitattributes".to_string());
            }
            let config = self.config_snapshot()?;
            let mut shown = Vec::new();
            for name in names {
                let driver = super::FilterDriver::from_config(&config, &name);
                if let Some(why) = driver.unusable() {
                    return Err(Error::FilterUnusable {
                        driver: driver.name,
                        why,
                    });
                }
                shown.push(match (&driver.clean, &driver.process) {
                    (Some(clean), _) => format!("`{name}` (clean: `{clean}`)"),
                    (None, Some(_)) => format!(
                        "`{name}` (process only: kern stores such files as they are, as git does without the driver)"
                    ),
                    (None, None) => format!("`{name}` (not configured: stored as they are, as git does)"),
                });
            }
            Ok(shown.join(", "))
        })();
        PreflightCheck {
            name: "filter drivers",
            result,
        }
    }
}
