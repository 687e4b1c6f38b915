//! Dispatch: one parsed command line to the function that carries it out.

use anyhow::Result;

use crate::args::{Cli, Command, Create};
use crate::commands::{create, daemon, execute, manage, runs, workflows};
use crate::exit::Outcome;
use crate::render::Printer;

/// Runs the command; the outcome becomes the exit code in `exit`.
pub(crate) fn run(cli: Cli) -> Result<Outcome> {
    let mut out = Printer::stdout(cli.json);
    match cli.command {
        Command::Create(Create::Command(args)) => create::command(&args, &mut out),
        Command::Create(Create::Agent(args)) => create::agent(&args, &mut out),
        Command::Create(Create::Workflow(_)) => create::workflow(),
        Command::List(args) => manage::list(&args, &mut out),
        Command::Show(args) => manage::show(&args, &mut out),
        Command::Runs(args) => runs::list(&args, &mut out),
        Command::Pause(args) => manage::pause(&args, &mut out),
        Command::Resume(args) => manage::resume(&args, &mut out),
        Command::Stop(args) => manage::stop(&args, &mut out),
        Command::Remove(args) => manage::remove(&args, &mut out),
        Command::RunNow(args) => execute::run_now(&args, &mut out),
        Command::Tick(args) => execute::tick(&args, &mut out),
        Command::Workflows(cmd) => workflows::run(cmd, &mut out),
        Command::Daemon(cmd) => daemon::run(cmd, &mut out),
        Command::Doctor(args) => daemon::doctor(&args, &mut out),
    }
}
