//! A claim on a task (`refs/kern/claims/<task-key>` on the remote) as data, and the pure rules
//! over it: may this run take the task, and what does a refused push mean.
//!
//! The one decision a reader must know: a claim is a commit whose message is its record (host,
//! pid, run, attempt, expiry in UTC seconds by the claimer's clock); its id is the fencing
//! token. A claim is taken, renewed, taken over and released only by a push that names the id
//! read (or "absent"), so of two machines acting on the same read exactly one succeeds. An
//! expired claim may be taken over; its holder, if it still lives, finds its next renewal or
//! its landing push refused and stops working on the task.

use git2::Oid;

/// What a claim's commit says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ClaimRecord {
    pub(crate) task: String,
    pub(crate) host: String,
    pub(crate) pid: u32,
    pub(crate) run: String,
    pub(crate) attempt: u32,
    /// When the claim lapses, UTC seconds since the epoch.
    pub(crate) expires: i64,
}

impl ClaimRecord {
    /// The claim commit's message.
    pub(crate) fn message(&self) -> String {
        format!(
            "kern claim: {}\n\nhost: {}\npid: {}\nrun: {}\nattempt: {}\nexpires: {}\n",
            self.task, self.host, self.pid, self.run, self.attempt, self.expires
        )
    }

    /// The record in a claim commit's message; `None` when it is not one kern wrote.
    pub(crate) fn parse(message: &str) -> Option<ClaimRecord> {
        let mut lines = message.lines();
        let task = lines.next()?.strip_prefix("kern claim: ")?.to_string();
        let field = |name: &str| -> Option<String> {
            message
                .lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(": "))
                .map(str::to_string)
        };
        Some(ClaimRecord {
            task,
            host: field("host")?,
            pid: field("pid")?.parse().ok()?,
            run: field("run")?,
            attempt: field("attempt")?.parse().ok()?,
            expires: field("expires")?.parse().ok()?,
        })
    }
}

/// What this run does about a task, given the claim it read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ClaimStep {
    /// No claim: create one (the ref must not exist).
    Create,
    /// The claim is this run's already (it was renewed or taken here): keep it.
    Mine(Oid),
    /// The claim lapsed (or is unreadable): take it over, expecting exactly `stale`.
    TakeOver { stale: Oid, attempt: u32 },
    /// Another run holds it until `expires`: take another task.
    HeldElsewhere { holder: String, expires: i64 },
}

/// The rule for one task: `read` is the claim as fetched (its id and record; a record of
/// `None` is a ref kern cannot read, which counts as lapsed).
pub(crate) fn claim_step(
    read: Option<(Oid, Option<&ClaimRecord>)>,
    run: &str,
    now: i64,
) -> ClaimStep {
    match read {
        None => ClaimStep::Create,
        Some((oid, Some(r))) if r.run == run => ClaimStep::Mine(oid),
        Some((oid, Some(r))) if r.expires <= now => ClaimStep::TakeOver {
            stale: oid,
            attempt: r.attempt + 1,
        },
        Some((_, Some(r))) => ClaimStep::HeldElsewhere {
            holder: format!("pid {} on {} (run {})", r.pid, r.host, r.run),
            expires: r.expires,
        },
        Some((oid, None)) => ClaimStep::TakeOver {
            stale: oid,
            attempt: 1,
        },
    }
}

/// What a run does after the remote refused its landing push (the target branch and the
/// release of its claim, in one atomic push), from what it reads afterwards.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AfterRefusal {
    /// The branch moved on: rebase onto the new tip and push again.
    Rebase,
    /// The claim is no longer this run's (it lapsed and another machine took it over): the
    /// work must not land from here; it stays on the task branch.
    LostClaim,
    /// The remote refuses such pushes (a hook, a protected branch): the work stays on the task
    /// branch and the person is told.
    Refused(String),
    /// Too many rounds: someone lands faster than this run can rebase; try again later.
    GiveUp,
}

/// Rounds of fetch-rebase-push before a landing gives up.
pub(crate) const MAX_LANDING_ROUNDS: u32 = 20;

