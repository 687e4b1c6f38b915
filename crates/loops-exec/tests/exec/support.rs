//! Test fixtures: a temp directory with a fake `bin/` and `HOME`, fake
//! binaries written as `#!/bin/sh` scripts, and options with an explicit,
//! controlled environment. Nothing here calls a real agent or `accounts`.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use loops_core::{CommandTarget, ExecutorResult, ProcessRef, ProcessTarget};
use loops_exec::{
    ExecError, ExecOptions, RunContext, RunMetadata, execute_target, preflight_target,
};
use tempfile::TempDir;

/// The grace period tests use instead of the 2 s default.
pub(crate) const GRACE: Duration = Duration::from_millis(200);

pub(crate) struct Fixture {
    pub(crate) dir: TempDir,
}

impl Fixture {
    pub(crate) fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("bin")).unwrap();
        std::fs::create_dir_all(dir.path().join("home")).unwrap();
        Fixture { dir }
    }

    pub(crate) fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    pub(crate) fn path_str(&self, rel: &str) -> String {
        self.path(rel).to_str().unwrap().to_owned()
    }

    pub(crate) fn bin(&self) -> PathBuf {
        self.path("bin")
    }

    pub(crate) fn home(&self) -> PathBuf {
        self.path("home")
    }

    /// Writes an executable `#!/bin/sh` script at `rel`.
    pub(crate) fn script(&self, rel: &str, body: &str) -> PathBuf {
        let path = self.path(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    /// Writes a fake binary into `bin/`, which is on the options' PATH.
    pub(crate) fn fake(&self, name: &str, body: &str) -> PathBuf {
        self.script(&format!("bin/{name}"), body)
    }

    /// `PATH=<bin>:/usr/bin:/bin`, `HOME=<home>`, `MARKERS=<dir>`.
    pub(crate) fn env(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            (
                "PATH".to_owned(),
                format!("{}:/usr/bin:/bin", self.bin().display()),
            ),
            ("HOME".to_owned(), self.home().display().to_string()),
            ("MARKERS".to_owned(), self.dir.path().display().to_string()),
        ])
    }

    pub(crate) fn opts(&self) -> ExecOptions {
        self.opts_with(self.env())
    }

    pub(crate) fn opts_with(&self, env: BTreeMap<String, String>) -> ExecOptions {
        ExecOptions {
            base_env: Some(env),
            kill_grace: GRACE,
            accounts_timeout: Duration::from_secs(5),
            ..ExecOptions::default()
        }
    }
}

pub(crate) fn shell(script: &str) -> ProcessTarget {
    let mut c = CommandTarget::new(script);
    c.shell = Some(true);
    ProcessTarget::Command(c)
}

pub(crate) fn command(program: &str, args: &[&str]) -> ProcessTarget {
    let mut c = CommandTarget::new(program);
    c.args = Some(args.iter().map(|a| a.to_string()).collect());
    ProcessTarget::Command(c)
}

pub(crate) fn with_timeout(mut target: ProcessTarget, ms: u64) -> ProcessTarget {
    match &mut target {
        ProcessTarget::Command(c) => c.timeout_ms = Some(ms),
        ProcessTarget::Agent(a) => a.timeout_ms = loops_core::WallClock::Ms(ms),
    }
    target
}

pub(crate) fn with_cwd(mut target: ProcessTarget, cwd: &str) -> ProcessTarget {
    match &mut target {
        ProcessTarget::Command(c) => c.cwd = Some(cwd.to_owned()),
        ProcessTarget::Agent(a) => a.cwd = Some(cwd.to_owned()),
    }
    target
}

/// Runs `target`, returning the result and the process `on_spawn` saw.
pub(crate) fn run_full(
    target: &ProcessTarget,
    meta: &RunMetadata,
    opts: &ExecOptions,
) -> (Result<ExecutorResult, ExecError>, Option<ProcessRef>) {
    run_in(target, meta, opts, &RunContext::default())
}

/// [`run_full`] with the run's clock, cancel token or spawn id.
pub(crate) fn run_in(
    target: &ProcessTarget,
    meta: &RunMetadata,
    opts: &ExecOptions,
    ctx: &RunContext<'_>,
) -> (Result<ExecutorResult, ExecError>, Option<ProcessRef>) {
    let mut spawned = None;
    let result = execute_target(target, meta, opts, ctx, &mut |p| spawned = Some(p));
    if let Ok(r) = &result {
        assert_eq!(
            r.pid,
            spawned.map(|p| p.pid),
            "on_spawn and the result disagree"
        );
    }
    (result, spawned)
}

pub(crate) fn run(target: &ProcessTarget, opts: &ExecOptions) -> ExecutorResult {
    run_full(target, &RunMetadata::default(), opts).0.unwrap()
}

pub(crate) fn run_err(target: &ProcessTarget, opts: &ExecOptions) -> String {
    let (result, spawned) = run_full(target, &RunMetadata::default(), opts);
    assert_eq!(
        spawned, None,
        "nothing may be spawned before an account error"
    );
    result.unwrap_err().to_string()
}

pub(crate) fn preflight_err(target: &ProcessTarget, opts: &ExecOptions) -> String {
    preflight_target(target, &RunMetadata::default(), opts)
        .unwrap_err()
        .to_string()
}

/// Polls `cond` until it holds or `timeout` passes.
pub(crate) fn eventually(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Asserts that `path` does not appear before `until` (an instant after
/// which it would have been written by a surviving process).
pub(crate) fn assert_never_appears(path: &Path, until: Instant) {
    loop {
        assert!(
            !path.exists(),
            "{} appeared: a process outlived its run",
            path.display()
        );
        if Instant::now() >= until {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The pids of live (non-zombie) processes in process group `pgid`.
pub(crate) fn live_group_members(pgid: u32) -> Vec<u32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some(close) = stat.rfind(')') else {
            continue;
        };
        let fields: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        if fields.get(2) == Some(&pgid.to_string().as_str()) && fields[0] != "Z" && fields[0] != "X"
        {
            pids.push(pid);
        }
    }
    pids
}
