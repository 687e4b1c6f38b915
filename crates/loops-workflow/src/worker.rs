//! One step as a process, on a worker thread (SPEC §6.3 step 2.6).
//!
//! The worker builds the step's effective target (`step.account ??
//! target.account`, `step.timeoutMs ?? target.timeoutMs`), runs it through
//! `loops_exec::execute_target` with the step's own [`CancelToken`], and
//! reports the spawn and the result to the store thread. It touches no
//! store: the store thread records the pid and the result. Workers are
//! threads of a [`Pool`], reused from one step to the next.
//!
//! An executor `Err` (the account errors of SPEC §5.4, raised before
//! anything is spawned) becomes a failed result with that message, and so
//! does a panic (the pool catches it), so the store thread always hears
//! back from every worker.

use std::sync::mpsc::Sender;
use std::time::Instant;

use loops_core::{Clock, ExecutorResult, ProcessRef, ProcessTarget, Step, Timestamp};
use loops_exec::{CancelToken, ExecOptions, Pool, RunContext, RunMetadata, execute_target};

/// A message from a step worker (or the stop token) to the store thread.
pub(crate) enum Report {
    /// The stop token was cancelled.
    Stop,
    /// The step at this position spawned its child.
    Spawned(usize, ProcessRef),
    /// The step at this position finished (boxed: a result is large, and
    /// reports queue up).
    Done(usize, Box<ExecutorResult>),
}

/// Everything a worker needs to run one step.
pub(crate) struct StepJob<'a> {
    /// The step's position in execution order, echoed in its reports.
    pub(crate) pos: usize,
    /// The step.
    pub(crate) step: &'a Step,
    /// Its `LOOPS_*` variables.
    pub(crate) meta: RunMetadata,
    /// Kills the step's process group when cancelled.
    pub(crate) cancel: CancelToken,
    /// When the step was started, for a result that never spawned.
    pub(crate) started_at: Timestamp,
}

/// The target a step runs: its own target with the step's account and
/// timeout laid over the target's (SPEC §6.3 step 2.6, §6.4).
pub(crate) fn effective_target(step: &Step) -> ProcessTarget {
    let account = step.effective_account().cloned();
    let timeout_ms = step.effective_timeout_ms();
    let mut target = step.target.clone();
    match &mut target {
        ProcessTarget::Command(c) => {
            c.account = account;
            c.timeout_ms = timeout_ms;
        }
        ProcessTarget::Agent(a) => {
            a.account = account;
            // A step's own timeout overrides; else the target's stays as
            // it is, `null` (no wall clock, no default watchdog) included.
            if let Some(ms) = step.timeout_ms {
                a.timeout_ms = loops_core::WallClock::Ms(ms);
            }
        }
    }
    target
}

/// Hands `job` to a worker of `pool`, which runs it with the workflow run's
/// `exec` and `ctx` (its clock and spawn id; the job brings the cancel
/// token) and reports its spawn and its result on `tx`. A panic in the
/// worker becomes a failed result too, so the store thread hears back from
/// every step.
pub(crate) fn submit_step<'scope>(
    pool: &mut Pool<'scope, '_, Report>,
    job: StepJob<'scope>,
    exec: &'scope ExecOptions,
    ctx: RunContext<'scope>,
    tx: Sender<Report>,
) {
    let (pos, started_at, began, clock) = (job.pos, job.started_at, Instant::now(), ctx.clock);
    pool.submit(
        move || run_step(job, began, exec, ctx, &tx),
        move |panic| {
            let error = format!("step executor panicked: {panic}");
            step_failed(pos, error, started_at, began, clock)
        },
    );
}

/// Runs `job` to completion, reporting its spawn on `tx`, and returns the
/// report of its result.
fn run_step(
    job: StepJob<'_>,
    began: Instant,
    exec: &ExecOptions,
    ctx: RunContext<'_>,
    tx: &Sender<Report>,
) -> Report {
    let pos = job.pos;
    let ctx = RunContext {
        cancel: Some(&job.cancel),
        ..ctx
    };
    let outcome = execute_target(
        &effective_target(job.step),
        &job.meta,
        exec,
        &ctx,
        &mut |process| {
            // The receiver outlives every worker; a failed send only
            // means the store thread is already gone.
            let _ = tx.send(Report::Spawned(pos, process));
        },
    );
    match outcome {
        Ok(result) => Report::Done(pos, Box::new(result)),
        Err(e) => step_failed(pos, e.to_string(), job.started_at, began, ctx.clock),
    }
}

/// SPEC §6.3 step 2.6: a thrown error becomes a failed result. It lasts
/// from `began`, when the step was handed to its worker, on the monotonic
/// clock.
fn step_failed(
    pos: usize,
    error: String,
    started_at: Timestamp,
    began: Instant,
    clock: &dyn Clock,
) -> Report {
    let result = ExecutorResult {
        duration_ms: i64::try_from(began.elapsed().as_millis()).unwrap_or(i64::MAX),
        ..ExecutorResult::failed(error, started_at, clock.now())
    };
    Report::Done(pos, Box::new(result))
}

#[cfg(test)]
mod tests {
    use super::*;
    use loops_core::workflow_from_json;
    use serde_json::json;

    #[test]
    fn step_account_and_timeout_override_the_target() {
        let w = workflow_from_json(
            &json!({"name": "w", "steps": [
                {"id": "a", "timeoutMs": 50, "account": {"profile": "p", "tool": "claude"},
                 "target": {"type": "command", "command": "true", "timeoutMs": 9000,
                            "account": {"profile": "q", "tool": "codex"}}},
                {"id": "b", "target": {"type": "agent", "provider": "claude", "prompt": "x",
                                        "timeoutMs": 9000}}
            ]}),
            None,
        )
        .unwrap();
        let a = effective_target(&w.steps[0]);
        assert_eq!(a.timeout_ms(), Some(50));
        assert_eq!(a.account().map(|a| a.profile.as_str()), Some("p"));
        let b = effective_target(&w.steps[1]);
        assert_eq!((b.timeout_ms(), b.account()), (Some(9000), None));
    }
}
