//! The SQLite side of [`crate::runs::advance`], which is written once: the
//! advance on a connection inside the caller's write transaction.

use loops_core::{Loop, LoopRun, Timestamp};
use rusqlite::Connection;

use crate::error::Result;
use crate::runs::Advance;
use crate::sqlite::sql::Lent;

/// [`crate::runs::advance_after`] on `conn`, inside the caller's write
/// transaction.
pub(crate) fn advance_after(
    conn: &Connection,
    run: &LoopRun,
    now: Timestamp,
) -> Result<(Advance, Option<Loop>)> {
    debug_assert!(!conn.is_autocommit(), "advance_after needs a transaction");
    crate::runs::advance_after(&mut Lent(conn), run, now)
}
