//! Fenced finalizes, finalize-and-advance, and overlap skips (SPEC §4.3
//! `finalizeRun`, `createSkippedRun`, §3.4; §10 items 25–26, 30, 36–37, 41;
//! SPEC §9 items 7, 8, 10, 12).

use loops_core::{ExecutorStatus, LoopStatus, ProcessRef, RunStatus, Schedule};
use loops_store::{Advance, Claim, Fence, SkipOutcome, StoreError};

use crate::common::*;

fn claim(
    store: &loops_store::Store,
    lp: &loops_core::Loop,
    slot: loops_core::Timestamp,
    runner: &str,
    now: loops_core::Timestamp,
) -> loops_core::LoopRun {
    match store.claim_run(lp, slot, runner, now).unwrap() {
        Claim::Claimed { run, .. } => run,
        Claim::NotClaimed(why) => panic!("not claimed: {why:?}"),
        other => panic!("not claimed: {other:?}"),
    }
}

// SPEC §10 item 25 (wrong claimant)
#[test]
fn fenced_finalize_after_a_takeover_changes_nothing_and_returns_the_stored_row() {
    let fx = Fixture::new();
    let store = fx.store();
    let lp = create(&store, "fence", 1);
    let run = claim(&store, &lp, t0(), RUNNER_A, t0());
    let expired = run.lease_expires_at.unwrap();
    let taken = claim(&store, &lp, t0(), RUNNER_B, expired);
    let late = expired.add_ms(5);
    let stored = store
        .finalize_run(
            &run.id,
            &result(ExecutorStatus::Succeeded, late),
            Some(&Fence::new(RUNNER_A)),
            late,
        )
        .unwrap();
    assert_eq!(stored, taken);
    assert_eq!(stored.status, RunStatus::Running);
    assert_eq!(stored.claimed_by.as_deref(), Some(RUNNER_B));
}

// SPEC §10 item 25 (after the lease expired)
#[test]
fn fenced_finalize_after_lease_expiry_is_dropped() {
    let fx = Fixture::new();
    let store = fx.store();
    let lp = create(&store, "late", 1);
    let run = claim(&store, &lp, t0(), RUNNER_A, t0());
    let expired = run.lease_expires_at.unwrap();
    let stored = store
        .finalize_run(
            &run.id,
            &result(ExecutorStatus::Succeeded, expired),
            Some(&Fence::new(RUNNER_A)),
            expired,
        )
        .unwrap();
    assert_eq!(stored, run);
}

// SPEC §10 item 26
#[test]
fn finalize_after_recovery_leaves_the_row_abandoned_with_stdout_unchanged() {
    let fx = Fixture::new();
    let store = fx.store();
    let lp = create(&store, "recovered", 1);
    let run = claim(&store, &lp, t0(), RUNNER_A, t0());
    let expired = run.lease_expires_at.unwrap();
    let recovered = store.recover_expired_run_leases(expired).unwrap();
    assert_eq!(recovered.len(), 1);
    let late = expired.add_ms(10);
    let stored = store
        .finalize_run(
            &run.id,
            &result(ExecutorStatus::Succeeded, late),
            Some(&Fence::new(RUNNER_A)),
            late,
        )
        .unwrap();
    assert_eq!(stored.status, RunStatus::Abandoned);
    assert_eq!(stored.stdout, None);
    assert_eq!(stored, recovered[0].run);
    // An unfenced finalize cannot change a finished row either.
    let stored = store
        .finalize_run(
            &run.id,
            &result(ExecutorStatus::Succeeded, late),
            None,
            late,
        )
        .unwrap();
    assert_eq!(stored.status, RunStatus::Abandoned);
}

