//! The SQLite side of lease recovery (`RecoveryTx`): each expired run is
//! recovered in its own `BEGIN IMMEDIATE` transaction, which fails its
//! linked workflow runs and advances its loop with SQLite's statements.

use loops_core::Timestamp;

use super::advance::advance_after;
use crate::backend::{Abandon, RecoveryTx};
use crate::error::Result;
use crate::runs::{PARENT_LEASE_EXPIRED, Recovered};
use crate::sqlite::Sqlite;
use crate::sqlite::sql::Lent;
use crate::sqlite::workflow_runs::fail_linked_workflow_runs;

/// The running runs whose lease has expired, oldest first, as SQLite reads
/// them (`idx_runs_status_created`; `plans.rs` checks the cost).
#[cfg(test)]
pub(in crate::sqlite) const EXPIRED_LEASES: &str = crate::runs::EXPIRED_LEASES.0;

impl RecoveryTx for Sqlite {
    fn recovery_tx(&self, now: Timestamp, abandon: Abandon<'_>) -> Result<Option<Recovered>> {
        self.write_tx(|conn| {
            let Some(run) = abandon(&mut Lent(conn))? else {
                return Ok(None);
            };
            let failed = fail_linked_workflow_runs(conn, &run.id, PARENT_LEASE_EXPIRED, now)?;
            let advanced = advance_after(conn, &run, now)?;
            Ok(Some(Recovered::of(run, failed, advanced)))
        })
    }
}
