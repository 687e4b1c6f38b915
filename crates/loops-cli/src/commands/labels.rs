//! `loops labels set|add|remove|clear` (issue 17): change a loop's labels
//! in one guarded write. The daemon is not woken: labels change nothing it
//! schedules.

use anyhow::Result;
use loops_store::{StoreError, loop_settings};
use serde_json::json;

use super::now;
use crate::args::policy::LabelsCommand;
use crate::context::Context;
use crate::exit::Outcome;
use crate::render::Printer;
use crate::resolve::policy::labels;

/// `loops labels …`.
pub(crate) fn run(ctx: &Context, command: &LabelsCommand, out: &mut Printer) -> Result<Outcome> {
    let (target, given) = match command {
        LabelsCommand::Set(a) | LabelsCommand::Add(a) | LabelsCommand::Remove(a) => {
            (a.target.as_str(), labels(&a.labels)?)
        }
        LabelsCommand::Clear(r) => (r.target.as_str(), Vec::new()),
    };
    let store = ctx.open_store()?;
    let lp = store.require_loop(target)?;
    // The edit reads the labels under the write lock, so an add or remove
    // never loses a concurrent change to them.
    let edited = store.edit_loop(&lp.id, now(), |stored| {
        let mut settings = loop_settings(stored);
        let have = &mut settings.policy.labels;
        match command {
            LabelsCommand::Set(_) | LabelsCommand::Clear(_) => *have = given.clone(),
            LabelsCommand::Add(_) => {
                for l in &given {
                    if !have.contains(l) {
                        have.push(l.clone());
                    }
                }
            }
            LabelsCommand::Remove(_) => have.retain(|l| !given.contains(l)),
        }
        Ok::<_, StoreError>(settings)
    })?;
    let lp = edited.after;
    if out.json {
        out.json(&json!({ "id": lp.id, "name": lp.name, "labels": lp.policy.labels }))?;
        return Ok(Outcome::Success);
    }
    // One line, whatever a stored name (the original's) holds.
    let name = crate::render::escape_controls(&lp.name, &[]);
    out.line(&match lp.policy.labels.as_slice() {
        [] => format!("{name} ({}): no labels", lp.id),
        l => format!("{name} ({}): {}", lp.id, l.join(", ")),
    })?;
    Ok(Outcome::Success)
}
