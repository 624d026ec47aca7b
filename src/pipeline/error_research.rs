//! Error research (DESIGN.md section 17): after a failed attempt whose failure carries an error
//! (the check's output, a must-have, a hook's refusal), what the next attempt is told about it —
//! the error classified, the approaches already tried against it, the standard approaches not
//! yet tried, and a recommendation: continue, or saturated ("all standard approaches
//! exhausted").
//!
//! Decisions a reader must know:
//! - It is kern's own read-only analysis of the task's Attempt notes, a pure function: no agent
//!   is asked and nothing is paid for it. `kern -n` shows the same text a run sends.
//! - An attempt's approach is what its note records: the `Approach:` line kern adds when an
//!   attempt failed after implement reported SUCCESS (the first sentence of implement's
//!   summary), else the note itself (implement's own FAILED note says what it tried). An
//!   approach that names a standard one (`run-alone`) counts as that one.
//! - Saturated: as many distinct approaches failed with the error's class as the class has
//!   standard ones, or every standard one by name. The next attempt is then the decomposition
//!   request, however few attempts were made, and a failure of the attempt made under that
//!   request blocks the task with what was tried and the error it hit (`tried_and_hit`,
//!   `decide::failed_attempt`). So no paid attempt repeats an approach the notes already hold.

/// The line kern adds to an Attempt note to record the approach that failed.
pub(crate) const APPROACH: &str = "Approach: ";

/// What kind of error a failed attempt carried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ErrorClass {
    /// The check failed to build or compile.
    Build,
    /// The check's tests failed.
    Test,
    /// The check ran out of time.
    Timeout,
    /// The check failed some other way (a linter, a script).
    Check,
    /// kern's check of the must-haves failed.
    Must,
    /// A git hook refused the commit.
    Hook,
}

impl ErrorClass {
    /// The class in words, for the prompt and the Blocked note.
    pub(crate) fn describe(self) -> &'static str {
        match self {
            ErrorClass::Build => "a build error",
            ErrorClass::Test => "a failing test",
            ErrorClass::Timeout => "a check that timed out",
            ErrorClass::Check => "a failing check",
            ErrorClass::Must => "a must-have that does not hold",
            ErrorClass::Hook => "a hook that refused the commit",
        }
    }

    /// The class's short name, for `kern status --json`.
    pub(crate) fn name(self) -> &'static str {
        match self {
            ErrorClass::Build => "build",
            ErrorClass::Test => "test",
            ErrorClass::Timeout => "timeout",
            ErrorClass::Check => "check",
            ErrorClass::Must => "must",
            ErrorClass::Hook => "hook",
        }
    }

    /// The standard approaches to this class of error, by name.
    pub(crate) fn approaches(self) -> &'static [(&'static str, &'static str)] {
        match self {
            ErrorClass::Build => &[
                (
                    "first-error",
                    "read the first error the build prints and fix its cause; later errors often follow from it",
                ),
                (
                    "match-api",
                    "read the definitions the new code calls and use them exactly as they are (names, types, arguments)",
                ),
                (
                    "smaller-change",
                    "make the least change that builds, then add the rest step by step, building after each",
                ),
            ],
            ErrorClass::Test => &[
                (
                    "run-alone",
                    "run the failing test alone and trace the value it got back to where it is made",
                ),
                (
                    "fix-cause",
                    "fix the code under test where the assertion points; never the test's expectation unless the task says the behaviour changes",
                ),
                ("other-design", "a different design for the part under test"),
            ],
            ErrorClass::Timeout => &[
                (
                    "find-slow",
                    "find what makes the check slow or hang (a loop, a wait, a server left running) and remove it",
                ),
                (
                    "smaller-change",
                    "make the least change that passes the check, then the rest",
                ),
            ],
            ErrorClass::Check => &[
                (
                    "run-check",
                    "run the check command yourself and fix what it reports, first line first",
                ),
                (
                    "follow-tool",
                    "follow the tool's own advice: its suggested fix, its configuration in the project",
                ),
            ],
            ErrorClass::Must => &[
                (
                    "meet-literally",
                    "make each failed must-have hold exactly as written: the path, the pattern, the command",
                ),
                (
                    "check-names",
                    "compare the names and paths in the must-have with the ones in your change, character by character",
                ),
            ],
            ErrorClass::Hook => &[
                (
                    "run-hook",
                    "run the hook's command yourself and fix what it reports",
                ),
                (
                    "follow-tool",
                    "apply the formatter or linter the hook runs, as the project configures it",
                ),
            ],
        }
    }
}

