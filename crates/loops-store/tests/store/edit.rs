//! Changing loops in place (issue 16): `Store::edit_loop`, the refusal of
//! an ambiguous name, and `Store::replace_workflow`.

use loops_core::{
    ExecutorStatus, LoopStatus, NewLoop, Schedule, Target, WorkflowId, WorkflowStatus,
    WorkflowTarget, workflow_from_json,
};
use loops_store::{Claim, Fence, Store, StoreError, loop_settings};
use serde_json::json;

use crate::common::*;

fn every(ms: u64) -> Schedule {
    Schedule::Interval {
        every_ms: ms,
        anchor: Some(loops_core::Anchor::FixedRate),
    }
}

/// Edits `lp` with `change` applied to its stored settings, at `now`.
fn edit(
    store: &Store,
    lp: &loops_core::Loop,
    now: loops_core::Timestamp,
    change: impl FnOnce(&mut NewLoop),
) -> Result<loops_store::LoopEdited, StoreError> {
    store.edit_loop(&lp.id, now, |stored| {
        let mut settings = loop_settings(stored);
        change(&mut settings);
        Ok(settings)
    })
}

#[test]
fn an_edit_keeps_the_id_status_creation_and_history() {
    let fx = Fixture::new();
    let store = fx.store();
    let lp = create(&store, "nightly", 1);
    let later = t0().add_ms(5_000);
    let edited = edit(&store, &lp, later, |s| {
        s.name = "renamed".into();
        s.description = Some("now described".into());
        s.max_attempts = 3;
    })
    .unwrap();
    assert_eq!(edited.before, lp);
    let after = edited.after;
    assert_eq!(
        (after.id, after.created_at, after.status),
        (lp.id, lp.created_at, lp.status)
    );
    assert_eq!(after.name, "renamed");
    assert_eq!(after.description.as_deref(), Some("now described"));
    assert_eq!(after.max_attempts, 3);
    assert_eq!(after.updated_at, later);
    assert_eq!(
        after.next_run_at, lp.next_run_at,
        "the schedule did not change"
    );
    assert_eq!(store.get_loop(&lp.id).unwrap(), Some(after));
}

#[test]
fn a_new_schedule_gets_a_next_run_from_now_and_drops_a_pending_retry() {
    let fx = Fixture::new();
    let store = fx.store();
    let lp = create(&store, "flaky", 2);
    // A failed first attempt leaves a retry pending.
    let slot = lp.next_run_at.unwrap();
    let Claim::Claimed { run, .. } = store.claim_run(&lp, slot, RUNNER_A, slot).unwrap() else {
        panic!("not claimed")
    };
    let out = store
        .finalize_and_advance(
            &run.id,
            &result(ExecutorStatus::Failed, slot.add_ms(1)),
            &Fence::new(RUNNER_A),
            slot.add_ms(1),
        )
        .unwrap();
    let retried = out.loop_.unwrap();
    assert_eq!(retried.retry_scheduled_for, Some(slot));

    let now = t0().add_ms(600_000);
    let after = edit(&store, &retried, now, |s| s.schedule = every(3_600_000))
        .unwrap()
        .after;
    assert_eq!(after.next_run_at, Some(now.add_ms(3_600_000)));
    assert_eq!(after.retry_scheduled_for, None);
    assert_eq!(after.schedule, every(3_600_000));
}

#[test]
fn an_edit_sees_and_keeps_an_advance_made_after_the_caller_read_the_loop() {
    let fx = Fixture::new();
    let store = fx.store();
    let lp = create(&store, "busy", 1);
    // A runner advances the loop after the caller's own read of `lp`.
    let advanced = t0().add_ms(120_000);
    set_next_run(&fx, &lp, Some(advanced));
    let edited = edit(&store, &lp, t0().add_ms(1), |s| s.lease_ms = 60_000).unwrap();
    assert_eq!(
        edited.before.next_run_at,
        Some(advanced),
        "read under the lock"
    );
    assert_eq!(
        edited.after.next_run_at,
        Some(advanced),
        "the advance is kept"
    );
    assert_eq!(edited.after.lease_ms, 60_000);
}

#[test]
fn a_stopped_loop_stays_stopped_without_a_next_run() {
    let fx = Fixture::new();
    let store = fx.store();
    let lp = create(&store, "idle", 1);
    store.stop_loop(&lp.id, t0()).unwrap();
    let after = edit(&store, &lp, t0().add_ms(1), |s| s.schedule = every(5_000))
        .unwrap()
        .after;
    assert_eq!(after.status, LoopStatus::Stopped);
    assert_eq!(after.next_run_at, None);
    // Resuming computes the next run from the new schedule.
    let resumed = store.resume_loop(&lp.id, t0().add_ms(10)).unwrap();
    assert_eq!(resumed.loop_().next_run_at, Some(t0().add_ms(5_010)));
}

