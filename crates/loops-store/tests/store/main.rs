//! Integration tests of the store on real temporary database files (WAL
//! and a second connection need a file): claims, leases, finalizes,
//! recovery, loop state changes, the daemon lease, and opening databases
//! written by the original 0.3.1 (SPEC §4, §10 items 18–35).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cancel;
mod claim;
mod common;
mod compat;
mod daemon;
mod datadir;
mod edit;
mod facts;
mod finalize;
mod gc;
mod lease;
mod loops;
mod opening;
mod placement;
mod policies;
mod pools;
mod recover;
mod step_pools;
mod triggers;
