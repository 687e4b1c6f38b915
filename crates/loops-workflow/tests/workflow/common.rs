//! Shared fixtures: a temporary data directory with a real database file, a
//! bin directory for fake programs, workflows from JSON, run options whose
//! environment is the fixture's, and deadline-bounded polls.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use loops_core::{
    Clock, ManualClock, Timestamp, WorkflowEvent, WorkflowRunId, WorkflowSpec, workflow_from_json,
};
use loops_exec::{ExecOptions, SystemProbe};
use loops_store::Store;
use loops_workflow::WorkflowRunOptions;
use serde_json::Value;
use tempfile::TempDir;

/// How long any wait in these tests may take before it counts as a hang.
pub(crate) const DEADLINE: Duration = Duration::from_secs(15);

/// A temporary directory holding the database, a `bin` directory for fake
/// programs, a `home`, and a `work` directory steps write markers into.
pub(crate) struct Fixture {
    pub(crate) dir: TempDir,
}

impl Fixture {
    pub(crate) fn new() -> Fixture {
        let fx = Fixture {
            dir: tempfile::tempdir().unwrap(),
        };
        for sub in ["bin", "home", "work"] {
            std::fs::create_dir_all(fx.dir.path().join(sub)).unwrap();
        }
        fx
    }

    pub(crate) fn db(&self) -> PathBuf {
        self.dir.path().join("data").join("loops.db")
    }

    /// A new store handle (its own connection, as another process would
    /// have) probing real processes.
    pub(crate) fn store(&self) -> Store {
        Store::open(&self.db(), Arc::new(SystemProbe)).unwrap()
    }

    /// Where steps write their markers.
    pub(crate) fn work(&self) -> PathBuf {
        self.dir.path().join("work")
    }

    /// `work/<name>`.
    pub(crate) fn marker(&self, name: &str) -> PathBuf {
        self.work().join(name)
    }

    /// Writes an executable `#!/bin/sh` script `bin/<name>`.
    pub(crate) fn script(&self, name: &str, body: &str) {
        let path = self.dir.path().join("bin").join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    /// The environment steps start from: `bin` first on PATH, the fixture's
    /// HOME, and `WORK` naming the marker directory.
    pub(crate) fn exec(&self) -> ExecOptions {
        let root = self.dir.path();
        let env = BTreeMap::from([
            (
                "PATH".to_owned(),
                format!("{}:/usr/bin:/bin", root.join("bin").display()),
            ),
            ("HOME".to_owned(), root.join("home").display().to_string()),
            ("WORK".to_owned(), self.work().display().to_string()),
        ]);
        ExecOptions {
            base_env: Some(env),
            ..ExecOptions::default()
        }
    }

    /// Options for a manual run in this fixture's environment.
    pub(crate) fn opts<'a>(&self, clock: &'a dyn Clock) -> WorkflowRunOptions<'a> {
        WorkflowRunOptions {
            exec: self.exec(),
            ..WorkflowRunOptions::new(clock)
        }
    }
}

/// The instant the tests start at.
pub(crate) fn t0() -> Timestamp {
    "2026-01-01T00:00:00.000Z".parse().unwrap()
}

/// A clock reading `t0`.
pub(crate) fn clock() -> ManualClock {
    ManualClock::new(t0())
}

/// A shell step `id` running `script`, after `deps`.
pub(crate) fn sh(id: &str, deps: &[&str], script: &str) -> Value {
    serde_json::json!({
        "id": id,
        "dependsOn": deps,
        "target": {"type": "command", "command": script, "shell": true}
    })
}

/// Validates and stores a workflow named `name` with `steps` and the extra
/// top-level keys in `extra`.
pub(crate) fn create(store: &Store, name: &str, steps: Value, extra: Value) -> WorkflowSpec {
    let mut file = serde_json::json!({"name": name, "steps": steps});
    for (k, v) in extra.as_object().into_iter().flatten() {
        file[k] = v.clone();
    }
    let new = workflow_from_json(&file, None).unwrap();
    store.create_workflow(&new, t0()).unwrap()
}

/// `(event type, step id)` of every event of a run, checking that the
/// sequence numbers are 1, 2, 3, … without gaps.
pub(crate) fn events(store: &Store, run: &WorkflowRunId) -> Vec<(String, Option<String>)> {
    let all: Vec<WorkflowEvent> = store.list_events(run, Some(10_000)).unwrap();
    for (i, e) in all.iter().enumerate() {
        assert_eq!(e.sequence as usize, i + 1, "sequence gap in {all:#?}");
    }
    all.into_iter().map(|e| (e.event_type, e.step_id)).collect()
}

/// `(type, step)` pairs written compactly: `"created"`, `"step_started:a"`.
pub(crate) fn ev(spec: &[&str]) -> Vec<(String, Option<String>)> {
    spec.iter()
        .map(|s| match s.split_once(':') {
            Some((t, step)) => (t.to_owned(), Some(step.to_owned())),
            None => ((*s).to_owned(), None),
        })
        .collect()
}

/// Polls `f` until it returns `Some`, failing the test after [`DEADLINE`].
pub(crate) fn wait_for<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(start.elapsed() < DEADLINE, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The lines of a marker file, or none when it does not exist.
pub(crate) fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .map(|s| s.lines().map(str::to_owned).collect())
        .unwrap_or_default()
}

/// Asserts that none of `paths` appears before `until`, checking every
/// 20 ms: the instant after which a surviving process would have written
/// them. A negative check has to wait, but it fails at the first sight of
/// a marker rather than after a fixed sleep.
pub(crate) fn assert_never_appear(paths: &[PathBuf], until: Instant) {
    loop {
        for path in paths {
            assert!(
                !path.exists(),
                "{} appeared: a killed step outlived its run",
                path.display()
            );
        }
        if Instant::now() >= until {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
