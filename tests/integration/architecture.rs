//! The floors of `src/` point one way (`docs/architecture.md`): every `use crate::…`, inline
//! `crate::…` path and `super::` reaching out of a top-level folder in production code (outside
//! `#[cfg(test)]` modules) names a top-level module on a lower floor than its own. The one
//! exception is `error → spec` (the error enum carries SPEC.md diagnostics).
//!
//! And the tests run kern through one door: outside `tests/integration/support/`, no file names
//! the variable Cargo gives the built binary's path, calls assert_cmd's `cargo_bin` or hands
//! kern's path to a `Command`. A run under test goes through `KernRun` (`Project::run`,
//! `support::kern_in`); the binary as a program (an agent wrapper, a shell recipe) comes from
//! `support::kern_bin()`. The scan reads comments too, so this file names none of them whole.

use std::path::Path;

/// The floors, top to bottom; a module uses only modules on floors below its own.
const FLOORS: &[&[&str]] = &[
    &["command"],
    &["pipeline"],
    &["workspace"],
    &["settings"],
    &["cli"],
    &["reporter"],
    &[
        "prompt",
        "repository",
        "state",
        "learnings",
        "retry",
        "scripted_agent",
        "tracker",
    ],
    &["agent", "event"],
    &["stage", "supervisor"],
    &["sandbox"],
    &["spec"],
    &["atomic_file"],
    &["error"],
    &["text", "timestamp", "private_file", "oid"],
];

/// Uses that point up, allowed by name (each is a two-way pair too).
const EXCEPTIONS: &[(&str, &str)] = &[("error", "spec")];

/// One use of another top-level module: `(from, to, "file:line")`.
type Use = (String, String, String);

/// `text` with comments and string and char literals blanked (newlines kept, so offsets and
/// line numbers stay), then every `#[cfg(test)]` module blanked.
fn production(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    let mut i = 0;
    while i < chars.len() {
        let rest = |k: usize| chars.get(i + k).copied().unwrap_or(' ');
        let end = if chars[i] == '/' && rest(1) == '/' {
            (i..chars.len())
                .find(|&j| chars[j] == '\n')
                .unwrap_or(chars.len())
        } else if chars[i] == '/' && rest(1) == '*' {
            let (mut j, mut depth) = (i + 2, 1);
            while j < chars.len() && depth > 0 {
                match (chars[j], chars.get(j + 1)) {
                    ('/', Some('*')) => (depth, j) = (depth + 1, j + 1),
                    ('*', Some('/')) => (depth, j) = (depth - 1, j + 1),
                    _ => {}
                }
                j += 1;
            }
            j
        } else if chars[i] == 'r'
            && (rest(1) == '"' || rest(1) == '#')
            && !ident(rest_before(&chars, i))
        {
            let hashes = (1..).take_while(|&k| rest(k) == '#').count();
            if rest(1 + hashes) != '"' {
                out.push(chars[i]);
                i += 1;
                continue;
            }
            let close: Vec<char> = std::iter::once('"')
                .chain("#".repeat(hashes).chars())
                .collect();
            let start = i + 2 + hashes;
            (start..chars.len())
                .find(|&j| chars[j..].starts_with(&close))
                .map_or(chars.len(), |j| j + close.len())
        } else if chars[i] == '"' {
            let mut j = i + 1;
            while j < chars.len() && chars[j] != '"' {
                j += if chars[j] == '\\' { 2 } else { 1 };
            }
            j + 1
        } else if chars[i] == '\'' && (rest(1) == '\\' || rest(2) == '\'') {
            let mut j = i + 1;
            while j < chars.len() && chars[j] != '\'' {
                j += if chars[j] == '\\' { 2 } else { 1 };
            }
            j + 1
        } else {
            out.push(chars[i]);
            i += 1;
            continue;
        };
        let end = end.min(chars.len());
        out.extend(chars[i..end].iter().map(|&c| blank(c)));
        i = end;
    }
    while let Some(at) = out.find("#[cfg(test)]") {
        let open = at + out[at..].find('{').unwrap_or(out.len() - at);
        let item: Vec<&str> = out[at + "#[cfg(test)]".len()..]
            .split_whitespace()
            .take(2)
            .collect();
        let is_mod = item.first() == Some(&"mod")
            || (item.first().is_some_and(|w| w.starts_with("pub")) && item.get(1) == Some(&"mod"));
        let close = if is_mod {
            matching(&out, open)
        } else {
            at + "#[cfg(test)]".len()
        };
        let blanked: String = out[at..close].chars().map(blank).collect();
        out.replace_range(at..close, &blanked);
    }
    out
}

