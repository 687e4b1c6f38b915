//! The SQLite side of [`crate::runs`]: the operations are written once in
//! `runs/ops.rs` and `runs/release.rs`; SQLite adds nothing to them
//! ([`RunHost`]'s defaults). Only the claims' transaction is its own
//! (`claim.rs`).

mod claim;

use crate::runs::ops::RunHost;
use crate::sqlite::Sqlite;

/// A commit on SQLite is never lost without an answer, and every run of
/// the database is this machine's.
impl RunHost for Sqlite {}