#[test]
fn finalize_records_results_and_clears_the_lease() {
    let fx = Fixture::new();
    let store = fx.store();
    let lp = create(&store, "results", 1);
    let run = claim(&store, &lp, t0(), RUNNER_A, t0());
    store
        .mark_run_pid(
            &run.id,
            ProcessRef {
                pid: 4242,
                start: Some(9),
            },
            Some(RUNNER_A),
            t0(),
        )
        .unwrap();
    let fin = t0().add_ms(2500);
    let done = store
        .finalize_run(
            &run.id,
            &result(ExecutorStatus::Failed, fin),
            Some(&Fence::new(RUNNER_A)),
            fin,
        )
        .unwrap();
    assert_eq!(done.status, RunStatus::Failed);
    assert_eq!(done.finished_at, Some(fin));
    assert_eq!(done.updated_at, fin);
    assert_eq!(done.lease_expires_at, None);
    assert_eq!(done.exit_code, Some(3));
    assert_eq!(done.duration_ms, Some(1000));
    assert_eq!(done.error.as_deref(), Some("process exited with code 3"));
    assert_eq!(done.pid, Some(4242));
    let start = fx.raw().int(&format!(
        "SELECT pid_start_ms FROM loop_runs WHERE id = {}",
        lit(run.id.as_str())
    ));
    assert_eq!(start, Some(9), "the same pid keeps its start time");
}

#[test]
fn finalizing_a_missing_run_fails_with_the_spec_message() {
    let fx = Fixture::new();
    let store = fx.store();
    let id = loops_core::RunId::parse("0123456789ab").unwrap();
    let err = store
        .finalize_run(&id, &result(ExecutorStatus::Succeeded, t0()), None, t0())
        .unwrap_err();
    assert!(matches!(err, StoreError::Vanished { .. }));
    assert_eq!(
        err.to_string(),
        "run not found after finalize: 0123456789ab"
    );
}

#[test]
fn finalize_and_advance_on_success_moves_next_run_at() {
    let fx = Fixture::new();
    let store = fx.store();
    let lp = create(&store, "advance", 1);
    let slot = t("2026-01-01T00:01:00Z");
    let run = claim(&store, &lp, slot, RUNNER_A, slot);
    let fin = t("2026-01-01T00:01:05Z");
    let out = store
        .finalize_and_advance(
            &run.id,
            &result(ExecutorStatus::Succeeded, fin),
            &Fence::new(RUNNER_A),
            fin,
        )
        .unwrap();
    assert!(out.applied);
    assert_eq!(out.run.status, RunStatus::Succeeded);
    assert!(
        matches!(out.advance, Advance::Advanced(_)),
        "{:?}",
        out.advance
    );
    let lp = out.loop_.unwrap();
    assert_eq!(lp.status, LoopStatus::Active);
    assert_eq!(lp.next_run_at, Some(t("2026-01-01T00:02:00Z")));
    assert_eq!(lp.retry_scheduled_for, None);
    assert_eq!(store.get_loop(&lp.id).unwrap(), Some(lp));
}

#[test]
fn finalize_and_advance_on_failure_with_attempts_left_schedules_a_retry() {
    let fx = Fixture::new();
    let store = fx.store();
    let lp = create(&store, "retry", 2);
    let slot = t("2026-01-01T00:01:00Z");
    let run = claim(&store, &lp, slot, RUNNER_A, slot);
    let fin = t("2026-01-01T00:01:05Z");
    let out = store
        .finalize_and_advance(
            &run.id,
            &result(ExecutorStatus::Failed, fin),
            &Fence::new(RUNNER_A),
            fin,
        )
        .unwrap();
    let lp = out.loop_.unwrap();
    assert_eq!(lp.status, LoopStatus::Active);
    assert_eq!(lp.retry_scheduled_for, Some(slot));
    assert_eq!(lp.next_run_at, Some(fin.add_ms(60_000)));
    // The retry re-claims the same row as attempt 2 (SPEC §10 item 38).
    let again = claim(&store, &lp, slot, RUNNER_A, fin.add_ms(60_000));
    assert_eq!((again.id, again.attempt), (run.id, 2));
}