/// The error part of an Attempt note: the note without kern's `Approach:` line.
pub(crate) fn error_part(note: &str) -> &str {
    match note.rfind(&format!("\n{APPROACH}")) {
        Some(i) => &note[..i],
        None => note,
    }
}

/// The approach an Attempt note records on its `Approach:` line, if it has one.
pub(crate) fn approach_of(note: &str) -> Option<&str> {
    note.rfind(&format!("\n{APPROACH}"))
        .map(|i| note[i + 1 + APPROACH.len()..].trim())
}

/// `note` with the approach that failed (`approach`: what implement said it did) recorded on
/// its last line: the summary's first sentence, at most 200 characters.
pub(crate) fn with_approach(note: &str, approach: Option<&str>) -> String {
    // A summary that names its approach as the research asked (`Approach: run-alone — …`)
    // is recorded without the word twice.
    let named = |a: &str| {
        let a = a.trim_start();
        match a.get(..APPROACH.len()) {
            Some(head) if head.eq_ignore_ascii_case(APPROACH) => a[APPROACH.len()..].to_string(),
            _ => a.to_string(),
        }
    };
    let Some(approach) = approach
        .map(|a| first_sentence(&named(a)))
        .filter(|a| !a.is_empty())
    else {
        return note.to_string();
    };
    format!("{note}\n{APPROACH}{approach}")
}

/// The first sentence of `text`, on one line, at most 200 characters.
fn first_sentence(text: &str) -> String {
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let end = one_line
        .match_indices(". ")
        .next()
        .map_or(one_line.len(), |(i, _)| i + 1);
    let sentence = &one_line[..end];
    if sentence.chars().count() > 200 {
        let cut: String = sentence.chars().take(199).collect();
        format!("{cut}…")
    } else {
        sentence.to_string()
    }
}

/// The class of the error an Attempt note carries; `None` for a failure without one (the
/// implement stage's own FAILED note, a review's rejection, a timeout of the agent).
pub(crate) fn classify(note: &str) -> Option<ErrorClass> {
    let error = error_part(note);
    let lower = error.to_lowercase();
    if lower.starts_with("kern's check of the must-haves failed") {
        return Some(ErrorClass::Must);
    }
    if error.starts_with("the `") && lower.contains(" hook refused the commit") {
        return Some(ErrorClass::Hook);
    }
    if !lower.starts_with("check `") {
        return None;
    }
    let first = lower.lines().next().unwrap_or_default();
    if first.contains("` timed out after") {
        return Some(ErrorClass::Timeout);
    }
    let output = lower.split_once("last output:").map_or("", |(_, o)| o);
    const BUILD: &[&str] = &[
        "error[e",
        "could not compile",
        "cannot find",
        "syntaxerror",
        "syntax error",
        "undefined reference",
        "undeclared",
        "compilation failed",
        "compile error",
        "no such file",
        "cannot resolve",
        "unresolved import",
        "is not defined",
        "modulenotfounderror",
        "importerror",
    ];
    const TEST: &[&str] = &[
        "test",
        "assert",
        "panicked",
        "expected",
        "fail:",
        "failures:",
        " failed,",
    ];
    if BUILD.iter().any(|w| output.contains(w)) {
        Some(ErrorClass::Build)
    } else if TEST.iter().any(|w| output.contains(w)) {
        Some(ErrorClass::Test)
    } else {
        Some(ErrorClass::Check)
    }
}

