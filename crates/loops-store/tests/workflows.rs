//! Workflow specs, runs, step runs and events against real database files
//! (SPEC §4.3, §6.5, §6.6; checklist §10 items 33, 34, 73, 79–81, 83–85).
//!
//! Every test uses a fresh file under a temp dir, because WAL mode and the
//! concurrency tests need a second connection to the same file; under
//! `LOOPS_TEST_BACKEND=postgres`, a fresh PostgreSQL database instead.

// `allow-unwrap-in-tests` covers only `#[test]` functions, not the helpers.
#![allow(clippy::unwrap_used)]

use std::collections::HashSet;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::sync::{Arc, Barrier, Mutex};
use std::thread;

use loops_core::{
    ExecutorStatus, LoopId, NewWorkflow, ProcessRef, RunId, StepRunStatus, Timestamp,
    WorkflowEvent, WorkflowRun, WorkflowRunId, WorkflowRunStatus, WorkflowSpec, WorkflowStatus,
    workflow_from_json,
};
use loops_store::testing::{RawDb, TestDatabase, lit};
use loops_store::{
    DatabaseUrl, NewWorkflowRun, StepOutcome, Store, StoreError, WorkflowFilter, WorkflowRunFilter,
    WorkflowRunPatch,
};
use serde_json::{Value, json};
use tempfile::TempDir;

/// A database file (or a fresh PostgreSQL database) plus the set of pids
/// the fake liveness reports alive, and a log of every process the store
/// asked about.
struct Db {
    _dir: TempDir,
    path: PathBuf,
    /// The fresh database on PostgreSQL, dropped with `Db`.
    pg: Option<TestDatabase>,
    alive: Arc<Mutex<HashSet<u32>>>,
    asked: Arc<Mutex<Vec<ProcessRef>>>,
}

impl Db {
    fn new() -> Db {
        // The temp dir is the data directory: 0700 whatever the umask, as
        // loops makes its own (it refuses one that group or others can
        // write).
        let dir = tempfile::Builder::new()
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir()
            .unwrap();
        let path = dir.path().join("loops.db");
        let pg = loops_store::testing::on_postgres().then(|| {
            loops_store::testing::fresh_database("workflows")
                .expect("LOOPS_TEST_DATABASE_URL is set when the backend is postgres")
        });
        Db {
            _dir: dir,
            path,
            pg,
            alive: Arc::default(),
            asked: Arc::default(),
        }
    }

    /// A raw connection for SQL both backends read the same way.
    fn raw(&self) -> RawDb {
        match &self.pg {
            None => RawDb::sqlite(&self.path),
            Some(pg) => RawDb::postgres(pg.url()),
        }
    }

    /// Opens another handle on the same database.
    fn open(&self) -> Store {
        let alive = Arc::clone(&self.alive);
        let asked = Arc::clone(&self.asked);
        let probe = Arc::new(move |p: ProcessRef| {
            asked.lock().unwrap().push(p);
            alive.lock().unwrap().contains(&p.pid)
        });
        match &self.pg {
            None => Store::open(&self.path, probe).unwrap().with_host("host-a"),
            Some(pg) => {
                let url = DatabaseUrl::parse(pg.url()).unwrap();
                Store::open_postgres(&url, "test", "host-a", probe).unwrap()
            }
        }
    }

    fn set_alive(&self, pid: u32, alive: bool) {
        let mut set = self.alive.lock().unwrap();
        if alive {
            set.insert(pid);
        } else {
            set.remove(&pid);
        }
    }
}

/// Writes a bare loop and loop run row with raw SQL, so the workflow runs
/// linked to them satisfy the schema's `REFERENCES` clauses whether or not
/// the connection enforces foreign keys.
fn insert_loop_run(db: &Db, loop_id: &str, run_id: &str, slot: Timestamp) {
    let raw = db.raw();
    let (loop_id, slot) = (lit(loop_id), lit(&slot.to_string()));
    raw.exec(&format!(
        "INSERT INTO loops (id, name, status, schedule_json, target_json, catch_up, catch_up_limit,
                overlap, max_attempts, retry_delay_ms, lease_ms, created_at, updated_at)
         VALUES ({loop_id}, 'nightly', 'active', '{{\"type\":\"dynamic\"}}',
                 '{{\"type\":\"command\",\"command\":\"true\"}}', 'latest', 50, 'skip', 1, 60000,
                 1800000, {slot}, {slot})"
    ));
    raw.exec(&format!(
        "INSERT INTO loop_runs (id, loop_id, loop_name, scheduled_for, attempt, status, created_at, updated_at)
         VALUES ({}, {loop_id}, 'nightly', {slot}, 1, 'running', {slot}, {slot})",
        lit(run_id)
    ));
}

/// `2026-01-01T00:00:00.000Z` plus `secs` seconds.
fn at(secs: i64) -> Timestamp {
    "2026-01-01T00:00:00Z"
        .parse::<Timestamp>()
        .unwrap()
        .add_ms(secs * 1000)
}

fn new_workflow(name: &str, steps: Value) -> NewWorkflow {
    workflow_from_json(&json!({ "name": name, "steps": steps }), None).unwrap()
}

/// Three steps `a`, `b` (after a, account on the step) and `c` (after b,
/// account on the target).
fn abc(store: &Store, name: &str) -> WorkflowSpec {
    let steps = json!([
        {"id": "a", "target": {"type": "command", "command": "true"}},
        {"id": "b", "dependsOn": ["a"], "account": {"profile": "work", "tool": "claude"},
         "target": {"type": "command", "command": "true"}},
        {"id": "c", "dependsOn": ["b"],
         "target": {"type": "agent", "provider": "codex", "prompt": "hi",
                    "account": {"profile": "home"}}},
    ]);
    store
        .create_workflow(&new_workflow(name, steps), at(0))
        .unwrap()
}

fn manual_run(store: &Store, spec: &WorkflowSpec, now: Timestamp) -> WorkflowRun {
    store
        .create_workflow_run(&NewWorkflowRun::new(spec), now)
        .unwrap()
}

fn events(store: &Store, run: &WorkflowRunId) -> Vec<WorkflowEvent> {
    store.list_events(run, Some(10_000)).unwrap()
}

fn event_types(store: &Store, run: &WorkflowRunId) -> Vec<String> {
    events(store, run)
        .into_iter()
        .map(|e| e.event_type)
        .collect()
}

