//! LEARNINGS.md: what the agents learned, appended by kern under a dated heading per task.
//!
//! kern only ever appends, re-reading the file first so a person's edits survive, in the
//! file's own line endings, through an atomic write. The prompts read its tail (budgeted).

use std::path::Path;

use crate::error::{Error, Result};

/// Appends `learnings` under `## <date> — <task>`; nothing when there are none.
/// Returns the file's text before the append (to put back if the commit fails).
pub(crate) fn append(
    path: &Path,
    date: &str,
    task: &str,
    learnings: &[String],
) -> Result<Option<String>> {
    let items: Vec<String> = learnings
        .iter()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|l| !l.is_empty())
        .collect();
    if items.is_empty() {
        return Ok(None);
    }
    let before = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(Error::io(path, e)),
    };
    let eol = if before.contains("\r\n") {
        "\r\n"
    } else {
        "\n"
    };
    let mut text = before.clone();
    if text.is_empty() {
        text.push_str(&format!("# Learnings{eol}"));
    } else if !text.ends_with('\n') {
        text.push_str(eol);
    }
    let title = task.split_whitespace().collect::<Vec<_>>().join(" ");
    text.push_str(&format!("{eol}## {date} — {title}{eol}{eol}"));
    for item in items {
        text.push_str(&format!("- {item}{eol}"));
    }
    crate::atomic_file::write(path, text.as_bytes())?;
    Ok(Some(before))
}

/// The last `budget` bytes of LEARNINGS.md (the prompt cuts again with a note); empty when
/// the file does not exist.
pub(crate) fn read(path: &Path) -> Result<String> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(String::from_utf8_lossy(&bytes).into_owned()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
        Err(e) => Err(Error::io(path, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appends_a_dated_section_and_keeps_what_was_there() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("LEARNINGS.md");
        std::fs::write(&path, "# Learnings\n\nhand written\n").unwrap();
        let before = append(
            &path,
            "2026-11-22",
            "Add  a\nparser",
            &["uses serde".into(), " ".into()],
        )
        .unwrap();
        assert_eq!(before.as_deref(), Some("# Learnings\n\nhand written\n"));
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "# Learnings\n\nhand written\n\n## 2026-11-22 — Add a parser\n\n- uses serde\n"
        );
    }

    #[test]
    fn creates_the_file_and_keeps_crlf() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("LEARNINGS.md");
        append(&path, "2026-11-22", "T", &["a".into()]).unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "# Learnings\n\n## 2026-11-22 — T\n\n- a\n"
        );
        std::fs::write(&path, "# L\r\n").unwrap();
        append(&path, "2026-11-22", "T", &["b".into()]).unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "# L\r\n\r\n## 2026-11-22 — T\r\n\r\n- b\r\n"
        );
        assert_eq!(append(&path, "d", "T", &[]).unwrap(), None);
    }
}
