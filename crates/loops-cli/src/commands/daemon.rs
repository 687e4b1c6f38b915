//! `loops daemon …` and `loops doctor` (SPEC §7.5, §7.6).

use anyhow::Result;

use crate::daemon_args::{Daemon, DoctorArgs};
use crate::exit::Outcome;
use crate::render::Printer;

/// Runs one `daemon` subcommand.
pub(crate) fn run(cmd: Daemon, out: &mut Printer) -> Result<Outcome> {
    let _ = out;
    match cmd {}
}

/// Runs `doctor`.
pub(crate) fn doctor(args: &DoctorArgs, out: &mut Printer) -> Result<Outcome> {
    let _ = (args, out);
    anyhow::bail!("doctor is not available yet")
}
