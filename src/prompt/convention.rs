//! The commit-message convention of a repository, read from its recent subjects: Conventional
//! Commits (`feat(parser): …`) or a ticket key first (`ABC-123: …`). The review prompt names
//! it, so that kern's first message usually passes a `commit-msg` hook such as commitlint.
//!
//! The one decision a reader must know: what kern says about the convention goes into the
//! prompt as kern's own unfenced words, so it is made only of a closed vocabulary — the known
//! types, a project key of capitals and digits, one of four fixed forms — never of a subject's
//! own text, which is data (anyone who can push writes it).

/// The types of Conventional Commits that commitlint's `config-conventional` accepts.
const TYPES: [&str; 11] = [
    "feat", "fix", "docs", "style", "refactor", "perf", "test", "build", "ci", "chore", "revert",
];

/// A convention most recent subjects follow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Convention {
    /// Conventional Commits: `type: description`, `type(scope): description`, `type!: …`.
    Conventional {
        /// Most of them give a scope.
        scoped: bool,
    },
    /// A ticket key first, such as `ABC-123: description`.
    Ticket {
        /// The project part of the key most of them use (`ABC`).
        project: String,
        /// How most of them write the key.
        form: TicketForm,
    },
}

/// How a subject writes its ticket key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TicketForm {
    /// `ABC-123: description`
    Colon,
    /// `[ABC-123] description`
    Brackets,
    /// `ABC-123 - description`
    Dash,
    /// `ABC-123 description`
    Space,
}

impl TicketForm {
    /// The key as a subject of this form starts with it: `ABC-123: `.
    fn prefix(self, key: &str) -> String {
        match self {
            TicketForm::Colon => format!("{key}: "),
            TicketForm::Brackets => format!("[{key}] "),
            TicketForm::Dash => format!("{key} - "),
            TicketForm::Space => format!("{key} "),
        }
    }
}

/// The convention that more than half of `subjects` follow, if any. Merges, reverts,
/// `fixup!`/`squash!`/`amend!` commits and an `Initial commit` do not count, as commitlint
/// ignores them too.
pub(crate) fn detect(subjects: &[String]) -> Option<Convention> {
    let counted: Vec<&str> = subjects
        .iter()
        .map(|s| s.trim())
        .filter(|s| !ignored(s))
        .collect();
    let majority = |hits: usize| hits > 0 && hits * 2 > counted.len();
    let conventional: Vec<bool> = counted.iter().filter_map(|s| conventional(s)).collect();
    if majority(conventional.len()) {
        let scoped = conventional.iter().filter(|&&s| s).count();
        return Some(Convention::Conventional {
            scoped: scoped * 2 > conventional.len(),
        });
    }
    let tickets: Vec<(&str, TicketForm)> = counted.iter().filter_map(|s| ticket(s)).collect();
    if majority(tickets.len()) {
        return Some(Convention::Ticket {
            project: most_common(tickets.iter().map(|t| t.0))?.to_string(),
            form: most_common(tickets.iter().map(|t| t.1))?,
        });
    }
    None
}

/// kern's words on the convention for the review prompt. `has_commits`: the branch has a
/// commit; `task_title`: the task's title, where a ticket key of the project is looked for.
pub(crate) fn advice(
    convention: Option<&Convention>,
    has_commits: bool,
    task_title: &str,
) -> String {
    match convention {
        None if !has_commits => {
            "There are no commits yet to take a style from: write a short subject in the imperative mood.".to_string()
        }
        None => "The recent subjects follow no convention kern recognises (Conventional Commits, a ticket key first): match their form.".to_string(),
        Some(Convention::Conventional { scoped }) => {
            let (form, example) = if *scoped {
                ("`<type>(<scope>): <description>`", "`feat(parser): accept an empty list`")
            } else {
                ("`<type>: <description>`", "`feat: accept an empty list`")
            };
            let types: Vec<String> = TYPES.iter().map(|t| format!("`{t}`")).collect();
            format!(
                "The recent subjects follow Conventional Commits: {form}, e.g. {example}. The type is one of {}, in lower case; the description starts in lower case and has no trailing period. Write yours that way: a `commit-msg` hook such as commitlint may refuse anything else.",
                types.join(", ")
            )
        }
        Some(Convention::Ticket { project, form }) => {
            let mut text = format!(
                "The recent subjects start with a ticket key of the `{project}` project, written `{}<description>`.",
                form.prefix(&format!("{project}-123"))
            );
            match ticket_key(task_title, project) {
                Some(key) => text.push_str(&format!(
                    " The task names `{key}`: start yours with `{}`.",
                    form.prefix(&key)
                )),
                None => text.push_str(&format!(
                    " Start yours the same way with the ticket the task names; it names no `{project}` key in its title, so look for one in its text."
                )),
            }
            text
        }
    }
}

