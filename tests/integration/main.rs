//! kern's integration tests, as one test binary (one link step instead of one per file on a
//! 2-core machine). Each module is one feature; they run the real `kern` binary in temporary
//! git repositories with fake agents, or (the real-agent tier) the real CLIs against loopback
//! mocks of their model APIs. Shared helpers live in `support/`.

mod support;

mod agents;
mod architecture;
mod cli;
mod config_file;
mod crash;
mod discovery;
mod doctor;
mod done;
mod dry_run;
mod error_research;
mod fence;
mod first_hour;
mod formatters;
mod git_fidelity;
mod git_formats;
mod hook_managers;
mod init;
mod lock;
mod morning;
mod night;
mod nothing_lost;
mod output;
mod parallel;
mod picks;
mod pipeline;
mod readme;
mod real_agent;
mod real_claude;
mod real_codex;
mod real_two_agents;
mod remote;
mod repository;
mod rough_edges;
mod scripted_agent;
mod second_round;
mod shared_repository;
mod soak;
mod spec_dialects;
mod spec_file;
mod stage_plan;
mod state_privacy;
mod status;
mod supervisor;
mod tests_first;
mod tracker;
mod two_agents;
mod verified_done;
mod watch;
mod windows;
