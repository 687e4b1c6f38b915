//! The SQLite side of [`crate::workflows`]: the operations are written
//! once in [`crate::workflows::ops`]; this asks about the live step
//! processes on SQLite's own connection.

use loops_core::RunId;

use crate::error::Result;
use crate::sqlite::Sqlite;
use crate::sqlite::sql::Lent;
use crate::workflows::ops::has_live_step_processes;

impl Sqlite {
    /// True when some linked workflow step process of `loop_run_id` is alive.
    pub(crate) fn has_live_step_processes(&self, loop_run_id: &RunId) -> Result<bool> {
        has_live_step_processes(self, &mut Lent(&self.conn), loop_run_id)
    }
}
