//! The loops command line, shared by its two binaries (SPEC §7): `loops`,
//! and the `loops-daemon` helper the original installs beside it (SPEC
//! §7.6), whose `run`, `start`, `stop`, `status` and `install` are the same
//! code as `loops daemon …`.
//!
//! The modules: `args` (clap), `resolve` (raw values to core types), `app`
//! and `commands` (the work), `render`, `human` and `redact` (output),
//! `hint` (the daemon hint), `complete` (shell completion), `exit`
//! (codes), `daemon_bin` (the `loops-daemon` command line), `service`
//! (daemon start, stop, status, logs, install, and doctor), and the
//! servers `mcp` and `serve` (the HTTP API, with `fault` for its statuses).

mod app;
mod args;
mod auto_backup;
mod brief;
mod commands;
mod complete;
mod context;
mod daemon_bin;
mod exit;
mod fault;
mod hint;
mod human;
mod mcp;
mod paths;
mod placement;
mod pretty;
mod redact;
mod render;
mod request;
mod resolve;
mod serve;
mod service;
mod ui;
mod watch;
mod zone;

use std::process::ExitCode;

use clap::Parser;

/// The `loops` binary: parses the command line, runs the command, and maps
/// the outcome to an exit code.
pub fn loops_main() -> ExitCode {
    // `COMPLETE=<shell> loops …` is the shell asking for completions
    // (`complete.rs`): answered first, and the process exits.
    complete::serve(<args::Cli as clap::CommandFactory>::command);
    loops_exec::survive_file_size_limit();
    match args::Cli::try_parse() {
        Ok(cli) => run(cli),
        // `--version` and `--help` end here too.
        Err(err) => exit::code(Err(err.into()), false),
    }
}

/// Runs a parsed command line. Kept out of line: inlined, the commands'
/// frames made `loops_main`'s stack frame 36 KiB, whose pages every
/// process touched, `--version` included (`docs/perf.md#process-start`).
#[inline(never)]
fn run(cli: args::Cli) -> ExitCode {
    let mut ctx = app::context(&cli);
    ctx.start_server = Some(serve::in_daemon);
    let result = match cli.command {
        // The protocol owns stdout: no printer may lock it.
        args::Command::Mcp(mcp_args) => mcp::run(&ctx, &mcp_args),
        // The dashboard owns the terminal: no printer may lock stdout.
        args::Command::Ui => ui::run(&ctx),
        // A server of its own, until SIGINT or SIGTERM.
        args::Command::Serve(serve_args) => serve::run(&ctx, &serve_args),
        command => app::run(&ctx, command),
    };
    exit::code(result, ctx.verbose)
}

/// The `loops-daemon` binary: `loops daemon run|start|stop|status|install`
/// under its own name, always printing JSON (SPEC §7.6).
pub fn loops_daemon_main() -> ExitCode {
    loops_exec::survive_file_size_limit();
    let result = daemon_bin::Cli::try_parse()
        .map_err(anyhow::Error::from)
        .and_then(daemon_bin::run);
    exit::code(result, false)
}
