//! One usage ledger per account across machines (`--remote` with `--pace`, DESIGN.md §21): the
//! record kept at `refs/kern/pace/<account-hash>` on the remote, which account a run's agent
//! spends ([`account_key`]), and the pure merge of readings from several machines into the
//! account's view ([`merge`], [`view`]).
//!
//! The one decision a reader must know: the ledger keeps the latest reading of each window by
//! each run (machine and run id), and the account's view of a window is the highest fresh
//! reading of its newest period: a reading whose reset has passed, or of a period a later
//! reading shows ended, drops out. So `--pace=80` judges 80 % of the account, whichever
//! machine saw it, and a reading from before a reset never holds a machine back.
//!
//! What names an account: Claude Code records the account it is logged in to in its config
//! (`oauthAccount.accountUuid` in `$CLAUDE_CONFIG_DIR/.claude.json` or `~/.claude.json`); where
//! that is found the account is the agent plus that id. Nothing else the agents report names
//! the account (claude's `system/init` says only `apiKeySource`, codex's events nothing), so
//! otherwise the account is the agent's name alone (`claude`, `codex`, `program:…`): machines
//! on one remote whose account kern cannot name share one ledger per agent. The ref holds a
//! hash of it, never the id, and never a key or token.

use serde::{Deserialize, Serialize};

use crate::agent::stream::window::{Window, length_secs};

pub(crate) use crate::repository::remote::PACE;

/// Two readings whose reset times differ by no more than this are of the same period.
const SAME_RESET_SECS: i64 = 120;

/// A window without a known reset is judged by readings no older than this.
const UNKNOWN_PERIOD_SECS: i64 = 5 * 3600;

/// One machine's latest reading of one window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Reading {
    /// `five_hour`, `seven_day`, … ([`Window::kind`]).
    pub kind: String,
    /// Percent used, 0 to 100.
    pub used_percent: f64,
    /// When the window resets, epoch seconds.
    pub resets_at: Option<i64>,
    /// When it was read, epoch seconds (by the reading machine's clock).
    pub read_at: i64,
    /// Which machine and run read it: `host (run ID)`.
    pub machine: String,
}

impl Reading {
    /// A reading of `window` by `machine` at `now`.
    pub(crate) fn of(window: &Window, machine: &str, now: i64) -> Reading {
        Reading {
            kind: window.kind.clone(),
            used_percent: (window.used * 1000.0).round() / 10.0,
            resets_at: window.resets_at,
            read_at: now,
            machine: machine.to_string(),
        }
    }

    fn window(&self) -> Window {
        Window {
            kind: self.kind.clone(),
            used: self.used_percent / 100.0,
            resets_at: self.resets_at,
        }
    }

    /// Still counts at `now`: its reset has not passed (or, with no known reset, it is
    /// recent).
    fn fresh(&self, now: i64) -> bool {
        match self.resets_at {
            Some(at) => at > now,
            None => {
                now - self.read_at
                    <= length_secs(&self.kind)
                        .map_or(UNKNOWN_PERIOD_SECS, |l| l.min(UNKNOWN_PERIOD_SECS))
            }
        }
    }
}

/// The ledger as the ref's commit message holds it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Book {
    /// The account's hash (the ref's last part).
    pub account: String,
    pub readings: Vec<Reading>,
}

impl Book {
    /// The ledger commit's message: a subject, then the JSON.
    pub(crate) fn message(&self) -> String {
        format!(
            "kern pace ledger: {}\n\n{}\n",
            self.account,
            serde_json::to_string_pretty(self).unwrap_or_default()
        )
    }

    /// The ledger in a commit's message; an unreadable one is empty (the next push replaces
    /// it).
    pub(crate) fn parse(message: &str) -> Book {
        message
            .split_once("\n\n")
            .and_then(|(_, json)| serde_json::from_str(json.trim()).ok())
            .unwrap_or_default()
    }
}

