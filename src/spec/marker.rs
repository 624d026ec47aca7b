//! kern's own task markers: the one character inside a task's box and the state it stands for
//! (`[ ]`, `[~]`, `[x]`/`[X]`, `[!]`). Other tools' markers are `dialect`'s.

use serde::{Deserialize, Serialize};

/// The state of a task, written as the one character inside its box.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskState {
    /// `[ ]`: not started.
    Pending,
    /// `[~]`: being worked on (at most one chain: a task and its ancestors).
    InProgress,
    /// `[x]` or `[X]`: finished.
    Done,
    /// `[!]`: kern gave up; a person must look.
    Blocked,
}

impl TaskState {
    /// The character kern writes inside the box for this state (`x` for done).
    pub fn marker_char(self) -> char {
        match self {
            TaskState::Pending => ' ',
            TaskState::InProgress => '~',
            TaskState::Done => 'x',
            TaskState::Blocked => '!',
        }
    }

    /// The state's name in machine output: `pending`, `in_progress`, `done`, `blocked`.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskState::Pending => "pending",
            TaskState::InProgress => "in_progress",
            TaskState::Done => "done",
            TaskState::Blocked => "blocked",
        }
    }

    /// The state a box character stands for, if it is one of kern's.
    pub fn from_marker(c: char) -> Option<TaskState> {
        match c {
            ' ' => Some(TaskState::Pending),
            '~' => Some(TaskState::InProgress),
            'x' | 'X' => Some(TaskState::Done),
            '!' => Some(TaskState::Blocked),
            _ => None,
        }
    }

    /// True for pending and in-progress tasks: work remains.
    pub fn is_unfinished(self) -> bool {
        matches!(self, TaskState::Pending | TaskState::InProgress)
    }
}