/// True for subjects no convention applies to.
fn ignored(subject: &str) -> bool {
    subject.is_empty()
        || ["Merge ", "Revert \"", "fixup! ", "squash! ", "amend! "]
            .iter()
            .any(|p| subject.starts_with(p))
        || subject.eq_ignore_ascii_case("initial commit")
}

/// `Some(scoped)` when `subject` is a Conventional Commits subject.
fn conventional(subject: &str) -> Option<bool> {
    let (head, description) = subject.split_once(": ")?;
    if description.trim().is_empty() {
        return None;
    }
    let head = head.strip_suffix('!').unwrap_or(head);
    let (kind, scoped) = match head.split_once('(') {
        Some((kind, scope)) => {
            let scope = scope.strip_suffix(')')?;
            if scope.trim().is_empty() || scope.contains(['(', ')']) {
                return None;
            }
            (kind, true)
        }
        None => (head, false),
    };
    TYPES.contains(&kind).then_some(scoped)
}

/// The project key and form of a subject that starts with a ticket key.
fn ticket(subject: &str) -> Option<(&str, TicketForm)> {
    let (bracketed, rest) = match subject.strip_prefix('[') {
        Some(rest) => (true, rest),
        None => (false, subject),
    };
    let (project, after) = rest.split_once('-')?;
    if !is_project(project) {
        return None;
    }
    let digits = after.bytes().take_while(u8::is_ascii_digit).count();
    if !(1..=7).contains(&digits) {
        return None;
    }
    let after = &after[digits..];
    let (form, description) = if bracketed {
        (TicketForm::Brackets, after.strip_prefix("] ")?)
    } else if let Some(d) = after.strip_prefix(": ") {
        (TicketForm::Colon, d)
    } else if let Some(d) = after.strip_prefix(" - ") {
        (TicketForm::Dash, d)
    } else {
        (TicketForm::Space, after.strip_prefix(' ')?)
    };
    (!description.trim().is_empty()).then_some((project, form))
}

/// A ticket project key: a capital, then 1 to 9 capitals or digits.
fn is_project(text: &str) -> bool {
    (2..=10).contains(&text.len())
        && text.starts_with(|c: char| c.is_ascii_uppercase())
        && text
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit())
}

/// The first key of `project` in `text` (`ABC-42`), standing as a word of its own.
fn ticket_key(text: &str, project: &str) -> Option<String> {
    let needle = format!("{project}-");
    let mut from = 0;
    while let Some(found) = text[from..].find(&needle) {
        let start = from + found;
        let digits_at = start + needle.len();
        let digits = text[digits_at..]
            .bytes()
            .take_while(u8::is_ascii_digit)
            .count();
        let before = text[..start].chars().next_back();
        let after = text[digits_at + digits..].chars().next();
        let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
        if (1..=7).contains(&digits) && !word(before) && !word(after) {
            return Some(text[start..digits_at + digits].to_string());
        }
        from = digits_at;
    }
    None
}

