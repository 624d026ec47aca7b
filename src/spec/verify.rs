//! The check after every edit of SPEC.md: the splices applied, the result parsed again, and
//! the new document compared with the old one.
//!
//! The one decision a reader must know: an edit is accepted only when the re-parse shows
//! exactly the intended change — the same tasks with the same titles, kinds, parents, notes
//! and free text except for what the edit says, the same malformed-box problems, and every
//! byte outside the spliced ranges unchanged; anything else refuses the edit and nothing is
//! written.

use std::collections::HashMap;
use std::ops::Range;

use super::document::{Document, NoteKind, Quoted, TaskState};
use super::plan::Plan;

pub(super) fn splice(text: &str, splices: &[(Range<usize>, String)]) -> String {
    let mut out = String::with_capacity(text.len() + 256);
    let mut at = 0;
    for (range, replacement) in splices {
        out.push_str(&text[at..range.start]);
        out.push_str(replacement);
        at = range.end;
    }
    out.push_str(&text[at..]);
    out
}

/// Checks that `new` shows exactly the change `plan` intended on `old`.
pub(super) fn verify(
    old: &Document,
    new: &Document,
    index: usize,
    plan: &Plan,
) -> Result<(), String> {
    // Every byte outside the splices is unchanged.
    let (a, b) = (old.text(), new.text());
    let (mut i, mut j) = (0, 0);
    for (range, replacement) in &plan.splices {
        let keep = range.start - i;
        if b.get(j..j + keep) != Some(&a[i..range.start]) {
            return Err(format!("bytes before offset {} changed", range.start));
        }
        j += keep + replacement.len();
        i = range.end;
    }
    if b.get(j..) != Some(&a[i..]) {
        return Err("bytes after the edit changed".to_string());
    }
    let (ot, nt) = (old.tasks(), new.tasks());
    if nt.len() != ot.len() + plan.subtasks.len() {
        return Err(format!(
            "expected {} tasks, found {}",
            ot.len() + plan.subtasks.len(),
            nt.len()
        ));
    }
    if new.problems().len() != old.problems().len() {
        return Err("a malformed task marker appeared".to_string());
    }
    // Old task -> new task, by where its box moved.
    let shift = |offset: usize| -> usize {
        let mut moved = offset as isize;
        for (range, replacement) in &plan.splices {
            if range.end <= offset {
                moved += replacement.len() as isize - range.len() as isize;
            }
        }
        moved as usize
    };
    let by_marker: HashMap<usize, usize> = nt
        .iter()
        .enumerate()
        .map(|(k, t)| (t.marker.start, k))
        .collect();
    let mut map = Vec::with_capacity(ot.len());
    for t in ot {
        match by_marker.get(&shift(t.marker.start)) {
            Some(&k) => map.push(k),
            None => return Err(format!("task {} moved or vanished", Quoted(&t.title))),
        }
    }
    for (k, t) in ot.iter().enumerate() {
        let n = &nt[map[k]];
        let state = plan.states.get(&k).copied().unwrap_or(t.state);
        if n.title != t.title
            || n.state != state
            || n.kind != t.kind
            || n.closed_by.is_some() != t.closed_by.is_some()
            || n.parent != t.parent.map(|p| map[p])
        {
            return Err(format!(
                "task {} changed its title, state or parent",
                Quoted(&t.title)
            ));
        }
        // Ticked criteria change the task's own text at their boxes only (every other byte is
        // checked above): the criteria must read back all done, the same ones.
        let ticked = k == index && plan.ticked;
        if ticked {
            let same = n.criteria.len() == t.criteria.len()
                && n.criteria
                    .iter()
                    .zip(&t.criteria)
                    .all(|(a, b)| a.text == b.text && a.done);
            if !same {
                return Err(format!(
                    "the criteria of task {} are not as intended",
                    Quoted(&t.title)
                ));
            }
        } else if n.free_text != t.free_text {
            return Err(format!("the text of task {} changed", Quoted(&t.title)));
        }
        let mut notes: Vec<(NoteKind, &str)> =
            t.notes.iter().map(|x| (x.kind, x.text.as_str())).collect();
        if k == index {
            notes.extend(plan.notes.iter().map(|(kind, text)| (*kind, text.as_str())));
        }
        let found: Vec<(NoteKind, &str)> =
            n.notes.iter().map(|x| (x.kind, x.text.as_str())).collect();
        if found != notes {
            return Err(format!(
                "the notes of task {} are not as intended",
                Quoted(&t.title)
            ));
        }
    }
    if !plan.subtasks.is_empty() {
        let parent = map[index];
        let children = &nt[parent].children;
        let added = &children[children.len().saturating_sub(plan.subtasks.len())..];
        let ok = added.len() == plan.subtasks.len()
            && added.iter().zip(&plan.subtasks).all(|(&c, title)| {
                let s = &nt[c];
                s.title == *title
                    && s.state == TaskState::Pending
                    && s.notes.is_empty()
                    && s.children.is_empty()
                    && !map.contains(&c)
            });
        if !ok {
            return Err("the new subtasks did not land under the task".to_string());
        }
    }
    Ok(())
}