#[test]
fn a_cancelled_workflow_run_of_the_attempt_is_never_retried() {
    // SPEC §9 item 21: the user's cancel must not come back as a retry.
    let fx = Fixture::new();
    let store = fx.store();
    let lp = create(&store, "cancelled", 3);
    let spec = store
        .create_workflow(
            &loops_core::workflow_from_json(
                &serde_json::json!({"name": "wf", "steps": [
                    {"id": "a", "target": {"type": "command", "command": "true"}}
                ]}),
                None,
            )
            .unwrap(),
            t0(),
        )
        .unwrap();
    let slot = t("2026-01-01T00:01:00Z");
    let run = claim(&store, &lp, slot, RUNNER_A, slot);
    let key = loops_core::loop_workflow_key(&lp.id, slot, run.attempt);
    // A cancelled run under another attempt's key does not count.
    let other = loops_store::NewWorkflowRun::new(&spec)
        .for_loop_run(&run)
        .with_key(loops_core::loop_workflow_key(&lp.id, slot, 9));
    let other = store.create_workflow_run(&other, slot).unwrap();
    store.cancel_workflow_run(&other.id, "x", slot).unwrap();
    let wr = loops_store::NewWorkflowRun::new(&spec)
        .for_loop_run(&run)
        .with_key(key);
    let wr = store.create_workflow_run(&wr, slot).unwrap();
    assert_eq!(
        store.workflow_run_status(&wr.id).unwrap(),
        Some(loops_core::WorkflowRunStatus::Running)
    );
    store
        .cancel_workflow_run(&wr.id, "cancelled by user", slot)
        .unwrap();
    assert_eq!(
        store.workflow_run_status(&wr.id).unwrap(),
        Some(loops_core::WorkflowRunStatus::Cancelled)
    );
    let fin = t("2026-01-01T00:01:05Z");
    let out = store
        .finalize_and_advance(
            &run.id,
            &result(ExecutorStatus::Failed, fin),
            &Fence::new(RUNNER_A),
            fin,
        )
        .unwrap();
    assert_eq!(out.run.status, RunStatus::Failed);
    let lp = out.loop_.unwrap();
    assert_eq!(lp.retry_scheduled_for, None);
    assert_eq!(lp.next_run_at, Some(t("2026-01-01T00:02:00Z")));
    assert_eq!(lp.status, LoopStatus::Active);
}

#[test]
fn max_parallel_round_trips_and_old_rows_read_as_unset() {
    let fx = Fixture::new();
    let store = fx.store();
    let file = |name: &str, extra: serde_json::Value| {
        let mut v = serde_json::json!({"name": name, "steps": [
            {"id": "a", "target": {"type": "command", "command": "true"}}
        ]});
        if let Some(n) = extra.as_u64() {
            v["maxParallel"] = n.into();
        }
        loops_core::workflow_from_json(&v, None).unwrap()
    };
    let with = store.create_workflow(&file("p", 8.into()), t0()).unwrap();
    let without = store
        .create_workflow(&file("s", serde_json::Value::Null), t0())
        .unwrap();
    assert_eq!(
        store.get_workflow(&with.id).unwrap().unwrap().max_parallel,
        Some(8)
    );
    let plain = store.get_workflow(&without.id).unwrap().unwrap();
    assert_eq!((plain.max_parallel, plain.parallelism()), (None, 1));
    assert!(
        !serde_json::to_string(&plain)
            .unwrap()
            .contains("maxParallel")
    );
    assert_eq!(
        store
            .workflow_run_status(&"0123456789ab".parse().unwrap())
            .unwrap(),
        None
    );
}

#[test]
fn a_once_loop_stops_after_its_run() {
    let fx = Fixture::new();
    let store = fx.store();
    let at = t("2026-01-01T00:05:00Z");
    let mut new = interval_loop("once");
    new.schedule = Schedule::Once { at };
    let lp = store.create_loop(&new, t0()).unwrap();
    let run = claim(&store, &lp, at, RUNNER_A, at);
    let out = store
        .finalize_and_advance(
            &run.id,
            &result(ExecutorStatus::Succeeded, at.add_ms(5)),
            &Fence::new(RUNNER_A),
            at.add_ms(5),
        )
        .unwrap();
    let lp = out.loop_.unwrap();
    assert_eq!(lp.status, LoopStatus::Stopped);
    assert_eq!(lp.next_run_at, None);
}

