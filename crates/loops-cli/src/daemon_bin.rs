//! The `loops-daemon` helper binary's command line (SPEC §7.6): `run`,
//! `start`, `stop`, `status` and `install`, carried out by the same code as
//! `loops daemon …` (`commands::daemon`), always printing JSON.
//!
//! What differs from `loops daemon …` is the command line that runs the
//! daemon: `start` spawns `<self> run` and `install` writes `<exe> run`
//! into the service file (SPEC §10 item 100), where `loops` uses
//! `<self> daemon run`.

use anyhow::Result;
use clap::{Parser, Subcommand};

use crate::args::daemon::{Daemon, InstallArgs, RunArgs, StopArgs};
use crate::commands::daemon::{self, Binary};
use crate::context::Context;
use crate::exit::Outcome;

/// The loops scheduler daemon: run it, start or stop it in the background,
/// show its status or install it as a service. Prints JSON.
#[derive(Debug, Parser)]
#[command(
    name = "loops-daemon",
    version = crate::args::VERSION,
    long_about = None,
    subcommand_required = true,
    arg_required_else_help = true,
    max_term_width = 100
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the scheduler in the foreground until SIGINT or SIGTERM (for
    /// systemd, launchd or a terminal).
    Run(RunArgs),
    /// Start the daemon in the background (`loops-daemon run`), with a pid
    /// file and a log file.
    Start(RunArgs),
    /// Stop the daemon: no new runs, runs in flight get --grace to finish.
    Stop(StopArgs),
    /// Show whether the daemon runs, its lease, and loop and run counts.
    Status,
    /// Install `loops-daemon run` as a systemd user unit (Linux) or launchd
    /// agent (macOS).
    Install(InstallArgs),
}

impl From<Command> for Daemon {
    fn from(command: Command) -> Daemon {
        match command {
            Command::Run(args) => Daemon::Run(args),
            Command::Start(args) => Daemon::Start(args),
            Command::Stop(args) => Daemon::Stop(args),
            Command::Status => Daemon::Status,
            Command::Install(args) => Daemon::Install(args),
        }
    }
}

/// Runs the command; the outcome becomes the exit code in `exit`.
pub(crate) fn run(cli: Cli) -> Result<Outcome> {
    // SPEC §7.6: `loops-daemon` always prints JSON.
    let mut ctx = Context::new(None, true, false, false);
    ctx.start_server = Some(crate::serve::in_daemon);
    let ctx = &ctx;
    let mut out = ctx.printer();
    let outcome = daemon::run(ctx, cli.command.into(), &mut out, Binary::LoopsDaemon);
    let flushed = out.flush();
    let outcome = outcome?;
    flushed?;
    Ok(outcome)
}
