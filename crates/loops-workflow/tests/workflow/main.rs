//! Integration tests of the workflow runner on real temporary database
//! files with real short-lived processes (`sh`, fake agents written into a
//! temporary bin directory): order and events, failure handling, timeouts,
//! cancel, recover and resume, parallel steps, idempotency and the bounded
//! summary (SPEC §6, §10 items 72–87; §9 items 19, 25, 35, 38). Workflows
//! as loop targets, through `tick`, are tested in `loops-scheduler`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cancel;
mod common;
mod idempotency;
mod parallel;
mod pools;
mod recover;
mod serial;
mod storage;
mod summary;
mod timeouts;
