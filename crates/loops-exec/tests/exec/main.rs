//! The executor against fake binaries (SPEC §10 items 54–71).
//!
//! Every test works in its own temp directory with an explicit environment
//! (`PATH`, `HOME`) and fake programs written as `#!/bin/sh` scripts. Waits
//! for real processes poll against a deadline.

// Fixture helpers are not `#[test]` functions, so `allow-unwrap-in-tests`
// does not cover them; a failed setup step should just fail the test.
#![allow(clippy::unwrap_used)]

mod account;
mod agent;
mod command;
mod database;
mod kill;
mod orphan;
mod output;
mod prompt;
mod secrets;
mod support;
mod watchdog;
mod worktree;
