//! `loops pools set|list|remove` (issue 30, `docs/triggers.md` Q1), and
//! what other commands say of a loop's pool: `create` and `edit` refuse a
//! pool that does not exist (Q2), `status` and `runs` show a member that
//! waits for room in its pool (Q4).
//!
//! The limit itself is the claim's (`loops_store`'s `pool_full`): nothing
//! here counts runs for a decision, only for display.

use anyhow::{Result, anyhow, bail};
use loops_core::{Loop, LoopStatus, Overlap, RunStatus, Timestamp, validate_pool_name};
use loops_store::{PoolInfo, PoolRemoval, Store};

use super::now;
use crate::args::pools::PoolsCommand;
use crate::context::Context;
use crate::exit::Outcome;
use crate::render::{self, Column, Printer, Table};
use crate::request::{self, Document, Request, Warnings};

/// `loops pools …`.
pub(crate) fn run(ctx: &Context, command: &PoolsCommand, out: &mut Printer) -> Result<Outcome> {
    match command {
        PoolsCommand::Set(args) => request::serve(ctx, out, |_| {
            let name = pool_name(&args.name)?;
            let max_running = crate::resolve::positive_int(&args.max, "--max")?;
            Ok(SetPool { name, max_running })
        }),
        PoolsCommand::List => request::serve(ctx, out, |_| Ok(ListPools)),
        PoolsCommand::Remove(args) => request::serve(ctx, out, |_| {
            Ok(RemovePool {
                name: args.name.trim().to_owned(),
            })
        }),
    }
}

/// A pool name, checked: the message of `--pool`'s check, without the flag.
fn pool_name(name: &str) -> Result<String> {
    let name = name.trim();
    validate_pool_name(name).map_err(|e| anyhow!("{}", e.message))?;
    Ok(name.to_owned())
}

/// `pools set`: create the pool or change its limit.
struct SetPool {
    name: String,
    max_running: u32,
}

/// What `pools set` returns: the pool as it now is.
struct PoolSet(PoolInfo);

impl Request for SetPool {
    type Document = PoolSet;

    fn run(self, ctx: &Context, _: &mut Warnings) -> Result<PoolSet> {
        let store = ctx.open_store()?;
        Ok(PoolSet(store.set_pool(
            &self.name,
            self.max_running,
            now(),
        )?))
    }
}

impl Document for PoolSet {
    fn json(&self, out: &mut Printer) -> Result<()> {
        Ok(out.json_of(&self.0)?)
    }

    /// `pool agents: at most 2 running at once (1 running, 3 member loops)`.
    fn human(&self, _: &Context, out: &mut Printer) -> Result<()> {
        let p = &self.0;
        Ok(out.line(&format!(
            "pool {}: at most {} running at once ({} running, {})",
            p.name,
            p.max_running,
            p.running,
            members(p.members)
        ))?)
    }
}

/// `3 member loops`, `1 member loop`, `no member loops`.
fn members(n: u64) -> String {
    match n {
        0 => "no member loops".to_owned(),
        1 => "1 member loop".to_owned(),
        n => format!("{n} member loops"),
    }
}

/// `pools list`.
struct ListPools;

/// What `pools list` returns: every pool, by name.
struct PoolsListed(Vec<PoolInfo>);

impl Request for ListPools {
    type Document = PoolsListed;

    fn run(self, ctx: &Context, _: &mut Warnings) -> Result<PoolsListed> {
        // Listing creates nothing: no database, no pools.
        let pools = match ctx.open_existing_store()? {
            Some(store) => store.list_pools()?,
            None => Vec::new(),
        };
        Ok(PoolsListed(pools))
    }
}

impl Document for PoolsListed {
    /// An array of pools, as `pools set --json` prints one.
    fn json(&self, out: &mut Printer) -> Result<()> {
        Ok(out.json_of(&self.0)?)
    }

    /// NAME MAX RUNNING MEMBERS; no pools is said on stderr.
    fn human(&self, ctx: &Context, out: &mut Printer) -> Result<()> {
        if self.0.is_empty() {
            ctx.hint("no pools; create one with `loops pools set NAME --max N`");
            return Ok(());
        }
        let mut table = Table::new(vec![
            Column::shrink("NAME"),
            Column::keep("MAX"),
            Column::keep("RUNNING"),
            Column::keep("MEMBERS"),
        ]);
        for p in &self.0 {
            let running = if p.running >= u64::from(p.max_running) {
                render::status_style("skipped")
            } else {
                anstyle::Style::new()
            };
            table.styled_row(vec![
                (p.name.clone(), anstyle::Style::new()),
                (p.max_running.to_string(), anstyle::Style::new()),
                (p.running.to_string(), running),
                (p.members.to_string(), anstyle::Style::new()),
            ]);
        }
        Ok(out.table(&table, |_| Vec::new())?)
    }
}

/// `pools remove`.
struct RemovePool {
    name: String,
}

/// What `pools remove` returns: the name of the pool removed.
struct PoolRemoved(String);

impl Request for RemovePool {
    type Document = PoolRemoved;

