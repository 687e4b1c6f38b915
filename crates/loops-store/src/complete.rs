//! What shell completion offers from the database (issue 28): loop names
//! and ids, run ids, workflow names and ids, workflow run ids, labels and
//! pools.
//!
//! A completion runs on every Tab, so it is read-only and bounded: the
//! database file is opened read-only and never created or migrated (a
//! missing file offers nothing), at most `limit` candidates come back, and a
//! read that takes longer than its budget is interrupted. Every failure
//! offers nothing: a completion never prints an error.

use std::path::Path;
use std::time::Duration;

/// The most candidates one completion offers unless told otherwise.
pub const COMPLETION_LIMIT: usize = 200;

/// How long one completion may read the database unless told otherwise.
pub const COMPLETION_BUDGET: Duration = Duration::from_millis(500);

/// What a value names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompletionKind {
    /// A loop: its name, or its id.
    Loop,
    /// A loop run, by its id.
    LoopRun,
    /// A workflow: the name of an active one, or any one's id.
    Workflow,
    /// A workflow run, by its id.
    WorkflowRun,
    /// A label some loop has.
    Label,
    /// A pool, by its name.
    Pool,
}

/// One value to offer, with a line about it that zsh and fish show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// The value, as the command line takes it.
    pub value: String,
    /// What it is (a loop's status, a run's loop), or `None`.
    pub help: Option<String>,
}

/// The values of `kind` starting with `prefix` in the SQLite database at
/// `db`, newest first, at most `limit` of them, read within `budget`.
/// Nothing is created: a missing file, or any failure, offers nothing.
pub fn complete_sqlite(
    db: &Path,
    kind: CompletionKind,
    prefix: &str,
    limit: usize,
    budget: Duration,
) -> Vec<Candidate> {
    crate::sqlite::complete::candidates(db, kind, prefix, limit, budget).unwrap_or_default()
}

/// Keeps the first of each value, those starting with `prefix` (SQL's
/// comparisons fold case or collate; the shell's do not), at most `limit`.
pub(crate) fn finish(found: Vec<Candidate>, prefix: &str, limit: usize) -> Vec<Candidate> {
    let mut seen = std::collections::HashSet::new();
    found
        .into_iter()
        .filter(|c| c.value.starts_with(prefix) && !c.value.is_empty())
        .filter(|c| seen.insert(c.value.clone()))
        .take(limit)
        .collect()
}
