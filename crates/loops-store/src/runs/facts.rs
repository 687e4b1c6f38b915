//! Reports over what finished runs said and cost (issue 27): the failures
//! of `loops health`, grouped by loop, class and fingerprint (agents note
//! §7.1, §7.2), and the runs `loops cost` totals.
//!
//! Both read only the runs that carry what they report, through the
//! partial indexes on `finished_at` made for them (`idx_runs_failure`,
//! `idx_runs_cost` and `idx_runs_usage` of V11), so their cost
//! follows the failures or the costed runs since the instant asked, not
//! every run stored (the plans are tested in `sqlite/plans.rs`). The
//! grouping of failures is done by the database in either dialect; only
//! the newest run of each group is read whole, for its error.
//!
//! Written once for both backends over [`Db`].

use std::ops::ControlFlow;

use loops_core::{FailureClass, LoopId, Timestamp, TokenUsage, Usd};

use crate::Store;
use crate::backend::FactOps;
use crate::columns::{instant, int, json_opt, parsed, text, text_opt, usd_opt};
use crate::error::Result;
use crate::sql::{Col, Db, Fields};

/// The most characters of a failure's error [`FailureGroup::sample`]
/// holds; the rest is cut in the database, so a long error never leaves
/// it whole.
pub const FAILURE_SAMPLE_CHARS: usize = 1000;

/// [`FAILURE_SAMPLE_CHARS`] as the literal the statement splices in.
macro_rules! sample_chars {
    () => {
        "1000"
    };
}

/// The failed runs of one loop with one class and fingerprint
/// ([`Store::failure_groups_since`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailureGroup {
    /// The loop the runs belong to (it may have been removed since).
    pub loop_id: LoopId,
    /// The loop's name, as its newest run of the group recorded it.
    pub loop_name: String,
    /// The class of every run of the group (agents note §7.1).
    pub failure_class: FailureClass,
    /// Their fingerprint (§7.2): the same failure of the same loop.
    pub failure_fingerprint: String,
    /// How many runs failed so since the instant asked.
    pub count: u64,
    /// When the oldest of them finished.
    pub first_seen: Timestamp,
    /// When the newest of them finished.
    pub last_seen: Timestamp,
    /// The error of the newest run, at most [`FAILURE_SAMPLE_CHARS`]
    /// characters of it, as stored (scrubbed at capture, not made safe for
    /// a terminal); `None` when it recorded none.
    pub sample: Option<String>,
}

/// What one finished run cost and used ([`Store::for_each_run_cost_since`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunCost {
    /// The run's loop (it may have been removed since).
    pub loop_id: LoopId,
    /// The loop's name, as the run recorded it.
    pub loop_name: String,
    /// When the run finished.
    pub finished_at: Timestamp,
    /// What the run cost, when its agent said.
    pub cost_usd: Option<Usd>,
    /// The tokens it used, when its agent said.
    pub usage: Option<TokenUsage>,
}

/// The failures since `?1`, grouped by loop, class and fingerprint, with
/// the newest run of each group joined for its name and error; most
/// recently seen first. Skipped runs are not failures: a skip exit code
/// and an overlap are outcomes a loop asked for.
///
/// The groups are counted over `idx_runs_failure`'s range; the newest run
/// of a group is found by its `finished_at` in the same index, so nothing
/// reads the runs of a loop that did not fail.
pub(crate) const FAILURE_GROUPS: &str = concat!(
    "WITH g AS (
       SELECT loop_id, failure_class, failure_fingerprint, COUNT(*) AS n,
              MIN(finished_at) AS first_seen, MAX(finished_at) AS last_seen
       FROM loop_runs
       WHERE failure_class IS NOT NULL AND finished_at >= ?1 AND status <> 'skipped'
       GROUP BY loop_id, failure_class, failure_fingerprint
     )
     SELECT g.loop_id, r.loop_name, g.failure_class, g.failure_fingerprint, g.n,
            g.first_seen, g.last_seen, SUBSTR(r.error, 1, ",
    sample_chars!(),
    ")
     FROM g JOIN loop_runs r ON r.id = (
       SELECT s.id FROM loop_runs s
       WHERE s.failure_class IS NOT NULL AND s.finished_at = g.last_seen
         AND s.loop_id = g.loop_id AND s.failure_class = g.failure_class
         AND s.failure_fingerprint IS NOT DISTINCT FROM g.failure_fingerprint
         AND s.status <> 'skipped'
       ORDER BY s.id DESC LIMIT 1)
     ORDER BY g.last_seen DESC, g.loop_id, g.failure_class, g.failure_fingerprint"
);

