//! Triggers other than the clock (issue 30, `docs/triggers.md` T1–T7).
//!
//! A trigger is a row of `loop_triggers`: a pending slot of its loop that
//! a runner claims like a scheduled one (`runs/claim/trigger.rs`), under
//! the same placement, pool and overlap rules. Rows come from three
//! places: the finalize of an upstream run, inside its transaction, for
//! each loop that runs `--after` it (kind `after`, unique per upstream
//! run); `loops trigger` and the dashboard's webhook (kind `manual`,
//! unique per idempotency key); and a watched path (kind `watch`, one per
//! run of the loop: see [`Store::add_watch_trigger`]).
//!
//! A triggered run never moves its loop's schedule, and is not retried.

use loops_core::{Loop, LoopId, RunId, Timestamp, TriggerKind};
use serde::Serialize;

use crate::Store;
use crate::error::Result;

pub(crate) mod ops;
mod watch;
#[cfg(test)]
pub(crate) use watch::WATCH_LOOPS;

/// One trigger of a loop.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LoopTrigger {
    /// Its id (12 hex characters).
    pub id: String,
    /// The loop it starts.
    pub loop_id: LoopId,
    /// What made it.
    pub kind: TriggerKind,
    /// The upstream run, for `after`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source_run_id: Option<RunId>,
    /// The upstream loop, for `after`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source_loop_id: Option<LoopId>,
    /// The key that makes a repeated delivery run once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
    /// The payload, handed to the run; shown only on request.
    #[serde(skip)]
    pub payload: Option<String>,
    /// When it arrived.
    pub created_at: Timestamp,
    /// The run it started, once claimed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_id: Option<RunId>,
    /// When catch-up `latest` folded it into a newer trigger (T7).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub coalesced_at: Option<Timestamp>,
}

/// A trigger to add by hand ([`Store::add_trigger`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NewTrigger {
    /// Given to the run (at most [`loops_core::MAX_TRIGGER_PAYLOAD`]
    /// bytes; the caller checks).
    pub payload: Option<String>,
    /// A repeated delivery with the same key adds nothing.
    pub idempotency_key: Option<String>,
}

/// What [`Store::add_trigger`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TriggerAdded {
    /// The trigger: the new one, or the first one with the same key.
    pub trigger: LoopTrigger,
    /// False when a trigger with the same idempotency key was there
    /// already, and nothing was added.
    pub added: bool,
}

/// What [`Store::add_watch_trigger`] did (T8, T9).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum WatchFired {
    /// A `watch` trigger was added; the daemons are woken.
    Added(LoopTrigger),
    /// A `watch` trigger since the loop's last run is there already
    /// (pending, or added by another daemon watching the same files): the
    /// change joins it.
    Joined,
    /// The change is the loop's own (T9): one of its runs is running, or
    /// the last one ended within the debounce before the change.
    OwnRun,
    /// The loop is gone, is not active, or watches nothing.
    NotWatching,
}

impl Store {
    /// Adds a `manual` trigger to loop `loop_id` (T4), and wakes the
    /// daemons. With an idempotency key already used for the loop, adds
    /// nothing and returns the first trigger. `None` when the loop does
    /// not exist.
    pub fn add_trigger(
        &self,
        loop_id: &LoopId,
        new: &NewTrigger,
        now: Timestamp,
    ) -> Result<Option<TriggerAdded>> {
        self.backend().add_trigger(loop_id, new, now)
    }

    /// The pending triggers of every loop, oldest first per loop, with the
    /// loops they belong to grouped together.
    pub fn pending_triggers(&self) -> Result<Vec<LoopTrigger>> {
        self.backend().pending_triggers()
    }

    /// The newest `limit` triggers of loop `loop_id`, newest first.
    pub fn loop_triggers(&self, loop_id: &LoopId, limit: u32) -> Result<Vec<LoopTrigger>> {
        self.backend().loop_triggers(loop_id, limit)
    }

    /// Every loop that runs after others, with its name and its edges
    /// (T1), for the cycle check of `create` and `edit`.
    pub fn after_edges(&self) -> Result<Vec<(LoopId, String, Vec<loops_core::AfterEdge>)>> {
        self.backend().after_edges()
    }

    /// The active loops that watch paths (T8), for the daemons' watchers:
    /// a few rows whatever the number of loops (`idx_loops_watch`).
    pub fn watch_loops(&self) -> Result<Vec<Loop>> {
        self.backend().watch_loops()
    }

    /// Adds a `watch` trigger to loop `loop_id` for a burst of changes
    /// whose last one came at `changed_at`, unless the change is the
    /// loop's own (T9). One per run of the loop, whichever daemons
    /// watch: its idempotency key is `watch:` and the loop's last run.
    pub fn add_watch_trigger(
        &self,
        loop_id: &LoopId,
        changed_at: Timestamp,
        now: Timestamp,
    ) -> Result<WatchFired> {
        self.backend().add_watch_trigger(loop_id, changed_at, now)
    }

    /// How many triggers catch-up folded into another (T7) before
    /// `older_than`: a gc pass's dry run.
    pub fn old_coalesced_triggers(&self, older_than: Timestamp) -> Result<u64> {
        self.backend().old_coalesced_triggers(older_than)
    }

    /// The next `limit` (at least one) triggers catch-up folded into
    /// another (T7) before `older_than`, in id order after `after`: a read,
    /// which takes no write lock however much of the table it passes over.
    /// Hand them to [`Store::delete_old_coalesced_triggers`], and the last
    /// one back as `after`.
    pub fn plan_old_coalesced_triggers(
        &self,
        older_than: Timestamp,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<String>> {
        self.backend()
            .plan_old_coalesced_triggers(older_than, after, limit)
    }

    /// Deletes those of the triggers `ids` that catch-up folded into
    /// another before `older_than`, in one short write; returns how many.
    /// They never run and belong to no run, so deleting runs never takes
    /// them: without this they would pile up for as long as a store lives
    /// (issue 32).
    pub fn delete_old_coalesced_triggers(
        &self,
        ids: &[String],
        older_than: Timestamp,
    ) -> Result<u64> {
        self.backend()
            .delete_old_coalesced_triggers(ids, older_than)
    }

    /// The triggers that started the runs `run_ids`, for `runs` (T10).
    pub fn triggers_of_runs(&self, run_ids: &[RunId]) -> Result<Vec<LoopTrigger>> {
        self.backend().triggers_of_runs(run_ids)
    }
}
