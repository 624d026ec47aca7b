//! A finding about SPEC.md, pointing at a line and column with the fix: what validation, the
//! parser and the text check report, and what errors and `status` render as `FILE:LINE:COL`.

use std::fmt;

/// Stands for the task list's file name inside a message or a fix (`{FILE}:12` renders as
/// `SPEC.md:12`): validation does not know the name the person gave the file.
pub(crate) const FILE: &str = "\u{e000}";

/// How bad a diagnostic is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    /// The run must not start (exit 2).
    Error,
    /// Worth saying; the run goes on.
    Warning,
}

/// One finding, pointing at a line and column of SPEC.md.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// Error or warning.
    pub severity: Severity,
    /// 1-based line.
    pub line: usize,
    /// 1-based column, in characters.
    pub column: usize,
    /// What is wrong, lower case, names in backticks.
    pub message: String,
    /// What to do about it (may be empty).
    pub fix: String,
}

impl Diagnostic {
    /// `SPEC.md:14:3: unknown task marker `[-]` — use [ ], [~], [x] or [!]`; warnings read
    /// `SPEC.md:3:1: warning: …`.
    pub fn render(&self, path: &str) -> String {
        self.render_as(path, true)
    }

    /// [`Diagnostic::render`] without the `warning: ` label, for a caller that prints its own
    /// (the run's reporter: `kern: warning: SPEC.md:3:1: …`, never the word twice).
    pub fn render_unlabelled(&self, path: &str) -> String {
        self.render_as(path, false)
    }

    fn render_as(&self, path: &str, labelled: bool) -> String {
        let level = match self.severity {
            Severity::Warning if labelled => "warning: ",
            Severity::Error | Severity::Warning => "",
        };
        let mut out = format!(
            "{path}:{}:{}: {level}{}",
            self.line,
            self.column,
            self.message_in(path)
        );
        if !self.fix.is_empty() {
            out.push_str(" — ");
            out.push_str(&self.fix_in(path));
        }
        out
    }

    /// The message, with the file named `path` where it refers to a line.
    pub fn message_in(&self, path: &str) -> String {
        self.message.replace(FILE, path)
    }

    /// The fix, with the file named `path` where it refers to a line.
    pub fn fix_in(&self, path: &str) -> String {
        self.fix.replace(FILE, path)
    }

    /// True for an error.
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render("SPEC.md"))
    }
}