#[test]
fn a_pause_between_claim_and_finalize_is_not_overwritten() {
    // SPEC §9 item 8.
    let fx = Fixture::new();
    let store = fx.store();
    let lp = create(&store, "paused", 2);
    let slot = t("2026-01-01T00:01:00Z");
    let run = claim(&store, &lp, slot, RUNNER_A, slot);
    let other = fx.store();
    other.pause_loop(&lp.id, slot.add_ms(1)).unwrap();
    let before = store.get_loop(&lp.id).unwrap().unwrap();
    let fin = slot.add_ms(5000);
    let out = store
        .finalize_and_advance(
            &run.id,
            &result(ExecutorStatus::Failed, fin),
            &Fence::new(RUNNER_A),
            fin,
        )
        .unwrap();
    assert!(out.applied);
    assert_eq!(out.advance, Advance::NotActive);
    assert_eq!(out.loop_.as_ref(), Some(&before));
    let after = store.get_loop(&lp.id).unwrap().unwrap();
    assert_eq!(after.status, LoopStatus::Paused);
    assert_eq!(after, before);
}

#[test]
fn a_fenced_out_finalize_does_not_advance_the_loop() {
    // SPEC §9 item 12.
    let fx = Fixture::new();
    let store = fx.store();
    let lp = create(&store, "fenced", 1);
    set_next_run(&fx, &lp, Some(t0()));
    let run = claim(&store, &lp, t0(), RUNNER_A, t0());
    let before = store.get_loop(&lp.id).unwrap().unwrap();
    let late = run.lease_expires_at.unwrap();
    let out = store
        .finalize_and_advance(
            &run.id,
            &result(ExecutorStatus::Succeeded, late),
            &Fence::new(RUNNER_A),
            late,
        )
        .unwrap();
    assert!(!out.applied);
    assert_eq!(out.advance, Advance::FencedOut);
    assert_eq!(out.run, run);
    // The loop is reported as stored, untouched.
    assert_eq!(out.loop_.as_ref(), Some(&before));
    assert_eq!(store.get_loop(&lp.id).unwrap().unwrap(), before);
}

#[test]
fn an_unusable_schedule_still_commits_the_finalize_and_pauses_the_loop() {
    let fx = Fixture::new();
    let store = fx.store();
    let lp = create(&store, "broken", 1);
    // A cron expression this version cannot parse, as an older or newer
    // writer might have stored.
    fx.raw().exec(&format!(
        "UPDATE loops SET schedule_json = '{{\"type\":\"cron\",\"expression\":\"61 * * * *\"}}' WHERE id = {}",
        lit(lp.id.as_str())
    ));
    let lp = store.get_loop(&lp.id).unwrap().unwrap();
    let slot = t("2026-01-01T00:01:00Z");
    let run = claim(&store, &lp, slot, RUNNER_A, slot);
    let fin = slot.add_ms(10);
    let out = store
        .finalize_and_advance(
            &run.id,
            &result(ExecutorStatus::Succeeded, fin),
            &Fence::new(RUNNER_A),
            fin,
        )
        .unwrap();
    assert!(out.applied);
    assert!(
        matches!(out.advance, Advance::Paused(_)),
        "{:?}",
        out.advance
    );
    assert_eq!(
        store.get_run(&run.id).unwrap().unwrap().status,
        RunStatus::Succeeded
    );
    assert_eq!(
        store.get_loop(&lp.id).unwrap().unwrap().status,
        LoopStatus::Paused
    );
}

#[test]
fn a_skip_on_a_new_slot_is_recorded_and_advances_the_loop() {
    let fx = Fixture::new();
    let store = fx.store();
    let lp = create(&store, "skip", 1);
    let slot = t("2026-01-01T00:01:00Z");
    let now = slot.add_ms(100);
    let SkipOutcome::Skipped {
        run,
        loop_,
        advance,
    } = store
        .create_skipped_run_and_advance(&lp, slot, loops_store::OVERLAP_SKIP_REASON, now)
        .unwrap()
    else {
        panic!("slot was occupied");
    };
    assert_eq!(run.status, RunStatus::Skipped);
    assert_eq!(run.attempt, 1);
    assert_eq!(run.finished_at, Some(now));
    assert_eq!(run.error.as_deref(), Some("previous run still active"));
    assert!(matches!(advance, Advance::Advanced(_)), "{advance:?}");
    assert_eq!(loop_.unwrap().next_run_at, Some(t("2026-01-01T00:02:00Z")));
}

