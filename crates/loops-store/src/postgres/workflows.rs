//! The PostgreSQL side of [`crate::workflows`]: the operations are written
//! once in [`crate::workflows::ops`]; this asks about the live step
//! processes on the connection of the caller's transaction.

use loops_core::RunId;

use crate::error::Result;
use crate::postgres::{Conn, Postgres};
use crate::workflows::ops;

impl Postgres {
    /// True when some linked workflow step process of `loop_run_id` is
    /// alive. The probe answers for this host's processes only: ask it
    /// about a loop run claimed on this host.
    pub(crate) fn has_live_step_processes(
        &self,
        c: &mut Conn<'_>,
        loop_run_id: &RunId,
    ) -> Result<bool> {
        ops::has_live_step_processes(self, c, loop_run_id)
    }
}
