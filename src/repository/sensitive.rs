//! Which files kern must never commit: judged by name and by content.
//!
//! The one decision a reader must know: a file is judged on what git would store — its name
//! (case-insensitively, so `ID_RSA` and `Key.PEM` count) and the first [`SCAN_LIMIT`] bytes of
//! its content. A secret placed beyond the first MiB of a larger file is not found; a scan of
//! whole multi-gigabyte files on every commit would cost more than it protects, and secrets
//! live in small files. Patterns are byte regexes with ASCII classes only, so binary files are
//! scanned too and no Unicode tables are needed.

use std::fs::File;
use std::io::Read;
use std::path::Path;
use std::sync::OnceLock;

use regex::bytes::Regex;

/// How many bytes of a file the content scan reads (1 MiB).
pub const SCAN_LIMIT: usize = 1 << 20;

/// Why a file is sensitive; [`std::fmt::Display`] gives the reason kern prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finding {
    /// The file name matches a pattern (the pattern is given, e.g. `*.pem`).
    Name(&'static str),
    /// The content holds a secret of this kind (e.g. `a GitHub token`).
    Content(&'static str),
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Finding::Name(pattern) => write!(f, "sensitive file name ({pattern})"),
            Finding::Content(PRIVATE_KEY) => write!(f, "holds a private key block"),
            Finding::Content(kind) => write!(f, "looks like {kind}"),
        }
    }
}

const PRIVATE_KEY: &str = "a private key block";