fn rest_before(chars: &[char], i: usize) -> char {
    if i == 0 { ' ' } else { chars[i - 1] }
}

fn ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The byte after the `}` that closes the `{` at `open`.
fn matching(text: &str, open: usize) -> usize {
    closing(text, open, ('{', '}')).map_or(text.len(), |at| at + 1)
}

/// The offset of the `close` that closes the `open` bracket at `at`, when one does.
fn closing(text: &str, at: usize, (open, close): (char, char)) -> Option<usize> {
    let mut depth = 0;
    for (k, c) in text[at..].char_indices() {
        if c == open {
            depth += 1;
        } else if c == close {
            depth -= 1;
        }
        if depth == 0 {
            return Some(at + k);
        }
    }
    None
}

/// The module path of a file under `src/`: `pipeline/stage/mod.rs` → `[pipeline, stage]`.
fn module_path(relative: &str) -> Vec<String> {
    let mut parts: Vec<String> = relative
        .trim_end_matches(".rs")
        .split('/')
        .map(String::from)
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts
}

/// The first identifier of `text`.
fn first_ident(text: &str) -> String {
    text.trim_start()
        .chars()
        .take_while(|&c| ident(c))
        .collect()
}

/// Every use of another top-level module in one file's production code.
fn uses(relative: &str, text: &str) -> Vec<Use> {
    let path = module_path(relative);
    let from = path[0].clone();
    let code = production(text);
    let line = |at: usize| code[..at].matches('\n').count() + 1;
    let mut found = Vec::new();
    let mut add = |to: String, at: usize| {
        if !to.is_empty() && to != from && !["self", "super", "crate"].contains(&to.as_str()) {
            found.push((from.clone(), to, format!("src/{relative}:{}", line(at))));
        }
    };
    for (at, _) in code.match_indices("crate::") {
        if code[..at].chars().next_back().is_some_and(ident) {
            continue;
        }
        let after = at + "crate::".len();
        if code[after..].starts_with('{') {
            let group = &code[after + 1..matching(&code, after) - 1];
            let mut depth = 0;
            let mut start = 0;
            for (k, c) in group
                .char_indices()
                .chain(std::iter::once((group.len(), ',')))
            {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        add(first_ident(&group[start..k]), at);
                        start = k + 1;
                    }
                    _ => {}
                }
            }
        } else {
            add(first_ident(&code[after..]), at);
        }
    }
    for (at, _) in code.match_indices("super::") {
        if code[..at]
            .chars()
            .next_back()
            .is_some_and(|c| ident(c) || c == ':')
        {
            continue;
        }
        let mut rest = &code[at..];
        let mut ups = 0;
        while let Some(r) = rest.strip_prefix("super::") {
            (rest, ups) = (r, ups + 1);
        }
        if ups >= path.len() {
            add(first_ident(rest), at);
        }
    }
    found
}

