//! `kern [ITERATIONS] [DELAY]`: open the workspace the settings name, make sure kern's fence
//! can be made there (before any agent), and run the loop in it. `kern demo` calls this too,
//! with settings that point at its throw-away repository.

use crate::error::Result;
use crate::reporter::Reporter;
use crate::settings::Settings;
use crate::supervisor::interrupt::Interrupt;
use crate::workspace::Workspace;

/// Runs the loop (see `pipeline`).
pub(crate) async fn run(
    settings: &Settings,
    reporter: &Reporter,
    interrupt: &Interrupt,
) -> Result<()> {
    let ws = Workspace::open(settings)?;
    crate::pipeline::fence::preflight(settings, ws.repo.top())?;
    crate::pipeline::run(settings, &ws, reporter, interrupt).await
}