#[test]
fn a_skip_on_a_failed_row_returns_it_and_keeps_its_pending_retry() {
    // SPEC §9 item 10, §10 item 30.
    let fx = Fixture::new();
    let store = fx.store();
    let lp = create(&store, "keep-retry", 3);
    let slot = t("2026-01-01T00:01:00Z");
    let run = claim(&store, &lp, slot, RUNNER_A, slot);
    let fin = slot.add_ms(1000);
    let failed = store
        .finalize_and_advance(
            &run.id,
            &result(ExecutorStatus::Failed, fin),
            &Fence::new(RUNNER_A),
            fin,
        )
        .unwrap();
    let lp = failed.loop_.unwrap();
    assert_eq!(lp.retry_scheduled_for, Some(slot));
    let out = store
        .create_skipped_run_and_advance(&lp, slot, loops_store::OVERLAP_SKIP_REASON, fin.add_ms(5))
        .unwrap();
    assert_eq!(out, SkipOutcome::Occupied(failed.run.clone()));
    assert_eq!(store.get_loop(&lp.id).unwrap().unwrap(), lp);
    // The plain variant also returns the existing row.
    assert_eq!(
        store
            .create_skipped_run(&lp, slot, "x", fin.add_ms(6))
            .unwrap(),
        failed.run
    );
}

#[test]
fn a_late_finalize_and_a_takeover_race_and_exactly_one_wins() {
    // Runner A finalizes just before its lease expires while runner B, on
    // another handle, claims the slot as soon as it has expired.
    const ROUNDS: usize = 50;
    let fx = Fixture::new();
    let setup = fx.store();
    let lp = create_overlapping(&setup, "race", 1);
    let runs: Vec<_> = (0..ROUNDS)
        .map(|i| claim(&setup, &lp, t0().add_ms(60_000 * i as i64), RUNNER_A, t0()))
        .collect();
    let expiry = runs[0].lease_expires_at.unwrap();
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(2));
    let finisher = {
        let (store, runs, barrier) = (fx.store(), runs.clone(), barrier.clone());
        std::thread::spawn(move || {
            runs.iter()
                .map(|run| {
                    barrier.wait();
                    let at = expiry.add_ms(-1);
                    store
                        .finalize_and_advance(
                            &run.id,
                            &result(ExecutorStatus::Succeeded, at),
                            &Fence::new(RUNNER_A),
                            at,
                        )
                        .unwrap()
                        .applied
                })
                .collect::<Vec<bool>>()
        })
    };
    let taker = {
        let (store, lp, barrier) = (fx.store(), lp.clone(), barrier.clone());
        std::thread::spawn(move || {
            runs.iter()
                .map(|run| {
                    barrier.wait();
                    matches!(
                        store
                            .claim_run(&lp, run.scheduled_for, RUNNER_B, expiry)
                            .unwrap(),
                        Claim::Claimed { .. }
                    )
                })
                .collect::<Vec<bool>>()
        })
    };
    let (finished, taken) = (finisher.join().unwrap(), taker.join().unwrap());
    for (i, (f, t)) in finished.iter().zip(&taken).enumerate() {
        assert!(f ^ t, "round {i}: finalized {f}, taken over {t}");
    }
}

#[test]
fn finalizing_a_run_of_a_deleted_loop_reports_the_loop_missing() {
    let fx = Fixture::new();
    let store = fx.store();
    let lp = create(&store, "deleted", 1);
    let run = claim(&store, &lp, t0(), RUNNER_A, t0());
    store
        .delete_loop(&lp.id, loops_store::DeleteHistory::Keep)
        .unwrap();
    let out = store
        .finalize_and_advance(
            &run.id,
            &result(ExecutorStatus::Succeeded, t0()),
            &Fence::new(RUNNER_A),
            t0(),
        )
        .unwrap();
    assert!(out.applied);
    assert_eq!((out.advance, out.loop_), (Advance::LoopMissing, None));
}