/// The ledger after `mine` (this run's readings) are added to `ledger` at `now`: each
/// machine's newest reading of each window kind; readings that are no longer fresh, or are of
/// a period older than the newest of their kind, drop.
pub(crate) fn merge(ledger: &[Reading], mine: &[Reading], now: i64) -> Vec<Reading> {
    let mut out: Vec<Reading> = Vec::new();
    for r in ledger.iter().chain(mine) {
        if !r.fresh(now) {
            continue;
        }
        match out
            .iter_mut()
            .find(|o| o.machine == r.machine && o.kind == r.kind)
        {
            Some(o) if r.read_at >= o.read_at => *o = r.clone(),
            Some(_) => {}
            None => out.push(r.clone()),
        }
    }
    let newest = |kind: &str, out: &[Reading]| -> Option<i64> {
        out.iter()
            .filter(|r| r.kind == kind)
            .filter_map(|r| r.resets_at)
            .max()
    };
    let kept: Vec<Reading> = out
        .iter()
        .filter(|r| match (r.resets_at, newest(&r.kind, &out)) {
            (Some(at), Some(latest)) => latest - at <= SAME_RESET_SECS,
            _ => true,
        })
        .cloned()
        .collect();
    let mut kept = kept;
    kept.sort_by(|a, b| (&a.kind, &a.machine).cmp(&(&b.kind, &b.machine)));
    kept
}

/// The account's view at `now`: per window kind, the highest fresh reading of its newest
/// period, with the machine that read it; in the order of the kinds' names.
pub(crate) fn view(ledger: &[Reading], now: i64) -> Vec<(Window, String)> {
    let merged = merge(ledger, &[], now);
    let mut out: Vec<(Window, String)> = Vec::new();
    for r in &merged {
        match out.iter_mut().find(|(w, _)| w.kind == r.kind) {
            Some((w, machine)) if r.used_percent / 100.0 > w.used => {
                *w = r.window();
                machine.clone_from(&r.machine);
            }
            Some(_) => {}
            None => out.push((r.window(), r.machine.clone())),
        }
    }
    out
}

/// The account's ledger name: a hash of the agent's name and the account id its config
/// records (see the module docs), 16 hex digits.
pub(crate) fn account_key(agent: &str, account: Option<&str>) -> String {
    let named = match account {
        Some(id) => format!("{agent}\naccount {id}"),
        None => agent.to_string(),
    };
    git2::Oid::hash_object(git2::ObjectType::Blob, named.as_bytes()).map_or_else(
        |_| "unknown".to_string(),
        |oid| oid.to_string()[..16].to_string(),
    )
}

/// The account id Claude Code's config `text` (`.claude.json`) records: its
/// `oauthAccount.accountUuid`.
pub(crate) fn claude_account(text: &str) -> Option<String> {
    let json: serde_json::Value = serde_json::from_str(text).ok()?;
    json.get("oauthAccount")?
        .get("accountUuid")?
        .as_str()
        .filter(|id| !id.is_empty())
        .map(str::to_string)
}

/// Rounds of fetch and compare-and-swap push before a publish gives up (and says so).
pub(crate) const MAX_PUBLISH_ROUNDS: u32 = 100;

#[cfg(test)]
mod tests {
    use super::*;

    fn r(machine: &str, kind: &str, used: f64, resets_at: Option<i64>, read_at: i64) -> Reading {
        Reading {
            kind: kind.into(),
            used_percent: used,
            resets_at,
            read_at,
            machine: machine.into(),
        }
    }

    const NOW: i64 = 100_000;

