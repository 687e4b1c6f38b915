//! Workflow specs, runs, steps and events on PostgreSQL: a run's whole
//! life gives the records SQLite gives for the same calls, and concurrent
//! writers of one run get gapless event sequences and one run per key.

use std::collections::HashSet;
use std::sync::{Arc, Barrier, Mutex};
use std::thread;

use loops_core::{
    ExecutorStatus, NewWorkflow, ProcessRef, WorkflowId, WorkflowRunId, WorkflowRunStatus,
    WorkflowSpec, WorkflowStatus, workflow_from_json,
};
use loops_store::{
    NewWorkflowRun, StepOutcome, Store, StoreError, WorkflowFilter, WorkflowRunFilter,
    WorkflowRunPatch,
};
use serde::Serialize;
use serde_json::{Value, json};

use crate::common::{at, database, pg_store};

/// The pid the probes of these tests call alive.
const ALIVE_PID: u32 = 4242;

fn probe(p: ProcessRef) -> bool {
    p.pid == ALIVE_PID
}

fn abc() -> NewWorkflow {
    let steps = json!([
        {"id": "a", "target": {"type": "command", "command": "true"}},
        {"id": "b", "dependsOn": ["a"], "account": {"profile": "work", "tool": "claude"},
         "target": {"type": "command", "command": "true"}},
        {"id": "c", "dependsOn": ["b"],
         "target": {"type": "agent", "provider": "codex", "prompt": "hi",
                    "account": {"profile": "home"}}},
    ]);
    workflow_from_json(&json!({"name": "abc", "steps": steps}), None).unwrap()
}

/// One backend's store and the records it created so far.
struct Side {
    store: Store,
    spec: Option<WorkflowSpec>,
    runs: Vec<WorkflowRunId>,
}

impl Side {
    fn spec(&self) -> &WorkflowSpec {
        self.spec.as_ref().unwrap()
    }

    fn run(&self, i: usize) -> &WorkflowRunId {
        &self.runs[i]
    }
}

/// The same calls on SQLite and PostgreSQL, compared after each one with
/// the ids each side drew replaced by one label.
struct Pair {
    sqlite: Side,
    pg: Side,
    /// `(sqlite id, postgres id, label)`.
    labels: Vec<(String, String, String)>,
}

impl Pair {
    fn learn(&mut self, sqlite: &str, pg: &str) {
        let label = format!("<id{}>", self.labels.len());
        self.labels.push((sqlite.to_owned(), pg.to_owned(), label));
    }

    /// Replaces the learned ids of one side by their labels, and masks the
    /// ids of step runs and events, which each side draws on its own.
    fn normalize(&self, sqlite_side: bool, text: String) -> Value {
        let mut text = text;
        for (lite, pg, label) in &self.labels {
            text = text.replace(if sqlite_side { lite } else { pg }, label);
        }
        let mut value: Value = serde_json::from_str(&text).unwrap_or(Value::String(text));
        mask_ids(&mut value);
        value
    }

    /// Runs `call` on both sides, asserts the results are the same, and
    /// returns them.
    fn both<T: Serialize>(
        &self,
        what: &str,
        call: impl Fn(&Side) -> Result<T, StoreError>,
    ) -> (Result<T, StoreError>, Result<T, StoreError>) {
        let lite = call(&self.sqlite);
        let pg = call(&self.pg);
        let shown = |side: bool, r: &Result<T, StoreError>| match r {
            Ok(v) => self.normalize(side, serde_json::to_string(v).unwrap()),
            Err(e) => json!({ "error": self.normalize(side, json!(e.to_string()).to_string()) }),
        };
        assert_eq!(shown(true, &lite), shown(false, &pg), "{what}");
        (lite, pg)
    }
}

/// Masks every `id` that is not a learned label.
fn mask_ids(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                if k == "id" && v.as_str().is_some_and(|s| !s.starts_with("<id")) {
                    *v = json!("<drawn>");
                } else {
                    mask_ids(v);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(mask_ids),
        _ => {}
    }
}

fn outcome(status: ExecutorStatus, exit: i32, finished: i64) -> StepOutcome {
    StepOutcome {
        status,
        finished_at: Some(at(finished)),
        exit_code: Some(exit),
        duration_ms: Some(1500),
        stdout: Some("out".into()),
        stderr: Some(String::new()),
        error: (exit != 0).then(|| format!("process exited with code {exit}")),
    }
}

