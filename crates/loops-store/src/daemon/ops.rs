//! [`DaemonOps`] written once for both backends: the daemon's reads of
//! its host's runs and of their steps' processes. When the daemon next
//! wakes ([`WakeOps`](crate::backend::WakeOps)) stays with each backend:
//! SQLite's excluded loops are a JSON list its plans are tuned for, and
//! PostgreSQL's runs of other hosts wait out a grace.

use loops_core::{ProcessRef, RunId};

use crate::backend::DaemonOps;
use crate::columns::{self, run_columns};
use crate::daemon::HostRun;
use crate::error::Result;
use crate::sql::{Col, Db, Fields};
use crate::workflows::ops::linked_step_processes;

/// The running runs whose runner id starts with `?1` (`<host>:`) other
/// than runner `?2`, oldest claim first; a run not yet started first.
const RUNS_OF_HOST: (&str, &str) = (
    concat!(
        "SELECT ",
        run_columns!(),
        " FROM loop_runs
         WHERE status = 'running' AND claimed_by <> ?2
           AND substr(claimed_by, 1, length(?1)) = ?1
         ORDER BY started_at, rowid"
    ),
    concat!(
        "SELECT ",
        run_columns!(),
        " FROM loop_runs
         WHERE status = 'running' AND claimed_by <> ?2
           AND left(claimed_by, length(?1)) = ?1
         ORDER BY started_at NULLS FIRST, id"
    ),
);

/// A [`run_columns!`] row → [`HostRun`].
fn host_run(row: &dyn Fields) -> Col<HostRun> {
    let (run, process) = columns::run_and_process(row)?;
    Ok(HostRun {
        run,
        process,
        spawn_id: columns::run_spawn_id(row)?,
    })
}

impl<D: Db> DaemonOps for D {
    fn running_runs_of_host(&self, host: &str, except_runner: &str) -> Result<Vec<HostRun>> {
        let prefix = format!("{host}:");
        self.read(|c| {
            c.query_vec(
                c.dialect().pick(RUNS_OF_HOST.0, RUNS_OF_HOST.1),
                &[prefix.as_str().into(), except_runner.into()],
                ("loop_runs", "finding the runs of this host's daemons"),
                host_run,
            )
        })
    }

    fn step_processes(&self, run_id: &RunId) -> Result<Vec<ProcessRef>> {
        self.read(|c| linked_step_processes(c, run_id))
    }
}
