//! The PostgreSQL side of [`crate::runs`]: the operations are written
//! once in `runs/ops.rs` and `runs/release.rs`; what PostgreSQL adds to
//! them ([`RunHost`](crate::runs::ops::RunHost)) is in `outcome.rs`: a
//! write whose COMMIT was cut off by a lost connection is resolved by
//! re-reading what it wrote, and only this host's runs have processes the
//! liveness probe can judge. Claims, takeovers and recovery live in
//! `runs/`.

mod advance;
mod claim;
mod outcome;
mod recover;
mod takeover;

use loops_core::{LoopId, LoopRun, Timestamp};

use crate::columns::run_columns;
use crate::error::Result;
use crate::postgres::rows::{self, ts};
use crate::postgres::{Conn, Params};

/// Runs a statement returning at most one run row (`SELECT` or
/// `… RETURNING`).
fn run_returning(
    c: &mut Conn<'_>,
    sql: &str,
    params: Params<'_>,
    context: &'static str,
) -> Result<Option<LoopRun>> {
    c.query_opt(sql, params, ("loop_runs", context), rows::run_row)
}

/// Reads the run of one slot.
fn query_slot(c: &mut Conn<'_>, loop_id: &LoopId, slot: Timestamp) -> Result<Option<LoopRun>> {
    run_returning(
        c,
        concat!(
            "SELECT ",
            run_columns!(),
            " FROM loop_runs WHERE loop_id = $1 AND scheduled_for = $2"
        ),
        &[&loop_id.as_str(), &ts(slot)],
        "reading a run by slot",
    )
}
