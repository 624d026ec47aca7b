//! What the parser reads inside a task's item once the walk has found it: its notes (kern's
//! and the person's, every shape a formatter leaves), its free text (what the agent is given
//! of the task), and the lines that look like tasks but are no list item.

use std::ops::Range;

use super::Builder;
use crate::spec::diagnostic::{Diagnostic, Severity};
use crate::spec::dialect;
use crate::spec::document::{Note, normalise, quote_title};
use crate::spec::notes;

impl<'a> Builder<'a> {
    /// Lines outside code, HTML, tables, quotes and headings that start with one of kern's
    /// boxes without being a task's first line: tasks whose `- ` was forgotten.
    pub(super) fn unlisted(&mut self) -> Vec<Diagnostic> {
        let text = self.text;
        self.opaque.sort_by_key(|r| r.start);
        let task_lines: std::collections::HashSet<usize> =
            self.tasks.iter().map(|t| t.line).collect();
        let mut out = Vec::new();
        let mut k = 0;
        for (n, &start) in self.lines.starts().iter().enumerate() {
            let line = &text[start..self.lines.line_end(self.text, start)];
            let content = line.trim_start_matches([' ', '\t', '\u{feff}']);
            if !content.starts_with('[') || !dialect::looks_like_task(content) {
                continue;
            }
            let at = start + (line.len() - content.len());
            while k < self.opaque.len() && self.opaque[k].end <= at {
                k += 1;
            }
            let covered = self.opaque[k..]
                .iter()
                .take_while(|r| r.start <= at)
                .any(|r| r.end > at);
            if covered || task_lines.contains(&(n + 1)) {
                continue;
            }
            out.push(Diagnostic {
                severity: Severity::Warning,
                line: n + 1,
                column: self.lines.column(self.text, at),
                message: format!(
                    "{} looks like a task but is not a list item, so kern does not see it",
                    quote_title(&normalise(content))
                ),
                fix: "write `- ` before the box".to_string(),
            });
        }
        out
    }

    /// The lines (start offsets and text without line ending) from the line of `from` through
    /// the line holding the last non-blank byte before `to`.
    pub(super) fn lines_between(&self, from: usize, to: usize) -> Vec<(usize, &'a str)> {
        let text = self.text;
        let trimmed_end = from + text[from..to].trim_end().len();
        if trimmed_end <= from {
            return Vec::new();
        }
        let first = self.lines.line_of(from);
        let last = self.lines.line_of(trimmed_end - 1);
        (first..=last)
            .map(|l| {
                let start = self.lines.start_of_line(l);
                (start, &text[start..self.lines.line_end(self.text, start)])
            })
            .collect()
    }

    pub(super) fn notes_in(&self, quote: &Range<usize>) -> Vec<Note> {
        let mut notes: Vec<Note> = Vec::new();
        let mut body: Vec<&str> = Vec::new();
        for (start, line) in self.lines_between(quote.start, quote.end) {
            let content = notes::content(line);
            if let Some((kind, rest)) = notes::header(content) {
                if let Some(last) = notes.last_mut() {
                    last.text = notes::text(last.kind, &body);
                }
                body.clear();
                body.push(rest);
                notes.push(Note {
                    kind,
                    text: String::new(),
                    line: self.lines.line_of(start),
                    range: start..start,
                });
            } else if !notes.is_empty() {
                body.push(content);
            }
            if let Some(last) = notes.last_mut() {
                last.range.end = self.lines.next_line(start);
            }
        }
        if let Some(last) = notes.last_mut() {
            last.text = notes::text(last.kind, &body);
        }
        notes
    }

    /// Walks the item's lines once, jumping over notes and subtasks, so that a parent with
    /// thousands of subtasks costs no more than its own lines.
    pub(super) fn free_text(&self, i: usize) -> String {
        let task = &self.tasks[i];
        let mut skip: Vec<Range<usize>> = task.notes.iter().map(|n| n.range.clone()).collect();
        skip.extend(task.children.iter().map(|&c| {
            let item = &self.tasks[c].item;
            self.lines.line_start(item.start)..item.end
        }));
        skip.sort_by_key(|r| r.start);
        let text = self.text;
        let end = task.item.start + text[task.item.clone()].trim_end().len();
        let next_line = |offset: usize| self.lines.next_line(offset);
        let mut pos = next_line(task.item.start);
        let mut k = 0;
        let mut out: Vec<&str> = Vec::new();
        while pos < end {
            while k < skip.len() && skip[k].end <= pos {
                k += 1;
            }
            if k < skip.len() && skip[k].start <= pos {
                let resume = skip[k].end;
                // A range ending inside a line (the file's last line) takes that line along.
                pos = if self.lines.line_start(resume) == resume {
                    resume
                } else {
                    next_line(resume)
                };
                continue;
            }
            let line = dedent(
                &text[pos..self.lines.line_end(self.text, pos)],
                &task.content_indent,
            )
            .trim_end();
            // Runs of blank lines count as one: kern separates its notes by blank lines.
            if !(line.is_empty() && out.last().is_some_and(|l| l.is_empty())) {
                out.push(line);
            }
            pos = next_line(pos);
        }
        while out.first().is_some_and(|l| l.is_empty()) {
            out.remove(0);
        }
        while out.last().is_some_and(|l| l.is_empty()) {
            out.pop();
        }
        out.join("\n")
    }
}

/// Removes up to `indent`'s worth of leading blanks.
fn dedent<'s>(line: &'s str, indent: &str) -> &'s str {
    if let Some(rest) = line.strip_prefix(indent) {
        return rest;
    }
    let blanks = line.len() - line.trim_start_matches([' ', '\t']).len();
    &line[blanks.min(indent.len())..]
}
