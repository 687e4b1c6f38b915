//! `loops trigger <loop>` (issue 30, `docs/triggers.md` T4): adds a
//! `manual` trigger, which a runner that can run the loop claims as a slot.

use anyhow::{Result, bail};
use loops_core::MAX_TRIGGER_PAYLOAD;
use loops_store::{LoopTrigger, NewTrigger};

use super::now;
use crate::args::trigger::TriggerArgs;
use crate::context::Context;
use crate::exit::Outcome;
use crate::render::Printer;
use crate::request::{self, Document, Request, Warnings};

/// `trigger`.
pub(crate) fn trigger(ctx: &Context, args: &TriggerArgs, out: &mut Printer) -> Result<Outcome> {
    request::serve(ctx, out, |_| {
        Ok(Trigger {
            target: args.target.clone(),
            new: new_trigger(args.payload.as_deref(), args.idempotency_key.as_deref())?,
        })
    })
}

/// A payload and key checked: the payload JSON of at most
/// [`MAX_TRIGGER_PAYLOAD`] bytes, the key 1 to 200 printable characters.
pub(crate) fn new_trigger(payload: Option<&str>, key: Option<&str>) -> Result<NewTrigger> {
    if let Some(p) = payload {
        if p.len() > MAX_TRIGGER_PAYLOAD {
            bail!(
                "--payload is {} bytes; a payload is at most {MAX_TRIGGER_PAYLOAD} bytes",
                p.len()
            );
        }
        if let Err(e) = serde_json::from_str::<serde_json::Value>(p) {
            bail!("--payload must be JSON ({e}); quote a string as '\"text\"'");
        }
    }
    if let Some(k) = key
        && (k.is_empty() || k.len() > 200 || k.chars().any(char::is_control))
    {
        bail!("--idempotency-key must be 1 to 200 printable characters");
    }
    Ok(NewTrigger {
        payload: payload.map(str::to_owned),
        idempotency_key: key.map(str::to_owned),
    })
}

/// The typed request of `trigger`.
pub(crate) struct Trigger {
    pub(crate) target: String,
    pub(crate) new: NewTrigger,
}

/// What `trigger` returns.
pub(crate) struct Triggered {
    trigger: LoopTrigger,
    name: String,
    added: bool,
    /// The loop's status when it is not active: the trigger waits.
    waits: Option<loops_core::LoopStatus>,
}

impl Request for Trigger {
    type Document = Triggered;

    fn run(self, ctx: &Context, _: &mut Warnings) -> Result<Triggered> {
        let store = ctx.open_store()?;
        let lp = store.require_loop(&self.target)?;
        let Some(added) = store.add_trigger(&lp.id, &self.new, now())? else {
            bail!("loop not found: {}", self.target);
        };
        Ok(Triggered {
            trigger: added.trigger,
            name: lp.name,
            added: added.added,
            waits: (lp.status != loops_core::LoopStatus::Active).then_some(lp.status),
        })
    }
}

impl Document for Triggered {
    fn json(&self, out: &mut Printer) -> Result<()> {
        let mut doc = serde_json::to_value(&self.trigger)?;
        if let Some(map) = doc.as_object_mut() {
            map.insert("added".to_owned(), self.added.into());
        }
        Ok(out.json(&doc)?)
    }

    /// A loop that is not active runs no trigger until it is resumed: said
    /// on stderr, in either format.
    fn notes(&self, ctx: &Context) {
        if let Some(status) = self.waits {
            ctx.hint(&format!(
                "loop {} is {status}: the trigger waits until `loops resume {}`",
                self.name, self.trigger.loop_id
            ));
        }
    }

    fn human(&self, _: &Context, out: &mut Printer) -> Result<()> {
        let t = &self.trigger;
        if self.added {
            out.line(&format!(
                "triggered {} ({}): trigger {}",
                self.name, t.loop_id, t.id
            ))?;
        } else {
            out.line(&format!(
                "already triggered {} ({}) with this key: trigger {}{}",
                self.name,
                t.loop_id,
                t.id,
                t.run_id.map(|r| format!(", run {r}")).unwrap_or_default()
            ))?;
        }
        Ok(())
    }
}

/// The lines `status` shows of a loop's triggers (issue 30, T10): the
/// loops it runs after, and its pending triggers; none when it has
/// neither.
pub(crate) fn status_lines(
    store: &loops_store::Store,
    lp: &loops_core::Loop,
) -> Result<Vec<(&'static str, String)>> {
    let mut lines = Vec::new();
    if !lp.policy.after.is_empty() {
        let mut edges = Vec::new();
        for edge in &lp.policy.after {
            let name = match edge.loop_id.parse() {
                Ok(id) => store.get_loop(&id)?.map(|up| up.name),
                Err(_) => None,
            };
            let name = name.unwrap_or_else(|| format!("{} (removed)", edge.loop_id));
            edges.push(format!("{name} ({})", edge.on));
        }
        lines.push(("After", edges.join(", ")));
    }
    if let Some(watch) = &lp.policy.watch {
        let ms = i64::try_from(watch.debounce_ms).unwrap_or(i64::MAX);
        lines.push((
            "Watches",
            format!(
                "{} (after {} quiet)",
                watch.paths.join(", "),
                crate::human::duration(ms)
            ),
        ));
    }
    let pending = store
        .loop_triggers(&lp.id, 100)?
        .iter()
        .filter(|t| t.run_id.is_none() && t.coalesced_at.is_none())
        .count();
    if pending > 0 {
        lines.push(("Triggers", format!("{pending} pending")));
    }
    Ok(lines)
}