/// Sequences are exactly 1..=n in order.
fn assert_gap_free(events: &[WorkflowEvent]) {
    let seqs: Vec<u32> = events.iter().map(|e| e.sequence).collect();
    let expected: Vec<u32> = (1..=u32::try_from(events.len()).unwrap()).collect();
    assert_eq!(seqs, expected);
}

fn outcome(status: ExecutorStatus, exit_code: Option<i32>, error: Option<&str>) -> StepOutcome {
    StepOutcome {
        exit_code,
        error: error.map(str::to_owned),
        stdout: Some("out".into()),
        stderr: Some(String::new()),
        duration_ms: Some(5),
        ..StepOutcome::new(status)
    }
}

fn step_status(store: &Store, run: &WorkflowRunId, step: &str) -> StepRunStatus {
    store.get_step_run(run, step).unwrap().unwrap().status
}

// §10 item 33.
#[test]
fn active_workflow_names_are_unique_until_archived() {
    let db = Db::new();
    let store = db.open();
    let first = abc(&store, "deploy");
    assert_eq!(first.status, WorkflowStatus::Active);
    assert_eq!(first.version, 1);
    assert_eq!(first.steps.len(), 3);

    let err = store
        .create_workflow(
            &new_workflow(
                "deploy",
                json!([{"id": "x", "target": {"type": "command", "command": "true"}}]),
            ),
            at(1),
        )
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::DuplicateWorkflowName { name } if name == "deploy"),
        "{err}"
    );
    assert_eq!(
        store
            .list_workflows(&WorkflowFilter::default())
            .unwrap()
            .len(),
        1
    );

    let archived = store.archive_workflow(&first.id, at(2)).unwrap();
    assert_eq!(archived.status, WorkflowStatus::Archived);
    assert_eq!(archived.updated_at, at(2));
    let second = abc(&db.open(), "deploy");
    assert_ne!(second.id, first.id);

    let active = store
        .list_workflows(&WorkflowFilter {
            status: Some(WorkflowStatus::Active),
            limit: None,
        })
        .unwrap();
    assert_eq!(
        active.iter().map(|w| w.id).collect::<Vec<_>>(),
        vec![second.id]
    );
    let all = store.list_workflows(&WorkflowFilter::default()).unwrap();
    assert_eq!(
        all.iter().map(|w| w.id).collect::<Vec<_>>(),
        vec![second.id, first.id]
    );
    let one = store
        .list_workflows(&WorkflowFilter {
            status: None,
            limit: Some(1),
        })
        .unwrap();
    assert_eq!(one.len(), 1);
}

#[test]
fn stored_steps_round_trip() {
    let db = Db::new();
    let store = db.open();
    let input = new_workflow(
        "keys",
        json!([{"id": "a", "x-note": "kept", "timeoutMs": 50,
                "target": {"type": "command", "command": "true"}}]),
    );
    let spec = store.create_workflow(&input, at(0)).unwrap();
    assert_eq!(spec.steps, input.steps);
    let again = db.open().get_workflow(&spec.id).unwrap().unwrap();
    assert_eq!(again, spec);
    assert_eq!(again.steps[0].extra.get("x-note"), Some(&json!("kept")));
}

// §10 item 34 (workflow part).
#[test]
fn require_workflow_tries_id_then_active_name() {
    let db = Db::new();
    let store = db.open();
    let old = abc(&store, "alpha");
    store.archive_workflow(&old.id, at(1)).unwrap();
    let new = abc(&store, "alpha");

    assert_eq!(store.require_workflow("alpha").unwrap().id, new.id);
    // By id, an archived workflow is still found.
    assert_eq!(store.require_workflow(old.id.as_str()).unwrap().id, old.id);

    // An id wins over a workflow whose name is that id.
    let named_like_id = abc(&store, old.id.as_str());
    assert_eq!(store.require_workflow(old.id.as_str()).unwrap().id, old.id);
    assert_eq!(
        store
            .require_workflow(named_like_id.id.as_str())
            .unwrap()
            .id,
        named_like_id.id
    );

    // A name lookup ignores archived workflows.
    store.archive_workflow(&new.id, at(2)).unwrap();
    let err = store.require_workflow("alpha").unwrap_err();
    assert_eq!(err.to_string(), "workflow not found: alpha");
    assert!(matches!(
        err,
        StoreError::NotFound {
            kind: "workflow",
            ..
        }
    ));

    let missing: loops_core::WorkflowId = "0123456789ab".parse().unwrap();
    assert!(store.get_workflow(&missing).unwrap().is_none());
    assert_eq!(
        store
            .archive_workflow(&missing, at(3))
            .unwrap_err()
            .to_string(),
        "workflow not found: 0123456789ab"
    );
}