/// What kern tells the next attempt about the last failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Research {
    /// The class of the last failure's error.
    pub class: ErrorClass,
    /// How many failed attempts carried an error of this class.
    pub seen: usize,
    /// The distinct approaches that failed with it, in order.
    pub tried: Vec<String>,
    /// The standard approaches not tried yet (name, what it is).
    pub untried: Vec<(&'static str, &'static str)>,
    /// All standard approaches exhausted.
    pub saturated: bool,
}

/// The error research of a task whose Attempt notes are `notes` (in order); `None` when it has
/// none, or when the last failure carried no error (see the module docs).
pub(crate) fn analyse(notes: &[String]) -> Option<Research> {
    let last = notes.last()?;
    let class = classify(last)?;
    let standard = class.approaches();
    let mut tried: Vec<String> = Vec::new();
    let mut keys: Vec<String> = Vec::new();
    let mut named: Vec<&str> = Vec::new();
    let mut seen = 0;
    for note in notes.iter().filter(|n| classify(n) == Some(class)) {
        seen += 1;
        let approach = approach_of(note)
            .unwrap_or("(the approach was not recorded)")
            .to_string();
        let lower = approach.to_lowercase();
        let name = standard
            .iter()
            .map(|(name, _)| *name)
            .find(|name| lower.contains(name));
        let key = match name {
            Some(name) => {
                named.push(name);
                name.to_string()
            }
            None => lower
                .split(|c: char| !c.is_alphanumeric())
                .filter(|w| !w.is_empty())
                .collect::<Vec<_>>()
                .join(" "),
        };
        if !keys.contains(&key) {
            keys.push(key);
            tried.push(approach);
        }
    }
    let untried: Vec<(&str, &str)> = standard
        .iter()
        .filter(|(name, _)| !named.contains(name))
        .copied()
        .collect();
    let saturated = untried.is_empty() || tried.len() >= standard.len();
    Some(Research {
        class,
        seen,
        tried,
        untried,
        saturated,
    })
}

impl Research {
    /// The research as `kern status --json` shows it (`next.error_research`).
    pub(crate) fn status(&self) -> serde_json::Value {
        serde_json::json!({
            "class": self.class.name(),
            "what": self.class.describe(),
            "seen": self.seen,
            "tried": self.tried,
            "untried": self.untried.iter().map(|(name, _)| *name).collect::<Vec<_>>(),
            "saturated": self.saturated,
        })
    }

    /// The research as the implement prompt shows it (short: it shares `{ATTEMPTS}`'s 2 KiB).
    pub(crate) fn text(&self) -> String {
        let mut out = format!(
            "Error research (kern's own analysis of the Attempt notes): the last failure is {} — {} with it so far.\n",
            self.class.describe(),
            crate::text::count(self.seen, "attempt", "attempts")
        );
        out.push_str("Approaches already tried against it (do not repeat them):\n");
        for (i, a) in self.tried.iter().enumerate() {
            out.push_str(&format!("{}. {}\n", i + 1, cut(a, 200)));
        }
        if self.saturated {
            out.push_str("Recommendation: saturated — all standard approaches exhausted for this error. Do not try the task again as it is.\n");
        } else {
            out.push_str("Standard approaches not yet tried:\n");
            for (name, what) in &self.untried {
                out.push_str(&format!("- `{name}`: {what}\n"));
            }
            out.push_str("Recommendation: continue — take one approach not yet tried (or a better one of your own that is not in the tried list), and start your `summary` with `Approach: <its name>` so kern records it.\n");
        }
        out
    }
}

/// The Blocked note of a task whose decomposition request implement answered with its own
/// FAILED ("cannot be split", `note`) after the failed attempts `before`.
pub(crate) fn blocked_answered(note: &str, before: &[String]) -> String {
    with_tried(
        format!(
            "the decomposition request was answered: {} — after {}; a person must look",
            crate::text::first_line(note),
            crate::text::count(before.len(), "failed attempt", "failed attempts")
        ),
        before,
    )
}

