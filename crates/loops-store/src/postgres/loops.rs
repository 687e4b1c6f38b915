//! The PostgreSQL side of [`crate::loops`]: nothing of its own. The
//! operations are written once in `loops/ops.rs`, with the row locks this
//! backend takes; what stays here serves the PostgreSQL files not yet
//! written once.

use loops_core::{Loop, LoopId};

use crate::error::Result;
use crate::postgres::{Conn, Params, rows};

/// Runs a statement returning at most one loop row (`SELECT` or a
/// single-row `UPDATE … RETURNING`).
pub(super) fn loop_returning(
    c: &mut Conn<'_>,
    sql: &str,
    params: Params<'_>,
    context: &'static str,
) -> Result<Option<Loop>> {
    c.query_opt(sql, params, ("loops", context), rows::loop_row)
}

/// Reads one loop by id.
pub(super) fn query_loop(c: &mut Conn<'_>, id: &LoopId) -> Result<Option<Loop>> {
    crate::loops::ops::read_loop(c, id)
}

/// Reads one loop by id and locks its row until the transaction ends
/// ([`crate::loops::ops::lock_loop`]).
pub(super) fn lock_loop(c: &mut Conn<'_>, id: &LoopId) -> Result<Option<Loop>> {
    crate::loops::ops::lock_loop(c, id)
}
