//! Planning (SPEC §3.1 steps 2–4): which due slots and pending triggers
//! this dispatcher queues, and which loops its next wake-up leaves out.

use std::collections::HashSet;

use loops_core::{Loop, LoopId, Timestamp, due_slots};
use loops_store::StoreError;

use super::{Dispatcher, LoopWork};

impl Dispatcher<'_, '_> {
    /// Recovers expired leases, expires loops, and, with `due`, queues the
    /// due slots of every due loop that has no work queued or in flight here
    /// (SPEC §3.1 steps 2–4).
    ///
    /// The daemon plans due slots only while its queue is empty: queued work
    /// means every worker is busy, and whatever else is due would only wait
    /// behind it.
    pub(crate) fn plan(&mut self, due: bool) -> Result<(), StoreError> {
        let now = self.opts.clock.now();
        for recovered in self.store.recover_expired_run_leases(now)? {
            self.result.recovered.push(recovered.run);
        }
        self.result.expired.extend(self.store.expire_loops(now)?);
        if !due {
            return Ok(());
        }
        self.parked.clear();
        let active: HashSet<LoopId> = self.working_loops().collect();
        let labels = self.store.labels();
        for lp in self.store.due_loops(now, u32::MAX)? {
            if active.contains(&lp.id) {
                continue;
            }
            if self.placed_elsewhere(&lp, &labels) {
                continue;
            }
            match due_slots(&lp, now) {
                Ok(slots) if !slots.is_empty() => {
                    self.queue.push_back(LoopWork::new(lp, slots.into()));
                }
                Ok(_) => {
                    self.parked.insert(lp.id);
                }
                Err(e) => self.pause_unplannable(&lp, &e.to_string(), now)?,
            }
        }
        self.plan_triggers(&active, &labels)
    }

    /// A loop whose stored schedule cannot be planned (a cron expression or
    /// time zone another implementation accepted) would fail again on every
    /// plan: it is paused with the reason recorded on it, and reported once.
    pub(super) fn pause_unplannable(
        &mut self,
        lp: &Loop,
        error: &str,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        let reason = format!(
            "schedule cannot be planned: {error}; loop paused \
             (remove it and create it again with a valid schedule)"
        );
        match self.store.pause_loop_with_reason(&lp.id, &reason, now)? {
            Some(_) => self.report_error(lp, &reason),
            // Changed by someone else meanwhile: look again next time.
            None => {
                self.parked.insert(lp.id);
            }
        }
        Ok(())
    }

    /// Loops with work queued or in flight.
    pub(super) fn working_loops(&self) -> impl Iterator<Item = LoopId> + '_ {
        self.queue
            .iter()
            .map(|w| w.lp.id)
            .chain(self.busy.keys().copied())
    }

    /// Loops the next wake-up must not wait for: those with work queued or
    /// in flight (their progress arrives as reports) and those parked.
    pub(crate) fn excluded_loops(&self) -> Vec<LoopId> {
        let mut ids: HashSet<LoopId> = self.working_loops().collect();
        ids.extend(self.parked.iter().copied());
        ids.into_iter().collect()
    }
}
