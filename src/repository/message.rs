//! The commit message as `git commit -m` cleans it, by the person's settings (`commit.cleanup`,
//! `core.commentChar`, `core.commentString`), as `git stripspace` does.
//!
//! The decision a reader must know: kern's message is given as `-m` gives one, never edited, so
//! git's `default` and `scissors` modes are `whitespace` here (trailing spaces, blank lines at
//! the ends and runs of them go); only `strip` removes comment lines — those that start with
//! the comment character, `#` unless configured; with `auto` git picks one that starts no line
//! of the message, so none is removed — and `verbatim` keeps the message byte for byte. The
//! cleaning happens once, after the message hooks, as git does it.

use crate::error::{Error, Result};

/// How `git commit -m` would clean a message, from the person's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Cleanup {
    /// `commit.cleanup = verbatim`: the message as it is.
    Verbatim,
    /// The default for a message not edited: whitespace only.
    Whitespace,
    /// `commit.cleanup = strip`: whitespace, and lines that start with this comment string
    /// (`None`: `core.commentChar = auto`, which strips nothing from a message given whole).
    Strip(Option<String>),
}

impl Cleanup {
    /// The mode the settings give: `cleanup` is `commit.cleanup`, `comment` the comment string
    /// (`core.commentString`, else `core.commentChar`), each `None` when unset.
    pub(crate) fn from_settings(cleanup: Option<&str>, comment: Option<&str>) -> Cleanup {
        match cleanup.map(str::trim) {
            Some("verbatim") => Cleanup::Verbatim,
            Some("strip") => Cleanup::Strip(match comment {
                Some("auto") => None,
                Some(c) if !c.is_empty() => Some(c.to_string()),
                _ => Some("#".to_string()),
            }),
            // `default`, `scissors` and `whitespace` on a message that is not edited.
            _ => Cleanup::Whitespace,
        }
    }

    /// The mode of the repository whose configuration is `config`.
    pub(crate) fn of(config: &git2::Config) -> Cleanup {
        let get = |key: &str| config.get_string(key).ok();
        let comment = get("core.commentString").or_else(|| get("core.commentChar"));
        Cleanup::from_settings(get("commit.cleanup").as_deref(), comment.as_deref())
    }

    /// `message` cleaned (see the module docs).
    pub(crate) fn clean(&self, message: &str) -> Result<String> {
        let kept: String = match self {
            Cleanup::Verbatim => return Ok(message.to_string()),
            Cleanup::Whitespace | Cleanup::Strip(None) => message.to_string(),
            Cleanup::Strip(Some(comment)) => message
                .split_inclusive('\n')
                .filter(|line| !line.starts_with(comment.as_str()))
                .collect(),
        };
        git2::message_prettify(kept, None).map_err(|e| Error::git("cleaning the commit message", e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_from_the_settings() {
        let cases = [
            (None, None, Cleanup::Whitespace),
            (Some("default"), Some(";"), Cleanup::Whitespace),
            (Some("scissors"), None, Cleanup::Whitespace),
            (Some("whitespace"), None, Cleanup::Whitespace),
            (Some("verbatim"), None, Cleanup::Verbatim),
            (Some("strip"), None, Cleanup::Strip(Some("#".into()))),
            (Some("strip"), Some(";"), Cleanup::Strip(Some(";".into()))),
            (Some("strip"), Some("//"), Cleanup::Strip(Some("//".into()))),
            (Some("strip"), Some("auto"), Cleanup::Strip(None)),
        ];
        for (cleanup, comment, want) in cases {
            assert_eq!(
                Cleanup::from_settings(cleanup, comment),
                want,
                "{cleanup:?} {comment:?}"
            );
        }
    }

    #[test]
    fn messages_clean_as_git_stripspace_does() {
        let message = "Subject  \n\n\nBody\n# hash\n; semi\n  # indented\n\n\n";
        let cases = [
            (
                Cleanup::Whitespace,
                "Subject\n\nBody\n# hash\n; semi\n  # indented\n",
            ),
            (
                Cleanup::Strip(Some("#".into())),
                "Subject\n\nBody\n; semi\n  # indented\n",
            ),
            (
                Cleanup::Strip(Some(";".into())),
                "Subject\n\nBody\n# hash\n  # indented\n",
            ),
            (
                Cleanup::Strip(None),
                "Subject\n\nBody\n# hash\n; semi\n  # indented\n",
            ),
            (Cleanup::Verbatim, message),
        ];
        for (mode, want) in cases {
            assert_eq!(mode.clean(message).unwrap(), want, "{mode:?}");
        }
    }
}
