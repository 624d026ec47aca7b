//! A gate in front of the scripted agent, for tests of a run that must be caught in a stage:
//! every invocation of a stage touches `<stage>-<n>.started` (n counts from 0 per stage), and
//! when the test holds that invocation ([`Gate::hold`]) it then prints a stream-json line
//! every 100 ms — an agent that is busy and says so — also appending it to `ticks`, until the
//! test releases it ([`Gate::release`]). Then the project's scenario plays as always.
#![allow(dead_code)]

use std::path::PathBuf;

use super::project::Project;

/// The gate's folder and its agent program.
pub(crate) struct Gate {
    dir: PathBuf,
    agent: PathBuf,
}

impl Gate {
    /// A gate for `p`'s scripted agent (its scenario as set now or later).
    pub(crate) fn new(p: &Project) -> Gate {
        let dir = p.outside.path().join("gate");
        std::fs::create_dir_all(&dir).unwrap();
        let agent = p.outside.path().join("gated-agent.sh");
        std::fs::write(
            &agent,
            format!(
                "#!/bin/sh\nd='{d}'\ns=\"$KERN_STAGE\"\nn=$(cat \"$d/$s.count\" 2>/dev/null || echo 0)\necho $((n + 1)) > \"$d/$s.count\"\ntouch \"$d/$s-$n.started\"\nif [ -f \"$d/$s-$n.wait\" ]; then\n  while [ ! -f \"$d/$s-$n.go\" ]; do\n    echo '{{\"type\":\"tick\"}}'\n    echo tick >> \"$d/ticks\"\n    sleep 0.1\n  done\nfi\nexec '{kern}' scripted-agent '{scenario}'\n",
                d = dir.display(),
                kern = super::kern_bin().display(),
                scenario = p.scenario_path().display()
            ),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();
        Gate { dir, agent }
    }

    /// `--agent`'s value for the gated agent.
    pub(crate) fn agent(&self) -> String {
        format!("program:{}", self.agent.display())
    }

    /// Holds invocation `n` of `stage` (0 is the first) until [`Gate::release`].
    pub(crate) fn hold(&self, stage: &str, n: u32) {
        std::fs::write(self.dir.join(format!("{stage}-{n}.wait")), "").unwrap();
    }

    /// Lets invocation `n` of `stage` go on.
    pub(crate) fn release(&self, stage: &str, n: u32) {
        std::fs::write(self.dir.join(format!("{stage}-{n}.go")), "").unwrap();
    }

    /// The file invocation `n` of `stage` touches when it starts.
    pub(crate) fn started(&self, stage: &str, n: u32) -> PathBuf {
        self.dir.join(format!("{stage}-{n}.started"))
    }

    /// How many ticks held invocations have printed so far.
    pub(crate) fn ticks(&self) -> usize {
        std::fs::read_to_string(self.dir.join("ticks")).map_or(0, |t| t.lines().count())
    }

    /// Waits (up to a minute, a bound against a broken build only) until `n` more ticks than
    /// now were printed: time passing, measured by the agent's own output.
    pub(crate) fn wait_ticks(&self, n: usize) {
        let target = self.ticks() + n;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while self.ticks() < target {
            assert!(
                std::time::Instant::now() < deadline,
                "the held agent stopped ticking"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}
