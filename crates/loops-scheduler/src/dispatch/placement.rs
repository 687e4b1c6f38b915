//! Placement in the plan (issue 30, `docs/triggers.md` P4, P6): a due
//! loop placed on labels this runner lacks is left to the runners that
//! match it (the claim refuses it here in any case); a tick says so.

use loops_core::{Loop, missing_labels, placement_matches};

use super::Dispatcher;

impl Dispatcher<'_, '_> {
    /// Whether `lp` is placed on labels `labels` lack: then it is parked
    /// for this plan and, when the options say so (a tick), reported
    /// through `on_error` with the labels missing.
    pub(super) fn placed_elsewhere(&mut self, lp: &Loop, labels: &[String]) -> bool {
        if placement_matches(&lp.policy.runs_on, labels) {
            return false;
        }
        if self.opts.report_misplaced {
            let missing = missing_labels(&lp.policy.runs_on, labels).join(", ");
            self.report_error(
                lp,
                &format!(
                    "not run: it runs on {missing}, which this host lacks; \
                     run it there, or pass --anywhere"
                ),
            );
        }
        self.parked.insert(lp.id);
        true
    }
}