/// The names [`failure_group`] reports a column under.
const GROUP_COLUMNS: &[&str] = &[
    "loop_id",
    "loop_name",
    "failure_class",
    "failure_fingerprint",
    "count",
    "first_seen",
    "last_seen",
    "error",
];

/// A [`FAILURE_GROUPS`] row → [`FailureGroup`].
fn failure_group(row: &dyn Fields) -> Col<FailureGroup> {
    let n = GROUP_COLUMNS;
    Ok(FailureGroup {
        loop_id: parsed(row, n, 0)?,
        loop_name: text(row, n, 1)?,
        failure_class: parsed(row, n, 2)?,
        // Every finalize that writes a class writes its fingerprint; a row
        // written otherwise groups under an empty one.
        failure_fingerprint: text_opt(row, n, 3)?.unwrap_or_default(),
        count: int(row, n, 4)?,
        first_seen: instant(row, n, 5)?,
        last_seen: instant(row, n, 6)?,
        sample: text_opt(row, n, 7)?,
    })
}

/// The runs finished since `?1` that reported a cost, over `idx_runs_cost`,
/// then those that reported only their usage, over `idx_runs_usage`: two
/// index ranges, where one `OR` would read every run since.
pub(crate) const COSTED_RUNS: &str = "SELECT loop_id, loop_name, finished_at, cost_usd_nanos, usage
   FROM loop_runs WHERE cost_usd_nanos IS NOT NULL AND finished_at >= ?1
 UNION ALL
 SELECT loop_id, loop_name, finished_at, cost_usd_nanos, usage
   FROM loop_runs WHERE usage IS NOT NULL AND finished_at >= ?1 AND cost_usd_nanos IS NULL";

/// The columns of [`COSTED_RUNS`].
const COST_COLUMNS: &[&str] = &[
    "loop_id",
    "loop_name",
    "finished_at",
    "cost_usd_nanos",
    "usage",
];

/// A [`COSTED_RUNS`] row → [`RunCost`].
fn run_cost(row: &dyn Fields) -> Col<RunCost> {
    let n = COST_COLUMNS;
    Ok(RunCost {
        loop_id: parsed(row, n, 0)?,
        loop_name: text(row, n, 1)?,
        finished_at: instant(row, n, 2)?,
        cost_usd: usd_opt(row, n, 3)?,
        usage: json_opt(row, n, 4)?,
    })
}

impl<D: Db> FactOps for D {
    fn failure_groups_since(&self, since: Timestamp) -> Result<Vec<FailureGroup>> {
        self.read(|c| {
            c.query_vec(
                FAILURE_GROUPS,
                &[since.into()],
                ("loop_runs", "grouping failed runs"),
                failure_group,
            )
        })
    }

    fn for_each_run_cost_since(
        &self,
        since: Timestamp,
        each: &mut dyn FnMut(RunCost) -> ControlFlow<()>,
    ) -> Result<()> {
        self.read(|c| {
            c.query_each(
                COSTED_RUNS,
                &[since.into()],
                ("loop_runs", "reading what runs cost"),
                run_cost,
                each,
            )
        })
    }
}

impl Store {
    /// The runs that failed, timed out or were abandoned, finished at or
    /// after `since`, grouped by loop, failure class and fingerprint
    /// (agents note §7.1, §7.2; `loops health`): how many, when first and
    /// last, and the newest one's error. Most recently seen first. Runs
    /// without a class (finished before loops classified them) and skipped
    /// runs are left out.
    pub fn failure_groups_since(&self, since: Timestamp) -> Result<Vec<FailureGroup>> {
        self.backend().failure_groups_since(since)
    }

    /// Hands `each` every run finished at or after `since` that reported a
    /// cost or a token usage (`loops cost`), costed runs first, in no
    /// particular order; a `Break` stops reading.
    pub fn for_each_run_cost_since(
        &self,
        since: Timestamp,
        mut each: impl FnMut(RunCost) -> ControlFlow<()>,
    ) -> Result<()> {
        self.backend().for_each_run_cost_since(since, &mut each)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sample_bound_is_the_one_spliced_in() {
        assert_eq!(
            sample_chars!().parse::<usize>().ok(),
            Some(FAILURE_SAMPLE_CHARS)
        );
        assert!(FAILURE_GROUPS.contains(concat!("SUBSTR(r.error, 1, ", sample_chars!(), ")")));
    }
}
