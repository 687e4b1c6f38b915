//! Loop creation, lookups, listing and the guarded status changes (SPEC
//! §4.3 "Loops", §1.5, §2.6; SPEC §9 items 8, 33 and 34).

use loops_core::{ExecutorStatus, LoopStatus, RunStatus, Schedule};
use loops_store::{
    Claim, DeleteHistory, DeleteOutcome, Fence, LoopChange, LoopFilter, Refusal, RunFilter, Store,
    StoreError,
};

use crate::common::*;

#[test]
fn create_loop_stores_the_input_and_the_first_next_run() {
    let fx = Fixture::new();
    let store = fx.store();
    let lp = create(&store, "nightly", 1);
    assert_eq!(lp.status, LoopStatus::Active);
    assert_eq!(lp.next_run_at, Some(t0().add_ms(60_000)));
    assert_eq!((lp.created_at, lp.updated_at), (t0(), t0()));
    assert_eq!(store.get_loop(&lp.id).unwrap(), Some(lp.clone()));
    let schedule = fx
        .raw()
        .text(&format!(
            "SELECT schedule_json FROM loops WHERE id = {}",
            lit(lp.id.as_str())
        ))
        .unwrap();
    assert_eq!(
        schedule,
        r#"{"type":"interval","everyMs":60000,"anchor":"fixed_rate"}"#
    );
}

#[test]
fn an_invalid_loop_writes_nothing() {
    let fx = Fixture::new();
    let store = fx.store();
    let mut new = interval_loop("bad");
    new.max_attempts = 0;
    let err = store.create_loop(&new, t0()).unwrap_err();
    assert!(matches!(err, StoreError::Invalid(_)), "{err}");
    assert_eq!(store.count_loops(None).unwrap(), 0);
}

// SPEC §10 item 34 (loops): the id first, then the name. Issue 16 departs
// from the newest-wins rule: a shared name is refused (`edit.rs` tests it).
#[test]
fn require_loop_tries_the_id_then_the_name() {
    let fx = Fixture::new();
    let store = fx.store();
    let old = create(&store, "solo", 1);
    assert_eq!(store.require_loop(old.id.as_str()).unwrap(), old);
    assert_eq!(store.require_loop("solo").unwrap(), old);
    // A loop named like another loop's id is found by that id first.
    let named_like_id = store
        .create_loop(&interval_loop(old.id.as_str()), t0().add_ms(2))
        .unwrap();
    assert_eq!(store.require_loop(old.id.as_str()).unwrap(), old);
    assert_ne!(named_like_id.id, old.id);
    let err = store.require_loop("nope").unwrap_err();
    assert_eq!(err.to_string(), "loop not found: nope");
}

#[test]
fn list_loops_sorts_nulls_first_and_honours_filters_and_limits() {
    let fx = Fixture::new();
    let store = fx.store();
    let a = create(&store, "a", 1);
    let b = create(&store, "b", 1);
    let c = create(&store, "c", 1);
    set_next_run(&fx, &a, Some(t("2026-01-01T00:03:00Z")));
    set_next_run(&fx, &b, None);
    set_next_run(&fx, &c, Some(t("2026-01-01T00:02:00Z")));
    store.pause_loop(&c.id, t0()).unwrap();
    let names = |f: LoopFilter| -> Vec<String> {
        store
            .list_loops(&f)
            .unwrap()
            .into_iter()
            .map(|l| l.name)
            .collect()
    };
    assert_eq!(names(LoopFilter::default()), ["b", "a", "c"]);
    assert_eq!(
        names(LoopFilter {
            status: Some(LoopStatus::Active),
            limit: None,
            offset: None,
        }),
        ["b", "a"]
    );
    assert_eq!(
        names(LoopFilter {
            status: None,
            limit: Some(1),
            offset: None,
        }),
        ["b"]
    );
    // Paging: the same order, a window of it.
    let page = |limit, offset| LoopFilter {
        status: None,
        limit: Some(limit),
        offset: Some(offset),
    };
    assert_eq!(names(page(1, 1)), ["a"]);
    assert_eq!(names(page(5, 2)), ["c"]);
    assert!(names(page(5, 3)).is_empty());
    let labeled = |f: LoopFilter| -> Vec<String> {
        let mut seen = Vec::new();
        store
            .for_each_labeled_loop(&f, &[], |l| {
                seen.push(l.name);
                std::ops::ControlFlow::Continue(())
            })
            .unwrap();
        seen
    };
    assert_eq!(labeled(page(2, 1)), ["a", "c"]);
    for i in 0..205 {
        store
            .create_loop(&interval_loop(&format!("bulk{i}")), t0())
            .unwrap();
    }
    assert_eq!(store.list_loops(&LoopFilter::default()).unwrap().len(), 200);
    assert_eq!(
        store
            .list_loops(&LoopFilter {
                status: None,
                limit: Some(1000),
                offset: None,
            })
            .unwrap()
            .len(),
        208
    );
    assert_eq!(store.count_loops(Some(LoopStatus::Paused)).unwrap(), 1);
}

