//! The tracker (`kern import github`, DESIGN.md section 22): GitHub issues into SPEC.md as
//! tasks, through the GitHub CLI `gh`, every call bounded.
//!
//! The one decision a reader must know: SPEC.md is the truth. An issue becomes a task once,
//! with the person's `> **Issue:**` note naming it (`issues.rs`: which issues and what task);
//! from then on the task is the person's like any other. `gh.rs` is the one caller of `gh`:
//! its command lines, one bounded call, and what a failure means.

pub(crate) mod gh;
pub(crate) mod issues;