// §10 item 73.
#[test]
fn a_new_run_has_pending_steps_in_declaration_order_and_a_created_event() {
    let db = Db::new();
    let store = db.open();
    let spec = abc(&store, "wf");
    let loop_id: LoopId = "aaaaaaaaaaaa".parse().unwrap();
    let loop_run_id: RunId = "bbbbbbbbbbbb".parse().unwrap();
    insert_loop_run(&db, "aaaaaaaaaaaa", "bbbbbbbbbbbb", at(-60));
    let input = NewWorkflowRun {
        loop_id: Some(loop_id),
        loop_run_id: Some(loop_run_id),
        scheduled_for: Some(at(-60)),
        ..NewWorkflowRun::new(&spec)
    }
    .with_key("k1");
    let run = store.create_workflow_run(&input, at(10)).unwrap();

    assert_eq!(run.status, WorkflowRunStatus::Running);
    assert_eq!(run.workflow_id, spec.id);
    assert_eq!(run.workflow_name, "wf");
    assert_eq!(run.started_at, Some(at(10)));
    assert_eq!(run.created_at, at(10));
    assert_eq!(run.scheduled_for, Some(at(-60)));
    assert_eq!(run.idempotency_key.as_deref(), Some("k1"));
    assert_eq!(run.loop_id, Some(loop_id));
    assert_eq!(run.loop_run_id, Some(loop_run_id));
    assert!(run.finished_at.is_none() && run.error.is_none());

    let steps = store.list_step_runs(&run.id).unwrap();
    let shape: Vec<_> = steps
        .iter()
        .map(|s| {
            (
                s.step_id.as_str(),
                s.sequence,
                s.status,
                s.account_profile.as_deref(),
                s.account_tool.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        shape,
        vec![
            ("a", 0, StepRunStatus::Pending, None, None),
            ("b", 1, StepRunStatus::Pending, Some("work"), Some("claude")),
            ("c", 2, StepRunStatus::Pending, Some("home"), None),
        ]
    );
    assert!(
        steps
            .iter()
            .all(|s| s.started_at.is_none() && s.pid.is_none())
    );

    let log = events(&store, &run.id);
    assert_eq!(log.len(), 1);
    assert_eq!(log[0].sequence, 1);
    assert_eq!(log[0].event_type, "created");
    assert_eq!(log[0].step_id, None);
    assert_eq!(log[0].created_at, at(10));
    assert_eq!(
        serde_json::to_string(log[0].payload.as_ref().unwrap()).unwrap(),
        format!(
            r#"{{"workflowId":"{}","workflowName":"wf","stepCount":3,"loopId":"aaaaaaaaaaaa","loopRunId":"bbbbbbbbbbbb"}}"#,
            spec.id
        )
    );

    // A manual run has no loop fields in its payload.
    let manual = manual_run(&store, &spec, at(11));
    assert_eq!(
        events(&store, &manual.id)[0].payload,
        Some(json!({"workflowId": spec.id, "workflowName": "wf", "stepCount": 3}))
    );
    assert!(manual.loop_id.is_none() && manual.scheduled_for.is_none());
}

#[test]
fn for_loop_run_links_the_run_and_its_slot() {
    let db = Db::new();
    let store = db.open();
    let spec = abc(&store, "wf");
    insert_loop_run(&db, "aaaaaaaaaaaa", "bbbbbbbbbbbb", at(-30));
    let loop_run = loops_core::LoopRun {
        id: "bbbbbbbbbbbb".parse().unwrap(),
        loop_id: "aaaaaaaaaaaa".parse().unwrap(),
        loop_name: "nightly".into(),
        scheduled_for: at(-30),
        attempt: 2,
        status: loops_core::RunStatus::Running,
        started_at: Some(at(0)),
        finished_at: None,
        claimed_by: Some("manual:1".into()),
        claimed_host: None,
        lease_expires_at: Some(at(100)),
        pid: None,
        exit_code: None,
        duration_ms: None,
        stdout: None,
        stderr: None,
        error: None,
        created_at: at(0),
        updated_at: at(0),
        claim_token: None,
        facts: Default::default(),
        last_output_at: Default::default(),
        cancel_requested_at: Default::default(),
        cancelled_by: Default::default(),
    };
    let input = NewWorkflowRun::new(&spec)
        .for_loop_run(&loop_run)
        .with_key("aaaaaaaaaaaa:2026-01-01T00:00:00.000Z:attempt:2");
    let run = store.create_workflow_run(&input, at(1)).unwrap();
    assert_eq!(run.loop_id, Some(loop_run.loop_id));
    assert_eq!(run.loop_run_id, Some(loop_run.id));
    assert_eq!(run.scheduled_for, Some(at(-30)));
    let linked = store
        .list_workflow_runs(&WorkflowRunFilter {
            loop_run_id: Some(loop_run.id),
            ..WorkflowRunFilter::default()
        })
        .unwrap();
    assert_eq!(
        linked.iter().map(|r| r.id).collect::<Vec<_>>(),
        vec![run.id]
    );
}

// §10 item 80 and the idempotency rule of SPEC §4.3.
#[test]
fn an_existing_key_returns_the_stored_run_as_is() {
    let db = Db::new();
    let store = db.open();
    let spec = abc(&store, "wf");
    let keyed = NewWorkflowRun::new(&spec).with_key("k");
    let first = store.create_workflow_run(&keyed, at(1)).unwrap();
    let again = db.open().create_workflow_run(&keyed, at(2)).unwrap();
    assert_eq!(again, first);

    store
        .finalize_workflow_run(
            &first.id,
            WorkflowRunStatus::Succeeded,
            &WorkflowRunPatch::default(),
            at(3),
        )
        .unwrap();
    let before = events(&store, &first.id);
    let terminal = store.create_workflow_run(&keyed, at(4)).unwrap();
    assert_eq!(terminal.id, first.id);
    assert_eq!(terminal.status, WorkflowRunStatus::Succeeded);
    assert_eq!(events(&store, &first.id), before);
    assert_eq!(store.list_step_runs(&first.id).unwrap().len(), 3);

    // Another key, or no key, creates another run.
    let other = store
        .create_workflow_run(&NewWorkflowRun::new(&spec).with_key("k2"), at(5))
        .unwrap();
    let unkeyed_1 = manual_run(&store, &spec, at(6));
    let unkeyed_2 = manual_run(&store, &spec, at(7));
    let ids: HashSet<_> = [first.id, other.id, unkeyed_1.id, unkeyed_2.id].into();
    assert_eq!(ids.len(), 4);

    // The same key on another workflow is another run.
    let spec2 = abc(&store, "wf2");
    let elsewhere = store
        .create_workflow_run(&NewWorkflowRun::new(&spec2).with_key("k"), at(8))
        .unwrap();
    assert_ne!(elsewhere.id, first.id);
}

// §10 item 79: concurrent creators with one key produce one run.
#[test]
fn concurrent_creators_with_the_same_key_make_one_run() {
    let db = Arc::new(Db::new());
    let spec = abc(&db.open(), "wf");
    for round in 0..8 {
        let key = format!("key-{round}");
        let barrier = Arc::new(Barrier::new(2));
        let handles: Vec<_> = (0..2)
            .map(|_| {
                let (db, spec, key, barrier) = (
                    Arc::clone(&db),
                    spec.clone(),
                    key.clone(),
                    Arc::clone(&barrier),
                );
                thread::spawn(move || {
                    let store = db.open();
                    barrier.wait();
                    store
                        .create_workflow_run(&NewWorkflowRun::new(&spec).with_key(key), at(round))
                        .unwrap()
                })
            })
            .collect();
        let runs: Vec<WorkflowRun> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        assert_eq!(runs[0].id, runs[1].id, "round {round}");
        let store = db.open();
        assert_eq!(store.list_step_runs(&runs[0].id).unwrap().len(), 3);
        assert_eq!(event_types(&store, &runs[0].id), vec!["created"]);
    }
    let all = db
        .open()
        .list_workflow_runs(&WorkflowRunFilter {
            workflow_id: Some(spec.id),
            ..WorkflowRunFilter::default()
        })
        .unwrap();
    assert_eq!(all.len(), 8);
}

// §10 item 79: the second start of a step is refused.
#[test]
fn starting_a_step_twice_is_not_claimable() {
    let db = Db::new();
    let store = db.open();
    let spec = abc(&store, "wf");
    let run = manual_run(&store, &spec, at(0));

    let started = store.start_step_run(&run.id, "a", at(1)).unwrap();
    assert_eq!(started.status, StepRunStatus::Running);
    assert_eq!(started.started_at, Some(at(1)));

    let err = db.open().start_step_run(&run.id, "a", at(2)).unwrap_err();
    assert!(matches!(err, StoreError::StepNotClaimable { .. }));
    assert_eq!(
        err.to_string(),
        format!(
            "workflow step is not claimable: {}/a status=running",
            run.id
        )
    );
    assert_eq!(
        event_types(&store, &run.id),
        vec!["created", "step_started"]
    );
    assert_eq!(
        store
            .get_step_run(&run.id, "a")
            .unwrap()
            .unwrap()
            .started_at,
        Some(at(1))
    );

    let missing = store.start_step_run(&run.id, "zzz", at(3)).unwrap_err();
    assert!(matches!(missing, StoreError::StepNotFound { .. }));
    assert_eq!(
        missing.to_string(),
        format!("workflow step run not found: {}/zzz", run.id)
    );
}

#[test]
fn concurrent_starts_of_one_step_let_exactly_one_win() {
    let db = Arc::new(Db::new());
    let store = db.open();
    let spec = abc(&store, "wf");
    for round in 0..8 {
        let run = manual_run(&store, &spec, at(round));
        let barrier = Arc::new(Barrier::new(2));
        let handles: Vec<_> = (0..2)
            .map(|_| {
                let (db, barrier, id) = (Arc::clone(&db), Arc::clone(&barrier), run.id);
                thread::spawn(move || {
                    let store = db.open();
                    barrier.wait();
                    store.start_step_run(&id, "a", at(round))
                })
            })
            .collect();
        let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        assert_eq!(
            results.iter().filter(|r| r.is_ok()).count(),
            1,
            "round {round}"
        );
        assert!(
            results
                .iter()
                .any(|r| matches!(r, Err(StoreError::StepNotClaimable { .. })))
        );
        assert_eq!(
            event_types(&store, &run.id),
            vec!["created", "step_started"]
        );
    }
}

#[test]
fn failed_and_timed_out_steps_can_start_again_with_results_cleared() {
    let db = Db::new();
    let store = db.open();
    let spec = abc(&store, "wf");
    let run = manual_run(&store, &spec, at(0));
    store.start_step_run(&run.id, "a", at(1)).unwrap();
    store
        .mark_step_pid(&run.id, "a", ProcessRef::pid(10), at(1))
        .unwrap();
    let failed = store
        .finalize_step_run(
            &run.id,
            "a",
            &outcome(ExecutorStatus::Failed, Some(3), Some("boom")),
            at(2),
        )
        .unwrap();
    assert_eq!(failed.status, StepRunStatus::Failed);
    assert_eq!(failed.pid, None);

    let again = store.start_step_run(&run.id, "a", at(3)).unwrap();
    assert_eq!(again.status, StepRunStatus::Running);
    assert_eq!(again.started_at, Some(at(3)));
    assert!(again.finished_at.is_none() && again.exit_code.is_none() && again.error.is_none());
    assert!(again.stdout.is_none() && again.stderr.is_none() && again.duration_ms.is_none());

    store
        .finalize_step_run(
            &run.id,
            "a",
            &outcome(ExecutorStatus::TimedOut, None, Some("timed out after 50ms")),
            at(4),
        )
        .unwrap();
    assert_eq!(
        store.start_step_run(&run.id, "a", at(5)).unwrap().status,
        StepRunStatus::Running
    );

    // Succeeded is settled: it is never started again.
    store
        .finalize_step_run(
            &run.id,
            "a",
            &outcome(ExecutorStatus::Succeeded, Some(0), None),
            at(6),
        )
        .unwrap();
    let err = store.start_step_run(&run.id, "a", at(7)).unwrap_err();
    assert!(err.to_string().ends_with("status=succeeded"), "{err}");
}

// §10 item 84.
#[test]
fn a_step_of_a_run_that_is_not_running_cannot_start() {
    let db = Db::new();
    let store = db.open();
    let spec = abc(&store, "wf");
    let run = manual_run(&store, &spec, at(0));
    store
        .finalize_workflow_run(
            &run.id,
            WorkflowRunStatus::Failed,
            &WorkflowRunPatch {
                error: Some("stop".into()),
                ..WorkflowRunPatch::default()
            },
            at(1),
        )
        .unwrap();
    let err = store.start_step_run(&run.id, "a", at(2)).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "workflow step is not claimable: {}/a status=pending",
            run.id
        )
    );
    assert_eq!(step_status(&store, &run.id, "a"), StepRunStatus::Pending);
    assert_eq!(event_types(&store, &run.id), vec!["created", "failed"]);
}

