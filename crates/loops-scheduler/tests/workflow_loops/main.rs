//! Workflows as loop targets, through `tick` and `ProcessExecutor` (SPEC
//! §6.8; §10 items 77, 78, 98 without the daemon; §9 item 21). The fixture
//! is the workflow runner's own (`loops-workflow/tests/workflow/common.rs`),
//! plus a tick with the production executor.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../../../loops-workflow/tests/workflow/common.rs"]
#[expect(dead_code)]
mod common;
mod lease;
mod loops;

use loops_core::{ManualClock, WorkflowSpec};
use loops_scheduler::{ProcessExecutor, TickOptions, TickResult, tick};
use loops_store::Store;

use crate::common::{Fixture, create, sh};

/// One tick of `store` at `clock`'s time with the production executor, as
/// `runner_id`, at most `max_parallel` runs at once, stopped by `stop`.
pub(crate) fn process_tick(
    fx: &Fixture,
    store: &Store,
    clock: &ManualClock,
    runner_id: &str,
    max_parallel: usize,
    stop: Option<&loops_exec::CancelToken>,
) -> TickResult {
    let mut executor = ProcessExecutor::for_store(clock, store);
    executor.exec = fx.exec();
    let opts = TickOptions {
        hooks: loops_scheduler::HookSettings::none(),
        on_hook_error: None,
        runner_id,
        clock,
        executor: &executor,
        max_parallel,
        stop,
        on_run: None,
        on_error: None,
    };
    tick(store, &opts).unwrap()
}

/// Stores a workflow named `name` whose one step `a` touches
/// `$WORK/started`, sleeps 5 s, then touches `$WORK/late`: a run to stop
/// mid-step, before its side effect.
pub(crate) fn create_slow(store: &Store, name: &str) -> WorkflowSpec {
    create(
        store,
        name,
        serde_json::json!([sh(
            "a",
            &[],
            "touch \"$WORK/started\"; sleep 5; touch \"$WORK/late\""
        )]),
        serde_json::json!({}),
    )
}
