//! kern's own diagnostics: `tracing` events on stderr, off unless `-v` (debug), `-vv` (trace)
//! or `KERN_LOG=error|warn|info|debug|trace` asks for them.
//!
//! Diagnostics are for finding a fault in kern, not what a person follows during a run (that
//! is `report.rs`); they never carry prompts or agent output above debug level.

use tracing::level_filters::LevelFilter;

/// The level for `-v` count `verbose` and the `KERN_LOG` value, if any (the louder wins).
pub(crate) fn level(verbose: u8, kern_log: Option<&str>) -> LevelFilter {
    let from_flag = match verbose {
        0 => LevelFilter::OFF,
        1 => LevelFilter::DEBUG,
        _ => LevelFilter::TRACE,
    };
    let from_env = kern_log
        .and_then(|v| v.trim().parse::<LevelFilter>().ok())
        .unwrap_or(LevelFilter::OFF);
    from_flag.max(from_env)
}

/// Installs the stderr subscriber once; later calls do nothing. Colour follows `--color`:
/// `auto` means a terminal and no `NO_COLOR`.
pub(crate) fn init(verbose: u8, color: super::ColorChoice, env: &super::OutputEnv) {
    use std::io::IsTerminal;
    let ansi = match color {
        super::ColorChoice::Always => true,
        super::ColorChoice::Never => false,
        super::ColorChoice::Auto => std::io::stderr().is_terminal() && !env.no_color,
    };
    let level = level(verbose, env.kern_log.as_deref());
    if level == LevelFilter::OFF {
        return;
    }
    let _ = tracing_subscriber::fmt()
        .with_max_level(level)
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_ansi(ansi)
        .try_init();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_and_env_choose_the_level() {
        assert_eq!(level(0, None), LevelFilter::OFF);
        assert_eq!(level(1, None), LevelFilter::DEBUG);
        assert_eq!(level(2, None), LevelFilter::TRACE);
        assert_eq!(level(0, Some("warn")), LevelFilter::WARN);
        assert_eq!(level(1, Some("trace")), LevelFilter::TRACE);
        assert_eq!(level(0, Some("nonsense")), LevelFilter::OFF);
    }
}