// §10 item 85.
#[test]
fn finalizing_or_skipping_an_ineligible_step_changes_nothing() {
    let db = Db::new();
    let store = db.open();
    let spec = abc(&store, "wf");
    let run = manual_run(&store, &spec, at(0));

    // Finalize of a pending step.
    let before = store.get_step_run(&run.id, "a").unwrap().unwrap();
    let after = store
        .finalize_step_run(
            &run.id,
            "a",
            &outcome(ExecutorStatus::Succeeded, Some(0), None),
            at(1),
        )
        .unwrap();
    assert_eq!(after, before);

    // Skip and finalize of a succeeded step.
    store.start_step_run(&run.id, "a", at(2)).unwrap();
    let done = store
        .finalize_step_run(
            &run.id,
            "a",
            &outcome(ExecutorStatus::Succeeded, Some(0), None),
            at(3),
        )
        .unwrap();
    assert_eq!(
        store.skip_step_run(&run.id, "a", "nope", at(4)).unwrap(),
        done
    );
    assert_eq!(
        store
            .finalize_step_run(
                &run.id,
                "a",
                &outcome(ExecutorStatus::Failed, Some(1), Some("late")),
                at(5)
            )
            .unwrap(),
        done
    );

    // Skip of a skipped step, and pid marks on steps that are not running.
    let skipped = store.skip_step_run(&run.id, "b", "first", at(6)).unwrap();
    assert_eq!(skipped.status, StepRunStatus::Skipped);
    assert_eq!(
        store.skip_step_run(&run.id, "b", "second", at(7)).unwrap(),
        skipped
    );
    assert!(
        !store
            .mark_step_pid(&run.id, "b", ProcessRef::pid(7), at(8))
            .unwrap()
    );
    assert_eq!(store.get_step_run(&run.id, "b").unwrap(), Some(skipped));
    assert!(
        !store
            .mark_step_pid(&run.id, "c", ProcessRef::pid(7), at(8))
            .unwrap()
    );
    assert_eq!(
        store.get_step_run(&run.id, "c").unwrap().map(|s| s.pid),
        Some(None)
    );

    assert_eq!(
        event_types(&store, &run.id),
        vec!["created", "step_started", "step_succeeded", "step_skipped"]
    );
    for missing in [
        store.skip_step_run(&run.id, "zzz", "r", at(9)).unwrap_err(),
        store
            .finalize_step_run(
                &run.id,
                "zzz",
                &StepOutcome::new(ExecutorStatus::Failed),
                at(9),
            )
            .unwrap_err(),
        store
            .mark_step_pid(&run.id, "zzz", ProcessRef::pid(1), at(9))
            .unwrap_err(),
    ] {
        assert!(
            matches!(missing, StoreError::StepNotFound { .. }),
            "{missing}"
        );
    }
}