    fn run(self, ctx: &Context, _: &mut Warnings) -> Result<PoolRemoved> {
        let missing = || anyhow!("no pool named {}; see loops pools list", self.name);
        let Some(store) = ctx.open_existing_store()? else {
            return Err(missing());
        };
        match store.remove_pool(&self.name)? {
            PoolRemoval::Removed => Ok(PoolRemoved(self.name)),
            PoolRemoval::Missing => Err(missing()),
            PoolRemoval::InUse(loops) => {
                let mut names = loops.join(", ");
                // The store names ten at most.
                if loops.len() >= 10 {
                    names.push_str(", …");
                }
                let (noun, them) = match loops.len() {
                    1 => ("loop", "it"),
                    _ => ("loops", "them"),
                };
                bail!(
                    "pool {} is still used by {noun} {names}; take {them} out first with \
                     loops edit LOOP --pool ''",
                    self.name,
                )
            }
            PoolRemoval::InUseBySteps(steps) => {
                let mut names = steps.join(", ");
                if steps.len() >= 10 {
                    names.push_str(", …");
                }
                let noun = if steps.len() == 1 { "step" } else { "steps" };
                bail!(
                    "pool {} is still used by workflow {noun} {names}; take the \"pool\" out of \
                     those steps first, then loops workflows create FILE --replace",
                    self.name,
                )
            }
            other => bail!("pool {} was not removed: {other:?}", self.name),
        }
    }
}

impl Document for PoolRemoved {
    fn json(&self, out: &mut Printer) -> Result<()> {
        Ok(out.json(&serde_json::json!({ "name": self.0, "removed": true }))?)
    }

    fn human(&self, _: &Context, out: &mut Printer) -> Result<()> {
        Ok(out.line(&format!("removed pool {}", self.0))?)
    }
}

/// Refuses `pool` (a loop's new `--pool`) when no pool has that name (Q2):
/// a member of a pool nobody created would never be limited.
pub(crate) fn require_pool(store: Option<&Store>, pool: Option<&str>) -> Result<()> {
    let Some(pool) = pool else {
        return Ok(());
    };
    let exists = match store {
        Some(store) => store.pool(pool)?.is_some(),
        None => false,
    };
    if !exists {
        bail!("no pool named {pool}; create it first with loops pools set {pool} --max N");
    }
    Ok(())
}

/// Refuses a workflow loop in `pool` when a step of `workflow` names the
/// same pool (Q2): the loop's run would hold a place its own step waits
/// for, and with as many runs as places none of their steps could start.
pub(crate) fn refuse_shared_pool(
    pool: Option<&str>,
    workflow: &loops_core::WorkflowSpec,
) -> Result<()> {
    let Some(pool) = pool else {
        return Ok(());
    };
    if let Some(step) = workflow
        .steps
        .iter()
        .find(|s| s.pool.as_deref() == Some(pool))
    {
        bail!(
            "pool {pool} is also the pool of step {} of workflow {}: the loop's run would hold \
             the place its step waits for; put the loop or the step in another pool",
            step.id,
            workflow.name
        );
    }
    Ok(())
}

/// The pool `lp` waits for (Q4): the loop is active and due (its next run
/// is at or before `now`) with no run of that slot started, and its pool
/// has as many runs running as it allows, so no runner can claim the slot
/// until one of them ends. A loop whose overlap is `skip` and that runs
/// already waits for its own run, not for the pool.
pub(crate) fn waiting_for(store: &Store, lp: &Loop, now: Timestamp) -> Result<Option<PoolInfo>> {
    let Some(pool) = lp.policy.pool.as_deref() else {
        return Ok(None);
    };
    let Some(next) = lp.next_run_at.filter(|t| *t <= now) else {
        return Ok(None);
    };
    if lp.status != LoopStatus::Active {
        return Ok(None);
    }
    let slot_running = store
        .get_run_by_slot(&lp.id, next)?
        .is_some_and(|run| run.status == RunStatus::Running);
    if slot_running || (lp.overlap == Overlap::Skip && store.has_running_run(&lp.id)?) {
        return Ok(None);
    }
    Ok(store
        .pool(pool)?
        .filter(|p| p.running >= u64::from(p.max_running)))
}

/// The `Pool:` lines of `status`: `agents (max 2, 2 running)`, then
/// `waiting for pool agents` when the loop waits for it (Q4). None for a
/// loop in no pool.
pub(crate) fn status_lines(store: &Store, lp: &Loop, now: Timestamp) -> Result<Vec<String>> {
    let Some(name) = lp.policy.pool.as_deref() else {
        return Ok(Vec::new());
    };
    let Some(pool) = store.pool(name)? else {
        return Ok(vec![format!("{name} (no such pool: it limits nothing)")]);
    };
    let mut lines = vec![format!(
        "{name} (max {}, {} running)",
        pool.max_running, pool.running
    )];
    if waiting_for(store, lp, now)?.is_some() {
        lines.push(format!("waiting for pool {name}"));
    }
    Ok(lines)
}