/// The rule after a refused landing push: `policy` is the remote's refusal when it was one
/// (not a stale ref), `claim_still_mine` what the fetch after it shows, `round` how many
/// pushes were refused so far.
pub(crate) fn after_refusal(
    policy: Option<&str>,
    claim_still_mine: bool,
    round: u32,
) -> AfterRefusal {
    match (policy, claim_still_mine) {
        (Some(why), _) => AfterRefusal::Refused(why.to_string()),
        (None, false) => AfterRefusal::LostClaim,
        (None, true) if round >= MAX_LANDING_ROUNDS => AfterRefusal::GiveUp,
        (None, true) => AfterRefusal::Rebase,
    }
}

/// True when a held claim is due for renewal: at most three quarters of its time is left (the
/// run looks every third of it, so a claim is renewed at every look).
pub(crate) fn renew_due(expires: i64, ttl_s: i64, now: i64) -> bool {
    expires - now <= ttl_s * 3 / 4
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(run: &str, attempt: u32, expires: i64) -> ClaimRecord {
        ClaimRecord {
            task: "add-the-parser".into(),
            host: "ci-3".into(),
            pid: 42,
            run: run.into(),
            attempt,
            expires,
        }
    }

    #[test]
    fn a_record_reads_back_what_it_wrote_and_nothing_else_is_one() {
        let r = record("42-2026", 2, 1_800_000_000);
        assert_eq!(
            r.message(),
            "kern claim: add-the-parser\n\nhost: ci-3\npid: 42\nrun: 42-2026\nattempt: 2\nexpires: 1800000000\n"
        );
        assert_eq!(ClaimRecord::parse(&r.message()), Some(r));
        assert_eq!(ClaimRecord::parse("a commit\n\nhost: x\n"), None);
        assert_eq!(
            ClaimRecord::parse(
                "kern claim: t\n\nhost: h\npid: x\nrun: r\nattempt: 1\nexpires: 1\n"
            ),
            None
        );
    }

    #[test]
    fn a_task_is_claimed_kept_taken_over_or_left_by_its_claim() {
        let oid = Oid::from_str("1111111111111111111111111111111111111111").unwrap();
        let mine = record("me", 1, 100);
        let live = record("other", 1, 100);
        let lapsed = record("other", 3, 50);
        type Read<'r> = Option<(Oid, Option<&'r ClaimRecord>)>;
        let table: &[(Read, ClaimStep)] = &[
            (None, ClaimStep::Create),
            (Some((oid, Some(&mine))), ClaimStep::Mine(oid)),
            (
                Some((oid, Some(&live))),
                ClaimStep::HeldElsewhere {
                    holder: "pid 42 on ci-3 (run other)".into(),
                    expires: 100,
                },
            ),
            (
                Some((oid, Some(&lapsed))),
                ClaimStep::TakeOver {
                    stale: oid,
                    attempt: 4,
                },
            ),
            (
                Some((oid, None)),
                ClaimStep::TakeOver {
                    stale: oid,
                    attempt: 1,
                },
            ),
        ];
        for (read, want) in table {
            assert_eq!(claim_step(*read, "me", 60), *want, "{read:?}");
        }
        // The expiry itself is past.
        assert_eq!(
            claim_step(Some((oid, Some(&record("other", 1, 60)))), "me", 60),
            ClaimStep::TakeOver {
                stale: oid,
                attempt: 2
            }
        );
    }

    #[test]
    fn a_refused_landing_rebases_stops_or_tells_the_person() {
        let table: &[(Option<&str>, bool, u32, AfterRefusal)] = &[
            (None, true, 1, AfterRefusal::Rebase),
            (None, false, 1, AfterRefusal::LostClaim),
            (None, true, MAX_LANDING_ROUNDS, AfterRefusal::GiveUp),
            (
                Some("[remote rejected] (pre-receive hook declined)"),
                true,
                1,
                AfterRefusal::Refused("[remote rejected] (pre-receive hook declined)".into()),
            ),
        ];
        for (policy, mine, round, want) in table {
            assert_eq!(after_refusal(*policy, *mine, *round), *want);
        }
    }

    #[test]
    fn a_claim_is_renewed_once_a_quarter_of_its_time_is_gone() {
        assert!(!renew_due(168, 90, 100));
        assert!(renew_due(167, 90, 100));
        assert!(renew_due(100, 90, 100));
        assert!(renew_due(102, 3, 100), "a 3 s claim at every 1 s look");
    }
}