#[test]
fn due_loops_are_active_due_and_earliest_first() {
    let fx = Fixture::new();
    let store = fx.store();
    let now = t("2026-01-01T01:00:00Z");
    let late = create(&store, "late", 1);
    let early = create(&store, "early", 1);
    let future = create(&store, "future", 1);
    let paused = create(&store, "paused", 1);
    let none = create(&store, "none", 1);
    set_next_run(&fx, &late, Some(now));
    set_next_run(&fx, &early, Some(t("2026-01-01T00:10:00Z")));
    set_next_run(&fx, &future, Some(now.add_ms(1)));
    set_next_run(&fx, &paused, Some(t0()));
    set_next_run(&fx, &none, None);
    store.pause_loop(&paused.id, t0()).unwrap();
    let due: Vec<String> = store
        .due_loops(now, 100)
        .unwrap()
        .into_iter()
        .map(|l| l.name)
        .collect();
    assert_eq!(due, ["early", "late"]);
    assert_eq!(store.due_loops(now, 1).unwrap().len(), 1);
}

#[test]
fn pause_is_guarded_and_keeps_next_run() {
    let fx = Fixture::new();
    let store = fx.store();
    let lp = create(&store, "p", 1);
    let LoopChange::Changed(paused) = store.pause_loop(&lp.id, t0().add_ms(5)).unwrap() else {
        panic!("not paused");
    };
    assert_eq!(paused.status, LoopStatus::Paused);
    assert_eq!(paused.next_run_at, lp.next_run_at);
    assert_eq!(paused.updated_at, t0().add_ms(5));
    assert_eq!(
        store.pause_loop(&lp.id, t0()).unwrap(),
        LoopChange::Already(paused)
    );
    store.stop_loop(&lp.id, t0()).unwrap();
    let out = store.pause_loop(&lp.id, t0()).unwrap();
    assert!(
        matches!(out, LoopChange::Refused { reason: Refusal::NotActive, ref loop_ } if loop_.status == LoopStatus::Stopped)
    );
    let missing = loops_core::LoopId::parse("0123456789ab").unwrap();
    assert_eq!(
        store.pause_loop(&missing, t0()).unwrap_err().to_string(),
        "loop not found: 0123456789ab"
    );
}

#[test]
fn stop_clears_next_run_and_retry() {
    let fx = Fixture::new();
    let store = fx.store();
    let lp = create(&store, "s", 1);
    fx.raw().exec(&format!(
        "UPDATE loops SET retry_scheduled_for = {} WHERE id = {}",
        ts(t0()),
        lit(lp.id.as_str())
    ));
    let LoopChange::Changed(stopped) = store.stop_loop(&lp.id, t0()).unwrap() else {
        panic!("not stopped");
    };
    assert_eq!(stopped.status, LoopStatus::Stopped);
    assert_eq!(
        (stopped.next_run_at, stopped.retry_scheduled_for),
        (None, None)
    );
    assert_eq!(
        store.stop_loop(&lp.id, t0()).unwrap(),
        LoopChange::Already(stopped)
    );
}

#[test]
fn resume_keeps_a_paused_next_run_and_recomputes_a_stopped_one() {
    // SPEC §9 item 33: a resumed stopped loop runs again.
    let fx = Fixture::new();
    let store = fx.store();
    let lp = create(&store, "r", 1);
    store.pause_loop(&lp.id, t0()).unwrap();
    let later = t("2026-01-01T05:00:00Z");
    let LoopChange::Changed(resumed) = store.resume_loop(&lp.id, later).unwrap() else {
        panic!("not resumed");
    };
    assert_eq!(resumed.status, LoopStatus::Active);
    assert_eq!(resumed.next_run_at, lp.next_run_at);
    assert_eq!(
        store.resume_loop(&lp.id, later).unwrap(),
        LoopChange::Already(resumed)
    );

    store.stop_loop(&lp.id, later).unwrap();
    let LoopChange::Changed(resumed) = store.resume_loop(&lp.id, later).unwrap() else {
        panic!("not resumed");
    };
    assert_eq!(resumed.status, LoopStatus::Active);
    assert_eq!(resumed.next_run_at, Some(later.add_ms(60_000)));
    assert_eq!(resumed.retry_scheduled_for, None);
}