#[test]
fn a_workflow_runs_whole_life_gives_the_records_sqlite_gives() {
    let Some(db) = database("whole_life") else {
        return;
    };
    let side = |store| Side {
        store,
        spec: None,
        runs: Vec::new(),
    };
    let mut p = Pair {
        sqlite: side(
            Store::open_in_memory(Arc::new(probe))
                .unwrap()
                .with_host("host-a"),
        ),
        pg: side(pg_store(&db, "host-a", probe)),
        labels: Vec::new(),
    };

    // Specs: create, duplicate name, lookups, lists.
    let (lite, pg) = p.both("create workflow", |s| {
        s.store.create_workflow(&abc(), at(0))
    });
    let (lite, pg) = (lite.unwrap(), pg.unwrap());
    p.learn(lite.id.as_str(), pg.id.as_str());
    p.sqlite.spec = Some(lite);
    p.pg.spec = Some(pg);
    let (_, pg) = p.both("duplicate name", |s| s.store.create_workflow(&abc(), at(1)));
    assert!(matches!(pg, Err(StoreError::DuplicateWorkflowName { .. })));
    let _ = p.both("require by name", |s| s.store.require_workflow("abc"));
    let _ = p.both("require by id", |s| {
        s.store.require_workflow(s.spec().id.as_str())
    });
    let _ = p.both("require unknown", |s| s.store.require_workflow("nope"));
    let _ = p.both("get", |s| s.store.get_workflow(&s.spec().id));

    // A run with a key, and the same key again.
    let (lite, pg) = p.both("create run", |s| {
        s.store
            .create_workflow_run(&NewWorkflowRun::new(s.spec()).with_key("k1"), at(10))
    });
    let (lite, pg) = (lite.unwrap(), pg.unwrap());
    p.learn(lite.id.as_str(), pg.id.as_str());
    p.sqlite.runs.push(lite.id);
    p.pg.runs.push(pg.id);
    let (_, pg) = p.both("same key", |s| {
        s.store
            .create_workflow_run(&NewWorkflowRun::new(s.spec()).with_key("k1"), at(11))
    });
    assert_eq!(pg.unwrap().id, p.pg.runs[0]);

    // Steps: start, pid, double start, finalize, fail and retry, skip.
    let _ = p.both("start a", |s| s.store.start_step_run(s.run(0), "a", at(12)));
    let (_, pg) = p.both("start a again", |s| {
        s.store.start_step_run(s.run(0), "a", at(13))
    });
    assert!(matches!(pg, Err(StoreError::StepNotClaimable { .. })));
    let _ = p.both("pid a", |s| {
        s.store
            .mark_step_pid(s.run(0), "a", ProcessRef::pid(77), at(13))
    });
    let _ = p.both("pid of unknown step", |s| {
        s.store
            .mark_step_pid(s.run(0), "zz", ProcessRef::pid(77), at(13))
    });
    let _ = p.both("finalize a", |s| {
        let done = outcome(ExecutorStatus::Succeeded, 0, 14);
        s.store.finalize_step_run(s.run(0), "a", &done, at(14))
    });
    let _ = p.both("finalize a again", |s| {
        let done = outcome(ExecutorStatus::Failed, 1, 15);
        s.store.finalize_step_run(s.run(0), "a", &done, at(15))
    });
    let _ = p.both("start b", |s| s.store.start_step_run(s.run(0), "b", at(16)));
    let _ = p.both("fail b", |s| {
        let done = outcome(ExecutorStatus::Failed, 2, 17);
        s.store.finalize_step_run(s.run(0), "b", &done, at(17))
    });
    // One turn of a runner: a start that is refused does not end it.
    let _ = p.both("a turn in one transaction", |s| {
        s.store.transaction(|| {
            let again = s.store.start_step_run(s.run(0), "a", at(18)).is_err();
            let b = s.store.start_step_run(s.run(0), "b", at(18))?;
            s.store
                .mark_step_pid(s.run(0), "b", ProcessRef::pid(88), at(18))?;
            Ok::<_, StoreError>((again, b))
        })
    });

    // Recovery: refused while a step's process lives, then done.
    let _ = p.both("start c", |s| s.store.start_step_run(s.run(0), "c", at(19)));
    let _ = p.both("pid c alive", |s| {
        s.store
            .mark_step_pid(s.run(0), "c", ProcessRef::pid(ALIVE_PID), at(19))
    });
    let recover = |s: &Side, now| {
        s.store
            .recover_workflow_run(s.run(0), "daemon died", now)
            .map(|r| (r.run, r.recovered_steps))
    };
    let (_, pg) = p.both("recover refused", |s| recover(s, at(20)));
    assert!(matches!(pg, Err(StoreError::StepsAlive { .. })));
    let _ = p.both("skip c", |s| {
        s.store.skip_step_run(s.run(0), "c", "not needed", at(21))
    });
    let _ = p.both("recover", |s| recover(s, at(22)));
    let _ = p.both("recover with nothing running", |s| recover(s, at(23)));

    // Cancel ends the run and its open steps; nothing moves after it.
    let _ = p.both("cancel", |s| {
        s.store.cancel_workflow_run(s.run(0), "user asked", at(24))
    });
    let _ = p.both("finalize after cancel", |s| {
        let patch = WorkflowRunPatch::default();
        s.store
            .finalize_workflow_run(s.run(0), WorkflowRunStatus::Succeeded, &patch, at(25))
    });
    let _ = p.both("fail after cancel", |s| {
        s.store.fail_workflow_run(s.run(0), "lease lost", at(25))
    });
    let _ = p.both("start after cancel", |s| {
        s.store.start_step_run(s.run(0), "b", at(26))
    });
    let _ = p.both("status", |s| s.store.workflow_run_status(s.run(0)));
    let _ = p.both("steps", |s| s.store.list_step_runs(s.run(0)));
    let (_, pg) = p.both("events", |s| s.store.list_events(s.run(0), None));
    let kinds: Vec<String> = pg.unwrap().into_iter().map(|e| e.event_type).collect();
    assert_eq!(
        kinds,
        [
            "created",
            "step_started",
            "step_succeeded",
            "step_started",
            "step_failed",
            "step_started",
            "step_started",
            "step_skipped",
            "recovered",
            "cancelled"
        ]
    );
    let _ = p.both("first events", |s| s.store.list_events(s.run(0), Some(3)));

    // A second run: skip what is open, finalize with a patch, and fail a
    // third run.
    for (i, now) in [(1, 30), (2, 40)] {
        let (lite, pg) = p.both("another run", |s| {
            s.store
                .create_workflow_run(&NewWorkflowRun::new(s.spec()), at(now))
        });
        let (lite, pg) = (lite.unwrap(), pg.unwrap());
        p.learn(lite.id.as_str(), pg.id.as_str());
        p.sqlite.runs.push(lite.id);
        p.pg.runs.push(pg.id);
        assert_eq!(p.pg.runs.len(), i + 1);
    }
    let _ = p.both("start a of run 2", |s| {
        s.store.start_step_run(s.run(1), "a", at(31))
    });
    let _ = p.both("skip open steps", |s| {
        s.store.skip_open_steps(s.run(1), "upstream failed", at(32))
    });
    let _ = p.both("finalize as running", |s| {
        let patch = WorkflowRunPatch::default();
        s.store
            .finalize_workflow_run(s.run(1), WorkflowRunStatus::Running, &patch, at(33))
    });
    let _ = p.both("finalize", |s| {
        let patch = WorkflowRunPatch {
            finished_at: Some(at(33)),
            duration_ms: Some(3000),
            error: Some("step a skipped".into()),
        };
        s.store
            .finalize_workflow_run(s.run(1), WorkflowRunStatus::Failed, &patch, at(34))
    });
    let _ = p.both("fail", |s| {
        s.store.fail_workflow_run(s.run(2), "lease lost", at(41))
    });
    for i in 0..3 {
        let _ = p.both("events of each run", |s| {
            s.store.list_events(s.run(i), None)
        });
    }
    let _ = p.both("runs of the workflow", |s| {
        let filter = WorkflowRunFilter {
            workflow_id: Some(s.spec().id),
            ..WorkflowRunFilter::default()
        };
        s.store.list_workflow_runs(&filter)
    });
    let _ = p.both("all runs, limited", |s| {
        let filter = WorkflowRunFilter {
            limit: Some(2),
            ..WorkflowRunFilter::default()
        };
        s.store.list_workflow_runs(&filter)
    });
    let _ = p.both("unknown run", |s| {
        s.store
            .cancel_workflow_run(&WorkflowRunId::from_bytes([1; 6]), "x", at(50))
    });

    // Archive: found by id only, listed as archived.
    let _ = p.both("archive", |s| {
        s.store.archive_workflow(&s.spec().id, at(60))
    });
    let _ = p.both("archive unknown", |s| {
        s.store
            .archive_workflow(&WorkflowId::from_bytes([2; 6]), at(60))
    });
    let _ = p.both("archived by name", |s| s.store.require_workflow("abc"));
    let _ = p.both("name free again", |s| {
        s.store.create_workflow(&abc(), at(61)).map(|w| w.name)
    });
    for status in [None, Some(WorkflowStatus::Archived)] {
        let _ = p.both("list", |s| {
            let filter = WorkflowFilter {
                status,
                limit: None,
            };
            s.store.list_workflows(&filter).map(|l| {
                l.into_iter()
                    .map(|w| (w.status, w.updated_at))
                    .collect::<Vec<_>>()
            })
        });
    }
}

