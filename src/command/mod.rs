//! One file per subcommand: what each of kern's commands does, on top of the pipeline and the
//! parts beside it. The run itself is `pipeline::run`.

pub mod completions;
pub mod demo;
pub mod detach;
pub mod doctor;
pub mod dry_run;
pub mod init;
pub mod log;
pub mod report;
pub mod review;
pub mod run;
pub mod status;