/// The value that occurs most often; on a tie the one seen first (the newest subject).
fn most_common<T: PartialEq + Copy>(values: impl Iterator<Item = T>) -> Option<T> {
    let mut counts: Vec<(T, usize)> = Vec::new();
    for value in values {
        match counts.iter_mut().find(|(v, _)| *v == value) {
            Some((_, n)) => *n += 1,
            None => counts.push((value, 1)),
        }
    }
    let best = counts.iter().map(|(_, n)| *n).max()?;
    counts.into_iter().find(|(_, n)| *n == best).map(|(v, _)| v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subjects(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_string()).collect()
    }

    #[test]
    fn conventions_are_what_most_subjects_follow() {
        let conventional = |scoped| Some(Convention::Conventional { scoped });
        let ticket = |project: &str, form| {
            Some(Convention::Ticket {
                project: project.into(),
                form,
            })
        };
        let table: Vec<(&[&str], Option<Convention>)> = vec![
            (&[], None),
            (&["Add the parser", "Fix the lexer"], None),
            (&["feat: add the parser"], conventional(false)),
            (
                &[
                    "feat: add the parser",
                    "fix(lexer): stop at EOF",
                    "docs: say so",
                ],
                conventional(false),
            ),
            (
                &[
                    "feat(parser): add it",
                    "fix(lexer): stop at EOF",
                    "docs: say so",
                ],
                conventional(true),
            ),
            (
                &[
                    "feat!: drop the old flag",
                    "chore(deps)!: bump",
                    "fix(cli): stop",
                ],
                conventional(true),
            ),
            (
                &["feat!: drop the old flag", "chore(deps)!: bump"],
                conventional(false),
            ),
            // Half is not most.
            (&["feat: add the parser", "Fix the lexer"], None),
            // Merges, reverts, fixups and the initial commit do not count.
            (
                &[
                    "Merge branch 'main' into topic",
                    "fix: stop at EOF",
                    "Revert \"feat: add x\"",
                    "fixup! fix: stop at EOF",
                    "Initial commit",
                ],
                conventional(false),
            ),
            // An area prefix, a capitalised or unknown type, an empty description: not CC.
            (&["parser: add it", "lexer: stop at EOF"], None),
            (&["Feat: add it", "FIX: stop"], None),
            (
                &["wip: add it", "feat(): add it", "feat: ", "feat:add it"],
                None,
            ),
            (
                &["ABC-12: add the parser", "ABC-13: fix the lexer", "Tidy up"],
                ticket("ABC", TicketForm::Colon),
            ),
            (
                &["[WEB-7] add the parser", "[API-9] fix it", "[WEB-3] more"],
                ticket("WEB", TicketForm::Brackets),
            ),
            (
                &["PROJ2-1 - add it", "PROJ2-2 - fix it"],
                ticket("PROJ2", TicketForm::Dash),
            ),
            (
                &["AB-1 add it", "AB-2: fix it"],
                ticket("AB", TicketForm::Space),
            ),
            // Not keys: one letter, lower case, no digits, eight digits, no description.
            (&["A-1: add it", "a-1: fix it"], None),
            (&["ABC-: add it", "ABC-12345678: fix it", "ABC-1:"], None),
        ];
        for (list, want) in table {
            assert_eq!(detect(&subjects(list)), want, "{list:?}");
        }
    }

    #[test]
    fn advice_names_the_form_and_the_tasks_key() {
        let table: Vec<(Option<Convention>, bool, &str, &str)> = vec![
            (
                None,
                false,
                "T",
                "There are no commits yet to take a style from: write a short subject in the imperative mood.",
            ),
            (
                None,
                true,
                "T",
                "The recent subjects follow no convention kern recognises (Conventional Commits, a ticket key first): match their form.",
            ),
            (
                Some(Convention::Conventional { scoped: false }),
                true,
                "T",
                "The recent subjects follow Conventional Commits: `<type>: <description>`, e.g. `feat: accept an empty list`. The type is one of `feat`, `fix`, `docs`, `style`, `refactor`, `perf`, `test`, `build`, `ci`, `chore`, `revert`, in lower case; the description starts in lower case and has no trailing period. Write yours that way: a `commit-msg` hook such as commitlint may refuse anything else.",
            ),
            (
                Some(Convention::Ticket {
                    project: "ABC".into(),
                    form: TicketForm::Brackets,
                }),
                true,
                "Fix ABC-42: the lexer (not XABC-9)",
                "The recent subjects start with a ticket key of the `ABC` project, written `[ABC-123] <description>`. The task names `ABC-42`: start yours with `[ABC-42] `.",
            ),
            (
                Some(Convention::Ticket {
                    project: "ABC".into(),
                    form: TicketForm::Colon,
                }),
                true,
                "Fix XABC-42 and ABC-4x",
                "The recent subjects start with a ticket key of the `ABC` project, written `ABC-123: <description>`. Start yours the same way with the ticket the task names; it names no `ABC` key in its title, so look for one in its text.",
            ),
        ];
        for (convention, has_commits, title, want) in table {
            assert_eq!(
                advice(convention.as_ref(), has_commits, title),
                want,
                "{title}"
            );
        }
        let scoped = advice(Some(&Convention::Conventional { scoped: true }), true, "T");
        assert!(
            scoped.starts_with("The recent subjects follow Conventional Commits: `<type>(<scope>): <description>`, e.g. `feat(parser): accept an empty list`."),
            "{scoped}"
        );
    }
}
