//! The PostgreSQL side of [`crate::daemon`]: the daemon's reads across
//! tables.
//!
//! Unlike SQLite, the runs of several hosts share the database, and a run
//! of another host is taken over only [`CROSS_HOST_GRACE_MS`] after its
//! lease expired: that instant, not the lease's, is when the daemon may
//! have something to recover.

use loops_core::{LoopId, Timestamp};

use crate::backend::WakeOps;
use crate::daemon::NextWake;
use crate::error::{Result, StoreError};
use crate::postgres::rows::{Ts, ts};
use crate::postgres::{CROSS_HOST_GRACE_MS, Conn, Params, Postgres};

/// The earliest next run of an active loop not excluded (`$1`, a text
/// array of loop ids): `idx_loops_status_next`.
pub(super) const NEXT_DUE: &str = "SELECT MIN(next_run_at) FROM loops
     WHERE status = 'active' AND next_run_at IS NOT NULL AND id <> ALL($1)";

/// The earliest instant after `$1` at which a running run that runner `$2`
/// does not hold may need recovering: its lease expiry when this host
/// (`$5`; `$3` is `<host>:`) claimed it, the expiry plus the grace (`$4`
/// ms) when another host did (`idx_runs_running_lease`). Where a run was
/// claimed is `takeover::claim_host`: the host its runner id names, else
/// the one its claim recorded.
pub(super) const NEXT_LEASE_EXPIRY: &str = "SELECT MIN(t) FROM (
       SELECT CASE WHEN (CASE WHEN claimed_by LIKE '%:%:%'
                              THEN left(claimed_by, length($3)) = $3
                              ELSE claimed_host = $5 END)
                   THEN lease_expires_at
                   ELSE lease_expires_at + $4::bigint * interval '1 millisecond' END AS t
       FROM loop_runs
       WHERE status = 'running' AND (claimed_by IS NULL OR claimed_by <> $2)
     ) AS due WHERE t > $1";

/// The next expiry of an active loop (`idx_loops_status_expires`).
pub(super) const NEXT_EXPIRY: &str =
    "SELECT MIN(expires_at) FROM loops WHERE status = 'active' AND expires_at IS NOT NULL";

/// The one instant `sql` returns, if any.
fn instant(c: &mut Conn<'_>, sql: &str, params: Params<'_>) -> Result<Option<Timestamp>> {
    let context = "computing the next wake-up";
    let row = c.query_one(sql, params, context)?;
    let t: Option<Ts> = row.try_get(0).map_err(StoreError::db(context))?;
    Ok(t.map(|t| t.0))
}

impl WakeOps for Postgres {
    fn next_wake(&self, now: Timestamp, runner_id: &str, exclude: &[LoopId]) -> Result<NextWake> {
        let excluded: Vec<&str> = exclude.iter().map(LoopId::as_str).collect();
        let this_host = format!("{}:", self.host);
        let wake = self.with(|c| {
            Ok(NextWake {
                due: instant(c, NEXT_DUE, &[&excluded])?,
                expiry: instant(c, NEXT_EXPIRY, &[])?,
                lease_expiry: instant(
                    c,
                    NEXT_LEASE_EXPIRY,
                    &[
                        &ts(now),
                        &runner_id,
                        &this_host,
                        &CROSS_HOST_GRACE_MS,
                        &self.host,
                    ],
                )?,
            })
        })?;
        Ok(wake)
    }
}
