//! `loops labels set|add|remove|clear` (issue 17): change a loop's labels
//! in one guarded write. The daemon is not woken: labels change nothing it
//! schedules.

use anyhow::Result;
use loops_core::Loop;
use loops_store::{StoreError, loop_settings};
use serde_json::json;

use super::now;
use crate::args::policy::LabelsCommand;
use crate::context::Context;
use crate::exit::Outcome;
use crate::render::Printer;
use crate::request::{self, Document, Request, Warnings};
use crate::resolve::policy::labels;

/// `loops labels …`.
pub(crate) fn run(ctx: &Context, command: &LabelsCommand, out: &mut Printer) -> Result<Outcome> {
    request::serve(ctx, out, |_| {
        let (target, change) = match command {
            LabelsCommand::Set(a) => (&a.target, LabelChange::Set(labels(&a.labels)?)),
            LabelsCommand::Add(a) => (&a.target, LabelChange::Add(labels(&a.labels)?)),
            LabelsCommand::Remove(a) => (&a.target, LabelChange::Remove(labels(&a.labels)?)),
            LabelsCommand::Clear(r) => (&r.target, LabelChange::Set(Vec::new())),
        };
        Ok(Labels {
            target: target.clone(),
            change,
        })
    })
}

/// The typed request of `labels`: one loop, and the change to its labels.
struct Labels {
    /// The loop, by id or name.
    target: String,
    change: LabelChange,
}

/// A change to a loop's labels, each checked.
enum LabelChange {
    /// These labels, and no others (`set`, and `clear` with none).
    Set(Vec<String>),
    /// These labels too, after the ones the loop has.
    Add(Vec<String>),
    /// Not these labels.
    Remove(Vec<String>),
}

/// What `labels` returns: the loop with its new labels.
struct Labeled(Loop);

impl Request for Labels {
    type Document = Labeled;

    fn run(self, ctx: &Context, _: &mut Warnings) -> Result<Labeled> {
        let store = ctx.open_store()?;
        let lp = store.require_loop(&self.target)?;
        // The edit reads the labels under the write lock, so an add or
        // remove never loses a concurrent change to them.
        let edited = store.edit_loop(&lp.id, now(), |stored| {
            let mut settings = loop_settings(stored);
            let have = &mut settings.policy.labels;
            match self.change {
                LabelChange::Set(given) => *have = given,
                LabelChange::Add(given) => {
                    for l in given {
                        if !have.contains(&l) {
                            have.push(l);
                        }
                    }
                }
                LabelChange::Remove(given) => have.retain(|l| !given.contains(l)),
            }
            Ok::<_, StoreError>(settings)
        })?;
        Ok(Labeled(edited.after))
    }
}

impl Document for Labeled {
    fn json(&self, out: &mut Printer) -> Result<()> {
        let lp = &self.0;
        Ok(out.json(&json!({ "id": lp.id, "name": lp.name, "labels": lp.policy.labels }))?)
    }

    /// `<name> (<id>): <labels>`, or `no labels`.
    fn human(&self, _: &Context, out: &mut Printer) -> Result<()> {
        let lp = &self.0;
        // One line, whatever a stored name (the original's) holds.
        let name = crate::render::escape_controls(&lp.name, &[]);
        Ok(out.line(&match lp.policy.labels.as_slice() {
            [] => format!("{name} ({}): no labels", lp.id),
            l => format!("{name} ({}): {}", lp.id, l.join(", ")),
        })?)
    }
}