#[test]
fn a_step_pid_is_kept_only_while_running() {
    let db = Db::new();
    let store = db.open();
    let spec = abc(&store, "wf");
    let run = manual_run(&store, &spec, at(0));
    store.start_step_run(&run.id, "a", at(1)).unwrap();
    assert!(
        store
            .mark_step_pid(
                &run.id,
                "a",
                ProcessRef {
                    pid: 4242,
                    start: Some(99),
                },
                at(2),
            )
            .unwrap()
    );
    let marked = store.get_step_run(&run.id, "a").unwrap().unwrap();
    assert_eq!(marked.pid, Some(4242));
    assert_eq!(marked.updated_at, at(2));
    let done = store
        .finalize_step_run(
            &run.id,
            "a",
            &outcome(ExecutorStatus::Succeeded, Some(0), None),
            at(3),
        )
        .unwrap();
    assert_eq!(done.pid, None);
    assert_eq!(done.status, StepRunStatus::Succeeded);
    assert_eq!(done.finished_at, Some(at(3)));
    assert_eq!(done.exit_code, Some(0));
    assert_eq!(done.stdout.as_deref(), Some("out"));
    assert_eq!(done.duration_ms, Some(5));
}

// §10 item 81.
#[test]
fn cancel_marks_the_run_and_its_open_steps_and_wins_over_a_later_finalize() {
    let db = Db::new();
    let store = db.open();
    let spec = abc(&store, "wf");
    let run = manual_run(&store, &spec, at(0));
    store.start_step_run(&run.id, "a", at(1)).unwrap();
    store
        .finalize_step_run(
            &run.id,
            "a",
            &outcome(ExecutorStatus::Succeeded, Some(0), None),
            at(2),
        )
        .unwrap();
    store.start_step_run(&run.id, "b", at(3)).unwrap();
    store
        .mark_step_pid(&run.id, "b", ProcessRef::pid(4242), at(3))
        .unwrap();
    db.set_alive(4242, true);

    let cancelled = db
        .open()
        .cancel_workflow_run(&run.id, "stop it", at(4))
        .unwrap();
    assert_eq!(cancelled.status, WorkflowRunStatus::Cancelled);
    assert_eq!(cancelled.finished_at, Some(at(4)));
    assert_eq!(cancelled.error.as_deref(), Some("stop it"));
    assert_eq!(cancelled.duration_ms, None);

    let steps = store.list_step_runs(&run.id).unwrap();
    assert_eq!(steps[0].status, StepRunStatus::Succeeded);
    assert_eq!(steps[0].error, None);
    for step in &steps[1..] {
        assert_eq!(step.status, StepRunStatus::Cancelled, "{}", step.step_id);
        assert_eq!(step.pid, None);
        assert_eq!(step.error.as_deref(), Some("stop it"));
        assert_eq!(step.finished_at, Some(at(4)));
    }
    let log = events(&store, &run.id);
    let last = log.last().unwrap();
    assert_eq!(last.event_type, "cancelled");
    assert_eq!(last.payload, Some(json!({"reason": "stop it"})));
    // No step_cancelled events (SPEC §6.6).
    assert!(log.iter().all(|e| e.event_type != "step_cancelled"));

    // A later finalize of the run, or of the step, changes nothing.
    let after = store
        .finalize_workflow_run(
            &run.id,
            WorkflowRunStatus::Failed,
            &WorkflowRunPatch {
                error: Some("step b failed".into()),
                duration_ms: Some(9),
                finished_at: Some(at(5)),
            },
            at(5),
        )
        .unwrap();
    assert_eq!(after, cancelled);
    let step_b = store
        .finalize_step_run(
            &run.id,
            "b",
            &outcome(ExecutorStatus::Failed, None, Some("cancelled")),
            at(5),
        )
        .unwrap();
    assert_eq!(step_b.status, StepRunStatus::Cancelled);
    // Cancelling again leaves it as it is.
    assert_eq!(
        store.cancel_workflow_run(&run.id, "again", at(6)).unwrap(),
        cancelled
    );
    assert_eq!(events(&store, &run.id), log);
    assert!(store.is_workflow_run_terminal(&run.id).unwrap());

    let missing: WorkflowRunId = "0123456789ab".parse().unwrap();
    assert_eq!(
        store
            .cancel_workflow_run(&missing, "x", at(7))
            .unwrap_err()
            .to_string(),
        "workflow run not found: 0123456789ab"
    );
}