/// What breaks the floors among `uses`: an import up (or sideways) a floor, a module on no
/// floor, a folder pair that uses each other both ways.
fn violations(uses: &[Use]) -> Vec<String> {
    let floor = |m: &str| FLOORS.iter().position(|f| f.contains(&m));
    let allowed = |a: &str, b: &str| EXCEPTIONS.contains(&(a, b)) || EXCEPTIONS.contains(&(b, a));
    let mut out = Vec::new();
    for (from, to, at) in uses {
        match (floor(from), floor(to)) {
            (None, _) => out.push(format!(
                "{at}: `{from}` is on no floor: add it to FLOORS and docs/architecture.md"
            )),
            (_, None) => out.push(format!(
                "{at}: `{to}` is on no floor: add it to FLOORS and docs/architecture.md"
            )),
            (Some(a), Some(b)) if b <= a && !EXCEPTIONS.contains(&(from.as_str(), to.as_str())) => {
                out.push(format!("{at}: `{from}` (floor {a}) uses `{to}` (floor {b}): imports point down the floors"));
            }
            _ => {}
        }
        // A two-way pair is named once, at one use each way.
        let back = uses.iter().find(|(f, t, _)| f == to && t == from);
        if let Some((_, _, there)) = back.filter(|_| from < to && !allowed(from, to)) {
            out.push(format!(
                "{at} and {there}: `{from}` and `{to}` use each other: a folder pair is one-way"
            ));
        }
    }
    out
}

/// Every `.rs` file under `src/` but the crate root (`lib.rs`, `main.rs`): (relative path, text).
fn sources() -> Vec<(String, String)> {
    rs_files(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &|relative| relative != "lib.rs" && relative != "main.rs",
    )
}

/// Every `.rs` file under `root` whose path relative to it `keep` accepts: (relative path,
/// text), sorted.
fn rs_files(root: &Path, keep: &dyn Fn(&str) -> bool) -> Vec<(String, String)> {
    let mut stack = vec![root.to_path_buf()];
    let mut files = Vec::new();
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let relative = path
                    .strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                if keep(&relative) {
                    files.push((relative, std::fs::read_to_string(&path).unwrap()));
                }
            }
        }
    }
    files.sort();
    files
}