#[test]
fn resume_refuses_an_expired_loop_and_a_spent_once_loop() {
    let fx = Fixture::new();
    let store = fx.store();
    let mut new = interval_loop("exp");
    new.expires_at = Some(t("2026-01-01T00:30:00Z"));
    let lp = store.create_loop(&new, t0()).unwrap();
    let expired = store.expire_loops(t("2026-01-01T00:30:00Z")).unwrap();
    assert_eq!(expired.len(), 1);
    let out = store
        .resume_loop(&lp.id, t("2026-01-01T01:00:00Z"))
        .unwrap();
    assert!(
        matches!(
            out,
            LoopChange::Refused {
                reason: Refusal::PastExpiry,
                ..
            }
        ),
        "{out:?}"
    );

    let at = t("2026-01-01T00:05:00Z");
    let mut once = interval_loop("once");
    once.schedule = Schedule::Once { at };
    let lp = store.create_loop(&once, t0()).unwrap();
    let Claim::Claimed { run, .. } = store.claim_run(&lp, at, RUNNER_A, at).unwrap() else {
        panic!("not claimed");
    };
    store
        .finalize_and_advance(
            &run.id,
            &result(ExecutorStatus::Succeeded, at),
            &Fence::new(RUNNER_A),
            at,
        )
        .unwrap();
    store.stop_loop(&lp.id, at).unwrap();
    let out = store.resume_loop(&lp.id, at.add_ms(1)).unwrap();
    assert!(
        matches!(
            out,
            LoopChange::Refused {
                reason: Refusal::NothingToRun,
                ..
            }
        ),
        "{out:?}"
    );
}

#[test]
fn expire_loops_clears_next_run_and_keeps_the_retry() {
    let fx = Fixture::new();
    let store = fx.store();
    let mut new = interval_loop("e");
    new.expires_at = Some(t("2026-01-01T00:30:00Z"));
    let lp = store.create_loop(&new, t0()).unwrap();
    let keep = create(&store, "keep", 1);
    fx.raw().exec(&format!(
        "UPDATE loops SET retry_scheduled_for = {} WHERE id = {}",
        ts(t0()),
        lit(lp.id.as_str())
    ));
    assert!(
        store
            .expire_loops(t("2026-01-01T00:29:59.999Z"))
            .unwrap()
            .is_empty()
    );
    let expired = store.expire_loops(t("2026-01-01T00:30:00Z")).unwrap();
    assert_eq!(expired.len(), 1);
    assert_eq!(expired[0].status, LoopStatus::Expired);
    assert_eq!(expired[0].next_run_at, None);
    assert_eq!(expired[0].retry_scheduled_for, Some(t0()));
    assert_eq!(
        store.get_loop(&keep.id).unwrap().unwrap().status,
        LoopStatus::Active
    );
}

#[test]
fn delete_keeps_or_purges_the_history() {
    let fx = Fixture::new();
    let store = fx.store();
    let kept = create(&store, "kept", 1);
    let purged = create(&store, "purged", 1);
    let mut run_ids = Vec::new();
    for lp in [&kept, &purged] {
        let Claim::Claimed { run, .. } = store.claim_run(lp, t0(), RUNNER_A, t0()).unwrap() else {
            panic!("not claimed");
        };
        insert_linked_workflow(&fx, lp.id.as_str(), run.id.as_str(), None);
        run_ids.push(run.id);
    }
    assert_eq!(
        store.delete_loop(&kept.id, DeleteHistory::Keep).unwrap(),
        DeleteOutcome::Deleted {
            runs_deleted: 0,
            workflow_runs_unlinked: 1
        }
    );
    assert_eq!(store.get_loop(&kept.id).unwrap(), None);
    assert!(
        store.get_run(&run_ids[0]).unwrap().is_some(),
        "history kept"
    );
    assert_eq!(
        store.delete_loop(&purged.id, DeleteHistory::Purge).unwrap(),
        DeleteOutcome::Deleted {
            runs_deleted: 1,
            workflow_runs_unlinked: 1
        }
    );
    assert_eq!(store.get_run(&run_ids[1]).unwrap(), None);
    let mut links: Vec<(Option<String>, Option<String>)> = fx
        .raw()
        .rows("SELECT loop_id, loop_run_id FROM workflow_runs")
        .iter()
        .map(|r| {
            (
                r[0].text().map(str::to_owned),
                r[1].text().map(str::to_owned),
            )
        })
        .collect();
    links.sort();
    // The kept run stays linked; the purged one is unlinked entirely.
    assert_eq!(links, [(None, None), (None, Some(run_ids[0].to_string()))]);
    assert_eq!(
        store.delete_loop(&purged.id, DeleteHistory::Purge).unwrap(),
        DeleteOutcome::NotFound
    );
    assert_eq!(store.count_runs(None).unwrap(), 1);
}

