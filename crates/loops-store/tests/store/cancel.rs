//! Cancel requests (issue 28): only a running run takes one, its holder
//! reads it back, and its finalize or recovery records it `cancelled`,
//! neither retried nor counted toward the failure streak.

use loops_core::{ExecutorStatus, LoopStatus, RunStatus};
use loops_store::{Advance, CancelOutcome, CancelRequest, Claim, Fence};

use crate::common::*;

fn claim(store: &loops_store::Store, lp: &loops_core::Loop, runner: &str) -> loops_core::LoopRun {
    match store.claim_run(lp, t0(), runner, t0()).unwrap() {
        Claim::Claimed { run, .. } => run,
        other => panic!("not claimed: {other:?}"),
    }
}

#[test]
fn cancel_a_running_run_reaches_its_holder_and_finalizes_cancelled_without_retry() {
    let fx = Fixture::new();
    let store = fx.store();
    // Three attempts: a failure would be retried.
    let lp = create(&store, "cancel-me", 3);
    let run = claim(&store, &lp, RUNNER_A);
    let asked = t0().add_ms(100);
    let requested = match store
        .request_cancel(&run.id, "ann@box", 2_000, asked)
        .unwrap()
    {
        Some(CancelOutcome::Requested(run)) => run,
        other => panic!("not requested: {other:?}"),
    };
    assert_eq!(requested.status, RunStatus::Running);
    assert_eq!(requested.cancelled_by.as_deref(), Some("ann@box"));
    assert_eq!(requested.cancel_requested_at, Some(asked));
    // A second request keeps the first requester.
    store
        .request_cancel(&run.id, "bob@elsewhere", 1_000, asked.add_ms(1))
        .unwrap();
    // The holder sees it; another runner does not.
    assert_eq!(
        store.cancel_requests(RUNNER_A).unwrap(),
        [CancelRequest {
            run_id: run.id,
            by: "ann@box".to_owned(),
            grace_ms: Some(1_000),
        }]
    );
    assert!(store.cancel_requests(RUNNER_B).unwrap().is_empty());
    // The killed process ends as a failure; it is recorded cancelled.
    let at = asked.add_ms(500);
    let finalized = store
        .finalize_and_advance(
            &run.id,
            &result(ExecutorStatus::Failed, at),
            &Fence::of_claim(RUNNER_A, &run),
            at,
        )
        .unwrap();
    assert_eq!(finalized.run.status, RunStatus::Cancelled);
    assert_eq!(finalized.run.cancelled_by.as_deref(), Some("ann@box"));
    let Advance::Advanced(plan) = &finalized.advance else {
        panic!("not advanced: {:?}", finalized.advance);
    };
    assert_eq!(
        plan.retry_scheduled_for, None,
        "a cancelled run is not retried"
    );
    let lp = store.get_loop(&lp.id).unwrap().unwrap();
    assert_eq!(lp.status, LoopStatus::Active);
    assert_eq!(lp.retry_scheduled_for, None);
    assert_eq!(lp.consecutive_failures.unwrap_or(0), 0, "not counted");
    assert!(lp.next_run_at.unwrap() > t0());
    // A finished run takes no request, and the slot is never claimed again.
    match store.request_cancel(&run.id, "ann@box", 0, at).unwrap() {
        Some(CancelOutcome::NotRunning(r)) => assert_eq!(r.status, RunStatus::Cancelled),
        other => panic!("{other:?}"),
    }
    assert!(store.cancel_requests(RUNNER_A).unwrap().is_empty());
    assert!(matches!(
        store.claim_run(&lp, t0(), RUNNER_B, at).unwrap(),
        Claim::NotClaimed(_)
    ));
}

#[test]
fn cancel_of_an_unknown_run_is_none_and_of_a_loop_takes_its_running_runs() {
    let fx = Fixture::new();
    let store = fx.store();
    let unknown = "0123456789ab".parse().unwrap();
    assert_eq!(
        store.request_cancel(&unknown, "mcp", 0, t0()).unwrap(),
        None
    );
    let lp = create(&store, "by-loop", 1);
    assert!(
        store
            .request_cancel_loop(&lp.id, "mcp", 0, t0())
            .unwrap()
            .is_empty()
    );
    let run = claim(&store, &lp, RUNNER_A);
    let runs = store
        .request_cancel_loop(&lp.id, "mcp", 5_000, t0())
        .unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].id, run.id);
    assert_eq!(runs[0].cancelled_by.as_deref(), Some("mcp"));
}

#[test]
fn a_cancelled_run_whose_holder_died_is_recovered_cancelled() {
    let fx = Fixture::new();
    let store = fx.store();
    let lp = create(&store, "orphan", 3);
    let run = claim(&store, &lp, RUNNER_A);
    store.request_cancel(&run.id, "ann@box", 0, t0()).unwrap();
    let expired = run.lease_expires_at.unwrap();
    let recovered = store.recover_expired_run_leases(expired).unwrap();
    assert_eq!(recovered.len(), 1);
    assert_eq!(recovered[0].run.status, RunStatus::Cancelled);
    let lp = store.get_loop(&lp.id).unwrap().unwrap();
    assert_eq!(lp.retry_scheduled_for, None);
    assert_eq!(lp.consecutive_failures.unwrap_or(0), 0);
}