#[test]
fn every_import_points_down_a_floor() {
    let all: Vec<Use> = sources().iter().flat_map(|(p, t)| uses(p, t)).collect();
    assert!(all.len() > 100, "the scan found only {} uses", all.len());
    let broken = violations(&all);
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

#[test]
fn the_floors_are_the_ones_the_docs_draw() {
    let line = FLOORS
        .iter()
        .map(|f| match f {
            [one] => (*one).to_string(),
            many => format!("{{{}}}", many.join(", ")),
        })
        .collect::<Vec<_>>()
        .join(" → ");
    let doc = include_str!("../../docs/architecture.md");
    assert!(
        doc.contains(&line),
        "docs/architecture.md does not draw {line}"
    );
}

#[test]
fn a_planted_upward_import_fails_with_its_file_and_line() {
    let spec = "//! `crate::pipeline` in a comment is no use.\nuse crate::error::Result;\nuse crate::{atomic_file, pipeline::Run};\n#[cfg(test)]\nmod tests {\n    use crate::command::x;\n}\n";
    let found = uses("spec/plant.rs", spec);
    assert_eq!(
        found
            .iter()
            .map(|(_, to, at)| format!("{to} {at}"))
            .collect::<Vec<_>>(),
        [
            "error src/spec/plant.rs:2",
            "atomic_file src/spec/plant.rs:3",
            "pipeline src/spec/plant.rs:3"
        ]
    );
    assert_eq!(
        violations(&found),
        [
            "src/spec/plant.rs:3: `spec` (floor 10) uses `pipeline` (floor 1): imports point down the floors"
        ]
    );
    let reach = uses(
        "stage/mod.rs",
        "fn f() { super::state::x(); let s = \"crate::agent\"; }\n",
    );
    assert_eq!(
        violations(&reach),
        [
            "src/stage/mod.rs:1: `stage` (floor 8) uses `state` (floor 6): imports point down the floors"
        ]
    );
    let pair = [
        ("agent".into(), "stage".into(), "src/agent/a.rs:1".into()),
        ("stage".into(), "agent".into(), "src/stage/b.rs:2".into()),
    ];
    let both_ways = "src/agent/a.rs:1 and src/stage/b.rs:2: `agent` and `stage` use each other: a folder pair is one-way";
    assert!(
        violations(&pair).iter().any(|v| v == both_ways),
        "{:?}",
        violations(&pair)
    );
}

/// The files among `sources` whose production code writes a stage record: a `.write(` whose
/// argument names `stage_record(`, with the line of each.
fn stage_record_writers(sources: &[(String, String)]) -> Vec<String> {
    let mut out = Vec::new();
    for (path, text) in sources {
        let code = production(text);
        let flat: String = code.chars().filter(|c| !c.is_whitespace()).collect();
        let mut from = 0;
        while let Some(at) = flat[from..].find(".write(&") {
            let start = from + at;
            let call = &flat[start..(start + 120).min(flat.len())];
            let argument = &call[..call.find(')').map_or(call.len(), |c| c + 1)];
            if argument.contains("stage_record(") {
                out.push(format!("src/{path}"));
            }
            from = start + 1;
        }
        // StageRecord's own writer, whatever path it is given.
        if flat.contains(".write_record(") && path != "stage/record.rs" {
            out.push(format!("src/{path}"));
        }
    }
    out.sort();
    out.dedup();
    out
}

/// A stage's record has one writer, the stage runner (HOUSE-REVIEW 6.3): each try's record is
/// written once, the stage's last after the audit added what it found.
#[test]
fn only_the_stage_runner_writes_a_stage_record() {
    let writers = stage_record_writers(&sources());
    assert_eq!(
        writers,
        [
            "src/pipeline/stage/attempt.rs",
            "src/pipeline/stage/runner.rs"
        ],
        "stageN.json is written only by the stage runner (StageRun::write, Attempt::finish)"
    );
    let planted = [
        (
            "pipeline/stage/mod.rs".to_string(),
            "fn f() { run.record\n  .write(&self.ws.state_dir.stage_record(stage))?; }\n// x.write(&sd.stage_record(s))\n".to_string(),
        ),
        (
            "pipeline/verify.rs".to_string(),
            "fn g() { let path = sd.stage_record(s);\n record.write_record(&path)?; }\n".to_string(),
        ),
    ];
    assert_eq!(
        stage_record_writers(&planted),
        ["src/pipeline/stage/mod.rs", "src/pipeline/verify.rs"]
    );
}

/// The side doors, spelled in pieces so that this file holds none of them.
const BIN_ENV: &str = concat!("CARGO_BIN_", "EXE_kern");
const CARGO_BIN: &str = concat!("cargo_", "bin(");
const COMMAND_NEW: &str = concat!("Command::", "new(");

/// Every place in the test file `relative` (under `tests/integration/`) that starts kern
/// another way than through `support/`, as `file:line: what`. The raw text is scanned, strings
/// and comments too: the binary's variable is itself named in a string (`env!`).
fn side_doors(relative: &str, text: &str) -> Vec<String> {
    let at = |offset: usize| {
        format!(
            "tests/integration/{relative}:{}",
            text[..offset].matches('\n').count() + 1
        )
    };
    let mut found = Vec::new();
    for (offset, _) in text.match_indices(BIN_ENV) {
        found.push((
            offset,
            format!(
                "{}: names `{BIN_ENV}`: run kern through `Project::run` or `support::kern_in`; \
                 as a program, take `support::kern_bin()`",
                at(offset)
            ),
        ));
    }
    for (offset, _) in text.match_indices(CARGO_BIN) {
        found.push((
            offset,
            format!(
                "{}: `{CARGO_BIN}` starts kern outside the builder: run it through \
                 `Project::run` or `support::kern_in`",
                at(offset)
            ),
        ));
    }
    for (offset, _) in text.match_indices(COMMAND_NEW) {
        let open = offset + COMMAND_NEW.len() - 1;
        let argument = &text[open + 1..closing_paren(text, open)];
        if argument.contains("kern") || argument.contains(BIN_ENV) {
            let argument = argument.split_whitespace().collect::<Vec<_>>().join(" ");
            found.push((
                offset,
                format!(
                    "{}: `{COMMAND_NEW}{argument})` starts kern outside the builder: run it \
                     through `Project::run` or `support::kern_in`",
                    at(offset)
                ),
            ));
        }
    }
    found.sort();
    found.into_iter().map(|(_, what)| what).collect()
}

/// The offset of the `)` that closes the `(` at `open` (the end of `text` when none does).
fn closing_paren(text: &str, open: usize) -> usize {
    closing(text, open, ('(', ')')).unwrap_or(text.len())
}

/// Every `.rs` file under `tests/integration/` but those in `support/`: (relative path, text).
fn test_sources() -> Vec<(String, String)> {
    rs_files(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/integration"),
        &|relative| !relative.starts_with("support/"),
    )
}

#[test]
fn tests_run_kern_only_through_the_support_door() {
    let files = test_sources();
    let names: Vec<&str> = files.iter().map(|(name, _)| name.as_str()).collect();
    assert!(
        names.contains(&"cli.rs") && names.contains(&"readme.rs") && !names.contains(&"mod.rs"),
        "the scan read {names:?}"
    );
    let found: Vec<String> = files
        .iter()
        .flat_map(|(name, text)| side_doors(name, text))
        .collect();
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn a_planted_side_door_fails_with_its_file_and_line() {
    let planted = format!(
        "fn f() {{\n    let a = env!(\"{BIN_ENV}\");\n    let b = assert_cmd::Command::{CARGO_BIN}\"kern\");\n    let c = std::process::{COMMAND_NEW}\n        kern_bin(),\n    );\n    let d = {COMMAND_NEW}\"sh\").arg(\"kern status\");\n    let e = Invocation {{ program: kern_bin() }};\n    let f = {COMMAND_NEW}p.path().join(\"x\"));\n}}\n"
    );
    let found = side_doors("plant.rs", &planted);
    let bin_env = format!(
        "tests/integration/plant.rs:2: names `{BIN_ENV}`: run kern through `Project::run` or \
         `support::kern_in`; as a program, take `support::kern_bin()`"
    );
    let cargo_bin = format!(
        "tests/integration/plant.rs:3: `{CARGO_BIN}` starts kern outside the builder: run it \
         through `Project::run` or `support::kern_in`"
    );
    let command_new = format!(
        "tests/integration/plant.rs:4: `{COMMAND_NEW}kern_bin(),)` starts kern outside the \
         builder: run it through `Project::run` or `support::kern_in`"
    );
    assert_eq!(found, [bin_env, cargo_bin, command_new]);
    assert_eq!(
        side_doors("clean.rs", "let d = p.run(&[\"status\"]).expect(0);\n"),
        Vec::<String>::new()
    );
}

/// The module paths a file's production code names, resolved to absolute paths from the
/// crate root: `crate::a::b`, `super::c` (from the file's own module), and the members of a
/// `{…}` group after either (`use super::{c, d::e}`).
fn named_paths(relative: &str, text: &str) -> Vec<(Vec<String>, usize)> {
    let own = module_path(relative);
    let code = production(text);
    let line = |at: usize| code[..at].matches('\n').count() + 1;
    let mut found = Vec::new();
    let idents = |s: &str| -> Vec<String> {
        s.split("::")
            .map(first_ident)
            .take_while(|p| !p.is_empty())
            .collect()
    };
    for prefix in ["crate::", "super::"] {
        for (at, _) in code.match_indices(prefix) {
            if code[..at]
                .chars()
                .next_back()
                .is_some_and(|c| ident(c) || c == ':')
            {
                continue;
            }
            let (mut base, mut rest) = (Vec::new(), &code[at..]);
            if let Some(r) = rest.strip_prefix("crate::") {
                rest = r;
            } else {
                base.clone_from(&own);
                while let Some(r) = rest.strip_prefix("super::") {
                    base.pop();
                    rest = r;
                }
            }
            // The plain path up to a group, then each member of the group.
            let head: String = rest.chars().take_while(|&c| ident(c) || c == ':').collect();
            let mut path = base.clone();
            path.extend(idents(&head));
            let after = &rest[head.len()..];
            if (head.is_empty() || head.ends_with("::")) && after.starts_with('{') {
                let open = code.len() - after.len();
                let group = &code[open + 1..matching(&code, open) - 1];
                for member in group.split(',') {
                    let mut p = path.clone();
                    p.extend(idents(member.trim()));
                    found.push((p, line(at)));
                }
            } else {
                found.push((path, line(at)));
            }
        }
    }
    found
}

/// The rings among the rooms of `folder` (its files and sub-folders, the folder's own `mod.rs`
/// left out: a parent and its child may use each other), each as its rooms and one use per
/// arrow.
fn room_rings(folder: &str, files: &[(String, String)]) -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("src")
        .join(folder);
    let room_of = |path: &[String]| -> Option<String> {
        let name = path.get(1)?;
        let is_room = root.join(format!("{name}.rs")).exists() || root.join(name).is_dir();
        (path[0] == folder && is_room).then(|| name.clone())
    };
    let mut arrows = std::collections::BTreeMap::<(String, String), String>::new();
    for (relative, text) in files {
        let Some(from) = room_of(&module_path(relative)) else {
            continue;
        };
        for (path, line) in named_paths(relative, text) {
            if let Some(to) = room_of(&path).filter(|to| *to != from) {
                arrows
                    .entry((from.clone(), to))
                    .or_insert_with(|| format!("src/{relative}:{line}"));
            }
        }
    }
    // A ring is a room that reaches itself again.
    let reach = |from: &str| {
        let mut seen = std::collections::BTreeSet::new();
        let mut stack = vec![from.to_string()];
        while let Some(r) = stack.pop() {
            for (a, b) in arrows.keys() {
                if *a == r && seen.insert(b.clone()) {
                    stack.push(b.clone());
                }
            }
        }
        seen
    };
    let mut rings = Vec::new();
    let rooms: std::collections::BTreeSet<&String> = arrows.keys().map(|(a, _)| a).collect();
    for room in rooms {
        let ahead = reach(room);
        if ahead.contains(room.as_str()) {
            let ring: Vec<String> = arrows
                .iter()
                .filter(|((a, b), _)| *a == *room && reach(b).contains(room.as_str()))
                .map(|((a, b), at)| format!("{a} → {b} ({at})"))
                .collect();
            rings.push(format!("{folder}/: {}", ring.join(", ")));
        }
    }
    rings
}

#[test]
fn no_room_of_a_folder_uses_a_sibling_that_uses_it_back() {
    let all = sources();
    for folder in [
        "pipeline",
        "spec",
        "agent",
        "stage",
        "state",
        "reporter",
        "repository",
        "command",
        "supervisor",
        "prompt",
        "event",
    ] {
        let files: Vec<(String, String)> = all
            .iter()
            .filter(|(p, _)| p.starts_with(&format!("{folder}/")))
            .cloned()
            .collect();
        let rings = room_rings(folder, &files);
        assert!(rings.is_empty(), "rings among rooms:\n{}", rings.join("\n"));
    }
}

#[test]
fn a_planted_ring_between_two_rooms_is_found() {
    let files = vec![
        (
            "spec/edit.rs".to_string(),
            "use super::verify::splice;\n".to_string(),
        ),
        (
            "spec/verify.rs".to_string(),
            "use super::{document::Document, edit::Plan};\n".to_string(),
        ),
        (
            "spec/mod.rs".to_string(),
            "use crate::spec::edit::apply;\n".to_string(),
        ),
    ];
    let rings = room_rings("spec", &files);
    assert_eq!(
        rings,
        [
            "spec/: edit → verify (src/spec/edit.rs:1)",
            "spec/: verify → edit (src/spec/verify.rs:1)"
        ]
    );
}
