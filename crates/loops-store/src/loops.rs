//! Loop operations. STUB.

use crate::Store;
use crate::error::{Result, StoreError};
use loops_core::LoopStatus;

impl Store {
    /// Counts loops, optionally by status.
    pub fn count_loops(&self, status: Option<LoopStatus>) -> Result<u64> {
        let n: i64 = match status {
            Some(s) => self.conn.query_row(
                "SELECT COUNT(*) FROM loops WHERE status = ?1",
                [s.as_str()],
                |r| r.get(0),
            ),
            None => self.conn.query_row("SELECT COUNT(*) FROM loops", [], |r| r.get(0)),
        }
        .map_err(StoreError::db("counting loops"))?;
        Ok(u64::try_from(n).unwrap_or(0))
    }
}
