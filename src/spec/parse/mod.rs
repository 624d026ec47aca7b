//! SPEC.md text -> tasks with exact byte ranges, notes and identities.
//!
//! The one decision a reader must know: structure comes from pulldown-cmark's event stream with
//! source offsets (`into_offset_iter`), never from grepping lines. pulldown-cmark tells us
//! *where* list items, paragraphs, headings and block quotes are; kern then reads the box from
//! the source bytes at the start of an item's first paragraph, because pulldown-cmark only
//! knows `[ ]`, `[x]` and `[X]` and reports `[~]` and `[!]` as plain text. Consequences:
//!
//! - Only a list item whose first block is a paragraph starting with a box is a task. Text in
//!   code blocks, HTML blocks, tables, headings, or inside any block quote (notes included) is
//!   never a task, however much it looks like one. What the box means — kern's own, another
//!   tool's (`[-]`, `[ ]*`, `[P]`) or a typo — is [`crate::spec::dialect`]'s to say.
//! - Notes are the block quotes that are direct children of a task's item, read by
//!   [`crate::spec::notes`] in whatever shape they have; a note runs to the next header or the
//!   end of its block quote (lazy continuation lines included, as markdown says).
//! - A heading that says its section is done (`[x]`, ✅, `DONE`, `COMPLETE(D)` at its end:
//!   [`crate::spec::dialect::heading_closes`]) closes its section: the tasks below it, to the
//!   next heading of the same or a higher level, are done by the heading.
//! - What is not a task list: a legend — the section under a heading named one, or the list
//!   right after a `Legend:` label — explains the markers, and its boxes are neither tasks nor
//!   warnings. A pending task whose title says it waits (`(deferred)`, `BLOCKED:`) is a task,
//!   listed but never taken ([`crate::spec::dialect::title_defers`]); so is an example task
//!   (`Example: …`, `(example)`: [`crate::spec::dialect::title_is_example`]), as `kern init`
//!   writes them.
//! - YAML front matter (`---` on the first line, closed by `---` or `...`, as Obsidian, Jekyll
//!   and docs tools write it) is metadata: nothing in it is a task, and since every edit is
//!   byte-based it stays byte for byte. A `---` first line that is never closed is a thematic
//!   break, as CommonMark reads it.
//! - Malformed boxes are errors, other tools' one-character boxes and lines that look like
//!   tasks without being list items are warnings; [`crate::spec::validate`] reports them.

mod item;

use std::ops::Range;

use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};

use super::diagnostic::{Diagnostic, Severity};
use super::dialect::{self, BoxKind};
use super::document::{Document, LineEnding, NotesBlock, Task, normalise};
use super::lines::LineIndex;

/// One open container while walking the events.
enum Frame {
    /// A list item; `Some(i)` when it is task `i`.
    Item(Option<usize>),
    /// A block quote.
    Quote,
    /// Any other block or inline tag.
    Other,
}

/// An item whose first event has not been seen yet (it decides whether the item is a task).
struct PendingItem {
    range: Range<usize>,
    content_start: usize,
    frame: usize,
    in_quote: bool,
    /// The item's content began with a paragraph start: its list is loose (pulldown-cmark
    /// leaves paragraphs out of tight lists).
    paragraph: bool,
}

/// A task being filled while its item is open.
struct Open {
    task: usize,
    /// Still inside the title paragraph: inline events extend `title_end`.
    in_title: bool,
}

/// A heading being read: where it starts, its level and its text so far.
struct OpenHeading {
    start: usize,
    level: u8,
    text: String,
}

/// Parses made by [`Document::parse`] in this process.
static PARSES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

impl Document {
    /// Parses SPEC.md text. Never fails and never panics: whatever is not a well-formed task is
    /// either ordinary text or a problem that [`crate::spec::validate`] reports.
    pub fn parse(text: &str) -> Document {
        PARSES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Builder::new(text).build()
    }

    /// How many times this process has parsed a SPEC.md: the loop reports it per iteration in
    /// its diagnostics (`-v`), so that a regression in how often it re-reads shows.
    pub fn parse_count() -> u64 {
        PARSES.load(std::sync::atomic::Ordering::Relaxed)
    }
}

pub(super) struct Builder<'a> {
    text: &'a str,
    lines: LineIndex,
    tasks: Vec<Task>,
    quotes: Vec<Vec<Range<usize>>>,
    problems: Vec<Diagnostic>,
    warnings: Vec<Diagnostic>,
    /// Blocks whose lines are never tasks: code, HTML, tables, block quotes, headings.
    opaque: Vec<Range<usize>>,
    heading: Option<OpenHeading>,
    /// The innermost heading that closed its section: (level, line).
    closing: Option<(u8, usize)>,
    /// The level of the legend heading whose section is being read: no tasks there.
    legend: Option<u8>,
    /// The text of the top-level paragraph being read, to tell a legend's label.
    paragraph: Option<String>,
    /// The block right before is a legend's label (`Legend:`).
    after_label: bool,
    /// The stack depth of the list a legend's label introduced: no tasks in it.
    legend_list: Option<usize>,
    /// The list of criteria being read: its stack depth and the task it belongs to.
    criteria_list: Option<(usize, usize)>,
    /// A criteria heading's section being read: its level and the task it belongs to.
    criteria_section: Option<(u8, Option<usize>)>,
}