// §10 item 83.
#[test]
fn recover_resets_dead_running_steps_and_refuses_live_ones() {
    let db = Db::new();
    let store = db.open();
    let spec = abc(&store, "wf");
    let run = manual_run(&store, &spec, at(0));
    store.start_step_run(&run.id, "a", at(1)).unwrap();
    store
        .mark_step_pid(
            &run.id,
            "a",
            ProcessRef {
                pid: 4242,
                start: Some(1234),
            },
            at(1),
        )
        .unwrap();
    db.set_alive(4242, true);

    let before_steps = store.list_step_runs(&run.id).unwrap();
    let before_events = events(&store, &run.id);
    let err = db
        .open()
        .recover_workflow_run(&run.id, "retry", at(2))
        .unwrap_err();
    assert!(matches!(err, StoreError::StepsAlive { .. }));
    assert_eq!(
        err.to_string(),
        "cannot recover workflow run while step processes are still alive: a pid=4242"
    );
    assert!(err.to_string().contains("still alive"));
    assert_eq!(store.list_step_runs(&run.id).unwrap(), before_steps);
    assert_eq!(events(&store, &run.id), before_events);
    // The liveness probe saw the recorded start time, not just the pid.
    assert!(db.asked.lock().unwrap().contains(&ProcessRef {
        pid: 4242,
        start: Some(1234)
    }));

    db.set_alive(4242, false);
    let recovered = store.recover_workflow_run(&run.id, "retry", at(3)).unwrap();
    assert_eq!(recovered.run.status, WorkflowRunStatus::Running);
    assert_eq!(recovered.recovered_steps.len(), 1);
    let a = &recovered.recovered_steps[0];
    assert_eq!(a.step_id, "a");
    assert_eq!(a.status, StepRunStatus::Pending);
    assert_eq!(a.pid, None);
    assert_eq!(a.started_at, None);
    assert_eq!(a.error.as_deref(), Some("retry"));
    assert_eq!(a.updated_at, at(3));
    let last = events(&store, &run.id).pop().unwrap();
    assert_eq!(last.event_type, "recovered");
    assert_eq!(
        last.payload,
        Some(json!({"reason": "retry", "recoveredSteps": ["a"]}))
    );

    // Nothing running: nothing to do, no event.
    let n = events(&store, &run.id).len();
    let idle = store.recover_workflow_run(&run.id, "retry", at(4)).unwrap();
    assert!(idle.recovered_steps.is_empty());
    assert_eq!(events(&store, &run.id).len(), n);

    // A running step without a pid counts as dead; the recovered step can
    // start again.
    store.start_step_run(&run.id, "a", at(5)).unwrap();
    let again = store.recover_workflow_run(&run.id, "retry", at(6)).unwrap();
    assert_eq!(again.recovered_steps.len(), 1);
    assert_eq!(
        store.start_step_run(&run.id, "a", at(7)).unwrap().status,
        StepRunStatus::Running
    );
}

#[test]
fn recover_lists_every_live_step() {
    let db = Db::new();
    let store = db.open();
    let steps = json!([
        {"id": "x", "target": {"type": "command", "command": "true"}},
        {"id": "y", "target": {"type": "command", "command": "true"}},
        {"id": "z", "target": {"type": "command", "command": "true"}},
    ]);
    let spec = store
        .create_workflow(&new_workflow("par", steps), at(0))
        .unwrap();
    let run = manual_run(&store, &spec, at(0));
    for (step, pid) in [("x", 11), ("y", 12), ("z", 13)] {
        store.start_step_run(&run.id, step, at(1)).unwrap();
        store
            .mark_step_pid(&run.id, step, ProcessRef::pid(pid), at(1))
            .unwrap();
    }
    db.set_alive(11, true);
    db.set_alive(13, true);
    let err = store.recover_workflow_run(&run.id, "r", at(2)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "cannot recover workflow run while step processes are still alive: x pid=11, z pid=13"
    );
    assert!(
        store
            .list_step_runs(&run.id)
            .unwrap()
            .iter()
            .all(|s| s.status == StepRunStatus::Running)
    );
}

#[test]
fn skip_open_steps_skips_pending_and_running_steps_in_order() {
    let db = Db::new();
    let store = db.open();
    let spec = abc(&store, "wf");
    let run = manual_run(&store, &spec, at(0));
    store.start_step_run(&run.id, "a", at(1)).unwrap();
    store
        .finalize_step_run(
            &run.id,
            "a",
            &outcome(ExecutorStatus::Succeeded, Some(0), None),
            at(2),
        )
        .unwrap();
    store.start_step_run(&run.id, "b", at(3)).unwrap();
    store
        .mark_step_pid(&run.id, "b", ProcessRef::pid(5), at(3))
        .unwrap();

    let skipped = store
        .skip_open_steps(&run.id, "workflow stopped before step could run", at(4))
        .unwrap();
    assert_eq!(
        skipped
            .iter()
            .map(|s| s.step_id.as_str())
            .collect::<Vec<_>>(),
        vec!["b", "c"]
    );
    for step in &skipped {
        assert_eq!(step.status, StepRunStatus::Skipped);
        assert_eq!(step.pid, None);
        assert_eq!(step.finished_at, Some(at(4)));
        assert_eq!(
            step.error.as_deref(),
            Some("workflow stopped before step could run")
        );
    }
    let log = events(&store, &run.id);
    let tail: Vec<_> = log[log.len() - 2..]
        .iter()
        .map(|e| {
            (
                e.event_type.as_str(),
                e.step_id.as_deref(),
                e.payload.clone(),
            )
        })
        .collect();
    let reason = json!({"reason": "workflow stopped before step could run"});
    assert_eq!(
        tail,
        vec![
            ("step_skipped", Some("b"), Some(reason.clone())),
            ("step_skipped", Some("c"), Some(reason)),
        ]
    );
    assert!(
        store
            .skip_open_steps(&run.id, "again", at(5))
            .unwrap()
            .is_empty()
    );
    assert_eq!(events(&store, &run.id).len(), log.len());
}

