//! Integration tests of the scheduler: `tick` and `run_now` on real
//! temporary database files, driven by a `ManualClock` and a fake executor
//! (SPEC §3, §10 items 36–53, §9 items 1, 7, 10, 12, 13). A few end-to-end
//! tests run real `true`/`false`/`sh` processes through `ProcessExecutor`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod concurrency;
mod daemon;
mod identity;
mod lease;
mod manual;
mod process;
mod stop;
mod tick;