impl<'a> Builder<'a> {
    pub(super) fn new(text: &'a str) -> Builder<'a> {
        Builder {
            text,
            lines: LineIndex::new(text),
            tasks: Vec::new(),
            quotes: Vec::new(),
            problems: Vec::new(),
            warnings: Vec::new(),
            opaque: Vec::new(),
            heading: None,
            closing: None,
            legend: None,
            paragraph: None,
            after_label: false,
            legend_list: None,
            criteria_list: None,
            criteria_section: None,
        }
    }

    pub(super) fn build(mut self) -> Document {
        let text = self.text;
        // A UTF-8 byte order mark would hide the first line's list item from the parser.
        let bom = if text.starts_with('\u{feff}') { 3 } else { 0 };
        let mut options = Options::empty();
        options.insert(Options::ENABLE_TASKLISTS);
        options.insert(Options::ENABLE_TABLES);
        // YAML front matter is never parsed: not pulldown-cmark's metadata option, which
        // takes a `---` … `---` pair anywhere in the file (thematic breaks around a list).
        let start = bom + front_matter_len(&text[bom..]);
        if start > bom {
            self.opaque.push(bom..start);
        }
        let mut stack: Vec<Frame> = Vec::new();
        let mut pending: Option<PendingItem> = None;
        let mut open: Vec<Open> = Vec::new();
        for (event, range) in Parser::new_ext(&text[start..], options).into_offset_iter() {
            let range = range.start + start..range.end + start;
            if let Some(mut p) = pending.take() {
                if matches!(event, Event::Start(Tag::Paragraph)) {
                    p.paragraph = true;
                    pending = Some(p);
                } else {
                    self.decide(p, &event, &range, &mut stack, &mut open);
                }
            }
            if let Some(o) = open.last_mut()
                && o.in_title
            {
                let ends_title = match &event {
                    Event::Start(tag) => is_block(tag),
                    Event::End(TagEnd::Paragraph | TagEnd::Item) => true,
                    _ => false,
                };
                if ends_title {
                    o.in_title = false;
                } else {
                    let t = &mut self.tasks[o.task];
                    t.title_end = t.title_end.max(range.end);
                }
            }
            if let Some(h) = &mut self.heading
                && let Event::Text(s) | Event::Code(s) = &event
            {
                h.text.push_str(s);
            }
            if let Some(p) = &mut self.paragraph
                && let Event::Text(s) | Event::Code(s) = &event
            {
                p.push_str(s);
            }
            let owner = stack.iter().rev().find_map(|f| match f {
                Frame::Item(Some(t)) => Some(*t),
                _ => None,
            });
            let in_quote = stack.iter().any(|f| matches!(f, Frame::Quote));
            match &event {
                Event::Start(Tag::List(_)) if self.criteria_list.is_none() && !in_quote => {
                    // The line right before a list inside a task names it (`Acceptance
                    // criteria:`), in a tight list or a loose one alike.
                    // kern's notes may stand between the label and its list: skipped.
                    let by_label = owner.filter(|_| {
                        let start = self.lines.line_start(range.start);
                        text[..start]
                            .lines()
                            .rev()
                            .map(|l| l.trim_start_matches([' ', '\t']))
                            .find(|l| !l.trim().is_empty() && !l.starts_with('>'))
                            .is_some_and(dialect::names_criteria)
                    });
                    let by_heading = self
                        .criteria_section
                        .and_then(|(_, task)| task)
                        .filter(|_| owner.is_none());
                    if let Some(task) = by_label.or(by_heading) {
                        self.criteria_list = Some((stack.len(), task));
                    }
                }
                Event::End(TagEnd::List(_))
                    if self.criteria_list.map(|(d, _)| d) == stack.len().checked_sub(1) =>
                {
                    self.criteria_list = None;
                }
                _ => {}
            }
            let top_level = !stack
                .iter()
                .any(|f| matches!(f, Frame::Item(_) | Frame::Quote));
            match &event {
                Event::Start(Tag::List(_))
                    if top_level && self.after_label && self.legend_list.is_none() =>
                {
                    self.after_label = false;
                    self.legend_list = Some(stack.len());
                }
                Event::Start(Tag::Paragraph) if top_level => {
                    self.after_label = false;
                    self.paragraph = Some(String::new());
                }
                Event::End(TagEnd::Paragraph) if self.paragraph.is_some() => {
                    let text = self.paragraph.take().unwrap_or_default();
                    self.after_label = dialect::label_is_legend(&text);
                }
                Event::Start(_) if top_level => self.after_label = false,
                Event::End(TagEnd::List(_)) if self.legend_list == stack.len().checked_sub(1) => {
                    self.legend_list = None;
                }
                _ => {}
            }
            match event {
                Event::Start(Tag::Item) => {
                    let in_quote = stack.iter().any(|f| matches!(f, Frame::Quote));
                    stack.push(Frame::Item(None));
                    let (bullet, content_start) = bullet_and_content(text, range.start);
                    pending = Some(PendingItem {
                        content_start,
                        range: bullet.min(range.end)..range.end,
                        frame: stack.len() - 1,
                        in_quote,
                        paragraph: false,
                    });
                }
                Event::Start(Tag::BlockQuote(_)) => {
                    if let Some(Frame::Item(Some(task))) = stack.last() {
                        self.quotes[*task].push(range.clone());
                    }
                    self.opaque.push(range);
                    stack.push(Frame::Quote);
                }
                Event::Start(Tag::Heading { level, .. }) => {
                    if !stack.iter().any(|f| matches!(f, Frame::Quote)) {
                        self.heading = Some(OpenHeading {
                            start: range.start,
                            level: level as u8,
                            text: String::new(),
                        });
                    }
                    self.opaque.push(range);
                    stack.push(Frame::Other);
                }
                Event::End(TagEnd::Heading(_)) => {
                    if let Some(h) = self.heading.take() {
                        self.heading_ends(h);
                    }
                    stack.pop();
                }
                Event::Start(tag) => {
                    if matches!(
                        tag,
                        Tag::CodeBlock(_) | Tag::HtmlBlock | Tag::Table(_) | Tag::MetadataBlock(_)
                    ) {
                        self.opaque.push(range);
                    }
                    stack.push(Frame::Other);
                }
                Event::End(TagEnd::Item) => {
                    if let Some(Frame::Item(Some(_))) = stack.pop() {
                        open.pop();
                    }
                }
                Event::End(_) => {
                    stack.pop();
                }
                _ => {}
            }
        }
        self.finish()
    }

    /// A heading ends the section of every closing heading of the same or a higher level, and
    /// starts one when it closes its own.
    fn heading_ends(&mut self, h: OpenHeading) {
        if self.closing.is_some_and(|(level, _)| h.level <= level) {
            self.closing = None;
        }
        if self.legend.is_some_and(|level| h.level <= level) {
            self.legend = None;
        }
        if self.legend.is_none() && dialect::heading_is_legend(&h.text) {
            self.legend = Some(h.level);
        }
        if self
            .criteria_section
            .is_some_and(|(level, _)| h.level <= level)
        {
            self.criteria_section = None;
        }
        if self.criteria_section.is_none() && dialect::names_criteria(&h.text) {
            // The criteria of the task right before the heading, when there is one.
            let last_top = self.tasks.iter().rposition(|t| t.depth == 0);
            self.criteria_section = Some((h.level, last_top));
        }
        if self.closing.is_none() && dialect::heading_closes(&h.text) {
            self.closing = Some((h.level, self.lines.line_of(h.start)));
        }
    }

    /// Decides whether the pending item is a task, from its first event after any paragraph
    /// start: it must be inline content starting exactly where the item's content starts.
    fn decide(
        &mut self,
        p: PendingItem,
        event: &Event<'_>,
        range: &Range<usize>,
        stack: &mut [Frame],
        open: &mut Vec<Open>,
    ) {
        let inline = matches!(
            event,
            Event::TaskListMarker(_)
                | Event::Text(_)
                | Event::Start(Tag::Link { .. } | Tag::Image { .. })
        );
        if !inline || range.start != p.content_start || p.in_quote {
            return;
        }
        // A legend explains the markers: its boxes are no tasks and no warnings.
        if self.legend.is_some() || self.legend_list.is_some() {
            return;
        }
        // A task's acceptance criteria are the task's, not tasks.
        let criteria_of = self.criteria_list.map(|(_, task)| task).or_else(|| {
            self.criteria_section
                .filter(|_| !stack.iter().any(|f| matches!(f, Frame::Item(Some(_)))))
                .map(|_| usize::MAX)
        });
        if let Some(task) = criteria_of {
            let rest = &self.text[p.content_start..self.lines.line_end(self.text, p.content_start)];
            if let BoxKind::Task {
                state, title_at, ..
            } = dialect::classify_box(rest)
                && let Some(t) = self.tasks.get_mut(task)
            {
                t.criteria.push(super::document::Criterion {
                    text: normalise(&rest[title_at.min(rest.len())..]),
                    done: state == super::document::TaskState::Done,
                    marker: p.content_start + 1..p.content_start + 2,
                });
            }
            return;
        }
        let text = self.text;
        let line_end = self.lines.line_end(self.text, p.content_start);
        let rest = &text[p.content_start..line_end];
        let (state, kind, title_at) = match dialect::classify_box(rest) {
            BoxKind::Task {
                state,
                kind,
                title_at,
            } => (state, kind, title_at),
            BoxKind::Foreign(c) => {
                self.warnings.push(Diagnostic {
                    severity: Severity::Warning,
                    line: self.lines.line_of(p.content_start),
                    column: self.lines.column(self.text, p.content_start),
                    message: format!(
                        "`[{c}]` is not one of kern's task markers: kern leaves this item alone"
                    ),
                    fix: "make it `[ ]` for kern to take it".to_string(),
                });
                return;
            }
            BoxKind::Malformed(message, fix) => {
                self.problems.push(Diagnostic {
                    severity: Severity::Error,
                    line: self.lines.line_of(p.content_start),
                    column: self.lines.column(self.text, p.content_start),
                    message,
                    fix,
                });
                return;
            }
            BoxKind::NotATask => return,
        };
        let parent = stack[..p.frame].iter().rev().find_map(|f| match f {
            Frame::Item(Some(t)) => Some(*t),
            _ => None,
        });
        let index = self.tasks.len();
        let depth = parent.map_or(0, |q| self.tasks[q].depth + 1);
        if let Some(q) = parent {
            self.tasks[q].children.push(index);
        }
        let line_start = self.lines.line_start(p.content_start);
        let content_indent: String = text[line_start..p.content_start]
            .chars()
            .map(|c| if c == '\t' { '\t' } else { ' ' })
            .collect();
        let marker = p.content_start + 1..p.content_start + 2;
        let title = normalise(&rest[title_at.min(rest.len())..]);
        self.tasks.push(Task {
            state,
            kind,
            closed_by: self.closing.map(|(_, line)| line),
            deferred: state == super::document::TaskState::Pending
                && (dialect::title_defers(&title) || dialect::title_is_example(&title)),
            title,
            line: self.lines.line_of(p.content_start),
            column: self.lines.column(self.text, p.content_start),
            marker,
            item: p.range,
            depth,
            parent,
            children: Vec::new(),
            notes: Vec::new(),
            criteria: Vec::new(),
            free_text: String::new(),
            content_indent,
            title_end: line_end,
            loose: p.paragraph,
            blocks: Vec::new(),
        });
        self.quotes.push(Vec::new());
        stack[p.frame] = Frame::Item(Some(index));
        open.push(Open {
            task: index,
            in_title: true,
        });
    }

    fn finish(mut self) -> Document {
        for i in 0..self.tasks.len() {
            let quotes = std::mem::take(&mut self.quotes[i]);
            let mut notes = Vec::new();
            let mut blocks = Vec::new();
            for q in &quotes {
                let found = self.notes_in(q);
                if found.is_empty() {
                    continue;
                }
                let lines = self.lines_between(q.start, q.end);
                if let (Some(first), Some(last)) = (lines.first(), lines.last()) {
                    blocks.push(NotesBlock {
                        lines: first.0..self.lines.next_line(last.0),
                        notes: notes.len()..notes.len() + found.len(),
                    });
                }
                notes.extend(found);
            }
            self.tasks[i].notes = notes;
            self.tasks[i].blocks = blocks;
            self.tasks[i].free_text = self.free_text(i);
        }
        let unlisted = self.unlisted();
        let line_ending = match self.text.find('\n') {
            Some(p) if p > 0 && self.text.as_bytes()[p - 1] == b'\r' => LineEnding::CrLf,
            _ => LineEnding::Lf,
        };
        Document {
            text: self.text.to_string(),
            lines: self.lines,
            line_ending,
            tasks: self.tasks,
            problems: self.problems,
            warnings: self.warnings,
            unlisted,
        }
    }
}

fn is_block(tag: &Tag<'_>) -> bool {
    matches!(
        tag,
        Tag::Paragraph
            | Tag::Heading { .. }
            | Tag::BlockQuote(_)
            | Tag::CodeBlock(_)
            | Tag::HtmlBlock
            | Tag::List(_)
            | Tag::Item
            | Tag::Table(_)
            | Tag::FootnoteDefinition(_)
            | Tag::DefinitionList
            | Tag::MetadataBlock(_)
    )
}

/// Where an item's bullet (`-`, `*`, `+`, `1.`, `1)`) and its content start. pulldown-cmark's
/// item range may begin with indentation, or even with the line ending before it (seen with
/// CRLF and a tab-indented item), so both are found from the source.
fn bullet_and_content(text: &str, item_start: usize) -> (usize, usize) {
    let bytes = text.as_bytes();
    let mut i = item_start;
    while i < bytes.len() && matches!(bytes[i], b' ' | b'\t' | b'\r' | b'\n') {
        i += 1;
    }
    let bullet = i;
    while i < bytes.len() && bytes[i].is_ascii_digit() {
        i += 1;
    }
    if i < bytes.len() && matches!(bytes[i], b'-' | b'*' | b'+' | b'.' | b')') {
        i += 1;
    }
    while i < bytes.len() && matches!(bytes[i], b' ' | b'\t') {
        i += 1;
    }
    (bullet, i)
}

/// The length of the YAML front matter `text` starts with, its closing line included; 0 when
/// there is none. Front matter opens with a first line `---` and closes with a later line `---`
/// or `...` (trailing blanks allowed); its first line may be neither blank nor the closing one,
/// as pulldown-cmark's metadata blocks have it, so a file that opens with a thematic break
/// and a blank line reads as before.
fn front_matter_len(text: &str) -> usize {
    let is = |line: &str, marks: &[&str]| {
        marks.contains(&line.trim_end_matches([' ', '\t', '\r', '\n']))
    };
    let mut lines = text.split_inclusive('\n');
    let mut end = match lines.next() {
        Some(first) if first.ends_with('\n') && is(first, &["---"]) => first.len(),
        _ => return 0,
    };
    for (i, line) in lines.enumerate() {
        let closing = is(line, &["---", "..."]);
        if i == 0 && (closing || line.trim().is_empty()) {
            return 0;
        }
        end += line.len();
        if closing {
            return end;
        }
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::TaskKind;
    use crate::spec::document::{Counts, NoteKind, TaskIdentity, TaskState};

    fn states(doc: &Document) -> Vec<(String, TaskState, usize, usize)> {
        doc.tasks()
            .iter()
            .map(|t| (t.title.clone(), t.state, t.line, t.column))
            .collect()
    }

    #[test]
    fn reads_every_marker_and_bullet() {
        let text = "# Spec\n\n- [ ] a\n* [~] b\n+ [x] c\n1. [X] d\n2) [!] e\n";
        let doc = Document::parse(text);
        assert_eq!(
            states(&doc),
            vec![
                ("a".into(), TaskState::Pending, 3, 3),
                ("b".into(), TaskState::InProgress, 4, 3),
                ("c".into(), TaskState::Done, 5, 3),
                ("d".into(), TaskState::Done, 6, 4),
                ("e".into(), TaskState::Blocked, 7, 4),
            ]
        );
        for t in doc.tasks() {
            assert_eq!(t.marker.len(), 1);
            assert_eq!(&text[t.marker.start - 1..t.marker.start], "[");
        }
        assert!(doc.problems().is_empty());
    }

    #[test]
    fn things_that_only_look_like_tasks_are_not_tasks() {
        let cases: &[(&str, &str)] = &[
            ("fenced code", "```\n- [ ] a\n```\n"),
            ("tilde fence", "~~~md\n- [~] a\n~~~\n"),
            ("indented code", "para\n\n    - [ ] a\n"),
            ("html block", "<div>\n- [ ] a\n</div>\n"),
            ("table", "| a | b |\n|---|---|\n| - [ ] c | d |\n"),
            ("block quote", "> - [ ] a\n"),
            ("bracket word", "- [docs] a\n"),
            ("link", "- [x](http://e) a\n"),
            ("reference", "- [x][r] a\n\n[r]: http://e\n"),
            ("escaped", "- \\[ ] a\n"),
            ("heading in item", "- # [ ] a\n"),
            ("code in item", "-     [ ] a\n"),
            ("no box", "- a [ ] b\n"),
            ("plain paragraph", "[ ] a\n"),
            ("wiki link", "- [[x]] a\n"),
            ("front matter", "---\ntags:\n- [ ] a\n---\n"),
            (
                "front matter closed by dots",
                "---\nitems:\n  - [x] a\n...\n",
            ),
            ("letter glued", "- [a]b\n"),
        ];
        for (name, text) in cases {
            let doc = Document::parse(text);
            assert!(doc.tasks().is_empty(), "{name}: {:?}", states(&doc));
            assert!(doc.problems().is_empty(), "{name}: {:?}", doc.problems());
        }
    }

    #[test]
    fn malformed_boxes_are_problems_with_position() {
        let cases: &[(&str, usize, usize, &str)] = &[
            (
                "- [] a\n",
                1,
                3,
                "malformed task marker `[]` — write `[ ]` (a space inside) for a pending task",
            ),
            (
                "- [ x] a\n",
                1,
                3,
                "malformed task marker `[ x]` — use [ ], [~], [x] or [!]: exactly one character inside the brackets",
            ),
            (
                "- [x ] a\n",
                1,
                3,
                "malformed task marker `[x ]` — use [ ], [~], [x] or [!]: exactly one character inside the brackets",
            ),
            (
                "- [~ ] a\n",
                1,
                3,
                "malformed task marker `[~ ]` — use [ ], [~], [x] or [!]: exactly one character inside the brackets",
            ),
            (
                "- [[ ] a\n",
                1,
                3,
                "malformed task marker `[[ ]` — use [ ], [~], [x] or [!]: exactly one character inside the brackets",
            ),
            (
                "- [x]a\n",
                1,
                3,
                "no space after the task marker `[x]` — write `[x] ` followed by the title",
            ),
            (
                "- [ ] ok\n  - [ x] b\n",
                2,
                5,
                "malformed task marker `[ x]` — use [ ], [~], [x] or [!]: exactly one character inside the brackets",
            ),
        ];
        for (text, line, column, rendered) in cases {
            let doc = Document::parse(text);
            let p = doc.problems();
            assert_eq!(p.len(), 1, "{text:?}: {p:?}");
            assert_eq!((p[0].line, p[0].column), (*line, *column), "{text:?}");
            assert_eq!(
                p[0].render("SPEC.md"),
                format!("SPEC.md:{line}:{column}: {rendered}")
            );
        }
    }

    #[test]
    fn other_tools_boxes_are_warnings_with_position_and_never_tasks() {
        let cases: &[(&str, usize, usize, &str)] = &[
            ("x\n\n  * [o] a\n", 3, 5, "[o]"),
            ("- [ ] ok\n- [P] tasks = different files\n", 2, 3, "[P]"),
            ("1. [?] a\n", 1, 4, "[?]"),
            ("- é [ ] ok\n- [ü] b\n", 2, 3, "[ü]"),
            ("- [>] forwarded\n", 1, 3, "[>]"),
        ];
        for (text, line, column, shown) in cases {
            let doc = Document::parse(text);
            assert!(doc.problems().is_empty(), "{text:?}");
            let w = doc.foreign_boxes();
            assert_eq!(w.len(), 1, "{text:?}: {w:?}");
            assert_eq!(
                w[0].render("SPEC.md"),
                format!(
                    "SPEC.md:{line}:{column}: warning: `{shown}` is not one of kern's task markers: kern leaves this item alone — make it `[ ]` for kern to take it"
                )
            );
            assert!(doc.tasks().iter().all(|t| t.line != *line), "{text:?}");
        }
    }

    #[test]
    fn held_and_optional_tasks_keep_their_place_in_the_tree() {
        let text = "- [-] 2. Kiro in progress\n  - [x] 2.1 done\n  - [ ] 2.2 next\n- [/] Obsidian\n- [ ]* 3.4 Write tests\n- [x]* 3.5 Done optional\n";
        let doc = Document::parse(text);
        let shape: Vec<(&str, TaskKind, TaskState, Option<usize>)> = doc
            .tasks()
            .iter()
            .map(|t| (t.title.as_str(), t.kind, t.state, t.parent))
            .collect();
        assert_eq!(
            shape,
            vec![
                (
                    "2. Kiro in progress",
                    TaskKind::HeldElsewhere('-'),
                    TaskState::Pending,
                    None
                ),
                ("2.1 done", TaskKind::Kern, TaskState::Done, Some(0)),
                ("2.2 next", TaskKind::Kern, TaskState::Pending, Some(0)),
                (
                    "Obsidian",
                    TaskKind::HeldElsewhere('/'),
                    TaskState::Pending,
                    None
                ),
                (
                    "3.4 Write tests",
                    TaskKind::Optional,
                    TaskState::Pending,
                    None
                ),
                (
                    "3.5 Done optional",
                    TaskKind::Optional,
                    TaskState::Done,
                    None
                ),
            ]
        );
        assert_eq!(&text[doc.tasks()[4].marker.clone()], " ");
        assert!(doc.problems().is_empty() && doc.foreign_boxes().is_empty());
        assert_eq!(
            doc.counts(),
            Counts {
                pending: 2,
                in_progress: 0,
                done: 2,
                blocked: 0
            },
            "held tasks are not counted"
        );
    }

    #[test]
    fn a_heading_with_x_or_a_check_mark_closes_its_section() {
        let text = "\
# Plan

## Phase 1: Setup [x]
- [ ] a
### Detail
- [ ] b
## Phase 2
- [ ] c
### 2.3 Verification \u{2705} COMPLETED
- [!] d
#### deeper
- [ ] e
### 2.4 Next
- [ ] f

Setext done [X]
---
- [ ] g
# Top
- [ ] h
";
        let doc = Document::parse(text);
        let closed: Vec<(&str, Option<usize>)> = doc
            .tasks()
            .iter()
            .map(|t| (t.title.as_str(), t.closed_by))
            .collect();
        assert_eq!(
            closed,
            vec![
                ("a", Some(3)),
                ("b", Some(3)),
                ("c", None),
                ("d", Some(9)),
                ("e", Some(9)),
                ("f", None),
                ("g", Some(16)),
                ("h", None),
            ]
        );
        assert_eq!(doc.tasks()[3].effective_state(), TaskState::Done);
        assert_eq!(
            doc.counts(),
            Counts {
                pending: 3,
                in_progress: 0,
                done: 5,
                blocked: 0
            }
        );
    }

    #[test]
    fn lines_that_look_like_tasks_but_are_not_list_items() {
        let text = "\
# Plan

[ ] Implement boolean search
[x] Done already
  [~] indented

- [ ] a real task
  [ ] its continuation line

> [ ] quoted
```
[ ] fenced
```
| [ ] cell |
|---|
<div>
[ ] html
</div>

[docs] not a box
[ ] 
";
        let doc = Document::parse(text);
        let found: Vec<String> = doc
            .unlisted_tasks()
            .iter()
            .map(|d| d.render("SPEC.md"))
            .collect();
        let warn = |line: usize, col: usize, title: &str| {
            format!(
                "SPEC.md:{line}:{col}: warning: `{title}` looks like a task but is not a list item, so kern does not see it — write `- ` before the box"
            )
        };
        assert_eq!(
            found,
            vec![
                warn(3, 1, "[ ] Implement boolean search"),
                warn(4, 1, "[x] Done already"),
                warn(5, 3, "[~] indented"),
                warn(8, 3, "[ ] its continuation line"),
            ]
        );
        assert_eq!(doc.tasks().len(), 1);
    }

    #[test]
    fn front_matter_is_metadata_and_only_at_the_very_top() {
        /// Name, text, the tasks' titles and lines.
        type Case = (&'static str, &'static str, Vec<(&'static str, usize)>);
        let cases: &[Case] = &[
            (
                "closed by ---",
                "---\ntitle: x\n- [ ] meta\n[ ] meta too\n---\n\n- [ ] real\n",
                vec![("real", 7)],
            ),
            (
                "closed by ...",
                "---\n- [~] meta\n...\n- [ ] real\n",
                vec![("real", 4)],
            ),
            // Not at the top: a thematic break, then a list.
            ("not first", "# Plan\n---\n- [ ] a\n---\n", vec![("a", 3)]),
            // Never closed: CommonMark's thematic break.
            ("unclosed", "---\n- [ ] a\n", vec![("a", 2)]),
            // A BOM before it changes nothing.
            (
                "bom",
                "\u{feff}---\n- [ ] meta\n---\n- [ ] real\n",
                vec![("real", 4)],
            ),
        ];
        for (name, text, want) in cases {
            let doc = Document::parse(text);
            let got: Vec<(&str, usize)> = doc
                .tasks()
                .iter()
                .map(|t| (t.title.as_str(), t.line))
                .collect();
            assert_eq!(&got, want, "{name}");
            assert!(doc.problems().is_empty(), "{name}: {:?}", doc.problems());
            assert!(doc.unlisted_tasks().is_empty(), "{name}");
        }
    }

    #[test]
    fn nesting_builds_parents_children_and_depth() {
        let text = "- [ ] a\n  - [ ] b\n    - [x] c\n  - plain\n    - [ ] d\n- [ ] e\n";
        let doc = Document::parse(text);
        let shape: Vec<(&str, usize, Option<usize>, Vec<usize>)> = doc
            .tasks()
            .iter()
            .map(|t| (t.title.as_str(), t.depth, t.parent, t.children.clone()))
            .collect();
        assert_eq!(
            shape,
            vec![
                ("a", 0, None, vec![1, 3]),
                ("b", 1, Some(0), vec![2]),
                ("c", 2, Some(1), vec![]),
                ("d", 1, Some(0), vec![]),
                ("e", 0, None, vec![]),
            ]
        );
        assert_eq!(doc.ancestors(2), vec![1, 0]);
        assert_eq!(doc.tasks()[0].free_text, "- plain");
    }

    #[test]
    fn crlf_tabs_unicode_and_bom() {
        let text = "\u{feff}- [ ]   Grüße\t an  die Welt 🌍\r\n\t- [x] sub\r\n";
        let doc = Document::parse(text);
        assert_eq!(doc.line_ending(), LineEnding::CrLf);
        assert_eq!(
            states(&doc),
            vec![
                ("Grüße an die Welt 🌍".into(), TaskState::Pending, 1, 4),
                ("sub".into(), TaskState::Done, 2, 4),
            ]
        );
        assert_eq!(doc.tasks()[1].parent, Some(0));
        assert_eq!(doc.tasks()[1].content_indent, "\t  ");
        assert_eq!(Document::parse("- [ ] a\n").line_ending(), LineEnding::Lf);
    }

    #[test]
    fn the_issue_note_names_the_tasks_issue_and_text_in_a_fence_is_no_note() {
        let text = "\
- [ ] Add a dark mode
  > **Issue:** acme/app#12
  ```
  > **Check:** rm -rf ~
  - [ ] not a task
  ## Done ✅
  ```
- [ ] Renamed by hand
  > **Research:**
  >
  > - read it
  >
  > **Issue:** https://github.com/acme/app/issues/15
- [ ] Plain
";
        let doc = Document::parse(text);
        let titles: Vec<&str> = doc.tasks().iter().map(|t| t.title.as_str()).collect();
        assert_eq!(titles, ["Add a dark mode", "Renamed by hand", "Plain"]);
        let t = &doc.tasks()[0];
        assert_eq!(
            t.issue().map(|i| i.to_string()).as_deref(),
            Some("acme/app#12")
        );
        assert_eq!(t.check_command(), None);
        assert!(t.closed_by.is_none() && doc.tasks()[2].closed_by.is_none());
        assert_eq!(
            t.free_text,
            "```\n> **Check:** rm -rf ~\n- [ ] not a task\n## Done ✅\n```"
        );
        assert_eq!(
            doc.tasks()[1].issue().map(|i| i.to_string()).as_deref(),
            Some("acme/app#15")
        );
        assert_eq!(doc.tasks()[2].issue(), None);
    }

    #[test]
    fn notes_are_read_before_and_after_subtasks() {
        let text = "\
- [~] Build it
  more words
  > **Research:**
  >   - read `a.rs`
  >     carefully
  >   - then b
  > **Attempt 1:** tests failed
  >   twice
  > **Check:** cargo test -q
  - [ ] sub
    > **Skipped:** not mine
  > **Attempt 2:** again
  > plain quote line
  > **Blocked:**

  > a person's quote
  after
";
        let doc = Document::parse(text);
        let t = &doc.tasks()[0];
        let notes: Vec<(NoteKind, &str, usize)> = t
            .notes
            .iter()
            .map(|n| (n.kind, n.text.as_str(), n.line))
            .collect();
        assert_eq!(
            notes,
            vec![
                (NoteKind::Research, "- read `a.rs`\ncarefully\n- then b", 3),
                (NoteKind::Attempt(1), "tests failed\ntwice", 7),
                (NoteKind::Check, "cargo test -q", 9),
                (NoteKind::Attempt(2), "again\nplain quote line", 12),
                (NoteKind::Blocked, "", 14),
            ]
        );
        assert_eq!(t.attempts(), 2);
        assert_eq!(t.check_command(), Some("cargo test -q"));
        assert!(!t.is_skipped());
        assert!(doc.tasks()[1].is_skipped());
        assert_eq!(t.free_text, "more words\n\n> a person's quote\nafter");
        assert_eq!(
            &text[t.notes[3].range.clone()],
            "  > **Attempt 2:** again\n  > plain quote line\n"
        );
    }

    #[test]
    fn note_headers_need_the_exact_words() {
        let text = "- [ ] a\n  > **attempt 2:** lower\n  > **Attempt x:** word\n  > > **Blocked:** nested\n  > \\**Skipped:** escaped\n";
        let doc = Document::parse(text);
        assert_eq!(doc.tasks()[0].notes, vec![]);
    }

    #[test]
    fn notes_nested_by_a_formatter_are_read_as_notes() {
        // What prettier and mdformat make of the old layout: the notes after the research
        // bullets are continuation text of the last bullet.
        let text = "\
- [~] Add the parser
  > **Research:**
  >
  > - read src/lib.rs
  >   carefully
  > - Pattern: follow the builder
  >   **Attempt 1:** the test `foo` failed
  >   second line
  >   **Attempt 2:** again
  >   **Check:** cargo test foo
";
        let doc = Document::parse(text);
        let t = &doc.tasks()[0];
        let notes: Vec<(NoteKind, &str)> =
            t.notes.iter().map(|n| (n.kind, n.text.as_str())).collect();
        assert_eq!(
            notes,
            vec![
                (
                    NoteKind::Research,
                    "- read src/lib.rs\ncarefully\n- Pattern: follow the builder"
                ),
                (NoteKind::Attempt(1), "the test `foo` failed\nsecond line"),
                (NoteKind::Attempt(2), "again"),
                (NoteKind::Check, "cargo test foo"),
            ]
        );
        assert_eq!(t.attempts(), 2);
        assert_eq!(t.check_command(), Some("cargo test foo"));
        assert_eq!(t.free_text, "");
        assert_eq!(t.blocks.len(), 1);
    }

    #[test]
    fn identity_paths_and_occurrences() {
        let text = "- [ ] A\n  - [ ]  same\n  - [ ] same\n- [ ] A\n  - [ ] same\n";
        let doc = Document::parse(text);
        let ids: Vec<String> = (0..5).map(|i| doc.identity(i).to_string()).collect();
        // Paths hold titles only: the second `A`'s `same` is the third `A › same`.
        assert_eq!(
            ids,
            vec!["A", "A › same", "A › same (#2)", "A (#2)", "A › same (#3)"]
        );
        for i in 0..5 {
            assert_eq!(doc.find(&doc.identity(i)), Some(i));
        }
        let id = doc.identity(4);
        assert_eq!(
            (id.path.clone(), id.occurrence),
            (vec!["A".to_string(), "same".to_string()], 2)
        );
        let json = serde_json::to_string(&doc.identity(2)).unwrap();
        assert_eq!(json, r#"{"path":["A","same"],"occurrence":1}"#);
        assert_eq!(
            doc.find(&TaskIdentity {
                path: vec!["same".into()],
                occurrence: 0
            }),
            None
        );
    }

    #[test]
    fn counts_and_task_block() {
        let doc = Document::parse("- [ ] a\n  - [x] b\n\n- [!] c\n- [~] d\n- [X] e\n");
        assert_eq!(
            doc.counts(),
            Counts {
                pending: 1,
                in_progress: 1,
                done: 2,
                blocked: 1
            }
        );
        assert_eq!(doc.task_block(0), "- [ ] a\n  - [x] b");
    }

    #[test]
    fn empty_title_is_still_a_task() {
        let doc = Document::parse("- [ ]\n- [x]   \n");
        assert_eq!(doc.tasks().len(), 2);
        assert_eq!(doc.tasks()[0].title, "");
    }

    #[test]
    fn from_bytes_rejects_non_text_with_position() {
        let cases: &[(&[u8], usize, usize, &str)] = &[
            (
                b"- [ ] a\n- [ ] \xff\n",
                2,
                7,
                "not valid UTF-8 (byte 0xff)",
            ),
            (
                b"ab\x00",
                1,
                3,
                "contains a NUL byte: this is not a text file",
            ),
            (
                "é\nxé\u{0}".as_bytes(),
                2,
                3,
                "contains a NUL byte: this is not a text file",
            ),
        ];
        for (bytes, line, column, message) in cases {
            let e = Document::from_bytes(bytes).unwrap_err();
            assert_eq!(
                (e.line, e.column, e.message.as_str()),
                (*line, *column, *message)
            );
        }
        assert_eq!(Document::from_bytes(b"- [ ] a\n").unwrap().tasks().len(), 1);
    }

    #[test]
    fn title_end_covers_a_multi_line_title_paragraph() {
        let text = "- [ ] a\n  b\n\n  c\n";
        let doc = Document::parse(text);
        let t = &doc.tasks()[0];
        assert_eq!(
            &text[..doc.line_end_after(t.title_end - 1)],
            "- [ ] a\n  b\n"
        );
        let tight = "- [ ] a\n  - [ ] b\n";
        let doc = Document::parse(tight);
        assert_eq!(doc.line_end_after(doc.tasks()[0].title_end - 1), 8);
    }
}
