//! Commit signing as git does it: `commit.gpgsign` with `gpg.format` `openpgp` or `ssh`.
//!
//! The one decision a reader must know: when signing is on, kern never makes an unsigned
//! commit. The commit is built with `commit_create_buffer`, signed by the same program git
//! would run with the same arguments (`gpg --status-fd=2 -bsau <key>`; `ssh-keygen -Y sign -n
//! git -f <key> [-U]`), stored with `commit_signed`, and only then does the branch move. A
//! format kern cannot sign with (x509) or any signing failure is an error with the fix, before
//! any agent runs when the preflight can see it, else at commit time with no commit made.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use git2::Config;

use super::Repository;
use crate::error::{Error, Result};
use crate::supervisor::probe::{self, Probe};

/// How long the preflight's key look-up may take.
const KEY_CHECK_TIMEOUT: Duration = Duration::from_secs(10);

/// How a commit is to be signed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Signer {
    /// OpenPGP through `program` (`gpg.openpgp.program`, `gpg.program`, else `gpg`) with `key`
    /// (`user.signingkey`, else the committer's `Name <email>`, as git does).
    OpenPgp {
        /// The gpg program.
        program: String,
        /// The key id, fingerprint or user id.
        key: String,
    },
    /// SSH through `program` (`gpg.ssh.program`, else `ssh-keygen`).
    Ssh {
        /// The ssh-keygen program.
        program: String,
        /// `user.signingkey`: a key file, or a literal public key (`key::…`, or `ssh-…`) whose
        /// private half is in ssh-agent.
        key: String,
    },
}

impl Signer {
    /// The signer `config` asks for; `None` when `commit.gpgsign` is off. `committer` is the
    /// `Name <email>` gpg falls back to. An x509 format, or ssh with no key, is an error.
    pub fn from_config(config: &Config, committer: &str) -> Result<Option<Signer>> {
        if !config.get_bool("commit.gpgsign").unwrap_or(false) {
            return Ok(None);
        }
        let get = |key: &str| config.get_string(key).ok().filter(|v| !v.trim().is_empty());
        let format = get("gpg.format").unwrap_or_else(|| "openpgp".into());
        match format.as_str() {
            "openpgp" => Ok(Some(Signer::OpenPgp {
                program: get("gpg.openpgp.program")
                    .or_else(|| get("gpg.program"))
                    .unwrap_or_else(|| "gpg".into()),
                key: get("user.signingkey").unwrap_or_else(|| committer.to_string()),
            })),
            "ssh" => {
                let key = get("user.signingkey").ok_or_else(|| Error::SigningFailed {
                    format: "ssh".into(),
                    message: "`user.signingkey` is not set — set it to your key file (`git config user.signingkey ~/.ssh/id_ed25519.pub`) or turn signing off (`git config commit.gpgsign false`)".into(),
                })?;
                Ok(Some(Signer::Ssh {
                    program: get("gpg.ssh.program").unwrap_or_else(|| "ssh-keygen".into()),
                    key,
                }))
            }
            other => Err(Error::SigningUnsupported {
                format: other.to_string(),
            }),
        }
    }