/// A name rule: how the lower-cased file name is matched.
enum NameRule {
    Exact(&'static str),
    Prefix(&'static str),
    Suffix(&'static str),
    PrefixSuffix(&'static str, &'static str),
}

/// The name rules, each with the pattern shown to the person.
const NAME_RULES: &[(NameRule, &str)] = &[
    (NameRule::Exact(".env"), ".env"),
    (NameRule::Prefix(".env."), ".env.*"),
    (NameRule::Suffix(".pem"), "*.pem"),
    (NameRule::Suffix(".key"), "*.key"),
    (NameRule::Prefix("id_rsa"), "id_rsa*"),
    (NameRule::Prefix("id_ed25519"), "id_ed25519*"),
    (NameRule::Suffix(".p12"), "*.p12"),
    (NameRule::Suffix(".pfx"), "*.pfx"),
    (NameRule::Exact(".npmrc"), ".npmrc"),
    (NameRule::Exact(".pypirc"), ".pypirc"),
    (NameRule::Exact(".netrc"), ".netrc"),
    (
        NameRule::PrefixSuffix("credentials", ".json"),
        "credentials*.json",
    ),
];

/// Example files meant to be committed: `.env.example` documents the variables, holds no values.
const NAME_EXCEPTIONS: &[&str] = &[".env.example", ".env.sample", ".env.template"];

/// Judges a path (relative or absolute; only its last component counts) by name.
pub fn sensitive_name(path: &Path) -> Option<Finding> {
    let name = path.file_name()?.to_string_lossy().to_ascii_lowercase();
    if NAME_EXCEPTIONS.contains(&name.as_str()) {
        return None;
    }
    NAME_RULES.iter().find_map(|(rule, shown)| {
        let hit = match rule {
            NameRule::Exact(s) => name == *s,
            NameRule::Prefix(p) => name.starts_with(p),
            NameRule::Suffix(s) => name.ends_with(s) && name.len() > s.len(),
            NameRule::PrefixSuffix(p, s) => {
                name.starts_with(p) && name.ends_with(s) && name.len() >= p.len() + s.len()
            }
        };
        hit.then_some(Finding::Name(shown))
    })
}

/// The content patterns, in the order they are tried (Anthropic before the wider OpenAI one).
fn content_rules() -> &'static [(Regex, &'static str)] {
    static RULES: OnceLock<Vec<(Regex, &'static str)>> = OnceLock::new();
    RULES.get_or_init(|| {
        let table: [(&str, &'static str); 8] = [
            (
                r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----",
                PRIVATE_KEY,
            ),
            (r"\bAKIA[0-9A-Z]{16}\b", "an AWS access key"),
            (r"\bgh[pousr]_[A-Za-z0-9]{36}\b", "a GitHub token"),
            (r"\bgithub_pat_[A-Za-z0-9_]{22,}", "a GitHub token"),
            (r"\bsk-ant-[A-Za-z0-9_-]{20,}", "an Anthropic API key"),
            // Project, service-account and admin keys carry `-` and `_`; the legacy form is
            // plain alphanumerics. Requiring length keeps CSS-like names (`sk-spinner-…`) out.
            (
                r"\bsk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{40,}",
                "an OpenAI API key",
            ),
            (r"\bsk-[A-Za-z0-9]{32,}\b", "an OpenAI API key"),
            (r"\bxox[baprs]-[A-Za-z0-9-]{10,}", "a Slack token"),
        ];
        table
            .into_iter()
            .filter_map(|(pattern, kind)| {
                // The patterns are constants covered by the unit tests; a failure to compile
                // one would drop only that rule, never panic at run time.
                Regex::new(&format!("(?-u){pattern}"))
                    .ok()
                    .map(|re| (re, kind))
            })
            .collect()
    })
}

/// Judges bytes by content (all of `bytes` is scanned; callers cap it at [`SCAN_LIMIT`]).
pub fn sensitive_content(bytes: &[u8]) -> Option<Finding> {
    content_rules()
        .iter()
        .find(|(re, _)| re.is_match(bytes))
        .map(|(_, kind)| Finding::Content(kind))
}

/// Judges a file in the work tree: by name first, then by its first [`SCAN_LIMIT`] bytes.
/// A symlink is judged by name only (its content is a path, not a secret); an unreadable
/// file by name only too (it cannot be staged either).
pub fn check_file(path: &Path) -> Option<Finding> {
    if let Some(finding) = sensitive_name(path) {
        return Some(finding);
    }
    let meta = std::fs::symlink_metadata(path).ok()?;
    if !meta.is_file() {
        return None;
    }
    let mut head = Vec::with_capacity((meta.len() as usize).min(SCAN_LIMIT));
    let file = File::open(path).ok()?;
    file.take(SCAN_LIMIT as u64).read_to_end(&mut head).ok()?;
    sensitive_content(&head)
}

/// Judges a blob already in git's object store (what is staged) the same way.
pub fn check_blob(path: &Path, content: &[u8]) -> Option<Finding> {
    sensitive_name(path).or_else(|| sensitive_content(&content[..content.len().min(SCAN_LIMIT)]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_design_list() {
        let cases: &[(&str, Option<&str>)] = &[
            (".env", Some(".env")),
            ("config/.env", Some(".env")),
            (".env.local", Some(".env.*")),
            (".env.production", Some(".env.*")),
            (".env.example", None),
            (".env.sample", None),
            (".env.template", None),
            ("server.pem", Some("*.pem")),
            ("Key.PEM", Some("*.pem")),
            ("tls.key", Some("*.key")),
            ("id_rsa", Some("id_rsa*")),
            ("id_rsa.pub", Some("id_rsa*")),
            ("ID_RSA", Some("id_rsa*")),
            ("id_ed25519", Some("id_ed25519*")),
            ("cert.p12", Some("*.p12")),
            ("cert.pfx", Some("*.pfx")),
            (".npmrc", Some(".npmrc")),
            (".pypirc", Some(".pypirc")),
            (".netrc", Some(".netrc")),
            ("credentials.json", Some("credentials*.json")),
            ("credentials-prod.json", Some("credentials*.json")),
            ("src/main.rs", None),
            ("environment.md", None),
            (".envrc", None),
            ("keyboard.rs", None),
            ("monkey.json", None),
            ("credentials.yaml", None),
            (".key", None),
        ];
        for (path, want) in cases {
            let got = sensitive_name(Path::new(path));
            assert_eq!(got, want.map(Finding::Name), "{path}");
        }
    }

    #[test]
    fn contents_with_secrets_are_found_and_ordinary_text_is_not() {
        let repeat = |c: &str, n: usize| c.repeat(n);
        let cases: Vec<(String, Option<&str>)> = vec![
            (
                format!("x\n-----BEGIN {}-----\nMII\n", "RSA PRIVATE KEY"),
                Some(PRIVATE_KEY),
            ),
            (
                format!("-----BEGIN {}-----", "OPENSSH PRIVATE KEY"),
                Some(PRIVATE_KEY),
            ),
            (
                format!("-----BEGIN {}-----", "PRIVATE KEY"),
                Some(PRIVATE_KEY),
            ),
            (
                format!("-----BEGIN {}-----", "PGP PRIVATE KEY BLOCK"),
                Some(PRIVATE_KEY),
            ),
            ("-----BEGIN PUBLIC KEY-----".to_string(), None),
            (
                format!("aws = \"AKIA{}\"", repeat("Q", 16)),
                Some("an AWS access key"),
            ),
            (format!("AKIA{}", repeat("Q", 15)), None),
            (
                format!("token: ghp_{}", repeat("a", 36)),
                Some("a GitHub token"),
            ),
            (format!("gho_{}", repeat("B", 36)), Some("a GitHub token")),
            (format!("ghs_{}", repeat("1", 36)), Some("a GitHub token")),
            (format!("ghu_{}", repeat("c", 36)), Some("a GitHub token")),
            (format!("ghr_{}", repeat("d", 36)), Some("a GitHub token")),
            (format!("ghp_{}", repeat("a", 20)), None),
            (
                format!("github_pat_{}", repeat("A1_", 30)),
                Some("a GitHub token"),
            ),
            (
                format!("key=sk-ant-api03-{}", repeat("xY", 40)),
                Some("an Anthropic API key"),
            ),
            (
                format!("sk-proj-{}", repeat("aB_-", 30)),
                Some("an OpenAI API key"),
            ),
            (
                format!("sk-{}", repeat("a1", 24)),
                Some("an OpenAI API key"),
            ),
            (
                "class=\"sk-loading-spinner-container-wrapper\"".into(),
                None,
            ),
            ("task-abcdefghijklmnopqrstuvwxyz0123456789".into(), None),
            (format!("xoxb-{}", repeat("12-", 10)), Some("a Slack token")),
            ("plain source code\nfn main() {}\n".into(), None),
        ];
        for (text, want) in cases {
            assert_eq!(
                sensitive_content(text.as_bytes()),
                want.map(Finding::Content),
                "{text}"
            );
        }
    }

    #[test]
    fn reasons_read_as_sentences() {
        assert_eq!(
            Finding::Name(".env").to_string(),
            "sensitive file name (.env)"
        );
        assert_eq!(
            Finding::Content(PRIVATE_KEY).to_string(),
            "holds a private key block"
        );
        assert_eq!(
            Finding::Content("a GitHub token").to_string(),
            "looks like a GitHub token"
        );
    }

    #[test]
    fn every_content_rule_compiles() {
        assert_eq!(content_rules().len(), 8);
    }

    #[test]
    fn a_file_is_scanned_up_to_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let early = dir.path().join("early.txt");
        let mut bytes = format!("AKIA{}\n", "Z".repeat(16)).into_bytes();
        bytes.resize(SCAN_LIMIT + 10, b' ');
        std::fs::write(&early, &bytes).unwrap();
        assert_eq!(
            check_file(&early),
            Some(Finding::Content("an AWS access key"))
        );
        let late = dir.path().join("late.txt");
        let mut bytes = vec![b' '; SCAN_LIMIT];
        bytes.extend_from_slice(format!("AKIA{}\n", "Z".repeat(16)).as_bytes());
        std::fs::write(&late, &bytes).unwrap();
        assert_eq!(check_file(&late), None, "documented: only the first MiB");
        assert_eq!(
            check_blob(Path::new("a/.netrc"), b""),
            Some(Finding::Name(".netrc"))
        );
    }
}
