//! The fence on macOS: a Seatbelt profile (the `sandbox-exec` language) with the same rules as
//! the Linux fence — writes only in the writable paths and `.git` read-only, the hidden paths
//! unreadable, no network but kern's proxy on loopback, signals only inside the fenced tree.
//!
//! The one decision a reader must know: the profile allows by default and denies by rule, the
//! more specific rule last (Seatbelt lets the last matching rule decide), so tools keep the
//! system services they need (Mach lookups, sysctl reads) that a deny-by-default profile would
//! have to list one by one. The profile text is built by a pure function and tested on Linux;
//! running it (`sandbox-exec -p`) is macOS only and untested by kern's CI, which has no macOS
//! (docs/safety.md says so). Seatbelt reports its denials to the system log, not to kern:
//! on macOS the record names only the denied connections (the proxy's).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::Fence;
use super::Network;

/// `text` as an SBPL string literal.
#[cfg_attr(not(target_os = "macos"), allow(dead_code))]
fn quoted(path: &Path) -> String {
    let text = path.to_string_lossy();
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

/// The Seatbelt profile of `fence`, with `tmp` (the session's TMPDIR) writable and, for a
/// listed network, kern's proxy at `proxy_port` on loopback the only address it may reach.
/// Paths are used as given: the caller passes them resolved (`/private/tmp`, not `/tmp`).
/// Built and tested everywhere; used on macOS.
#[cfg_attr(not(target_os = "macos"), allow(dead_code))]
pub(crate) fn profile(fence: &Fence, tmp: &Path, proxy_port: Option<u16>) -> String {
    let mut out = String::from("(version 1)\n(allow default)\n");
    let list = |out: &mut String, rule: &str, op: &str, paths: &[PathBuf], how: &str| {
        if paths.is_empty() {
            return;
        }
        let _ = write!(out, "({rule} {op}");
        for p in paths {
            let _ = write!(out, "\n  ({how} {})", quoted(p));
        }
        out.push_str(")\n");
    };
    out.push_str("(deny file-write*)\n");
    // Seatbelt has no private layer: caches are writable for real, the machine's temporary
    // folders stay read-only (the TMPDIR below is the process's own).
    let mut writable: Vec<PathBuf> = fence.writable.clone();
    writable.extend(
        fence
            .private
            .iter()
            .filter(|p| {
                !super::secrets::SYSTEM_TEMP
                    .iter()
                    .any(|t| p.as_path() == Path::new(t) || p.ends_with(t.trim_start_matches('/')))
            })
            .cloned(),
    );
    writable.push(tmp.to_path_buf());
    list(&mut out, "allow", "file-write*", &writable, "subpath");
    out.push_str(
        "(allow file-write*\n  (literal \"/dev/null\")\n  (literal \"/dev/zero\")\n  (literal \"/dev/tty\")\n  (regex #\"^/dev/fd/\")\n  (regex #\"^/dev/ttys\"))\n",
    );
    list(&mut out, "deny", "file-write*", &fence.read_only, "subpath");
    list(&mut out, "deny", "file-read*", &fence.hidden, "subpath");
    list(&mut out, "allow", "file-read*", &fence.shown, "subpath");
    match fence.network {
        Network::Open => {}
        Network::None => out.push_str("(deny network*)\n(allow network* (local unix-socket))\n"),
        Network::List => {
            out.push_str("(deny network*)\n(allow network* (local unix-socket))\n");
            if let Some(port) = proxy_port {
                let _ = writeln!(
                    out,
                    "(allow network-outbound (remote ip \"localhost:{port}\"))"
                );
            }
            for port in fence.hosts.iter().filter_map(super::HostRule::loopback) {
                let _ = writeln!(
                    out,
                    "(allow network-outbound (remote ip \"localhost:{port}\"))"
                );
            }
        }
    }
    out.push_str("(deny signal)\n(allow signal (target same-sandbox))\n");
    out
}

/// The command that runs `program args` under `profile`.
#[cfg(target_os = "macos")]
pub(crate) fn command(
    profile: &str,
    program: &Path,
    args: &[String],
) -> (PathBuf, Vec<std::ffi::OsString>) {
    let mut argv: Vec<std::ffi::OsString> = vec!["-p".into(), profile.into(), program.into()];
    argv.extend(args.iter().map(Into::into));
    (PathBuf::from("/usr/bin/sandbox-exec"), argv)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::{AgentKind, Who};

    #[test]
    fn the_profile_says_the_fence_in_seatbelt_rules() {
        let fence = Fence {
            who: Who::Agent {
                kind: AgentKind::Claude,
            },
            network: Network::List,
            writable: vec!["/Users/me/proj".into(), "/Users/me/.claude".into()],
            read_only: vec!["/Users/me/proj/.git".into()],
            private: vec![],
            temp: Vec::new(),
            hidden: vec![
                "/Users/me/.ssh".into(),
                "/Users/me/Library/Application Support/kern".into(),
            ],
            shown: vec!["/Users/me/Library/Application Support/kern/proj/main".into()],
            hosts: vec![
                "api.anthropic.com".parse().unwrap(),
                "127.0.0.1:4000".parse().unwrap(),
            ],
            pass_env: vec![],
        };
        let text = profile(
            &fence,
            Path::new("/private/tmp/kern-fence-501/s1/tmp"),
            Some(3128),
        );
        let expected = r#"(version 1)
(allow default)
(deny file-write*)
(allow file-write*
  (subpath "/Users/me/proj")
  (subpath "/Users/me/.claude")
  (subpath "/private/tmp/kern-fence-501/s1/tmp"))
(allow file-write*
  (literal "/dev/null")
  (literal "/dev/zero")
  (literal "/dev/tty")
  (regex #"^/dev/fd/")
  (regex #"^/dev/ttys"))
(deny file-write*
  (subpath "/Users/me/proj/.git"))
(deny file-read*
  (subpath "/Users/me/.ssh")
  (subpath "/Users/me/Library/Application Support/kern"))
(allow file-read*
  (subpath "/Users/me/Library/Application Support/kern/proj/main"))
(deny network*)
(allow network* (local unix-socket))
(allow network-outbound (remote ip "localhost:3128"))
(allow network-outbound (remote ip "localhost:4000"))
(deny signal)
(allow signal (target same-sandbox))
"#;
        assert_eq!(text, expected);
        assert_eq!(quoted(Path::new("/a \"b\"\\c")), r#""/a \"b\"\\c""#);
    }

    #[test]
    fn a_read_only_stages_tree_is_writable_and_the_temporary_folders_read_only_on_macos() {
        // Seatbelt has no layers: the tree a Linux fence layers is writable (kern's audit
        // after the stage saves and reverts), and the machine's temporary folders stay
        // read-only but for the session's TMPDIR.
        let fence = Fence {
            who: Who::Agent {
                kind: AgentKind::Program,
            },
            network: Network::None,
            writable: vec![],
            read_only: vec!["/Users/me/proj/.git".into()],
            private: vec!["/Users/me/proj".into(), "/private/tmp".into()],
            temp: vec!["/private/tmp".into(), "/private/var/tmp".into()],
            hidden: vec![],
            shown: vec![],
            hosts: vec![],
            pass_env: vec![],
        };
        let text = profile(
            &fence,
            Path::new("/private/tmp/kern-fence-501/s1/tmp"),
            None,
        );
        let expected = r#"(version 1)
(allow default)
(deny file-write*)
(allow file-write*
  (subpath "/Users/me/proj")
  (subpath "/private/tmp/kern-fence-501/s1/tmp"))
(allow file-write*
  (literal "/dev/null")
  (literal "/dev/zero")
  (literal "/dev/tty")
  (regex #"^/dev/fd/")
  (regex #"^/dev/ttys"))
(deny file-write*
  (subpath "/Users/me/proj/.git"))
(deny network*)
(allow network* (local unix-socket))
(deny signal)
(allow signal (target same-sandbox))
"#;
        assert_eq!(text, expected);
    }
}
