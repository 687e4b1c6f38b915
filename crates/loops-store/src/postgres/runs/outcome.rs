//! Writes whose outcome is unknown: the connection was lost while the
//! transaction committed (a server restart, a failover,
//! `pg_terminate_backend`), so the COMMIT may or may not have landed.
//!
//! Such a write is never replayed blindly: a claim replayed would find its
//! own run and report the slot held, leaving it to run nowhere until its
//! lease expired. Each write says instead how to recognize, on a fresh
//! connection, that it landed: a claim by the token it generated before
//! the transaction, a finalize by its result stored under the fence's
//! claim (`runs/ops.rs`). When the re-read cannot tell (or fails), the original error is
//! returned; it is transient, so the caller tries again later.

use loops_core::LoopRun;

use crate::backend::Transactions;
use crate::error::{DbError, Result, StoreError};
use crate::postgres::{Conn, Postgres};
use crate::runs::ops::RunHost;
use crate::sql::Sql;

/// True when `e` means the connection was lost, so that a COMMIT sent on
/// it may have landed or not.
pub(super) fn outcome_unknown(e: &StoreError) -> bool {
    match e {
        StoreError::ConnectionLost => true,
        _ => e.db_error().is_some_and(DbError::is_connection_lost),
    }
}

impl Postgres {
    /// Runs `write`, one [`write_tx`](Postgres::write_tx). When it fails
    /// with the connection lost and it owned its transaction (it did not
    /// join a [`Store::batch`](crate::Store::batch), whose commit is its
    /// caller's), asks `landed` on a new connection whether it was
    /// committed after all, and returns what `landed` found; otherwise,
    /// or when `landed` finds nothing or fails, the original error.
    pub(in crate::postgres) fn resolving<T>(
        &self,
        write: impl FnOnce() -> Result<T>,
        landed: impl FnOnce(&mut Conn<'_>) -> Result<Option<T>>,
    ) -> Result<T> {
        let owned = !self.in_transaction();
        match write() {
            Err(e) if owned && outcome_unknown(&e) => match self.with(landed) {
                Ok(Some(found)) => Ok(found),
                _ => Err(e),
            },
            other => other,
        }
    }
}

/// What PostgreSQL adds to the run operations written once: lost commits
/// are resolved by [`Postgres::resolving`], and only a run claimed on this
/// host has processes the liveness probe can judge.
impl RunHost for Postgres {
    fn resolve_commit<T>(
        &self,
        write: impl FnOnce() -> Result<T>,
        landed: impl FnOnce(&mut dyn Sql) -> Result<Option<T>>,
    ) -> Result<T> {
        self.resolving(write, |c| landed(c))
    }

    fn sees_processes_of(&self, run: &LoopRun) -> bool {
        self.claimed_here(run)
    }
}
