//! `loops workflows …` (SPEC §6, §7.4).

use anyhow::Result;

use crate::exit::Outcome;
use crate::render::Printer;
use crate::workflow_args::Workflows;

/// Runs one `workflows` subcommand.
pub(crate) fn run(cmd: Workflows, out: &mut Printer) -> Result<Outcome> {
    let _ = out;
    match cmd {}
}