/// The Blocked note of a saturated task whose attempt under the decomposition request failed
/// (`notes`: every Attempt note, that one last).
pub(crate) fn blocked_saturated(research: &Research, notes: &[String]) -> String {
    with_tried(
        format!(
            "saturated: all standard approaches exhausted for {} ({}), decomposition included — a person must look",
            research.class.describe(),
            crate::text::count(research.seen, "attempt", "attempts"),
        ),
        notes,
    )
}

/// The Blocked note of a task whose attempt number `attempt`, made under the decomposition
/// request, failed (`notes`: every Attempt note, that one last).
pub(crate) fn blocked_after(attempt: u32, notes: &[String]) -> String {
    with_tried(
        format!("{attempt} failed attempts, decomposition included — a person must look"),
        notes,
    )
}

/// `reason`, then what `notes` tried and hit ([`tried_and_hit`]), when there is any.
fn with_tried(reason: String, notes: &[String]) -> String {
    let tried = tried_and_hit(notes);
    if tried.is_empty() {
        reason
    } else {
        format!("{reason}. {tried}")
    }
}

/// What a Blocked note says the attempts of `notes` (in order) tried and the error each hit:
/// one entry per approach (its note's `Approach:` line, else the note's own words), the same
/// approach hitting the same error once with how many attempts it took; the error named once
/// when every attempt hit the same one. Empty for no notes.
pub(crate) fn tried_and_hit(notes: &[String]) -> String {
    let mut entries: Vec<(Option<String>, String, usize)> = Vec::new();
    for note in notes {
        let approach = approach_of(note).map(str::to_string);
        let hit = headline(error_part(note));
        let key = |a: &Option<String>| a.as_deref().map(str::to_lowercase);
        match entries
            .iter_mut()
            .find(|(a, h, _)| key(a) == key(&approach) && *h == hit)
        {
            Some(entry) => entry.2 += 1,
            None => entries.push((approach, hit, 1)),
        }
    }
    let Some((_, first_hit, _)) = entries.first() else {
        return String::new();
    };
    let one_error = entries
        .iter()
        .all(|(a, h, _)| a.is_some() && h == first_hit);
    let list = entries
        .iter()
        .enumerate()
        .map(|(i, (approach, hit, times))| {
            let what = match approach {
                Some(a) if one_error => a.clone(),
                Some(a) => format!("{a} → {hit}"),
                None => hit.clone(),
            };
            let times = if *times > 1 {
                format!(" ({times} attempts)")
            } else {
                String::new()
            };
            format!("{}) {what}{times}", i + 1)
        })
        .collect::<Vec<_>>()
        .join("; ");
    if one_error {
        format!("Tried against {first_hit}: {list}")
    } else {
        format!("Tried: {list}")
    }
}

/// The error of an Attempt note in one line: its first line (a check's command and exit, a
/// hook's name, a must-have's finding) and the output line that names the error — the first
/// that says error, failed or panicked, else the last.
fn headline(error: &str) -> String {
    let mut lines = error.lines().map(str::trim);
    let first = lines.next().unwrap_or_default();
    let head = match first.strip_prefix("kern's check of the must-haves failed: ") {
        Some(finding) => format!("must-have {finding}"),
        None => first
            .trim_end_matches(':')
            .trim_end_matches("; last output")
            .to_string(),
    };
    let output: Vec<&str> = lines
        .filter(|l| !l.is_empty() && *l != "(no output)")
        .collect();
    let named = output.iter().find(|l| {
        let l = l.to_lowercase();
        ["error", "failed", "panicked", "assert"]
            .iter()
            .any(|w| l.contains(w))
    });
    match named.or(output.last()) {
        Some(line) => format!("{}: {}", cut(&head, 200), cut(line, 200)),
        None => cut(&head, 300),
    }
}

