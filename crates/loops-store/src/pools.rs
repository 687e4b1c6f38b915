//! Pools (issue 30, `docs/triggers.md` Q1–Q6): named limits on how many
//! runs of their member loops run at once, across every daemon and host.
//!
//! A pool is a row of `pools`; a loop joins one with `--pool` (its `pool`
//! column), and each run records the pool it was claimed in
//! (`loop_runs.pool`). The limit itself is enforced by the claim
//! (`runs/claim/ops.rs`), inside its transaction; this module keeps the
//! rows.

use loops_core::Timestamp;
use serde::Serialize;

use crate::Store;
use crate::error::Result;

pub(crate) mod ops;

/// One pool, as [`Store::list_pools`] and [`Store::set_pool`] return it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolInfo {
    /// Its name.
    pub name: String,
    /// The most runs of its members running at once.
    pub max_running: u32,
    /// The loops that belong to it.
    pub members: u64,
    /// Its runs and workflow steps running now.
    pub running: u64,
    /// When it was created.
    pub created_at: Timestamp,
    /// When its limit last changed.
    pub updated_at: Timestamp,
}

/// What [`Store::remove_pool`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PoolRemoval {
    /// The pool is gone.
    Removed,
    /// No pool has that name.
    Missing,
    /// Loops still name it (their names, at most ten): nothing changed.
    InUse(Vec<String>),
    /// No loop names it, but workflow steps do (`workflow/step`, at most
    /// ten): nothing changed.
    InUseBySteps(Vec<String>),
}

impl Store {
    /// Creates pool `name` with limit `max_running`, or changes the limit
    /// of the pool of that name (Q1). A raised limit wakes the daemons, so
    /// members waiting for room start at once. The name is checked by the
    /// caller ([`loops_core::validate_pool_name`]).
    pub fn set_pool(&self, name: &str, max_running: u32, now: Timestamp) -> Result<PoolInfo> {
        self.backend().set_pool(name, max_running, now)
    }

    /// Every pool, by name, with its members and runs in flight.
    pub fn list_pools(&self) -> Result<Vec<PoolInfo>> {
        self.backend().list_pools()
    }

    /// The pool called `name`, if any.
    pub fn pool(&self, name: &str) -> Result<Option<PoolInfo>> {
        Ok(self.list_pools()?.into_iter().find(|p| p.name == name))
    }

    /// Removes pool `name`, unless a loop or a workflow step still names it
    /// (Q1).
    pub fn remove_pool(&self, name: &str) -> Result<PoolRemoval> {
        self.backend().remove_pool(name)
    }
}
