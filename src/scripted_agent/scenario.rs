//! The scenario file of the scripted agent: which run each (task, stage) invocation plays, and
//! what a run does. The format is documented in `docs/scripted-agent.md`; unknown fields are
//! errors, so a typo in a scenario fails loudly.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer};
use serde_json::Value;

use crate::stage::Stage;

/// A whole scenario file.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Scenario {
    /// What every task does unless an entry of `tasks` says otherwise.
    #[serde(default)]
    pub default: StagePlans,
    /// Per-task plans, the first matching entry wins.
    #[serde(default)]
    pub tasks: Vec<TaskPlans>,
}

/// The runs of each stage.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct StagePlans {
    /// Stage 1.
    pub research: Option<Runs>,
    /// The tests step (stage 2's first half, for a task tested first).
    pub tests: Option<Runs>,
    /// Stage 2.
    pub implement: Option<Runs>,
    /// Stage 3.
    pub commit: Option<Runs>,
}

/// The runs of each stage for the tasks whose title contains `pattern`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TaskPlans {
    /// A substring of the task title.
    #[serde(rename = "match")]
    pub pattern: String,
    /// Stage 1.
    pub research: Option<Runs>,
    /// The tests step.
    pub tests: Option<Runs>,
    /// Stage 2.
    pub implement: Option<Runs>,
    /// Stage 3.
    pub commit: Option<Runs>,
}

/// One run, or a sequence used invocation by invocation (the last repeats).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Runs {
    /// The same run every time.
    One(Box<Run>),
    /// Run N on the Nth invocation.
    Many(Vec<Run>),
}

/// What one agent invocation does; see the module docs for every field.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Run {
    /// Files to create or replace.
    #[serde(default)]
    pub write: BTreeMap<String, String>,
    /// Files to append to.
    #[serde(default)]
    pub append: BTreeMap<String, String>,
    /// Files or folders to remove.
    #[serde(default)]
    pub delete: Vec<String>,
    /// Shell commands.
    #[serde(default)]
    pub shell: Vec<String>,
    /// Where to save the prompt.
    pub save_prompt: Option<String>,
    /// Sleep before anything.
    pub sleep_before_ms: Option<u64>,
    /// Sleep before the ending.
    pub sleep_ms: Option<u64>,
    /// The structured output: absent = the stage's default, `Some(Null)` = none.
    #[serde(default, deserialize_with = "present")]
    pub result: Option<Value>,
    /// The result text.
    pub text: Option<String>,
    /// The cost to report.
    pub cost_usd: Option<f64>,
    /// The exit code.
    pub exit_code: Option<i32>,
    /// Plain text output instead of stream-json.
    #[serde(default)]
    pub plain: bool,
    /// A failure to imitate.
    pub error: Option<ErrorKind>,
    /// `usage_limit`: seconds until the reset.
    pub resets_in_secs: Option<u64>,
    /// A subscription usage to report before the ending: a `rate_limit_event` as Claude Code
    /// prints it for a subscription login.
    pub usage: Option<Usage>,
    /// `huge_output`: how many bytes.
    pub huge_bytes: Option<u64>,
    /// `spawn_grandchild`: where its pid goes.
    pub pid_file: Option<String>,
    /// The tokens the result reports (the prompt's share added to `input`), and the cost
    /// priced from them unless `cost_usd` is given.
    pub tokens: Option<Tokens>,
}

/// The tokens a run reports (`tokens`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Tokens {
    /// Input tokens besides the prompt's (what the agent read: files, tool output).
    #[serde(default)]
    pub input: u64,
    /// Output tokens.
    #[serde(default)]
    pub output: u64,
}

impl Tokens {
    /// Input and output tokens for a run that read `prompt_bytes` of prompt: the prompt counts
    /// one token per 4 bytes.
    pub(crate) fn reported(self, prompt_bytes: usize) -> (u64, u64) {
        (self.input + (prompt_bytes as u64).div_ceil(4), self.output)
    }

    /// Their price at Claude Sonnet's list price ($3 per million input tokens, $15 per million
    /// output tokens).
    pub(crate) fn cost(reported: (u64, u64)) -> f64 {
        (reported.0 as f64 * 3.0 + reported.1 as f64 * 15.0) / 1_000_000.0
    }
}

