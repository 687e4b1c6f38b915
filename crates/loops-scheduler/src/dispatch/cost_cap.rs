//! A loop's daily cost cap (issue 27), checked before each scheduled run.

use loops_core::{Loop, Timestamp, Zone, cost_cap_reason, day_start};
use loops_store::StoreError;

use super::Dispatcher;

impl Dispatcher<'_, '_> {
    /// Issue 27: whether `lp`, whose runs of today cost its daily cap or
    /// more, was paused (with the reason, said through `on_error`) instead
    /// of running again. Checked before each scheduled run; a manual
    /// `run-now` is the owner's own choice and is not held back.
    pub(super) fn paused_over_cost_cap(
        &self,
        lp: &Loop,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        let Some(cap) = lp.policy.max_cost_per_day else {
            return Ok(false);
        };
        let spent = self
            .store
            .loop_cost_since(&lp.id, day_start(now, Zone::Local))?;
        let Some(reason) = cost_cap_reason(&lp.name, spent, cap) else {
            return Ok(false);
        };
        if self
            .store
            .pause_loop_with_reason(&lp.id, &reason, now)?
            .is_some()
        {
            self.report_error(lp, &reason);
        }
        Ok(true)
    }
}
