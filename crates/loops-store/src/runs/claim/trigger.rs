//! Claiming a trigger (issue 30, `docs/triggers.md` T5, T7): a pending row
//! of `loop_triggers` is a slot of its loop. The claim runs in the
//! backend's claim transaction ([`ClaimTx`]: on PostgreSQL the loop's row
//! and its pool's are locked first), under the rules of a scheduled claim:
//! placement, the overlap policy (a trigger of a loop whose overlap is
//! `skip` waits while another run of it goes) and the pool. It inserts the
//! run, names the trigger on it, and sets the trigger's `run_id`, guarded
//! on its still being pending; under catch-up `latest` or `none` the older
//! pending triggers of the loop are marked coalesced into it.

use loops_core::{CatchUp, Loop, LoopRun, Overlap, Timestamp};

use super::ops::{Claiming, LOOP, insert, landed_claim, misplaced, pool_full};
use super::{Claim, NotClaimed};
use crate::backend::{ClaimSteps, ClaimTx};
use crate::columns;
use crate::error::Result;
use crate::runs::{new_claim_token, offset_ms};
use crate::sql::{Db, Sql};
use crate::triggers::LoopTrigger;
use crate::triggers::ops::{trigger_row, trigger_select};

/// How many slots after the trigger's arrival are tried when another run
/// of the loop has that instant already.
const SLOT_TRIES: i64 = 1000;

/// A running run of a loop.
const RUNNING_ANY: &str = concat!(
    "SELECT ",
    crate::columns::run_columns!(),
    " FROM loop_runs WHERE loop_id = ?1 AND status = 'running' LIMIT 1"
);

/// One trigger claim.
struct TriggerClaim<'a, D> {
    db: &'a D,
    request: [(&'a Loop, Timestamp); 1],
    trigger_id: &'a str,
    runner_id: &'a str,
    now: Timestamp,
    token: String,
}

/// Claims trigger `trigger_id` of `lp` for `runner_id`; see the module
/// docs. A trigger that is no longer pending is [`NotClaimed::Raced`].
pub(crate) fn claim_trigger<D: Db + ClaimTx>(
    db: &D,
    lp: &Loop,
    trigger_id: &str,
    runner_id: &str,
    now: Timestamp,
) -> Result<Claim> {
    let claim = TriggerClaim {
        db,
        request: [(lp, now)],
        trigger_id,
        runner_id,
        now,
        token: new_claim_token(),
    };
    Ok(db
        .claim_tx(&claim)?
        .into_iter()
        .next()
        .unwrap_or(Claim::NotClaimed(NotClaimed::Raced)))
}

fn pending(c: &mut dyn Sql, id: &str) -> Result<Option<LoopTrigger>> {
    c.query_opt(
        concat!(
            trigger_select!(),
            " WHERE id = ?1 AND run_id IS NULL AND coalesced_at IS NULL"
        ),
        &[id.into()],
        ("loop_triggers", "reading a pending trigger"),
        trigger_row,
    )
}

impl<D: Db> ClaimSteps for TriggerClaim<'_, D> {
    fn requests(&self) -> &[(&Loop, Timestamp)] {
        &self.request
    }

    fn manual(&self) -> bool {
        false
    }

    fn claim(&self, c: &mut dyn Sql, _: usize) -> Result<Claim> {
        let lp = self.request[0].0;
        let d = c.dialect();
        let Some(fresh) = c.query_opt(
            d.pick(LOOP.0, LOOP.1),
            &[lp.id.as_str().into()],
            ("loops", "reading a loop"),
            columns::loop_row,
        )?
        else {
            return Ok(Claim::NotClaimed(NotClaimed::LoopMissing));
        };
        if let Some(refused) = misplaced(&fresh, &self.db.labels()) {
            return Ok(Claim::NotClaimed(refused));
        }
        let Some(trigger) = pending(c, self.trigger_id)? else {
            return Ok(Claim::NotClaimed(NotClaimed::Raced));
        };
        if trigger.loop_id != fresh.id {
            return Ok(Claim::NotClaimed(NotClaimed::Raced));
        }
        if fresh.overlap == Overlap::Skip {
            // Any running run of the loop: the trigger waits for it.
            if let Some(running) = c.query_opt(
                RUNNING_ANY,
                &[fresh.id.as_str().into()],
                ("loop_runs", "checking for an overlapping run"),
                columns::run_row,
            )? {
                return Ok(Claim::NotClaimed(NotClaimed::OverlapRunning(running)));
            }
        }
        if let Some(full) = pool_full(c, &fresh)? {
            return Ok(Claim::NotClaimed(full));
        }
        // The trigger's own slot: its arrival, or the first free instant
        // after it.
        let mut slot = trigger.created_at;
        for _ in 0..SLOT_TRIES {
            let taken = c.query_int(
                "SELECT COUNT(*) FROM loop_runs WHERE loop_id = ?1 AND scheduled_for = ?2",
                &[fresh.id.as_str().into(), slot.into()],
                "reading a run by slot",
            )?;
            if taken == 0 {
                break;
            }
            slot = slot.add_ms(1);
        }
        let how = Claiming {
            runner_id: self.runner_id,
            host: self.db.host(),
            now: self.now,
            lease: self.now.add_ms(offset_ms(fresh.lease_ms)),
            token: &self.token,
            exclusive: fresh.overlap == Overlap::Skip,
            pool: fresh.policy.pool.as_deref(),
        };
        let Some(run) = insert(c, &fresh, slot, &how)? else {
            return Ok(Claim::NotClaimed(NotClaimed::Raced));
        };
        c.execute(
            "UPDATE loop_runs SET trigger_id = ?2 WHERE id = ?1",
            &[run.id.as_str().into(), trigger.id.as_str().into()],
            "naming a run's trigger",
        )?;
        let taken = c.execute(
            "UPDATE loop_triggers SET run_id = ?2 WHERE id = ?1 AND run_id IS NULL",
            &[trigger.id.as_str().into(), run.id.as_str().into()],
            "claiming a trigger",
        )?;
        if taken == 0 {
            // Another runner took it between the read and here: undo.
            return Err(crate::error::StoreError::Vanished {
                kind: "pending trigger",
                op: "claim",
                id: trigger.id,
            });
        }
        if fresh.catch_up != CatchUp::All {
            c.execute(
                "UPDATE loop_triggers SET coalesced_at = ?3
                 WHERE loop_id = ?1 AND run_id IS NULL AND coalesced_at IS NULL
                   AND created_at <= ?2",
                &[
                    fresh.id.as_str().into(),
                    trigger.created_at.into(),
                    self.now.into(),
                ],
                "coalescing older triggers",
            )?;
        }
        Ok(Claim::Claimed { run, loop_: fresh })
    }

    /// The trigger names the run this claim inserted, under its token.
    fn landed(&self, c: &mut dyn Sql) -> Result<Vec<Claim>> {
        let trigger = c.query_opt(
            concat!(trigger_select!(), " WHERE id = ?1"),
            &[self.trigger_id.into()],
            ("loop_triggers", "reading a trigger"),
            trigger_row,
        )?;
        let run: Option<LoopRun> = match trigger.and_then(|t| t.run_id) {
            Some(run_id) => c.query_opt(
                concat!(
                    "SELECT ",
                    crate::columns::run_columns!(),
                    " FROM loop_runs WHERE id = ?1"
                ),
                &[run_id.as_str().into()],
                ("loop_runs", "reading a run"),
                columns::run_row,
            )?,
            None => None,
        };
        Ok(vec![landed_claim(c, run, self.runner_id, &self.token)?])
    }
}
