//! The environment of a fenced process (PURE): the person's variables less the secrets, then
//! the command's own variables, then the fence's (its TMPDIR, the proxy).
//!
//! The one decision a reader must know: a variable is dropped when its name or value looks
//! like a secret (`secrets::is_secret_name`, `secrets::is_secret_value`) unless the fence lets
//! it pass (the agent's own key, `[sandbox] pass_env`); the command's own variables (kern's
//! `KERN_*` for a program, Claude's retry setting) are kern's and always set; the fence's come
//! last and win. The names dropped are recorded (never their values).

use std::ffi::{OsStr, OsString};

use super::secrets::{is_secret_name, is_secret_value};

/// A fenced process's environment and the names kept from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FencedEnv {
    /// Every variable, in order.
    pub vars: Vec<(OsString, OsString)>,
    /// The names of the variables not passed, sorted.
    pub dropped: Vec<String>,
}

/// The environment for a process fenced with `pass`, from the person's `inherited` one, the
/// command's `own` variables and the fence's `fence` ones.
pub(crate) fn fenced_env(
    inherited: &[(OsString, OsString)],
    own: &[(String, String)],
    fence: &[(String, String)],
    pass: &[String],
) -> FencedEnv {
    let mut vars: Vec<(OsString, OsString)> = Vec::with_capacity(inherited.len() + 8);
    let mut dropped = Vec::new();
    for (name, value) in inherited {
        let text = name.to_string_lossy();
        let passes = pass.iter().any(|p| p.eq_ignore_ascii_case(&text));
        if !passes && (is_secret_name(&text) || is_secret_value(&value.to_string_lossy())) {
            dropped.push(text.into_owned());
            continue;
        }
        vars.push((name.clone(), value.clone()));
    }
    let mut set = |name: &str, value: &str| {
        let name = OsStr::new(name);
        vars.retain(|(n, _)| n != name);
        vars.push((name.to_os_string(), OsString::from(value)));
    };
    for (name, value) in own.iter().chain(fence) {
        set(name, value);
    }
    dropped.sort();
    dropped.dedup();
    FencedEnv { vars, dropped }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        pairs
            .iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v)))
            .collect()
    }

    #[test]
    fn secrets_are_dropped_keys_pass_and_kerns_own_win() {
        let inherited = env(&[
            ("PATH", "/usr/bin"),
            ("HOME", "/home/me"),
            ("GITHUB_TOKEN", "ghp_x"),
            ("ANTHROPIC_API_KEY", "sk-ant"),
            ("DATABASE_URL", "postgres://u:pw@db/x"),
            ("NPM_TOKEN", "npm_x"),
            ("TMPDIR", "/tmp"),
            ("SSH_AUTH_SOCK", "/tmp/ssh-x/agent.1"),
        ]);
        let got = fenced_env(
            &inherited,
            &[("KERN_STAGE".into(), "implement".into())],
            &[("TMPDIR".into(), "/f/tmp".into())],
            &["ANTHROPIC_API_KEY".into(), "npm_token".into()],
        );
        assert_eq!(
            got.vars,
            env(&[
                ("PATH", "/usr/bin"),
                ("HOME", "/home/me"),
                ("ANTHROPIC_API_KEY", "sk-ant"),
                ("NPM_TOKEN", "npm_x"),
                ("KERN_STAGE", "implement"),
                ("TMPDIR", "/f/tmp"),
            ])
        );
        assert_eq!(
            got.dropped,
            ["DATABASE_URL", "GITHUB_TOKEN", "SSH_AUTH_SOCK"]
        );
    }
}
