//! The PostgreSQL backend's workflow, step, gc, daemon and membership
//! operations against a real server (issue 15), checked against SQLite fed
//! the same calls or holding the same rows.
//!
//! Each test takes a fresh database on the server in
//! `LOOPS_TEST_DATABASE_URL` and skips, saying so, when it is not set.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod gc;
mod members;
mod workflows;