// SPEC §6.6: every event type, in order, with gap-free sequences.
#[test]
fn every_event_type_is_written_in_order_with_gap_free_sequences() {
    let db = Db::new();
    let store = db.open();
    let spec = abc(&store, "wf");

    let run = manual_run(&store, &spec, at(0));
    store.start_step_run(&run.id, "a", at(1)).unwrap();
    store
        .finalize_step_run(
            &run.id,
            "a",
            &outcome(ExecutorStatus::Succeeded, Some(0), None),
            at(2),
        )
        .unwrap();
    store.start_step_run(&run.id, "b", at(3)).unwrap();
    store
        .finalize_step_run(
            &run.id,
            "b",
            &outcome(
                ExecutorStatus::Failed,
                Some(3),
                Some("process exited with code 3"),
            ),
            at(4),
        )
        .unwrap();
    store.start_step_run(&run.id, "b", at(5)).unwrap();
    store
        .finalize_step_run(
            &run.id,
            "b",
            &outcome(ExecutorStatus::TimedOut, None, Some("timed out after 50ms")),
            at(6),
        )
        .unwrap();
    store.start_step_run(&run.id, "c", at(7)).unwrap();
    store.recover_workflow_run(&run.id, "retry", at(8)).unwrap();
    store
        .skip_step_run(&run.id, "c", "dependency did not succeed: b", at(9))
        .unwrap();
    let failed = store
        .finalize_workflow_run(
            &run.id,
            WorkflowRunStatus::TimedOut,
            &WorkflowRunPatch {
                finished_at: Some(at(10)),
                duration_ms: Some(10_000),
                error: Some("step b timed_out: timed out after 50ms".into()),
            },
            at(11),
        )
        .unwrap();
    assert_eq!(failed.status, WorkflowRunStatus::TimedOut);
    assert_eq!(failed.finished_at, Some(at(10)));
    assert_eq!(failed.duration_ms, Some(10_000));

    let log = events(&store, &run.id);
    assert_gap_free(&log);
    let seen: Vec<_> = log
        .iter()
        .map(|e| {
            (
                e.event_type.as_str(),
                e.step_id.as_deref(),
                e.payload.clone(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        vec![
            (
                "created",
                None,
                Some(json!({"workflowId": spec.id, "workflowName": "wf", "stepCount": 3}))
            ),
            ("step_started", Some("a"), None),
            ("step_succeeded", Some("a"), Some(json!({"exitCode": 0}))),
            ("step_started", Some("b"), None),
            (
                "step_failed",
                Some("b"),
                Some(json!({"exitCode": 3, "error": "process exited with code 3"}))
            ),
            ("step_started", Some("b"), None),
            (
                "step_timed_out",
                Some("b"),
                Some(json!({"error": "timed out after 50ms"}))
            ),
            ("step_started", Some("c"), None),
            (
                "recovered",
                None,
                Some(json!({"reason": "retry", "recoveredSteps": ["c"]}))
            ),
            (
                "step_skipped",
                Some("c"),
                Some(json!({"reason": "dependency did not succeed: b"}))
            ),
            (
                "timed_out",
                None,
                Some(json!({"error": "step b timed_out: timed out after 50ms"}))
            ),
        ]
    );
    assert_eq!(log.last().unwrap().created_at, at(11));

    // The other run-level events.
    let cases = [
        (WorkflowRunStatus::Succeeded, None, json!({})),
        (
            WorkflowRunStatus::Failed,
            Some("step a failed: boom"),
            json!({"error": "step a failed: boom"}),
        ),
    ];
    for (status, error, payload) in cases {
        let run = manual_run(&store, &spec, at(20));
        let patch = WorkflowRunPatch {
            error: error.map(str::to_owned),
            ..WorkflowRunPatch::default()
        };
        let done = store
            .finalize_workflow_run(&run.id, status, &patch, at(21))
            .unwrap();
        assert_eq!(done.finished_at, Some(at(21)));
        let log = events(&store, &run.id);
        assert_gap_free(&log);
        assert_eq!(log.last().unwrap().event_type, status.as_str());
        assert_eq!(log.last().unwrap().payload, Some(payload));
    }
    let run = manual_run(&store, &spec, at(30));
    store
        .cancel_workflow_run(&run.id, "cancelled by user", at(31))
        .unwrap();
    let log = events(&store, &run.id);
    assert_gap_free(&log);
    assert_eq!(event_types(&store, &run.id), vec!["created", "cancelled"]);

    // The limit keeps the first events.
    let first_two = store.list_events(&run.id, Some(1)).unwrap();
    assert_eq!(first_two.len(), 1);
    assert_eq!(first_two[0].event_type, "created");
}

// SPEC §9 item 9: concurrent writers never collide on a sequence.
#[test]
fn concurrent_event_writers_produce_unique_gap_free_sequences() {
    let db = Arc::new(Db::new());
    let store = db.open();
    let steps: Vec<Value> = (0..40)
        .map(|i| json!({"id": format!("s{i}"), "target": {"type": "command", "command": "true"}}))
        .collect();
    let spec = store
        .create_workflow(&new_workflow("wide", Value::Array(steps)), at(0))
        .unwrap();
    let run = manual_run(&store, &spec, at(0));
    let barrier = Arc::new(Barrier::new(2));
    let handles: Vec<_> = (0..2)
        .map(|parity| {
            let (db, barrier, id) = (Arc::clone(&db), Arc::clone(&barrier), run.id);
            thread::spawn(move || {
                let store = db.open();
                barrier.wait();
                for i in (parity..40).step_by(2) {
                    let step = format!("s{i}");
                    store.start_step_run(&id, &step, at(1)).unwrap();
                    store
                        .finalize_step_run(
                            &id,
                            &step,
                            &outcome(ExecutorStatus::Succeeded, Some(0), None),
                            at(2),
                        )
                        .unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let log = events(&store, &run.id);
    assert_eq!(log.len(), 81);
    assert_gap_free(&log);
    let ids: HashSet<_> = log.iter().map(|e| e.id).collect();
    assert_eq!(ids.len(), 81);
    assert_eq!(
        log.iter()
            .filter(|e| e.event_type == "step_succeeded")
            .count(),
        40
    );
    // Each step's start precedes its finish.
    for i in 0..40 {
        let step = format!("s{i}");
        let kinds: Vec<_> = log
            .iter()
            .filter(|e| e.step_id.as_deref() == Some(step.as_str()))
            .map(|e| e.event_type.as_str())
            .collect();
        assert_eq!(kinds, vec!["step_started", "step_succeeded"], "{step}");
    }
}

// SPEC §1.5: terminal workflow runs never change.
#[test]
fn terminal_runs_never_change_status() {
    let db = Db::new();
    let store = db.open();
    let spec = abc(&store, "wf");
    let terminal = [
        WorkflowRunStatus::Succeeded,
        WorkflowRunStatus::Failed,
        WorkflowRunStatus::TimedOut,
        WorkflowRunStatus::Cancelled,
    ];
    for status in terminal {
        let run = manual_run(&store, &spec, at(0));
        let done = if status == WorkflowRunStatus::Cancelled {
            store.cancel_workflow_run(&run.id, "c", at(1)).unwrap()
        } else {
            store
                .finalize_workflow_run(&run.id, status, &WorkflowRunPatch::default(), at(1))
                .unwrap()
        };
        assert_eq!(done.status, status);
        let log = events(&store, &run.id);
        let steps = store.list_step_runs(&run.id).unwrap();

        for other in terminal {
            let again = store
                .finalize_workflow_run(
                    &run.id,
                    other,
                    &WorkflowRunPatch {
                        error: Some("late".into()),
                        ..WorkflowRunPatch::default()
                    },
                    at(2),
                )
                .unwrap();
            assert_eq!(again, done, "{status} then {other}");
        }
        assert_eq!(
            store.cancel_workflow_run(&run.id, "late", at(3)).unwrap(),
            done
        );
        assert!(store.start_step_run(&run.id, "a", at(4)).is_err());
        assert_eq!(
            store
                .recover_workflow_run(&run.id, "late", at(5))
                .unwrap()
                .run,
            done
        );
        assert_eq!(store.require_workflow_run(&run.id).unwrap(), done);
        assert_eq!(store.list_step_runs(&run.id).unwrap(), steps);
        assert_eq!(events(&store, &run.id), log);
        assert!(store.is_workflow_run_terminal(&run.id).unwrap());
    }
}

#[test]
fn finalizing_a_run_as_running_is_refused() {
    let db = Db::new();
    let store = db.open();
    let spec = abc(&store, "wf");
    let run = manual_run(&store, &spec, at(0));
    let err = store
        .finalize_workflow_run(
            &run.id,
            WorkflowRunStatus::Running,
            &WorkflowRunPatch::default(),
            at(1),
        )
        .unwrap_err();
    assert!(matches!(err, StoreError::InvalidTransition { .. }), "{err}");
    assert!(!store.is_workflow_run_terminal(&run.id).unwrap());
    assert_eq!(event_types(&store, &run.id), vec!["created"]);
}

#[test]
fn workflow_run_lookups_and_lists() {
    let db = Db::new();
    let store = db.open();
    let one = abc(&store, "one");
    let two = abc(&store, "two");
    let r1 = manual_run(&store, &one, at(1));
    let r2 = manual_run(&store, &two, at(2));
    let r3 = manual_run(&store, &one, at(3));

    let ids = |filter: WorkflowRunFilter| -> Vec<WorkflowRunId> {
        store
            .list_workflow_runs(&filter)
            .unwrap()
            .into_iter()
            .map(|r| r.id)
            .collect()
    };
    assert_eq!(ids(WorkflowRunFilter::default()), vec![r3.id, r2.id, r1.id]);
    assert_eq!(
        ids(WorkflowRunFilter {
            workflow_id: Some(one.id),
            ..WorkflowRunFilter::default()
        }),
        vec![r3.id, r1.id]
    );
    assert_eq!(
        ids(WorkflowRunFilter {
            limit: Some(2),
            ..WorkflowRunFilter::default()
        }),
        vec![r3.id, r2.id]
    );
    // The workflow filter takes precedence over the loop-run filter.
    assert_eq!(
        ids(WorkflowRunFilter {
            workflow_id: Some(two.id),
            loop_run_id: Some("cccccccccccc".parse().unwrap()),
            limit: None,
        }),
        vec![r2.id]
    );
    assert!(
        ids(WorkflowRunFilter {
            loop_run_id: Some("cccccccccccc".parse().unwrap()),
            ..WorkflowRunFilter::default()
        })
        .is_empty()
    );

    assert_eq!(store.get_workflow_run(&r1.id).unwrap(), Some(r1.clone()));
    let missing: WorkflowRunId = "0123456789ab".parse().unwrap();
    assert_eq!(store.get_workflow_run(&missing).unwrap(), None);
    assert_eq!(
        store
            .require_workflow_run(&missing)
            .unwrap_err()
            .to_string(),
        "workflow run not found: 0123456789ab"
    );
    assert!(store.is_workflow_run_terminal(&missing).is_err());
    assert_eq!(
        store
            .recover_workflow_run(&missing, "r", at(4))
            .unwrap_err()
            .to_string(),
        "workflow run not found: 0123456789ab"
    );
    assert!(store.list_step_runs(&missing).unwrap().is_empty());
    assert!(store.get_step_run(&r1.id, "zzz").unwrap().is_none());
    assert!(store.list_events(&missing, None).unwrap().is_empty());
}

#[test]
fn a_transaction_keeps_all_or_nothing_and_lets_a_guard_failure_pass() {
    let db = Db::new();
    let store = db.open();
    let other = db.open();
    let spec = abc(&store, "wf");
    let run = manual_run(&store, &spec, at(0));

    // A step that cannot start fails its guard inside the transaction and
    // writes nothing; the caller handles it, and the rest commits.
    let turn: Result<(), StoreError> = store.transaction(|| {
        store.start_step_run(&run.id, "a", at(1))?;
        let again = store.start_step_run(&run.id, "a", at(1)).unwrap_err();
        assert!(
            matches!(again, StoreError::StepNotClaimable { .. }),
            "{again}"
        );
        // Not visible elsewhere until the transaction commits.
        assert_eq!(
            other.get_step_run(&run.id, "a").unwrap().unwrap().status,
            StepRunStatus::Pending
        );
        store.start_step_run(&run.id, "b", at(1))?;
        Ok(())
    });
    turn.unwrap();
    assert_eq!(
        event_types(&other, &run.id),
        vec!["created", "step_started", "step_started"]
    );

    // Any error ends it: nothing of it is stored, not even what succeeded
    // before the error.
    let failed: Result<(), StoreError> = store.transaction(|| {
        store.finalize_step_run(
            &run.id,
            "a",
            &outcome(ExecutorStatus::Succeeded, Some(0), None),
            at(2),
        )?;
        store.start_step_run(&run.id, "zzz", at(2))?;
        Ok(())
    });
    assert!(
        matches!(failed, Err(StoreError::StepNotFound { .. })),
        "{failed:?}"
    );
    assert_eq!(
        other.get_step_run(&run.id, "a").unwrap().unwrap().status,
        StepRunStatus::Running,
        "the finalize before the error was rolled back"
    );
    assert_eq!(event_types(&other, &run.id).len(), 3);
}
