//! The `loops` binary: parse the command line, run the command, map the
//! outcome to an exit code (SPEC §7). Everything else lives in the modules:
//! `args` (clap), `resolve` (raw values to core types), `app` and
//! `commands` (the work), `render` and `redact` (output), `exit` (codes).

mod app;
mod args;
mod commands;
mod daemon_args;
mod exit;
mod paths;
mod pretty;
mod redact;
mod render;
mod resolve;
mod workflow_args;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    loops_exec::survive_file_size_limit();
    let result = args::Cli::try_parse()
        .map_err(anyhow::Error::from)
        .and_then(app::run);
    exit::code(result)
}