#[test]
fn runs_are_counted_listed_newest_first_and_filtered() {
    let fx = Fixture::new();
    let store = fx.store();
    let a = create(&store, "a", 1);
    let b = create(&store, "b", 1);
    assert!(!store.has_running_run(&a.id).unwrap());
    for i in 0..3 {
        let slot = t0().add_ms(60_000 * i);
        let Claim::Claimed { run, .. } = store.claim_run(&a, slot, RUNNER_A, slot).unwrap() else {
            panic!("not claimed");
        };
        if i < 2 {
            store
                .finalize_run(
                    &run.id,
                    &result(ExecutorStatus::Succeeded, slot.add_ms(5)),
                    None,
                    slot.add_ms(5),
                )
                .unwrap();
        }
    }
    store
        .create_skipped_run(&b, t0(), "previous run still active", t0())
        .unwrap();
    assert!(store.has_running_run(&a.id).unwrap());
    assert!(!store.has_running_run(&b.id).unwrap());
    assert_eq!(store.count_runs(None).unwrap(), 4);
    assert_eq!(store.count_runs(Some(RunStatus::Succeeded)).unwrap(), 2);
    let all = store.list_runs(&RunFilter::default()).unwrap();
    assert_eq!(all.len(), 4);
    assert!(all.windows(2).all(|w| w[0].created_at >= w[1].created_at));
    assert_eq!(all[0].scheduled_for, t0().add_ms(120_000));
    let of_a = store
        .list_runs(&RunFilter {
            loop_id: Some(a.id),
            ..RunFilter::default()
        })
        .unwrap();
    assert_eq!(of_a.len(), 3);
    let done_a = RunFilter {
        loop_id: Some(a.id),
        status: Some(RunStatus::Succeeded),
        limit: Some(1),
        offset: None,
    };
    assert_eq!(store.list_runs(&done_a).unwrap().len(), 1);
    // Paging: the same order, a window of it, through either entry point.
    let second = RunFilter {
        limit: Some(2),
        offset: Some(1),
        ..RunFilter::default()
    };
    let ids = |runs: Vec<loops_core::LoopRun>| runs.into_iter().map(|r| r.id).collect::<Vec<_>>();
    let all_ids = ids(all.clone());
    assert_eq!(ids(store.list_runs(&second).unwrap()), all_ids[1..3]);
    let labeled = store.list_labeled_runs(&second, &[]).unwrap();
    assert_eq!(ids(labeled), all_ids[1..3]);
    let of_a_later = RunFilter {
        loop_id: Some(a.id),
        offset: Some(2),
        ..RunFilter::default()
    };
    assert_eq!(store.list_runs(&of_a_later).unwrap().len(), 1);
    let skipped = RunFilter {
        status: Some(RunStatus::Skipped),
        ..RunFilter::default()
    };
    assert_eq!(store.list_runs(&skipped).unwrap()[0].loop_id, b.id);
}

#[test]
fn closing_keeps_a_short_wal_and_starts_a_long_one_over() {
    sqlite_only!("about SQLite's WAL file");
    let fx = Fixture::new();
    let mut wal = fx.path().into_os_string();
    wal.push("-wal");
    let wal_len = || std::fs::metadata(&wal).map_or(0, |m| m.len());
    // The WAL's valid frames, read by a second connection. Called while a
    // store keeps the database open, so this connection's close (SQLite's
    // own, which checkpoints as the last one out) changes nothing.
    let frames = || {
        rusqlite::Connection::open(fx.path())
            .unwrap()
            .query_row("PRAGMA wal_checkpoint(NOOP)", [], |r| r.get::<_, i64>(1))
            .unwrap()
    };

    // One short command: its commit stays in the WAL, which the next
    // connection reads.
    let first = {
        let store = fx.store();
        create(&store, "short", 1)
    };
    let reader = fx.store();
    let short = frames();
    assert!(short > 0, "a short WAL is kept on close");
    assert_eq!(reader.get_loop(&first.id).unwrap(), Some(first));
    drop(reader);

    // Many commits: the closing connection checkpoints, and starts the WAL
    // over in the file it has.
    let mut ids = Vec::new();
    let grown = {
        let store = fx.store();
        for i in 0..600 {
            ids.push(create(&store, &format!("long-{i}"), 1).id);
        }
        let written = frames();
        assert!(written > 96, "the WAL grew: {written} frames");
        wal_len()
    };
    let store = fx.store();
    assert_eq!(frames(), 1, "a long WAL is started over on close");
    assert_eq!(wal_len(), grown, "the WAL file keeps its blocks");
    for id in &ids {
        assert!(store.get_loop(id).unwrap().is_some(), "{id} survived");
    }
}

