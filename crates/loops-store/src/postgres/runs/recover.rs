//! The PostgreSQL side of lease recovery (`RecoveryTx`): each expired run
//! is recovered in its own short transaction, which fails its linked
//! workflow runs, advances its loop and wakes the other daemons.

use loops_core::Timestamp;

use super::advance::advance_after;
use crate::backend::{Abandon, RecoveryTx};
use crate::error::Result;
use crate::postgres::Postgres;
use crate::postgres::workflow_runs::fail_linked_workflow_runs;
use crate::runs::{PARENT_LEASE_EXPIRED, Recovered};

impl RecoveryTx for Postgres {
    fn recovery_tx(&self, now: Timestamp, abandon: Abandon<'_>) -> Result<Option<Recovered>> {
        self.write_tx(|c| {
            let Some(run) = abandon(c)? else {
                return Ok(None);
            };
            let failed = fail_linked_workflow_runs(c, &run.id, PARENT_LEASE_EXPIRED, now)?;
            let advanced = advance_after(c, &run, now)?;
            c.notify(run.loop_id.as_str())?;
            Ok(Some(Recovered::of(run, failed, advanced)))
        })
    }
}