#[test]
fn two_stores_appending_to_one_run_get_distinct_gapless_sequences() {
    let Some(db) = database("gapless") else {
        return;
    };
    let store = pg_store(&db, "host-a", |_| false);
    let spec = store.create_workflow(&abc(), at(0)).unwrap();
    let run = store
        .create_workflow_run(&NewWorkflowRun::new(&spec), at(1))
        .unwrap();
    const ROUNDS: i64 = 25;
    let barrier = Arc::new(Barrier::new(2));
    let workers: Vec<_> = ["a", "b"]
        .into_iter()
        .map(|step| {
            let store = pg_store(&db, "host-a", |_| false);
            let (barrier, run) = (Arc::clone(&barrier), run.id);
            thread::spawn(move || {
                barrier.wait();
                for i in 0..ROUNDS {
                    store.start_step_run(&run, step, at(10 + i)).unwrap();
                    let done = outcome(ExecutorStatus::Failed, 1, 10 + i);
                    store
                        .finalize_step_run(&run, step, &done, at(10 + i))
                        .unwrap();
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    let events = store.list_events(&run.id, Some(u32::MAX)).unwrap();
    let sequences: Vec<u32> = events.iter().map(|e| e.sequence).collect();
    let expected: Vec<u32> = (1..=u32::try_from(1 + 4 * ROUNDS).unwrap()).collect();
    assert_eq!(sequences, expected);
    // Each step's own events stay in order: started, failed, started, …
    for step in ["a", "b"] {
        let kinds: Vec<&str> = events
            .iter()
            .filter(|e| e.step_id.as_deref() == Some(step))
            .map(|e| e.event_type.as_str())
            .collect();
        assert_eq!(kinds.len(), 2 * ROUNDS as usize);
        assert!(
            kinds
                .chunks(2)
                .all(|c| c == ["step_started", "step_failed"])
        );
    }
}

#[test]
fn two_creators_with_one_key_get_one_run_and_one_created_event() {
    let Some(db) = database("one_key") else {
        return;
    };
    let store = pg_store(&db, "host-a", |_| false);
    let spec = store.create_workflow(&abc(), at(0)).unwrap();
    let barrier = Arc::new(Barrier::new(4));
    let seen = Arc::new(Mutex::new(HashSet::new()));
    let workers: Vec<_> = (0..4)
        .map(|i| {
            let store = pg_store(&db, "host-a", |_| false);
            let (barrier, seen, spec) = (Arc::clone(&barrier), Arc::clone(&seen), spec.clone());
            thread::spawn(move || {
                let input = NewWorkflowRun::new(&spec).with_key("slot-1");
                barrier.wait();
                let run = store.create_workflow_run(&input, at(1 + i)).unwrap();
                seen.lock().unwrap().insert(run.id);
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 1, "{seen:?}");
    let run = seen.iter().next().unwrap();
    assert_eq!(store.list_step_runs(run).unwrap().len(), 3);
    let events = store.list_events(run, None).unwrap();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].event_type, "created");
    assert_eq!(
        store
            .list_workflow_runs(&WorkflowRunFilter::default())
            .unwrap()
            .len(),
        1
    );
}

#[test]
fn a_second_active_workflow_of_one_name_is_refused_whoever_commits_first() {
    let Some(db) = database("one_name") else {
        return;
    };
    let barrier = Arc::new(Barrier::new(3));
    let workers: Vec<_> = (0..3)
        .map(|i| {
            let store = pg_store(&db, "host-a", |_| false);
            let barrier = Arc::clone(&barrier);
            thread::spawn(move || {
                barrier.wait();
                store.create_workflow(&abc(), at(i)).map(|w| w.id)
            })
        })
        .collect();
    let results: Vec<_> = workers.into_iter().map(|w| w.join().unwrap()).collect();
    assert_eq!(
        results.iter().filter(|r| r.is_ok()).count(),
        1,
        "{results:?}"
    );
    assert!(
        results
            .iter()
            .filter_map(|r| r.as_ref().err())
            .all(|e| matches!(e, StoreError::DuplicateWorkflowName { name } if name == "abc"))
    );
}

#[test]
fn a_recovery_leaves_the_steps_of_another_hosts_live_loop_run_alone() {
    let Some(db) = database("other_host_steps") else {
        return;
    };
    // Host B's pid 5 is not a process of host A, whose probe finds it dead.
    let store = pg_store(&db, "host-a", |_| false);
    let mut raw = crate::common::pg_raw(&db);
    raw.batch_execute(&format!(
        "{}{}",
        crate::common::loop_sql("aaaaaaaaaaa1", None),
        crate::common::run_sql(
            "bbbbbbbbbbb1",
            "aaaaaaaaaaa1",
            at(0),
            "running",
            Some("host-b:9:cccccccccccc"),
            at(0)
        )
    ))
    .unwrap();
    let spec = store.create_workflow(&abc(), at(0)).unwrap();
    let run_id = "bbbbbbbbbbb1".parse().unwrap();
    let mut input = NewWorkflowRun::new(&spec);
    input.loop_run_id = Some(run_id);
    input.loop_id = Some("aaaaaaaaaaa1".parse().unwrap());
    let run = store.create_workflow_run(&input, at(1)).unwrap();
    store.start_step_run(&run.id, "a", at(2)).unwrap();
    store
        .mark_step_pid(&run.id, "a", ProcessRef::pid(5), at(2))
        .unwrap();
    let err = store
        .recover_workflow_run(&run.id, "stuck", at(30))
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::StepsAlive { steps } if steps == "a pid=5 on host-b:9:cccccccccccc"),
        "{err}"
    );
    assert_eq!(store.step_processes(&run_id).unwrap(), [ProcessRef::pid(5)]);
    // Once the loop run's lease expired, its host is no longer trusted to
    // hold the steps: the probe decides, as on SQLite.
    let recovered = store
        .recover_workflow_run(&run.id, "stuck", at(61))
        .unwrap();
    assert_eq!(recovered.recovered_steps.len(), 1);
}

// Issue 25, item 12.
#[test]
fn a_recovery_judges_a_manual_loop_run_by_the_host_that_claimed_it() {
    let Some(db) = database("manual_run_steps") else {
        return;
    };
    let store = pg_store(&db, "host-a", |_| false);
    let mut raw = crate::common::pg_raw(&db);
    let spec = store.create_workflow(&abc(), at(0)).unwrap();
    // Two `run-now` runs (`manual:<pid>`, no host in it) with live leases,
    // one claimed on this host and one on host B.
    let mut stuck = Vec::new();
    for (n, host) in [(1, "host-a"), (2, "host-b")] {
        let (loop_id, run_id) = (format!("aaaaaaaaaaa{n}"), format!("bbbbbbbbbbb{n}"));
        raw.batch_execute(&format!(
            "{}{}UPDATE loop_runs SET claimed_host = '{host}' WHERE id = '{run_id}';",
            crate::common::loop_sql(&loop_id, None),
            crate::common::run_sql(&run_id, &loop_id, at(0), "running", Some("manual:7"), at(0)),
        ))
        .unwrap();
        let mut input = NewWorkflowRun::new(&spec);
        input.loop_run_id = Some(run_id.parse().unwrap());
        input.loop_id = Some(loop_id.parse().unwrap());
        let run = store.create_workflow_run(&input, at(1)).unwrap();
        store.start_step_run(&run.id, "a", at(2)).unwrap();
        store
            .mark_step_pid(&run.id, "a", ProcessRef::pid(5), at(2))
            .unwrap();
        stuck.push(run.id);
    }
    // This host's probe finds the step dead: recovered.
    let recovered = store
        .recover_workflow_run(&stuck[0], "stuck", at(30))
        .unwrap();
    assert_eq!(recovered.recovered_steps.len(), 1);
    // Host B's step is beyond this host's probe.
    let err = store
        .recover_workflow_run(&stuck[1], "stuck", at(30))
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::StepsAlive { steps } if steps == "a pid=5 on manual:7"),
        "{err}"
    );
}