#[test]
fn a_batch_commits_once_and_keeps_what_succeeded_before_an_error() {
    let fx = Fixture::new();
    let store = fx.store();
    let other = fx.store();
    let ok: Result<(), loops_store::StoreError> = store.batch(|| {
        create(&store, "a", 1);
        // Not visible elsewhere until the batch commits.
        assert_eq!(other.count_loops(None).unwrap(), 0);
        create(&store, "b", 1);
        Ok(())
    });
    ok.unwrap();
    assert_eq!(other.count_loops(None).unwrap(), 2);

    let failed: Result<(), loops_store::StoreError> = store.batch(|| {
        create(&store, "c", 1);
        Err(loops_store::StoreError::Encode("stop here".into()))
    });
    assert!(failed.is_err());
    assert_eq!(
        other.count_loops(None).unwrap(),
        3,
        "the create before the error is committed"
    );
}

/// The counts `count_loops`/`count_runs` read are kept by triggers (V6):
/// they follow inserts, status changes and deletes, a raw write the
/// original could make included, and `recount_statuses` repairs a count
/// that drifted.
#[test]
fn kept_counts_follow_every_write_and_a_recount_repairs_drift() {
    let fx = Fixture::new();
    let store = fx.store();
    let a = create(&store, "a", 1);
    let b = create(&store, "b", 1);
    let c = create(&store, "c", 1);
    store.pause_loop(&b.id, t0()).unwrap();
    for (i, lp) in [&a, &a, &c].into_iter().enumerate() {
        let slot = t0().add_ms(60_000 * i as i64);
        let Claim::Claimed { run, .. } = store.claim_run(lp, slot, RUNNER_A, slot).unwrap() else {
            panic!("not claimed");
        };
        if i == 0 {
            let done = result(ExecutorStatus::Failed, slot.add_ms(5));
            store
                .finalize_run(&run.id, &done, None, slot.add_ms(5))
                .unwrap();
        }
    }
    let counts = |store: &Store| {
        (
            store.count_loops(None).unwrap(),
            store.count_loops(Some(LoopStatus::Active)).unwrap(),
            store.count_loops(Some(LoopStatus::Paused)).unwrap(),
            store.count_runs(None).unwrap(),
            store.count_runs(Some(RunStatus::Running)).unwrap(),
            store.count_runs(Some(RunStatus::Failed)).unwrap(),
        )
    };
    assert_eq!(counts(&store), (3, 2, 1, 3, 2, 1));
    // A write from outside the store (the original, or `sqlite3`) is
    // counted too.
    fx.raw()
        .exec("UPDATE loop_runs SET status = 'failed' WHERE status = 'running'");
    fx.raw().exec("DELETE FROM loops WHERE name = 'c'");
    assert_eq!(counts(&store), (2, 1, 1, 3, 0, 3));
    store.delete_loop(&a.id, DeleteHistory::Purge).unwrap();
    assert_eq!(counts(&store), (1, 0, 1, 1, 0, 1));
    assert!(!store.recount_statuses().unwrap(), "nothing drifted");
    // A count that drifted (here, by hand) is found and rewritten. On
    // PostgreSQL a count is the sum of its delta rows, so the drift is one
    // more of them.
    fx.raw().exec(if fx.on_postgres() {
        "INSERT INTO status_counts (tbl, status, n) VALUES ('loop_runs', 'failed', 7)"
    } else {
        "UPDATE status_counts SET n = n + 7 WHERE tbl = 'loop_runs' AND status = 'failed'"
    });
    assert_eq!(store.count_runs(None).unwrap(), 8);
    assert!(store.recount_statuses().unwrap(), "drift found");
    assert_eq!(counts(&store), (1, 0, 1, 1, 0, 1));
    assert!(!store.recount_statuses().unwrap());
}
