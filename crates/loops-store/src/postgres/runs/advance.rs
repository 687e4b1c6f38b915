//! The PostgreSQL side of [`crate::runs::advance`], which is written once:
//! the advance on a lent connection inside the caller's transaction.

use loops_core::{Loop, LoopRun, Timestamp};

use crate::error::Result;
use crate::postgres::Conn;
use crate::runs::Advance;

/// [`crate::runs::advance_after`] on `c`, inside the caller's transaction.
pub(super) fn advance_after(
    c: &mut Conn<'_>,
    run: &LoopRun,
    now: Timestamp,
) -> Result<(Advance, Option<Loop>)> {
    crate::runs::advance_after(c, run, now)
}