/// `text` cut to `max` characters.
fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_string()
    } else {
        format!("{}…", text.chars().take(max - 1).collect::<String>())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEST_FAIL: &str = "check `cargo test` failed (exit 101); last output:\ntest parse ... FAILED\nassertion failed: left == right";

    #[test]
    fn errors_are_classified_from_the_note() {
        let cases: &[(&str, Option<ErrorClass>)] = &[
            (TEST_FAIL, Some(ErrorClass::Test)),
            (
                "check `cargo build` failed (exit 101); last output:\nerror[E0425]: cannot find value `x`",
                Some(ErrorClass::Build),
            ),
            (
                "check `sleep 9` timed out after 1s; last output:\n(no output)",
                Some(ErrorClass::Timeout),
            ),
            (
                "check `ruff .` failed (exit 1); last output:\nE501 line too long",
                Some(ErrorClass::Check),
            ),
            (
                "kern's check of the must-haves failed: `file src/a.rs` — missing",
                Some(ErrorClass::Must),
            ),
            (
                "the `pre-commit` hook refused the commit:\nblack would reformat",
                Some(ErrorClass::Hook),
            ),
            ("review rejected the change: no test", None),
            ("could not find the function", None),
            // The approach line never changes the class.
            (
                "check `x` failed (exit 1); last output:\nE501\nApproach: added a test for it",
                Some(ErrorClass::Check),
            ),
        ];
        for (note, want) in cases {
            assert_eq!(classify(note), *want, "{note}");
        }
    }

    #[test]
    fn the_approach_is_the_summarys_first_sentence_on_the_last_line() {
        assert_eq!(
            with_approach(
                "check failed",
                Some("Changed  src/a.rs\nto use x. Ran the tests.")
            ),
            "check failed\nApproach: Changed src/a.rs to use x."
        );
        assert_eq!(
            with_approach("n", Some("Approach: run-alone — traced it. Then more.")),
            "n\nApproach: run-alone — traced it."
        );
        assert_eq!(with_approach("n", None), "n");
        assert_eq!(with_approach("n", Some("  ")), "n");
        assert_eq!(error_part("check failed\nApproach: x"), "check failed");
        let long = "a".repeat(300);
        assert_eq!(
            with_approach("n", Some(&long)).chars().count(),
            "n\nApproach: ".len() + 200
        );
    }

    fn notes(list: &[&str]) -> Vec<String> {
        list.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn tried_untried_and_saturation() {
        let fail = |approach: &str| format!("{TEST_FAIL}\n{APPROACH}{approach}");
        // (notes, tried, untried names, saturated)
        type Case<'a> = (Vec<String>, Vec<&'a str>, Vec<&'a str>, bool);
        let cases: Vec<Case> = vec![
            (
                notes(&[TEST_FAIL]),
                vec!["(the approach was not recorded)"],
                vec!["run-alone", "fix-cause", "other-design"],
                false,
            ),
            (
                vec![fail("did it")],
                vec!["did it"],
                vec!["run-alone", "fix-cause", "other-design"],
                false,
            ),
            // The same approach twice is one approach.
            (
                vec![fail("did it"), fail("Did it!")],
                vec!["did it"],
                vec!["run-alone", "fix-cause", "other-design"],
                false,
            ),
            (
                vec![fail("did it"), fail("run-alone: traced the value")],
                vec!["did it", "run-alone: traced the value"],
                vec!["fix-cause", "other-design"],
                false,
            ),
            // Three distinct approaches for a class of three: saturated.
            (
                vec![
                    fail("did it"),
                    fail("run-alone: traced"),
                    fail("fix-cause in parse"),
                ],
                vec!["did it", "run-alone: traced", "fix-cause in parse"],
                vec!["other-design"],
                true,
            ),
            // A must-have has two standard approaches.
            (
                notes(&[
                    "kern's check of the must-haves failed: `file a` — missing\nApproach: wrote b",
                    "kern's check of the must-haves failed: `file a` — missing\nApproach: meet-literally: wrote a",
                ]),
                vec!["wrote b", "meet-literally: wrote a"],
                vec!["check-names"],
                true,
            ),
            // Only failures of the last one's class count.
            (
                vec![
                    "kern's check of the must-haves failed: `file a`\nApproach: one".to_string(),
                    fail("two"),
                ],
                vec!["two"],
                vec!["run-alone", "fix-cause", "other-design"],
                false,
            ),
        ];
        for (notes, tried, untried, saturated) in cases {
            let r = analyse(&notes).unwrap();
            assert_eq!(r.tried, tried, "{notes:?}");
            assert_eq!(
                r.untried.iter().map(|(n, _)| *n).collect::<Vec<_>>(),
                untried,
                "{notes:?}"
            );
            assert_eq!(r.saturated, saturated, "{notes:?}");
        }
        assert_eq!(analyse(&[]), None);
        assert_eq!(analyse(&notes(&["review rejected the change: no"])), None);
        assert_eq!(
            analyse(&notes(&[TEST_FAIL, "could not do it"])),
            None,
            "the last failure carries no error"
        );
    }

    #[test]
    fn the_prompt_text_names_what_was_tried_and_what_to_do() {
        let r = analyse(&[format!("{TEST_FAIL}\n{APPROACH}did it")]).unwrap();
        assert_eq!(
            r.text(),
            "Error research (kern's own analysis of the Attempt notes): the last failure is a failing test — 1 attempt with it so far.\n\
             Approaches already tried against it (do not repeat them):\n1. did it\n\
             Standard approaches not yet tried:\n\
             - `run-alone`: run the failing test alone and trace the value it got back to where it is made\n\
             - `fix-cause`: fix the code under test where the assertion points; never the test's expectation unless the task says the behaviour changes\n\
             - `other-design`: a different design for the part under test\n\
             Recommendation: continue — take one approach not yet tried (or a better one of your own that is not in the tried list), and start your `summary` with `Approach: <its name>` so kern records it.\n"
        );
        let saturated = analyse(&notes(&[
            "kern's check of the must-haves failed: x\nApproach: a",
            "kern's check of the must-haves failed: x\nApproach: b",
        ]))
        .unwrap();
        assert!(
            saturated
                .text()
                .contains("Recommendation: saturated — all standard approaches exhausted")
        );
        assert!(saturated.text().len() < 1024);
    }

    #[test]
    fn a_blocked_note_lists_each_approach_once_with_the_error_it_hit() {
        let build = "check `cargo build` failed (exit 101); last output:\n   Compiling kern\nerror[E0425]: cannot find value `lexer`\nerror: could not compile `kern`";
        let test = "check `cargo build` failed (exit 101); last output:\ntest parse ... FAILED\ntest result: FAILED. 0 passed; 1 failed";
        let with = |note: &str, approach: &str| format!("{note}\nApproach: {approach}");
        let cases: &[(Vec<String>, &str)] = &[
            (vec![], ""),
            (
                vec![
                    with(build, "Wrote it."),
                    with(build, "wrote it."),
                    with(build, "Split it."),
                ],
                "Tried against check `cargo build` failed (exit 101): error[E0425]: cannot find value `lexer`: 1) Wrote it. (2 attempts); 2) Split it.",
            ),
            (
                vec![with(build, "Wrote it."), with(test, "Fixed the build.")],
                "Tried: 1) Wrote it. → check `cargo build` failed (exit 101): error[E0425]: cannot find value `lexer`; 2) Fixed the build. → check `cargo build` failed (exit 101): test parse ... FAILED",
            ),
            (
                vec![
                    "could not find the lexer".into(),
                    "review rejected the change: no test".into(),
                ],
                "Tried: 1) could not find the lexer; 2) review rejected the change: no test",
            ),
            (
                vec![with(
                    "check `true` failed (exit 1); last output:\n(no output)",
                    "Wrote it.",
                )],
                "Tried against check `true` failed (exit 1): 1) Wrote it.",
            ),
            (
                vec![with(
                    "the `pre-commit` hook refused the commit:\nblack....Failed\n- files were modified",
                    "Ran black.",
                )],
                "Tried against the `pre-commit` hook refused the commit: black....Failed: 1) Ran black.",
            ),
        ];
        for (notes, want) in cases {
            assert_eq!(tried_and_hit(notes), *want, "{notes:?}");
        }
    }
}
