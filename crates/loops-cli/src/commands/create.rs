//! `loops create command|agent <name>` (SPEC §7.3).
//!
//! The arguments are resolved and validated before the store is opened, so
//! a rejected create leaves no row behind (SPEC §2.3).

use anyhow::{Result, bail};
use loops_core::{Loop, NewLoop};

use crate::args::{CreateAgent, CreateCommand};
use crate::exit::Outcome;
use crate::paths;
use crate::redact;
use crate::render::Printer;

/// `create command`.
pub(crate) fn command(args: &CreateCommand, out: &mut Printer) -> Result<Outcome> {
    let new = crate::resolve::command_loop(args)?;
    create(&new, out)
}

/// `create agent`.
pub(crate) fn agent(args: &CreateAgent, out: &mut Printer) -> Result<Outcome> {
    let new = crate::resolve::agent_loop(args)?;
    create(&new, out)
}

/// `create workflow` lands with the workflow commands.
pub(crate) fn workflow() -> Result<Outcome> {
    bail!(
        "create workflow is not available yet in this version of loops; \
         create command and create agent are"
    )
}

fn create(new: &NewLoop, out: &mut Printer) -> Result<Outcome> {
    let store = paths::open_store()?;
    let lp = store.create_loop(new, super::now())?;
    print_created(&lp, out)?;
    Ok(Outcome::Success)
}

fn print_created(lp: &Loop, out: &mut Printer) -> std::io::Result<()> {
    if out.json {
        return out.json(&redact::loop_json(lp));
    }
    let next = lp
        .next_run_at
        .map_or_else(|| "-".to_owned(), |t| t.to_string());
    out.line(&format!("created loop {} ({}) next={next}", lp.id, lp.name))
}
