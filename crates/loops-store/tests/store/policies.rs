//! Issue 17 in the store, on both backends: policy columns round-trip,
//! label filters, streaks kept by finalize-and-advance, the breaker and
//! resume, and skip exit codes decided in the finalize.

use loops_core::{Backoff, ExecutorStatus, LoopStatus, RunStatus};
use loops_store::{Claim, Fence, LoopFilter, RunFilter, Store};

use crate::common::*;

fn run_slot(
    store: &Store,
    lp: &loops_core::Loop,
    status: ExecutorStatus,
    code: i32,
) -> loops_core::LoopRun {
    let lp = store.get_loop(&lp.id).unwrap().unwrap();
    let slot = lp.retry_scheduled_for.or(lp.next_run_at).unwrap();
    let run = match store.claim_run(&lp, slot, RUNNER_A, slot).unwrap() {
        Claim::Claimed { run, .. } => run,
        other => panic!("not claimed: {other:?}"),
    };
    let mut res = result(status, slot.add_ms(10));
    res.exit_code = Some(code);
    store
        .finalize_and_advance(
            &run.id,
            &res,
            &Fence::of_claim(RUNNER_A, &run),
            slot.add_ms(10),
        )
        .unwrap()
        .run
}

#[test]
fn policies_round_trip_and_labels_filter_in_the_query() {
    let fx = Fixture::new();
    let store = fx.store();
    let mut new = interval_loop("labeled");
    new.policy.labels = vec!["team=infra".into(), "nightly".into()];
    new.policy.backoff = Backoff::Exponential;
    new.policy.max_retry_delay_ms = Some(5_000);
    new.policy.skip_exit_codes = vec![75];
    let lp = store.create_loop(&new, t0()).unwrap();
    assert_eq!(store.get_loop(&lp.id).unwrap().unwrap(), lp);
    store.create_loop(&interval_loop("plain"), t0()).unwrap();
    let names = |labels: &[&str]| {
        let labels: Vec<String> = labels.iter().map(|l| (*l).to_owned()).collect();
        let mut names = Vec::new();
        store
            .for_each_labeled_loop(&LoopFilter::default(), &labels, |l| {
                names.push(l.name);
                std::ops::ControlFlow::Continue(())
            })
            .unwrap();
        names.sort();
        names
    };
    assert_eq!(names(&[]), ["labeled", "plain"]);
    assert_eq!(names(&["nightly", "team=infra"]), ["labeled"]);
    assert!(names(&["nightly", "other"]).is_empty());
    run_slot(&store, &lp, ExecutorStatus::Succeeded, 0);
    let runs = store
        .list_labeled_runs(&RunFilter::default(), &["nightly".to_owned()])
        .unwrap();
    assert_eq!(runs.len(), 1);
    assert!(
        store
            .list_labeled_runs(&RunFilter::default(), &["other".to_owned()])
            .unwrap()
            .is_empty()
    );
}

#[test]
fn streaks_expire_trip_and_resume_rearms() {
    let fx = Fixture::new();
    let store = fx.store();
    let mut new = interval_loop("counted");
    new.policy.expires_after_runs = Some(2);
    new.policy.pause_after_failures = Some(2);
    let lp = store.create_loop(&new, t0()).unwrap();
    run_slot(&store, &lp, ExecutorStatus::Failed, 3);
    let got = store.get_loop(&lp.id).unwrap().unwrap();
    assert_eq!(
        (got.consecutive_failures, got.consecutive_successes),
        (Some(1), Some(0))
    );
    run_slot(&store, &lp, ExecutorStatus::Failed, 3);
    let got = store.get_loop(&lp.id).unwrap().unwrap();
    assert_eq!(got.status, LoopStatus::Paused);
    assert!(
        got.paused_reason
            .unwrap()
            .contains("2 consecutive failures")
    );
    let resumed = store.resume_loop(&lp.id, t0().add_ms(500_000)).unwrap();
    assert_eq!(resumed.loop_().consecutive_failures, Some(0));
    run_slot(&store, &lp, ExecutorStatus::Succeeded, 0);
    assert_eq!(
        store.get_loop(&lp.id).unwrap().unwrap().status,
        LoopStatus::Active
    );
    run_slot(&store, &lp, ExecutorStatus::Succeeded, 0);
    let got = store.get_loop(&lp.id).unwrap().unwrap();
    assert_eq!((got.status, got.next_run_at), (LoopStatus::Expired, None));
}

#[test]
fn a_skip_exit_code_is_recorded_skipped_without_a_retry() {
    let fx = Fixture::new();
    let store = fx.store();
    let mut new = interval_loop("tempfail");
    new.max_attempts = 3;
    new.policy.skip_exit_codes = vec![75];
    let lp = store.create_loop(&new, t0()).unwrap();
    let run = run_slot(&store, &lp, ExecutorStatus::Failed, 75);
    assert_eq!(run.status, RunStatus::Skipped);
    assert_eq!(
        store.get_loop(&lp.id).unwrap().unwrap().retry_scheduled_for,
        None
    );
    // Another code still fails and retries.
    let run = run_slot(&store, &lp, ExecutorStatus::Failed, 3);
    assert_eq!(run.status, RunStatus::Failed);
    assert!(
        store
            .get_loop(&lp.id)
            .unwrap()
            .unwrap()
            .retry_scheduled_for
            .is_some()
    );
}
