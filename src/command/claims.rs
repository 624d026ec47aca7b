//! The claims of `kern --remote` by hand: `kern status --remote [--json]` lists them (task,
//! holder, expiry), `kern release <task>` frees one, and the hidden `kern claim <key>` claims once
//! (the tests race two of it).
//!
//! Unlike `kern status`, these fetch: the remote's branch and claims land under
//! `refs/kern/remote/<name>/` in the clone.
//!
//! The one decision a reader must know: each command fetches the claims first and acts on what
//! it read — `release` deletes the claim expecting exactly the id it fetched, so a claim
//! renewed or taken over meanwhile is left alone and the command says so.

use crate::error::{Error, Result};
use crate::pipeline::remote::claim::ClaimRecord;
use crate::pipeline::remote::{Claimed, Remote, task_key};
use crate::repository::Repository;
use crate::repository::remote::{CLAIMS, Expected, Pushed, RefUpdate};
use crate::settings::Settings;
use crate::spec::{Quoted, TaskIdentity};
use crate::timestamp::Timestamp;
use crate::workspace::Workspace;

/// `kern status --remote NAME [--json]`: the claims on the remote, one a line on stdout, or
/// one JSON object (`{"remote", "claims": [{"key", "id", "host", "pid", "run", "attempt",
/// "expires", "lapsed"}]}`; a claim kern did not write has only `key`, `id`, `kern: false` and
/// `lapsed`). An error with --json is printed as `kern status --json` prints one.
pub(crate) fn status(settings: &Settings, remote: &str, json: bool) -> Result<()> {
    let claims = match fetch_claims(settings, remote) {
        Ok(claims) => claims,
        Err(e) => {
            if json {
                super::status::print_out(&format!("{}\n", super::status::error_json(&e)))?;
            }
            return Err(e);
        }
    };
    let now = Timestamp::now().epoch_seconds();
    if json {
        let listed: Vec<serde_json::Value> = claims
            .iter()
            .map(|(key, id, message)| match ClaimRecord::parse(message) {
                Some(r) => serde_json::json!({
                    "key": key,
                    "id": id.to_string(),
                    "task": r.task,
                    "host": r.host,
                    "pid": r.pid,
                    "run": r.run,
                    "attempt": r.attempt,
                    "expires": Timestamp::from_epoch_seconds(r.expires).to_string(),
                    "lapsed": r.expires <= now,
                }),
                None => serde_json::json!({
                    "key": key, "id": id.to_string(), "kern": false, "lapsed": true,
                }),
            })
            .collect();
        let out = serde_json::json!({"remote": remote, "claims": listed});
        return super::status::print_out(&format!("{out}\n"));
    }
    let mut out = format!("claims on `{remote}` ({CLAIMS}):\n");
    if claims.is_empty() {
        out.push_str("  none\n");
    }
    for (key, _, message) in claims {
        let line = match ClaimRecord::parse(&message) {
            Some(r) => format!(
                "  {key}: pid {} on {}, run {}, attempt {}, {} {}\n",
                r.pid,
                r.host,
                r.run,
                r.attempt,
                if r.expires > now { "expires" } else { "lapsed" },
                Timestamp::from_epoch_seconds(r.expires)
            ),
            None => format!("  {key}: not a claim kern wrote (it counts as lapsed)\n"),
        };
        out.push_str(&crate::text::clean_lines(&line));
    }
    super::status::print_out(&out)
}

/// The claims on `remote`, fetched now: key, claim commit, its message.
fn fetch_claims(settings: &Settings, remote: &str) -> Result<Vec<(String, git2::Oid, String)>> {
    let repo = Repository::discover(&settings.cwd)?;
    repo.check_remote(remote)?;
    repo.fetch_remote(remote, &repo.branch_name()?)?;
    repo.fetched_claims(remote)
}

/// `kern release TASK`: deletes the task's claim on the remote, expecting the claim fetched.
pub(crate) fn release(settings: &Settings, task: &str, remote: &str) -> Result<()> {
    let ws = Workspace::open(settings)?;
    let repo = &ws.repo;
    repo.check_remote(remote)?;
    repo.fetch_remote(remote, &repo.branch_name()?)?;
    let claims = repo.fetched_claims(remote)?;
    let (_, doc, _) = ws.load_spec()?;
    let wanted = task.trim();
    let key = (0..doc.tasks().len())
        .find(|&i| doc.tasks()[i].title.starts_with(wanted) && !wanted.is_empty())
        .map_or_else(|| wanted.to_string(), |i| task_key(&doc.identity(i)));
    let Some((_, oid, _)) = claims.iter().find(|(k, _, _)| *k == key) else {
        return Err(Error::Usage(format!(
            "no claim on {} on `{remote}` (`{CLAIMS}{key}`) — `kern status --remote {remote}` lists the claims",
            Quoted(wanted)
        )));
    };
    let pushed = repo.push_expecting(
        remote,
        &[RefUpdate {
            name: format!("{CLAIMS}{key}"),
            new: None,
            expected: Expected::At(*oid),
        }],
    )?;
    match pushed {
        Pushed::Done => {
            if !settings.quiet {
                eprintln!("kern: released `{CLAIMS}{key}` on `{remote}`");
            }
            Ok(())
        }
        Pushed::Stale => Err(Error::Usage(format!(
            "the claim `{CLAIMS}{key}` changed on `{remote}` while kern read it (renewed or taken over) — look again with `kern status --remote {remote}`"
        ))),
        Pushed::Refused(why) => Err(Error::Remote {
            remote: remote.to_string(),
            what: format!("deleting `{CLAIMS}{key}`"),
            detail: why,
        }),
    }
}

/// `kern claim KEY`: one claim attempt; prints `claimed` or `held` on stdout.
pub(crate) fn claim_once(settings: &Settings, key: &str, remote: &str) -> Result<()> {
    let repo = Repository::discover(&settings.cwd)?;
    let run = format!("{}-{}", std::process::id(), Timestamp::now());
    let mut claims = Remote::new(&repo, remote, settings.claim_ttl, &run)?;
    repo.fetch_remote(remote, &claims.branch)?;
    let identity = TaskIdentity {
        path: vec![key.to_string()],
        occurrence: 0,
    };
    let claimed = claims.claim(&repo, key, &identity, None)?;
    super::status::print_out(if claimed == Claimed::No {
        "held\n"
    } else {
        "claimed\n"
    })
}