    /// `openpgp` or `ssh`.
    pub fn format(&self) -> &'static str {
        match self {
            Signer::OpenPgp { .. } => "openpgp",
            Signer::Ssh { .. } => "ssh",
        }
    }

    /// The key, as configured.
    pub fn key(&self) -> &str {
        match self {
            Signer::OpenPgp { key, .. } | Signer::Ssh { key, .. } => key,
        }
    }

    /// Signs `buffer` (a commit object without its signature); the armored signature.
    pub fn sign(&self, buffer: &[u8], cwd: &Path, timeout: Duration) -> Result<String> {
        let fail = |message: String| Error::SigningFailed {
            format: self.format().into(),
            message,
        };
        let io = |e: std::io::Error| fail(format!("could not prepare the signature: {e}"));
        match self {
            Signer::OpenPgp { program, key } => {
                let mut input = tempfile::tempfile().map_err(io)?;
                input.write_all(buffer).map_err(io)?;
                std::io::Seek::rewind(&mut input).map_err(io)?;
                let mut out = tempfile::tempfile().map_err(io)?;
                let mut probe = Probe::new(program, ["--status-fd=2", "-bsau", key], cwd, timeout);
                probe.stdin = Some(input);
                probe.stdout = Some(out.try_clone().map_err(io)?);
                let ran = probe::run(probe).map_err(|e| {
                    fail(format!(
                        "could not run `{program}`: {e} — install GnuPG or set `gpg.program`"
                    ))
                })?;
                let signature = probe::read_tail(&mut out, u64::MAX);
                if !ran.end.success()
                    || !ran.output.contains("[GNUPG:] SIG_CREATED ")
                    || signature.is_empty()
                {
                    return Err(fail(format!(
                        "`{program} -bsau {key}` did not sign ({}): {} — check that `gpg --list-secret-keys {key}` shows the key and that gpg-agent can use it without a prompt, or turn signing off (`git config commit.gpgsign false`)",
                        ran.end.describe(),
                        last_lines(&ran.output)
                    )));
                }
                Ok(format!("{signature}\n"))
            }
            Signer::Ssh { program, key } => {
                let dir = tempfile::tempdir().map_err(io)?;
                let (key_file, literal) = match literal_ssh_key(key) {
                    Some(literal) => {
                        let path = dir.path().join("key.pub");
                        std::fs::write(&path, format!("{literal}\n")).map_err(io)?;
                        (path, true)
                    }
                    None => (expand_home(key), false),
                };
                let buffer_file = dir.path().join("commit");
                std::fs::write(&buffer_file, buffer).map_err(io)?;
                let mut args: Vec<std::ffi::OsString> = vec![
                    "-Y".into(),
                    "sign".into(),
                    "-n".into(),
                    "git".into(),
                    "-f".into(),
                    key_file.into(),
                ];
                if literal {
                    args.push("-U".into());
                }
                args.push(buffer_file.clone().into());
                let ran = probe::run(Probe::new(program, args, cwd, timeout)).map_err(|e| {
                    fail(format!("could not run `{program}`: {e} — install OpenSSH's ssh-keygen or set `gpg.ssh.program`"))
                })?;
                let sig_file = buffer_file.with_extension("sig");
                let signature = std::fs::read_to_string(&sig_file).unwrap_or_default();
                if !ran.end.success() || signature.trim().is_empty() {
                    return Err(fail(format!(
                        "`{program} -Y sign -n git -f {key}` did not sign ({}): {} — check `user.signingkey` (a key file, or `key::<public key>` held by ssh-agent), or turn signing off (`git config commit.gpgsign false`)",
                        ran.end.describe(),
                        last_lines(&ran.output)
                    )));
                }
                Ok(signature)
            }
        }
    }

    /// The preflight: can this signer sign now? Looks the key up without signing anything.
    pub fn check(&self, cwd: &Path) -> Result<String> {
        let fail = |message: String| Error::SigningFailed {
            format: self.format().into(),
            message,
        };
        match self {
            Signer::OpenPgp { program, key } => {
                let probe = Probe::new(
                    program,
                    ["--batch", "--list-secret-keys", key.as_str()],
                    cwd,
                    KEY_CHECK_TIMEOUT,
                );
                match probe::run(probe) {
                    Ok(out) if out.end.success() => Ok(format!("openpgp, key `{key}`")),
                    Ok(out) => Err(fail(format!(
                        "`{program} --list-secret-keys {key}` finds no secret key ({}) — import the key, set `user.signingkey`, or turn signing off (`git config commit.gpgsign false`)",
                        out.end.describe()
                    ))),
                    Err(e) => Err(fail(format!(
                        "could not run `{program}`: {e} — install GnuPG or set `gpg.program`"
                    ))),
                }
            }
            Signer::Ssh { program, key } => {
                if literal_ssh_key(key).is_none() && !expand_home(key).is_file() {
                    return Err(fail(format!(
                        "the key file `{key}` (`user.signingkey`) does not exist — point `user.signingkey` at your key, or turn signing off (`git config commit.gpgsign false`)"
                    )));
                }
                match probe::run(Probe::new(program, ["-?"], cwd, KEY_CHECK_TIMEOUT)) {
                    Ok(_) => Ok(format!("ssh, key `{key}`")),
                    Err(e) => Err(fail(format!(
                        "could not run `{program}`: {e} — install OpenSSH's ssh-keygen or set `gpg.ssh.program`"
                    ))),
                }
            }
        }
    }
}

impl Repository {
    /// The signer the repository's config asks for, for the current committer.
    pub fn signer(&self) -> Result<Option<Signer>> {
        let config = self
            .repo
            .config()
            .and_then(|mut c| c.snapshot())
            .map_err(|e| Error::git("reading the git config", e))?;
        let committer = self
            .committer()
            .map(|s| {
                format!(
                    "{} <{}>",
                    String::from_utf8_lossy(s.name_bytes()),
                    String::from_utf8_lossy(s.email_bytes())
                )
            })
            .unwrap_or_default();
        Signer::from_config(&config, &committer)
    }
}