    #[test]
    fn readings_from_several_machines_merge_into_the_accounts_view() {
        let reset = Some(NOW + 3600);
        type Case = (
            &'static str,
            Vec<Reading>,
            Vec<Reading>,
            Vec<Reading>,
            Vec<(&'static str, f64, &'static str)>,
        );
        let cases: Vec<Case> = vec![
            ("empty", vec![], vec![], vec![], vec![]),
            (
                "a first reading is the view",
                vec![],
                vec![r("a", "five_hour", 40.0, reset, NOW)],
                vec![r("a", "five_hour", 40.0, reset, NOW)],
                vec![("five_hour", 40.0, "a")],
            ),
            (
                "a machine's newer reading replaces its older one",
                vec![r("a", "five_hour", 40.0, reset, NOW - 60)],
                vec![r("a", "five_hour", 45.0, reset, NOW)],
                vec![r("a", "five_hour", 45.0, reset, NOW)],
                vec![("five_hour", 45.0, "a")],
            ),
            (
                "an older reading arriving late does not replace a newer one",
                vec![r("a", "five_hour", 45.0, reset, NOW)],
                vec![r("a", "five_hour", 40.0, reset, NOW - 60)],
                vec![r("a", "five_hour", 45.0, reset, NOW)],
                vec![("five_hour", 45.0, "a")],
            ),
            (
                "the highest reading of the account wins, whoever read it",
                vec![r("b", "five_hour", 85.0, reset, NOW - 600)],
                vec![r("a", "five_hour", 30.0, reset, NOW)],
                vec![
                    r("a", "five_hour", 30.0, reset, NOW),
                    r("b", "five_hour", 85.0, reset, NOW - 600),
                ],
                vec![("five_hour", 85.0, "b")],
            ),
            (
                "a reading whose reset has passed drops",
                vec![r("b", "five_hour", 95.0, Some(NOW - 5), NOW - 3600)],
                vec![r("a", "five_hour", 3.0, Some(NOW + 5 * 3600), NOW)],
                vec![r("a", "five_hour", 3.0, Some(NOW + 5 * 3600), NOW)],
                vec![("five_hour", 3.0, "a")],
            ),
            (
                "a reading of an older period drops once a newer one is known",
                vec![r("b", "five_hour", 95.0, Some(NOW + 60), NOW - 600)],
                vec![r("a", "five_hour", 2.0, Some(NOW + 60 + 5 * 3600), NOW)],
                vec![r("a", "five_hour", 2.0, Some(NOW + 60 + 5 * 3600), NOW)],
                vec![("five_hour", 2.0, "a")],
            ),
            (
                "reset times rounded apart are one period",
                vec![r("b", "five_hour", 70.0, Some(NOW + 3600), NOW - 60)],
                vec![r("a", "five_hour", 60.0, Some(NOW + 3660), NOW)],
                vec![
                    r("a", "five_hour", 60.0, Some(NOW + 3660), NOW),
                    r("b", "five_hour", 70.0, Some(NOW + 3600), NOW - 60),
                ],
                vec![("five_hour", 70.0, "b")],
            ),
            (
                "kinds are judged apart",
                vec![r("b", "seven_day", 50.0, Some(NOW + 86_400), NOW)],
                vec![r("a", "five_hour", 10.0, reset, NOW)],
                vec![
                    r("a", "five_hour", 10.0, reset, NOW),
                    r("b", "seven_day", 50.0, Some(NOW + 86_400), NOW),
                ],
                vec![("five_hour", 10.0, "a"), ("seven_day", 50.0, "b")],
            ),
            (
                "no known reset: recent readings count, old ones drop",
                vec![r("b", "five_hour", 90.0, None, NOW - 6 * 3600)],
                vec![r("a", "five_hour", 20.0, None, NOW - 60)],
                vec![r("a", "five_hour", 20.0, None, NOW - 60)],
                vec![("five_hour", 20.0, "a")],
            ),
        ];
        for (name, ledger, mine, want, view_want) in cases {
            let merged = merge(&ledger, &mine, NOW);
            assert_eq!(merged, want, "{name}");
            let seen: Vec<(String, f64, String)> = view(&merged, NOW)
                .into_iter()
                .map(|(w, m)| (w.kind, (w.used * 1000.0).round() / 10.0, m))
                .collect();
            let view_want: Vec<(String, f64, String)> = view_want
                .into_iter()
                .map(|(k, u, m)| (k.to_string(), u, m.to_string()))
                .collect();
            assert_eq!(seen, view_want, "{name}: view");
        }
    }

    #[test]
    fn a_book_reads_back_what_it_wrote_and_garbage_is_an_empty_one() {
        let book = Book {
            account: "0123456789abcdef".into(),
            readings: vec![r("ci-3 (run 42-a)", "five_hour", 61.5, Some(9), 5)],
        };
        let message = book.message();
        assert!(
            message.starts_with("kern pace ledger: 0123456789abcdef\n\n{"),
            "{message}"
        );
        assert_eq!(Book::parse(&message), book);
        assert_eq!(Book::parse("a commit\n\nnot json"), Book::default());
        assert_eq!(Book::parse(""), Book::default());
    }

    #[test]
    fn the_account_is_a_hash_of_the_agent_and_the_id_its_config_records() {
        let a = account_key("claude", Some("4f1c-uuid"));
        assert_eq!(a.len(), 16);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
        assert_eq!(a, account_key("claude", Some("4f1c-uuid")), "stable");
        assert_ne!(a, account_key("claude", Some("another")));
        assert_ne!(a, account_key("claude", None));
        assert_ne!(account_key("claude", None), account_key("codex", None));
        assert!(!a.contains("4f1c"));
        let config = r#"{"numStartups": 3, "oauthAccount": {"accountUuid": "4f1c-uuid", "emailAddress": "x@y.z"}}"#;
        assert_eq!(claude_account(config).as_deref(), Some("4f1c-uuid"));
        assert_eq!(claude_account(r#"{"numStartups": 3}"#), None);
        assert_eq!(
            claude_account(r#"{"oauthAccount": {"accountUuid": ""}}"#),
            None
        );
        assert_eq!(claude_account("not json"), None);
    }
}