/// The subscription usage a run reports (`usage`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Usage {
    /// The fraction of the window used, 0 to 1.
    pub utilization: f64,
    /// The window: `five_hour` (default), `seven_day`, ….
    #[serde(default = "five_hour")]
    pub window: String,
    /// Seconds until the window resets; default 3600.
    pub resets_in_secs: Option<u64>,
}

fn five_hour() -> String {
    "five_hour".to_string()
}

/// The failures the scripted agent can imitate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ErrorKind {
    /// Not logged in.
    Auth,
    /// A 401 `api_retry`, then a hang.
    AuthRetry,
    /// API 529.
    Overloaded,
    /// API 429.
    RateLimit,
    /// A subscription usage limit with a reset time.
    UsageLimit,
    /// `error_max_turns`.
    MaxTurns,
    /// `error_max_budget_usd`: the `--max-budget-usd` kern gave was reached.
    MaxBudget,
    /// Exit 1 without a result.
    NoResult,
    /// Non-JSON lines, then a normal result.
    Garbage,
    /// Silence forever.
    Silence,
    /// A result, then a hang.
    HangAfterResult,
    /// A lot of output, then a result.
    HugeOutput,
    /// A background grandchild, then a result.
    SpawnGrandchild,
}

impl<'de> Deserialize<'de> for Runs {
    /// By hand rather than `untagged`, so that a typo inside a RUN is reported by name.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Runs, D::Error> {
        use serde::de::Error as _;
        match Value::deserialize(deserializer)? {
            Value::Array(items) => items
                .into_iter()
                .map(|item| serde_json::from_value(item).map_err(D::Error::custom))
                .collect::<std::result::Result<Vec<Run>, _>>()
                .map(Runs::Many),
            other => serde_json::from_value(other)
                .map(|run| Runs::One(Box::new(run)))
                .map_err(D::Error::custom),
        }
    }
}

/// Keeps `null` apart from an absent field.
fn present<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> std::result::Result<Option<Value>, D::Error> {
    Value::deserialize(deserializer).map(Some)
}

impl Scenario {
    /// Parses a scenario.
    pub(crate) fn parse(text: &str) -> std::result::Result<Scenario, serde_json::Error> {
        serde_json::from_str(text)
    }

    /// The counting key and the runs for `task` in `stage`.
    pub(crate) fn plan(&self, task: &str, stage: Stage) -> (String, Option<&Runs>) {
        let from_default = pick(
            [
                self.default.research.as_ref(),
                self.default.tests.as_ref(),
                self.default.implement.as_ref(),
                self.default.commit.as_ref(),
            ],
            stage,
        );
        match self
            .tasks
            .iter()
            .enumerate()
            .find(|(_, entry)| task.contains(entry.pattern.as_str()))
        {
            Some((i, entry)) => (
                format!("tasks[{i}]/{}", stage.name()),
                pick(
                    [
                        entry.research.as_ref(),
                        entry.tests.as_ref(),
                        entry.implement.as_ref(),
                        entry.commit.as_ref(),
                    ],
                    stage,
                )
                .or(from_default),
            ),
            None => (format!("default/{}", stage.name()), from_default),
        }
    }
}

/// The runs of `stage` among a plan's `[research, tests, implement, commit]`.
fn pick(runs: [Option<&Runs>; 4], stage: Stage) -> Option<&Runs> {
    let [research, tests, implement, commit] = runs;
    match stage {
        Stage::Research => research,
        Stage::Tests => tests,
        Stage::Implement => implement,
        Stage::Review => commit,
    }
}

impl Runs {
    /// The run for the invocation numbered `n` (0-based); the last one repeats.
    pub(crate) fn nth(&self, n: u64) -> Option<&Run> {
        match self {
            Runs::One(run) => Some(run),
            Runs::Many(runs) => {
                let i = usize::try_from(n)
                    .unwrap_or(usize::MAX)
                    .min(runs.len().checked_sub(1)?);
                runs.get(i)
            }
        }
    }
}
