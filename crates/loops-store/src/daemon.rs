//! What the daemon asks the database beyond SPEC §4.3: when it next has
//! work ([`Store::next_wake`], SPEC §9 item 6), which runs a dead daemon of
//! this host left behind ([`Store::running_runs_of_host`], §9 items 16 and
//! 18), and, for `doctor`, the schema version of a database file without
//! opening it for writing ([`inspect_database`](crate::inspect_database),
//! §9 item 31) and whether the file is damaged
//! ([`check_integrity`](crate::check_integrity)). The last two work on a
//! SQLite file and live in the SQLite backend.
//!
//! All of these only read.

use std::time::Duration;

use loops_core::{LoopId, LoopRun, ProcessRef, RunId, Timestamp};

use crate::Store;
use crate::error::Result;

pub(crate) mod ops;

/// The instants at which the database next asks something of a daemon.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NextWake {
    /// The earliest `next_run_at` of an active loop that is not excluded: a
    /// slot or a retry coming due.
    pub due: Option<Timestamp>,
    /// The earliest `expires_at` of an active loop.
    pub expiry: Option<Timestamp>,
    /// The earliest lease, after `now`, of a running run that another runner
    /// holds: when that runner may need recovering.
    pub lease_expiry: Option<Timestamp>,
}

impl NextWake {
    /// The earliest of the three, if any.
    pub fn earliest(&self) -> Option<Timestamp> {
        [self.due, self.expiry, self.lease_expiry]
            .into_iter()
            .flatten()
            .min()
    }
}

/// A running run claimed on this host, with its recorded process.
#[derive(Debug, Clone, PartialEq)]
pub struct HostRun {
    /// The run.
    pub run: LoopRun,
    /// Its recorded child process, if one was spawned.
    pub process: Option<ProcessRef>,
    /// The spawn id its processes carry in `LOOPS_SPAWN_ID`, when the
    /// runner recorded one (see [`Store::mark_run_spawn`]).
    pub spawn_id: Option<String>,
}

/// What [`inspect_database`](crate::inspect_database) found at a database path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DatabaseState {
    /// No file yet; the first command creates it.
    Missing,
    /// A loops database. `version` is its newest applied migration, 0 for a
    /// database the original wrote (which has no migration history).
    Loops {
        /// The schema version of the file.
        version: i64,
    },
}

/// What [`check_integrity`](crate::check_integrity) found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Integrity {
    /// No file yet: nothing to check.
    Missing,
    /// `PRAGMA quick_check` found nothing wrong.
    Ok,
    /// The check found damage: SQLite's own descriptions, at most
    /// [`INTEGRITY_MAX_PROBLEMS`] of them.
    Damaged(Vec<String>),
    /// The check did not finish within its time budget; nothing is known.
    Unfinished {
        /// The budget it ran out of.
        budget: Duration,
    },
}

/// The most problems [`check_integrity`](crate::check_integrity) reports.
pub const INTEGRITY_MAX_PROBLEMS: usize = 20;

/// The time [`check_integrity`](crate::check_integrity) allows itself: one
/// second, plus 10 ms for every MiB of the database (a quick check reads
/// every page once, and disks read well over 100 MiB a second).
pub fn integrity_budget(bytes: u64) -> Duration {
    Duration::from_secs(1)
        + Duration::from_millis(10)
            .saturating_mul(u32::try_from(bytes / (1024 * 1024)).unwrap_or(u32::MAX))
}

/// A fresh random lease id for a daemon start (SPEC §0).
pub fn new_lease_id() -> loops_core::LeaseId {
    loops_core::LeaseId::from_bytes(crate::random_id_bytes())
}

impl Store {
    /// When the daemon next has work (SPEC §9 item 6): the earliest
    /// `next_run_at` of an active loop outside `exclude` (loops the daemon
    /// is already running or could not make progress on), the earliest
    /// `expires_at` of an active loop, and the earliest unexpired lease of
    /// a running run that `runner_id` does not hold.
    ///
    /// An expired lease whose process is still alive is not reported: its
    /// recovery is refused until the process dies, so waking for it would
    /// only spin.
    pub fn next_wake(
        &self,
        now: Timestamp,
        runner_id: &str,
        exclude: &[LoopId],
    ) -> Result<NextWake> {
        self.backend().next_wake(now, runner_id, exclude)
    }

    /// The running runs claimed by a daemon of `host` (runner ids
    /// `<host>:<pid>:<leaseId>`, SPEC §0) other than `except_runner`, oldest
    /// claim first.
    pub fn running_runs_of_host(&self, host: &str, except_runner: &str) -> Result<Vec<HostRun>> {
        self.backend().running_runs_of_host(host, except_runner)
    }

    /// The recorded processes of the running steps of the open workflow
    /// runs linked to `run_id`, alive or not.
    pub fn step_processes(&self, run_id: &RunId) -> Result<Vec<ProcessRef>> {
        self.backend().step_processes(run_id)
    }
}
