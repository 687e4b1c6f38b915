//! The overlap policy for the dispatcher's own runs (SPEC §3.2; §9 item
//! 2): when a loop's next slot comes due while this dispatcher still runs
//! the loop, `skip` records the slot as skipped and `allow` starts it beside
//! the run in flight. Only the daemon asks for this; a tick's loops finish
//! within the tick.

use loops_core::{
    Anchor, Loop, LoopId, LoopStatus, Overlap, Schedule, Timestamp, compute_next_after, due_slots,
    is_expired,
};
use loops_store::{OVERLAP_SKIP_REASON, SkipOutcome, StoreError};

use super::{Dispatcher, LoopWork};

impl Dispatcher<'_, '_> {
    /// The earliest slot that would overlap a run in flight.
    pub(crate) fn next_overlap(&self) -> Option<Timestamp> {
        self.busy.values().filter_map(|b| b.next_overlap).min()
    }

    /// Applies the overlap policy to the slots of busy loops that came due
    /// while they run (SPEC §3.2 with this dispatcher's own runs; §9 item
    /// 2): `skip` records each as skipped and advances the loop, `allow`
    /// queues them to start beside the run in flight. The slots are the ones
    /// the loop's catch-up policy picks.
    pub(crate) fn plan_overlaps(&mut self) -> Result<(), StoreError> {
        if !self.opts.overlap_in_flight || self.stopping() {
            return Ok(());
        }
        let now = self.opts.clock.now();
        let due: Vec<(LoopId, Timestamp)> = self
            .busy
            .iter()
            .filter_map(|(id, b)| b.next_overlap.filter(|t| *t <= now).map(|t| (*id, t)))
            .collect();
        for (id, first) in due {
            let fresh = self.store.get_loop(&id)?;
            let Some(mut lp) =
                fresh.filter(|l| l.status == LoopStatus::Active && !is_expired(l, now))
            else {
                // Paused, stopped, expired or removed while running: nothing
                // more comes due until the run in flight is recorded.
                if let Some(b) = self.busy.get_mut(&id) {
                    b.next_overlap = None;
                }
                continue;
            };
            lp.next_run_at = Some(first);
            lp.retry_scheduled_for = None;
            let slots = match due_slots(&lp, now) {
                Ok(slots) => slots,
                Err(e) => {
                    self.report_error(&lp, &e.to_string());
                    Vec::new()
                }
            };
            let last = slots.last().copied().unwrap_or(first);
            if let Some(b) = self.busy.get_mut(&id) {
                b.last_slot = b.last_slot.max(last);
                b.next_overlap = overlap_slot_after(&lp.schedule, b.last_slot, b.last_slot);
            }
            match lp.overlap {
                Overlap::Skip => {
                    for slot in slots {
                        self.skip(&lp, slot, now)?;
                    }
                }
                Overlap::Allow => {
                    if !slots.is_empty() {
                        self.queue.push_back(LoopWork::new(lp, slots.into()));
                    }
                }
            }
        }
        Ok(())
    }

    /// Records an overlap skip of `slot` (SPEC §3.2).
    pub(super) fn skip(
        &mut self,
        lp: &Loop,
        slot: Timestamp,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        let (run, written) =
            match self
                .store
                .create_skipped_run_and_advance(lp, slot, OVERLAP_SKIP_REASON, now)?
            {
                SkipOutcome::Skipped { run, .. } => (run, true),
                // SPEC §9 item 10: an occupied slot keeps its row and any
                // pending retry; it is reported as it stands.
                SkipOutcome::Occupied(run) => (run, false),
            };
        self.report_run(&run);
        self.result.sort(run);
        Ok(written)
    }
}

/// The first slot after `slot`, and after `since`, that would overlap a run
/// of `slot`, for schedules whose slots do not depend on when a run
/// finishes: fixed-rate intervals and cron. Once, fixed-delay and dynamic
/// loops cannot overlap themselves.
pub(super) fn overlap_slot_after(
    schedule: &Schedule,
    slot: Timestamp,
    since: Timestamp,
) -> Option<Timestamp> {
    match schedule {
        Schedule::Interval {
            anchor: None | Some(Anchor::FixedRate),
            ..
        }
        | Schedule::Cron { .. } => compute_next_after(schedule, slot, since.max(slot))
            .ok()
            .flatten(),
        _ => None,
    }
}
