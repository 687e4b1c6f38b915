//! Cancel requests (issue 28): `loops cancel` writes a request on the
//! run's row, from any host; the runner holding the run reads the requests
//! on its runs in flight at each turn and cancels their tokens, which
//! stops each run's process group (SIGTERM, the request's grace, SIGKILL).
//! The finalize then records the run `cancelled` (the store decides, from
//! the request on the row).
//!
//! A daemon's turn comes at once: `loops cancel` wakes a local daemon
//! through its socket, and on PostgreSQL the request's notify wakes the
//! daemons of every host. `tick` and `run-now` look every
//! [`CANCEL_POLL`] while they have runs in flight.

use std::time::Duration;

use loops_store::StoreError;

use super::Dispatcher;

/// How often `tick` and `run-now` look for cancel requests while runs are
/// in flight: they have no socket to be woken through.
pub(crate) const CANCEL_POLL: Duration = Duration::from_secs(1);

impl Dispatcher<'_, '_> {
    /// Cancels the runs in flight that `loops cancel` asked to stop.
    pub(super) fn apply_cancel_requests(&self) -> Result<(), StoreError> {
        if self.inflight.is_empty() {
            return Ok(());
        }
        for request in self.store.cancel_requests(self.opts.runner_id)? {
            let Some(f) = self.inflight.get(&request.run_id) else {
                continue;
            };
            let reason = format!("cancelled by {}", request.by);
            match request.grace_ms {
                Some(ms) => f
                    .cancel
                    .cancel_with_grace(reason, Duration::from_millis(ms)),
                None => f.cancel.cancel(reason),
            }
        }
        Ok(())
    }
}
