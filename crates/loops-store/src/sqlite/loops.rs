//! The SQLite side of [`crate::loops`]: nothing of its own. The operations
//! are written once in `loops/ops.rs`; what stays here serves the SQLite
//! files not yet written once.

use loops_core::{Loop, LoopId};
use rusqlite::Connection;

use crate::error::Result;
pub(super) use crate::loops::has_labels;
use crate::sqlite::sql::Lent;

/// Reads one loop by id on `conn` (inside or outside a transaction).
pub(crate) fn query_loop(conn: &Connection, id: &LoopId) -> Result<Option<Loop>> {
    crate::loops::ops::read_loop(&mut Lent(conn), id)
}
