//! Shared fixtures: a temporary database file, a controllable liveness
//! probe, and builders for loops and executor results.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use loops_core::{
    Anchor, CommandTarget, ExecutorResult, ExecutorStatus, Loop, NewLoop, ProcessRef, Schedule,
    Target, Timestamp,
};
use loops_store::Store;
use rusqlite::Connection;
use tempfile::TempDir;

/// The runner ids the tests claim as.
pub(crate) const RUNNER_A: &str = "host-a:100:aaaaaaaaaaaa";
pub(crate) const RUNNER_B: &str = "host-b:200:bbbbbbbbbbbb";

/// A temporary data directory with a database file and a set of "alive"
/// processes the liveness probe consults.
pub(crate) struct Fixture {
    pub(crate) dir: TempDir,
    pub(crate) alive: Arc<Mutex<HashSet<ProcessRef>>>,
}

impl Fixture {
    pub(crate) fn new() -> Fixture {
        Fixture {
            dir: tempfile::tempdir().unwrap(),
            alive: Arc::default(),
        }
    }

    pub(crate) fn path(&self) -> PathBuf {
        self.dir.path().join("data").join("loops.db")
    }

    /// A new store handle (its own connection) on the fixture's file.
    pub(crate) fn store(&self) -> Store {
        let alive = Arc::clone(&self.alive);
        // A process is alive when its exact reference is in the set, or when
        // the set holds its pid without a start time (the original's
        // pid-only view).
        let probe = move |p: ProcessRef| {
            let set = alive.lock().unwrap();
            set.contains(&p) || set.contains(&ProcessRef::pid(p.pid))
        };
        Store::open(&self.path(), Arc::new(probe)).unwrap()
    }

    /// A raw connection for arranging and inspecting rows.
    pub(crate) fn raw(&self) -> Connection {
        let c = Connection::open(self.path()).unwrap();
        c.busy_timeout(std::time::Duration::from_secs(5)).unwrap();
        c
    }

    pub(crate) fn set_alive(&self, p: ProcessRef) {
        self.alive.lock().unwrap().insert(p);
    }
}

/// Parses an instant.
pub(crate) fn t(s: &str) -> Timestamp {
    s.parse().unwrap()
}

/// The instant the tests start at.
pub(crate) fn t0() -> Timestamp {
    t("2026-01-01T00:00:00.000Z")
}

/// An interval loop running `echo hi` every minute, with SPEC defaults.
pub(crate) fn interval_loop(name: &str) -> NewLoop {
    let mut target = CommandTarget::new("echo hi");
    target.shell = Some(true);
    NewLoop::new(
        name,
        Schedule::Interval {
            every_ms: 60_000,
            anchor: Some(Anchor::FixedRate),
        },
        Target::Command(target),
    )
}

/// Creates an interval loop with `max_attempts` attempts at `t0`.
pub(crate) fn create(store: &Store, name: &str, max_attempts: u32) -> Loop {
    let mut new = interval_loop(name);
    new.max_attempts = max_attempts;
    store.create_loop(&new, t0()).unwrap()
}

/// An executor result finished at `finished`.
pub(crate) fn result(status: ExecutorStatus, finished: Timestamp) -> ExecutorResult {
    let ok = status == ExecutorStatus::Succeeded;
    ExecutorResult {
        status,
        exit_code: Some(if ok { 0 } else { 3 }),
        stdout: "out".into(),
        stderr: String::new(),
        error: (!ok).then(|| "process exited with code 3".into()),
        pid: Some(4242),
        started_at: finished.add_ms(-1000),
        finished_at: finished,
        duration_ms: 1000,
    }
}

/// Sets a loop's `next_run_at` directly.
pub(crate) fn set_next_run(fx: &Fixture, lp: &Loop, next: Option<Timestamp>) {
    fx.raw()
        .execute(
            "UPDATE loops SET next_run_at = ?2 WHERE id = ?1",
            (lp.id.as_str(), next.map(|n| n.to_string())),
        )
        .unwrap();
}

/// Inserts a workflow spec, a running workflow run linked to `loop_run_id`
/// with event 1 `created`, a running step `a` with `step_pid`, and a pending
/// step `b`. Returns the workflow run id.
pub(crate) fn insert_linked_workflow(
    fx: &Fixture,
    loop_id: &str,
    loop_run_id: &str,
    step_pid: Option<u32>,
) -> String {
    let raw = fx.raw();
    let now = "2026-01-01T00:00:00.000Z";
    let spec = "0000000000f1";
    let run = format!("{}00f2f2", &loop_run_id[..6]);
    raw.execute(
        "INSERT OR IGNORE INTO workflow_specs (id, name, version, status, steps_json, created_at, updated_at)
         VALUES (?1, 'wf', 1, 'active', '[]', ?2, ?2)",
        (spec, now),
    )
    .unwrap();
    raw.execute(
        "INSERT INTO workflow_runs (id, workflow_id, workflow_name, loop_id, loop_run_id, status,
           started_at, created_at, updated_at)
         VALUES (?1, ?2, 'wf', ?3, ?4, 'running', ?5, ?5, ?5)",
        (&run, spec, loop_id, loop_run_id, now),
    )
    .unwrap();
    for (i, (step, status, pid)) in [("a", "running", step_pid), ("b", "pending", None)]
        .into_iter()
        .enumerate()
    {
        raw.execute(
            "INSERT INTO workflow_step_runs (id, workflow_run_id, step_id, sequence, status, pid,
               created_at, updated_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7)",
            (
                format!("{}{i:02}", &run[..10]),
                &run,
                step,
                i as i64,
                status,
                pid,
                now,
            ),
        )
        .unwrap();
    }
    raw.execute(
        "INSERT INTO workflow_events (id, workflow_run_id, sequence, event_type, payload_json, created_at)
         VALUES (?1, ?2, 1, 'created', '{}', ?3)",
        (format!("{}ee", &run[..10]), &run, now),
    )
    .unwrap();
    run
}
