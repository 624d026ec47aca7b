//! What changed in SPEC.md between two readings, task by task, one sentence each: how kern
//! names the changes it did not make (the person's, or an agent's against its orders) in its
//! lines, notes and commit messages.

use super::{Document, Quoted};

/// The changes of SPEC.md between `before` and `after` that are not kern's: tasks added or
/// gone, markers changed, Check notes changed — one sentence each, in document order. kern's
/// own edits never happen during a stage, so whatever differs here was the person's (or an
/// agent's against its orders).
pub(crate) fn changes(before: &Document, after: &Document) -> Vec<String> {
    let mut out = Vec::new();
    for (index, task) in after.tasks().iter().enumerate() {
        let id = after.identity(index);
        match before.find(&id) {
            None => out.push(format!("{} added", Quoted(&task.title))),
            Some(old) => {
                let was = &before.tasks()[old];
                if was.state != task.state {
                    out.push(format!(
                        "{} [{}] → [{}]",
                        Quoted(&task.title),
                        was.state.marker_char(),
                        task.state.marker_char()
                    ));
                }
                if was.check_command() != task.check_command() {
                    out.push(format!(
                        "{} Check `{}` → `{}`",
                        Quoted(&task.title),
                        was.check_command().unwrap_or(""),
                        task.check_command().unwrap_or("")
                    ));
                }
            }
        }
    }
    for (index, task) in before.tasks().iter().enumerate() {
        if after.find(&before.identity(index)).is_none() {
            out.push(format!("{} removed or renamed", Quoted(&task.title)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hand_edits_name_markers_checks_and_tasks() {
        let before =
            Document::parse("- [~] Alpha\n  > **Check:** false\n- [ ] Beta\n- [ ] Gamma\n");
        let after = Document::parse("- [~] Alpha\n  > **Check:** true\n- [x] Beta\n- [ ] Delta\n");
        assert_eq!(
            changes(&before, &after),
            vec![
                "`Alpha` Check `false` → `true`",
                "`Beta` [ ] → [x]",
                "`Delta` added",
                "`Gamma` removed or renamed",
            ]
        );
        assert!(changes(&before, &before).is_empty());
    }
}
