//! The reliability suite: it proves loops' guarantees under faults (crashes,
//! races, output floods, escaping process trees, bad input, storage faults)
//! and keeps them proven.
//!
//! Every test has a short variant, which `cargo test --workspace` (and so
//! `cargo xtask ci`) runs within a few minutes on two cores, and a long
//! variant that `cargo xtask reliability` runs on demand by setting
//! `LOOPS_RELIABILITY_LONG=1`. Each test prints its figures as
//! `reliability: <test>: ...` lines; run with `--nocapture` to see them.

mod support;

mod crash;
mod daemon_files;
mod datadir;
mod flood;
mod fuzz;
mod opening;
mod races;
mod secrets;
mod storage;
mod trees;