#[test]
fn a_rejected_edit_writes_nothing() {
    let fx = Fixture::new();
    let store = fx.store();
    let lp = create(&store, "kept", 1);
    let err = edit(&store, &lp, t0().add_ms(1), |s| s.max_attempts = 0).unwrap_err();
    assert!(matches!(err, StoreError::Invalid(_)), "{err}");
    let err = edit(&store, &lp, t0().add_ms(1), |s| {
        s.schedule = Schedule::Cron {
            expression: "99 * * * *".into(),
            timezone: None,
        };
    })
    .unwrap_err();
    assert!(
        matches!(err, StoreError::Invalid(_) | StoreError::Schedule(_)),
        "{err}"
    );
    // The caller's own refusal is returned as it is.
    let refused: Result<_, StoreError> = store.edit_loop(&lp.id, t0(), |_| {
        Err(StoreError::Encode("refused by the caller".into()))
    });
    assert!(
        refused
            .unwrap_err()
            .to_string()
            .contains("refused by the caller")
    );
    assert_eq!(store.get_loop(&lp.id).unwrap(), Some(lp));
}

#[test]
fn a_removed_loop_is_not_found_and_not_written_again() {
    let fx = Fixture::new();
    let store = fx.store();
    let lp = create(&store, "gone", 1);
    store
        .delete_loop(&lp.id, loops_store::DeleteHistory::Keep)
        .unwrap();
    let err = edit(&store, &lp, t0(), |s| s.name = "back".into()).unwrap_err();
    assert_eq!(err.to_string(), format!("loop not found: {}", lp.id));
    assert_eq!(store.count_loops(None).unwrap(), 0);
}

#[test]
fn a_name_two_loops_share_is_refused_with_both_ids() {
    let fx = Fixture::new();
    let store = fx.store();
    let old = create(&store, "twin", 1);
    let newer = store
        .create_loop(&interval_loop("twin"), t0().add_ms(1))
        .unwrap();
    let err = store.require_loop("twin").unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "2 loops are named \"twin\": {} (created 2026-01-01T00:00:00.001Z), {} (created \
             2026-01-01T00:00:00.000Z); use an id",
            newer.id, old.id
        )
    );
    let StoreError::AmbiguousName { matches, .. } = err else {
        panic!("{err:?}")
    };
    assert_eq!(
        matches,
        vec![(newer.id, newer.created_at), (old.id, old.created_at)]
    );
    // Each is still reached by its id, and a rename makes the name unique.
    assert_eq!(store.require_loop(old.id.as_str()).unwrap(), old);
    edit(&store, &old, t0().add_ms(2), |s| s.name = "elder".into()).unwrap();
    assert_eq!(store.require_loop("twin").unwrap().id, newer.id);
}

fn workflow(store: &Store, name: &str, command: &str) -> loops_core::WorkflowSpec {
    store
        .create_workflow(&new_workflow(name, command), t0())
        .unwrap()
}

fn new_workflow(name: &str, command: &str) -> loops_core::NewWorkflow {
    workflow_from_json(
        &json!({"name": name, "steps": [
            {"id": "a", "target": {"type": "command", "command": command}}
        ]}),
        None,
    )
    .unwrap()
}

fn workflow_loop(store: &Store, name: &str, workflow: WorkflowId) -> loops_core::Loop {
    let mut new = interval_loop(name);
    new.target = Target::Workflow(WorkflowTarget {
        workflow_id: workflow,
        input: None,
        timeout_ms: Some(60_000),
    });
    store.create_loop(&new, t0()).unwrap()
}

#[test]
fn replacing_a_workflow_archives_it_and_moves_its_loops_to_the_new_one() {
    let fx = Fixture::new();
    let store = fx.store();
    let old = workflow(&store, "build", "make");
    let other = workflow(&store, "deploy", "true");
    let follower = workflow_loop(&store, "nightly-build", old.id);
    store.pause_loop(&follower.id, t0()).unwrap();
    let bystander = workflow_loop(&store, "nightly-deploy", other.id);
    let command = create(&store, "plain", 1);

    let now = t0().add_ms(1_000);
    let replaced = store
        .replace_workflow(&new_workflow("build", "gmake"), now)
        .unwrap();
    let archived = replaced.archived.unwrap();
    assert_eq!(
        (archived.id, archived.status),
        (old.id, WorkflowStatus::Archived)
    );
    assert_eq!(replaced.created.status, WorkflowStatus::Active);
    assert_ne!(replaced.created.id, old.id);
    assert_eq!(replaced.repointed, vec![follower.id]);
    assert_eq!(store.require_workflow("build").unwrap(), replaced.created);

    let moved = store.get_loop(&follower.id).unwrap().unwrap();
    let Target::Workflow(target) = &moved.target else {
        panic!("{:?}", moved.target)
    };
    assert_eq!(target.workflow_id, replaced.created.id);
    assert_eq!(
        target.timeout_ms,
        Some(60_000),
        "the rest of the target stays"
    );
    assert_eq!(moved.status, LoopStatus::Paused, "its status stays");
    assert_eq!(moved.next_run_at, follower.next_run_at);
    assert_eq!(store.get_loop(&bystander.id).unwrap(), Some(bystander));
    assert_eq!(store.get_loop(&command.id).unwrap(), Some(command));
}

#[test]
fn replacing_a_workflow_no_one_has_creates_it() {
    let fx = Fixture::new();
    let store = fx.store();
    let replaced = store
        .replace_workflow(&new_workflow("fresh", "true"), t0())
        .unwrap();
    assert_eq!(replaced.archived, None);
    assert!(replaced.repointed.is_empty());
    assert_eq!(store.require_workflow("fresh").unwrap(), replaced.created);
}