/// The public key of a literal `user.signingkey` (`key::ssh-ed25519 …`, or the older bare
/// `ssh-ed25519 …`), as git recognises one.
fn literal_ssh_key(key: &str) -> Option<&str> {
    key.strip_prefix("key::")
        .or_else(|| key.starts_with("ssh-").then_some(key))
}

/// `~/x` with the home folder, as git expands key paths.
fn expand_home(path: &str) -> PathBuf {
    match (path.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => PathBuf::from(home).join(rest),
        _ => PathBuf::from(path),
    }
}

/// The last few lines of a program's output, on one line.
fn last_lines(output: &str) -> String {
    let lines: Vec<&str> = output
        .lines()
        .filter(|l| !l.starts_with("[GNUPG:]") && !l.trim().is_empty())
        .collect();
    let start = lines.len().saturating_sub(3);
    let text = lines[start..].join(" / ");
    if text.is_empty() {
        "no output".into()
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(entries: &[(&str, &str)]) -> (tempfile::TempDir, Config) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config");
        std::fs::write(&path, "").unwrap();
        let mut config = Config::open(&path).unwrap();
        for (k, v) in entries {
            config.set_str(k, v).unwrap();
        }
        (dir, config)
    }

    #[test]
    fn the_config_chooses_the_signer_as_git_does() {
        let me = "Kern Test <kern@example.com>";
        type Case = (Vec<(&'static str, &'static str)>, Option<Signer>);
        let cases: Vec<Case> = vec![
            (vec![], None),
            (
                vec![("commit.gpgsign", "false"), ("gpg.format", "ssh")],
                None,
            ),
            (
                vec![("commit.gpgsign", "true")],
                Some(Signer::OpenPgp {
                    program: "gpg".into(),
                    key: me.into(),
                }),
            ),
            (
                vec![
                    ("commit.gpgsign", "true"),
                    ("user.signingkey", "ABCD"),
                    ("gpg.program", "gpg2"),
                ],
                Some(Signer::OpenPgp {
                    program: "gpg2".into(),
                    key: "ABCD".into(),
                }),
            ),
            (
                vec![
                    ("commit.gpgsign", "true"),
                    ("gpg.program", "gpg2"),
                    ("gpg.openpgp.program", "gpg3"),
                ],
                Some(Signer::OpenPgp {
                    program: "gpg3".into(),
                    key: me.into(),
                }),
            ),
            (
                vec![
                    ("commit.gpgsign", "true"),
                    ("gpg.format", "ssh"),
                    ("user.signingkey", "~/.ssh/k.pub"),
                ],
                Some(Signer::Ssh {
                    program: "ssh-keygen".into(),
                    key: "~/.ssh/k.pub".into(),
                }),
            ),
        ];
        for (entries, want) in cases {
            let (_dir, config) = config(&entries);
            assert_eq!(
                Signer::from_config(&config, me).unwrap(),
                want,
                "{entries:?}"
            );
        }
        let (_dir, c) = config(&[("commit.gpgsign", "true"), ("gpg.format", "x509")]);
        let e = Signer::from_config(&c, me).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert_eq!(
            e.to_string(),
            "commits must be signed (`commit.gpgsign`) with `gpg.format` `x509`, which kern cannot sign with — use openpgp or ssh, or turn signing off for this repository (`git config commit.gpgsign false`)"
        );
        let (_dir, c) = config(&[("commit.gpgsign", "true"), ("gpg.format", "ssh")]);
        let e = Signer::from_config(&c, me).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(
            e.to_string().contains("`user.signingkey` is not set"),
            "{e}"
        );
    }

    #[test]
    fn literal_keys_are_recognised() {
        assert_eq!(
            literal_ssh_key("key::ssh-ed25519 AAAA"),
            Some("ssh-ed25519 AAAA")
        );
        assert_eq!(literal_ssh_key("ssh-rsa AAAA"), Some("ssh-rsa AAAA"));
        assert_eq!(literal_ssh_key("/home/me/.ssh/id.pub"), None);
    }

    #[test]
    fn a_failing_signer_never_gives_a_signature() {
        let dir = tempfile::tempdir().unwrap();
        let signer = Signer::OpenPgp {
            program: "false".into(),
            key: "k".into(),
        };
        let e = signer
            .sign(b"tree x\n", dir.path(), Duration::from_secs(30))
            .unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(
            e.to_string()
                .contains("`false -bsau k` did not sign (exit status 1)"),
            "{e}"
        );
    }
}
