//! The classes of an agent's failure (DESIGN.md section 6), apart from the classifier that
//! reads them from an output ([`crate::agent::failure`]), so that the stream parsers, which stop
//! at a decisive failure as it streams, and the classifier, which reads the parsers' output,
//! depend on this and not on each other.
//!
//! The one decision a reader must know: a class says what kern does next — retry, wait for a
//! reset, stop for the person, or count a failed attempt — not what went wrong in detail; the
//! message carries that.

/// Why an agent run failed, and so what kern does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FailureClass {
    /// Worth retrying after a backoff delay: overload, rate limit, lost connection, a crash.
    Transient(String),
    /// A subscription limit: wait until it resets (`resets_at`, epoch seconds, when known).
    UsageLimit {
        /// When the limit resets, in seconds since the epoch.
        resets_at: Option<i64>,
        /// What the agent said.
        message: String,
    },
    /// The person must act (log in, fix the model name…); the run stops. The message says
    /// what to do.
    NeedsUser(String),
    /// The stage hit a limit a retry would hit again (turns, budget, prompt size): a failed
    /// attempt.
    StageLimit(String),
}

impl FailureClass {
    /// The human message.
    pub(crate) fn message(&self) -> &str {
        match self {
            FailureClass::Transient(m)
            | FailureClass::NeedsUser(m)
            | FailureClass::StageLimit(m)
            | FailureClass::UsageLimit { message: m, .. } => m,
        }
    }
}

impl std::fmt::Display for FailureClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.message())
    }
}

/// The message for an agent that is not logged in.
pub(crate) fn not_logged_in(agent: &str, hint: &str) -> FailureClass {
    FailureClass::NeedsUser(format!("{agent} is not logged in: {hint}"))
}
