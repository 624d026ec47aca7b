//! One file per subcommand: what each of kern's commands does, on top of the pipeline and the
//! parts beside it. The run itself is `pipeline::run`.

pub(crate) mod claims;
pub(crate) mod completions;
pub(crate) mod demo;
pub(crate) mod detach;
pub(crate) mod doctor;
pub(crate) mod dry_run;
pub(crate) mod import;
pub(crate) mod init;
pub(crate) mod log;
pub(crate) mod report;
pub(crate) mod review;
pub(crate) mod run;
mod running;
pub(crate) mod schedule;
pub(crate) mod status;
mod tracked;
pub(crate) mod watch;
