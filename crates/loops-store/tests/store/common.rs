//! Shared fixtures: a temporary database (a file, or a fresh PostgreSQL
//! database under `LOOPS_TEST_BACKEND=postgres`), a controllable liveness
//! probe, raw SQL on either backend, and builders for loops and executor
//! results.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use loops_core::{
    Anchor, CommandTarget, ExecutorResult, ExecutorStatus, Loop, NewLoop, Overlap, ProcessRef,
    Schedule, Target, Timestamp,
};
pub(crate) use loops_store::testing::lit;
use loops_store::testing::{RawDb, TestDatabase};
use loops_store::{DatabaseUrl, Store};
use tempfile::TempDir;

/// The runner ids the tests claim as.
pub(crate) const RUNNER_A: &str = "host-a:100:aaaaaaaaaaaa";
pub(crate) const RUNNER_B: &str = "host-b:200:bbbbbbbbbbbb";

/// The host a store says it runs on, and records with every claim:
/// [`RUNNER_A`]'s, so that on PostgreSQL the liveness probe answers for the
/// runs it claims, as it does on SQLite, where every run is this host's.
pub(crate) const HOST: &str = "host-a";

/// Marks a test about SQLite itself (its files, WAL, pages, the
/// original's databases): on PostgreSQL it prints `skipped <test> on
/// postgres: <why>` and returns.
macro_rules! sqlite_only {
    ($why:expr) => {{
        fn here() {}
        if loops_store::testing::sqlite_only(std::any::type_name_of_val(&here), $why) {
            return;
        }
    }};
}
pub(crate) use sqlite_only;

/// A temporary data directory with a database file (or, on PostgreSQL, a
/// fresh database) and a set of "alive" processes the liveness probe
/// consults.
pub(crate) struct Fixture {
    pub(crate) dir: TempDir,
    pub(crate) alive: Arc<Mutex<HashSet<ProcessRef>>>,
    /// The fresh database, dropped with the fixture; `None` on SQLite.
    pg: Option<TestDatabase>,
}

impl Fixture {
    pub(crate) fn new() -> Fixture {
        let pg = loops_store::testing::on_postgres().then(|| {
            loops_store::testing::fresh_database("store")
                .expect("LOOPS_TEST_DATABASE_URL is set when the backend is postgres")
        });
        Fixture {
            dir: tempfile::tempdir().unwrap(),
            alive: Arc::default(),
            pg,
        }
    }

    /// The SQLite database file (unused on PostgreSQL).
    pub(crate) fn path(&self) -> PathBuf {
        self.dir.path().join("data").join("loops.db")
    }

    /// True when the fixture's database is on PostgreSQL.
    pub(crate) fn on_postgres(&self) -> bool {
        self.pg.is_some()
    }

    /// A new store handle (its own connection) on the fixture's database.
    pub(crate) fn store(&self) -> Store {
        let alive = Arc::clone(&self.alive);
        // A process is alive when its exact reference is in the set, or when
        // the set holds its pid without a start time (the original's
        // pid-only view).
        let probe = move |p: ProcessRef| {
            let set = alive.lock().unwrap();
            set.contains(&p) || set.contains(&ProcessRef::pid(p.pid))
        };
        match &self.pg {
            None => Store::open(&self.path(), Arc::new(probe))
                .unwrap()
                .with_host(HOST),
            Some(db) => {
                let url = DatabaseUrl::parse(db.url()).unwrap();
                Store::open_postgres(&url, "test", HOST, Arc::new(probe)).unwrap()
            }
        }
    }

    /// A raw connection for arranging and inspecting rows with SQL both
    /// backends read the same way (values inlined with [`lit`] and
    /// [`ts`]).
    pub(crate) fn raw(&self) -> RawDb {
        match &self.pg {
            None => RawDb::sqlite(&self.path()),
            Some(db) => RawDb::postgres(db.url()),
        }
    }

    pub(crate) fn set_alive(&self, p: ProcessRef) {
        self.alive.lock().unwrap().insert(p);
    }
}

/// An instant as an SQL literal.
pub(crate) fn ts(t: Timestamp) -> String {
    lit(&t.to_string())
}

/// A nullable instant as an SQL literal.
pub(crate) fn ts_opt(t: Option<Timestamp>) -> String {
    t.map_or_else(|| "NULL".to_owned(), ts)
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

/// Creates an interval loop like [`create`] whose slots may run side by
/// side (`overlap: allow`), for tests that hold several of its slots
/// running at once: a `skip` loop refuses a second running slot
/// ([`loops_store::NotClaimed::OverlapRunning`]).
pub(crate) fn create_overlapping(store: &Store, name: &str, max_attempts: u32) -> Loop {
    let mut new = interval_loop(name);
    new.max_attempts = max_attempts;
    new.overlap = Overlap::Allow;
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
        facts: Default::default(),
    }
}

/// Sets a loop's `next_run_at` directly.
pub(crate) fn set_next_run(fx: &Fixture, lp: &Loop, next: Option<Timestamp>) {
    fx.raw().exec(&format!(
        "UPDATE loops SET next_run_at = {} WHERE id = {}",
        ts_opt(next),
        lit(lp.id.as_str())
    ));
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
    let now = lit("2026-01-01T00:00:00.000Z");
    let spec = "0000000000f1";
    let run = format!("{}00f2f2", &loop_run_id[..6]);
    raw.exec(&format!(
        "INSERT INTO workflow_specs (id, name, version, status, steps_json, created_at, updated_at)
         VALUES ({}, 'wf', 1, 'active', '[]', {now}, {now}) ON CONFLICT DO NOTHING",
        lit(spec)
    ));
    raw.exec(&format!(
        "INSERT INTO workflow_runs (id, workflow_id, workflow_name, loop_id, loop_run_id, status,
           started_at, created_at, updated_at)
         VALUES ({}, {}, 'wf', {}, {}, 'running', {now}, {now}, {now})",
        lit(&run),
        lit(spec),
        lit(loop_id),
        lit(loop_run_id)
    ));
    for (i, (step, status, pid)) in [("a", "running", step_pid), ("b", "pending", None)]
        .into_iter()
        .enumerate()
    {
        raw.exec(&format!(
            "INSERT INTO workflow_step_runs (id, workflow_run_id, step_id, sequence, status, pid,
               created_at, updated_at)
             VALUES ({}, {}, {}, {i}, {}, {}, {now}, {now})",
            lit(&format!("{}{i:02}", &run[..10])),
            lit(&run),
            lit(step),
            lit(status),
            pid.map_or_else(|| "NULL".to_owned(), |p| p.to_string()),
        ));
    }
    raw.exec(&format!(
        "INSERT INTO workflow_events (id, workflow_run_id, sequence, event_type, payload_json, created_at)
         VALUES ({}, {}, 1, 'created', '{{}}', {now})",
        lit(&format!("{}ee", &run[..10])),
        lit(&run)
    ));
    run
}
