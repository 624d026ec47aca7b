//! What a run reads and never changes: its settings, its workspace, its reporter and the
//! interrupt it listens to — just's `ExecutionContext`.
//!
//! The one decision a reader must know: [`Cx`] is `Copy` and holds only shared references, so
//! a function of the loop that only reads takes `Cx` (or the one field it needs) and can never
//! change what the run holds; what changes lives in the run's owners (the lock, the teller, the
//! SPEC.md guard, the ledger, the target), passed on their own.
//! No unit test here: a struct of four references with no logic; held by every test of the
//! loop (tests/integration/pipeline.rs).

use crate::reporter::Reporter;
use crate::settings::Settings;
use crate::supervisor::interrupt::Interrupt;
use crate::workspace::Workspace;

/// The read-only context of a run (or of one parallel task: its own workspace and labelled
/// reporter).
#[derive(Clone, Copy)]
pub(crate) struct Cx<'a> {
    pub(crate) settings: &'a Settings,
    pub(crate) ws: &'a Workspace,
    pub(crate) reporter: &'a Reporter,
    pub(crate) interrupt: &'a Interrupt,
}
