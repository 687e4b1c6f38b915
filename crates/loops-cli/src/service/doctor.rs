//! `loops doctor` (SPEC §7.5): is this machine ready to run the daemon?
//!
//! SPEC §9 item 31: the original checks its own PATH rather than the one
//! runs get, requires `bun`, and exits 1 only in human mode. Here every
//! executable is looked up on the normalized PATH a run of the daemon
//! really gets (SPEC §5.5), there is no `bun` check, the data directory's
//! permissions and the database's schema version are checked too, and the
//! report's `ok` (no check failed) decides the exit code in every output
//! mode. A warning never fails the report.
//!
//! All six providers are checked, as the original does; the human report
//! folds the ones no loop uses into one line (`providers.rs`).
//!
//! Beyond the SPEC, the database is checked for damage with SQLite's
//! `PRAGMA quick_check` (read-only, within a time budget that grows with its
//! size), and the report names this implementation.

use std::collections::BTreeMap;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use loops_core::{
    CommandTarget, ExecutorStatus, Loop, LoopStatus, ProcessTarget, RunStatus, Target, Timestamp,
};
use loops_exec::{
    ExecOptions, RunContext, RunMetadata, SystemProbe, execute_target, preflight_target,
};
use loops_store::{
    DatabaseState, Integrity, LoopFilter, Store, backup_dir, check_integrity, inspect_database,
    integrity_budget, newest_backup, schema_version,
};
use serde::Serialize;

use loops_scheduler::DaemonPaths;
use loops_workflow::preflight_workflow;

use super::control::daemon_status;

mod failing;
mod gc;
mod path;
mod postgres;
pub(crate) mod providers;

/// How long `accounts --version` may take.
const ACCOUNTS_TIMEOUT_MS: u64 = 10_000;

/// A check's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum CheckStatus {
    /// Fine.
    Ok,
    /// Worth knowing; does not fail the report.
    Warn,
    /// Broken; the report fails.
    Fail,
}

impl CheckStatus {
    /// `ok`, `warn` or `fail`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            CheckStatus::Ok => "ok",
            CheckStatus::Warn => "warn",
            CheckStatus::Fail => "fail",
        }
    }
}

/// One check (SPEC §7.5 `{id, status, message, detail?}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Check {
    /// What was checked.
    pub(crate) id: String,
    /// The verdict.
    pub(crate) status: CheckStatus,
    /// What was found.
    pub(crate) message: String,
    /// More about it: a path, an error.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) detail: Option<String>,
    /// A provider no loop uses, which the human report folds into one
    /// line (`--json` keeps every check).
    #[serde(skip)]
    pub(crate) folded: bool,
}

impl Check {
    fn new(id: impl Into<String>, status: CheckStatus, message: impl Into<String>) -> Check {
        Check {
            id: id.into(),
            status,
            message: message.into(),
            detail: None,
            folded: false,
        }
    }

    fn detail(mut self, detail: impl Into<String>) -> Check {
        self.detail = Some(detail.into());
        self
    }
}

/// The doctor's report (SPEC §7.5 `{ok, checks}`, plus `implementation`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct DoctorReport {
    /// No check failed.
    pub(crate) ok: bool,
    /// The checks, in order.
    pub(crate) checks: Vec<Check>,
    /// Which implementation wrote the report (`loops (Rust) <version>,
    /// compatible with OpenLoops 0.3.1`); new in loops, after the SPEC's
    /// fields.
    pub(crate) implementation: String,
}

/// This implementation and the one whose contract it keeps, e.g.
/// `loops (Rust) 0.1.0, compatible with OpenLoops 0.3.1`.
pub(crate) fn implementation() -> String {
    format!(
        "loops (Rust) {}, compatible with OpenLoops 0.3.1",
        env!("CARGO_PKG_VERSION")
    )
}

/// What the doctor looks at.
pub(crate) struct DoctorOptions<'a> {
    /// The data directory.
    pub(crate) data_dir: &'a Path,
    /// The environment the daemon would start from (normally this process's).
    pub(crate) env: BTreeMap<String, String>,
    /// This host's name.
    pub(crate) host: String,
    /// The current instant.
    pub(crate) now: Timestamp,
    /// The PostgreSQL database in use, or `None` for SQLite in the data
    /// directory.
    pub(crate) database_url: Option<loops_store::DatabaseUrl>,
}

/// Runs every check, in order (SPEC §7.5).
pub(crate) fn run_doctor(opts: &DoctorOptions<'_>) -> DoctorReport {
    let mut checks = vec![check_data_dir(opts.data_dir)];
    let paths = DaemonPaths::new(opts.data_dir);
    if let Some(url) = &opts.database_url {
        let (db, store) = postgres::check(url, &opts.host);
        checks.push(db);
        checks.extend(check_machine(opts));
        return finish(checks, store.as_ref(), &paths, opts);
    }
    let db = check_database(&paths.database());
    // A file that cannot be read is not checked for damage as well.
    let integrity = (db.status != CheckStatus::Fail).then(|| check_damage(&paths.database()));
    // A damaged database is not opened for writing (opening migrates it).
    let db_usable = db.status != CheckStatus::Fail
        && integrity
            .as_ref()
            .is_none_or(|c| c.status != CheckStatus::Fail);
    checks.push(db);
    checks.extend(check_machine(opts));
    checks.extend(integrity);
    let store = if db_usable {
        // Opening migrates an older database, after its automatic backup.
        let auto = crate::commands::backup::automatic_at(opts.now);
        Store::open_with(&paths.database(), Arc::new(SystemProbe), auto)
            .ok()
            .map(|(store, _)| store)
    } else {
        None
    };
    finish(checks, store.as_ref(), &paths, opts)
}

/// The checks of this machine, whatever the database: the PATH runs get,
/// `accounts` and the provider CLIs.
fn check_machine(opts: &DoctorOptions<'_>) -> Vec<Check> {
    let mut checks = vec![path::check(&opts.env)];
    let exec = machine_exec(opts);
    checks.push(check_accounts(&exec));
    checks
}

/// What a run of the daemon would get: the environment with the
/// normalized PATH.
fn machine_exec(opts: &DoctorOptions<'_>) -> ExecOptions {
    let mut env = opts.env.clone();
    env.insert("PATH".to_owned(), loops_exec::normalize_path(&opts.env));
    ExecOptions {
        base_env: Some(env),
        ..ExecOptions::default()
    }
}

/// The checks that need the store (the daemon, the loops, retention) and
/// the report.
fn finish(
    mut checks: Vec<Check>,
    store: Option<&Store>,
    paths: &DaemonPaths,
    opts: &DoctorOptions<'_>,
) -> DoctorReport {
    let exec = machine_exec(opts);
    checks.extend(providers::check_providers(store, &exec));
    match store {
        Some(store) => {
            let (daemon, daemon_pid) = check_daemon(store, paths, opts);
            checks.push(daemon);
            checks.extend(check_loops(store, &exec));
            let home = opts.env.get("HOME").map(Path::new);
            checks.push(gc::check_retention(store, daemon_pid, home));
        }
        None => checks.push(
            Check::new(
                "daemon",
                CheckStatus::Warn,
                "daemon state unknown: the database cannot be opened",
            )
            .detail(paths.database().display().to_string()),
        ),
    }
    checks.push(Check::new(
        "implementation",
        CheckStatus::Ok,
        implementation(),
    ));
    DoctorReport {
        ok: checks.iter().all(|c| c.status != CheckStatus::Fail),
        checks,
        implementation: implementation(),
    }
}

/// `PRAGMA quick_check` within a budget that grows with the file's size: a
/// damaged file fails the report and says how to recover; a check that ran
/// out of time only warns.
fn check_damage(db: &Path) -> Check {
    let shown = db.display().to_string();
    let size = std::fs::metadata(db).map_or(0, |m| m.len());
    match check_integrity(db, integrity_budget(size)) {
        Ok(Integrity::Missing) => Check::new(
            "database-integrity",
            CheckStatus::Ok,
            "no database yet; nothing to check",
        )
        .detail(shown),
        Ok(Integrity::Ok) => Check::new(
            "database-integrity",
            CheckStatus::Ok,
            "database passes SQLite's quick check",
        )
        .detail(shown),
        Ok(Integrity::Damaged(problems)) => Check::new(
            "database-integrity",
            CheckStatus::Fail,
            format!(
                "database is damaged; to recover, stop the daemon (loops daemon stop), {}",
                recovery(db)
            ),
        )
        .detail(problems.join("; ")),
        Ok(Integrity::Unfinished { budget }) => Check::new(
            "database-integrity",
            CheckStatus::Warn,
            format!(
                "database was not checked fully within {} ms; run sqlite3 {shown} \"PRAGMA quick_check\" to check it",
                budget.as_millis()
            ),
        )
        .detail(shown),
        Err(e) => Check::new(
            "database-integrity",
            CheckStatus::Fail,
            "database cannot be checked for damage",
        )
        .detail(e.to_string()),
    }
}

/// How to recover the damaged database `db`, after stopping the daemon:
/// restore the newest backup of `backups/` (issue 14), when there is one,
/// or salvage what the file still holds with SQLite's `.recover`.
pub(crate) fn recovery(db: &Path) -> String {
    let shown = db.display();
    let salvage = format!(
        "back up {shown}, then run: sqlite3 {shown} \".recover\" | sqlite3 recovered.db \
         and move recovered.db into its place"
    );
    let dir = backup_dir(db.parent().unwrap_or(Path::new(".")));
    match newest_backup(&dir) {
        // The stale WAL and shared-memory file go first: SQLite would
        // replay the damaged file's WAL into the restored copy.
        Ok(Some(b)) => format!(
            "then restore the newest backup, taken {}: rm -f {shown}-wal {shown}-shm && \
             cp {} {shown}; or, to salvage what the damaged file still holds, {salvage}",
            b.taken_at,
            b.path.display()
        ),
        Ok(None) => format!(
            "{salvage}; there is no backup in {} to restore (loops backup takes one)",
            dir.display()
        ),
        Err(e) => format!("{salvage}; the backups cannot be listed: {e}"),
    }
}

fn check_data_dir(dir: &Path) -> Check {
    let shown = dir.display().to_string();
    let writable = std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .and_then(|()| {
            // A new file under a fresh name: an exclusive create never
            // follows a link another user may have planted.
            #[expect(
                clippy::disallowed_methods,
                reason = "entropy for a unique name, not a reading of time"
            )]
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos());
            let probe = dir.join(format!(".doctor-{}-{nanos:09}", std::process::id()));
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&probe)?;
            let written = std::io::Write::write_all(&mut file, b"ok");
            drop(file);
            let removed = std::fs::remove_file(&probe);
            written.and(removed)
        });
    if let Err(e) = writable {
        return Check::new(
            "data-dir",
            CheckStatus::Fail,
            "data directory is not writable",
        )
        .detail(format!("{shown}: {e}"));
    }
    // The same rule every command applies (ssh's StrictModes): another
    // user must not own or be able to write the directory.
    if let Err(e) = loops_store::check_data_dir(dir) {
        return Check::new(
            "data-dir",
            CheckStatus::Fail,
            "data directory could be changed by another user; loops refuses it",
        )
        .detail(e.to_string());
    }
    match std::fs::metadata(dir).map(|m| m.permissions().mode() & 0o777) {
        Ok(mode) if mode & 0o077 != 0 => Check::new(
            "data-dir",
            CheckStatus::Warn,
            format!(
                "data directory is accessible to other users (mode {mode:o}); run chmod 700 on it"
            ),
        )
        .detail(shown),
        _ => Check::new("data-dir", CheckStatus::Ok, "data directory is writable").detail(shown),
    }
}

fn check_database(db: &Path) -> Check {
    let known = schema_version();
    let shown = db.display().to_string();
    match inspect_database(db) {
        Ok(DatabaseState::Missing) => Check::new(
            "database",
            CheckStatus::Ok,
            "no database yet; the first command creates it",
        )
        .detail(shown),
        Ok(DatabaseState::Loops { version }) if version == known => Check::new(
            "database",
            CheckStatus::Ok,
            format!("database schema is current (version {version})"),
        )
        .detail(shown),
        Ok(DatabaseState::Loops { version }) if version < known => Check::new(
            "database",
            CheckStatus::Ok,
            format!("database schema version {version} is migrated to {known} when next opened"),
        )
        .detail(shown),
        Ok(DatabaseState::Loops { version }) => Check::new(
            "database",
            CheckStatus::Fail,
            format!(
                "database schema version {version} is newer than the {known} this loops knows; upgrade loops"
            ),
        )
        .detail(shown),
        Err(e) => Check::new("database", CheckStatus::Fail, "database cannot be read")
            .detail(e.to_string()),
    }
}

fn check_accounts(exec: &ExecOptions) -> Check {
    let mut target = CommandTarget::new("accounts");
    target.args = Some(vec!["--version".to_owned()]);
    target.timeout_ms = Some(ACCOUNTS_TIMEOUT_MS);
    let opts = ExecOptions {
        kill_grace: Duration::from_millis(500),
        ..exec.clone()
    };
    let missing = |detail: String| {
        Check::new(
            "accounts",
            CheckStatus::Warn,
            "accounts CLI is not available; account-routed steps will fail",
        )
        .detail(detail)
    };
    match execute_target(
        &ProcessTarget::Command(target),
        &RunMetadata::default(),
        &opts,
        &RunContext::default(),
        &mut |_| {},
    ) {
        Ok(r) if r.status == ExecutorStatus::Succeeded => {
            let version = r.stdout.lines().next().unwrap_or("").trim().to_owned();
            let check = Check::new("accounts", CheckStatus::Ok, "accounts is available");
            if version.is_empty() {
                check
            } else {
                check.detail(version)
            }
        }
        // The PATH is the `path` check's detail; the error would repeat it.
        Ok(r) if r.exit_code.is_none() && r.pid.is_none() => {
            missing("not found on the PATH runs get".to_owned())
        }
        Ok(r) => missing(
            r.error
                .unwrap_or_else(|| "accounts --version failed".to_owned()),
        ),
        Err(e) => missing(e.to_string()),
    }
}

/// The `daemon` check, and the running daemon's pid.
fn check_daemon(
    store: &Store,
    paths: &DaemonPaths,
    opts: &DoctorOptions<'_>,
) -> (Check, Option<u32>) {
    let status = daemon_status(store, paths, &opts.host, opts.now);
    let pid = status
        .as_ref()
        .ok()
        .filter(|s| s.running)
        .and_then(|s| s.pid);
    let check = match status {
        Ok(s) if s.running => {
            let check = Check::new(
                "daemon",
                CheckStatus::Ok,
                format!("daemon is running pid={}", s.pid.unwrap_or_default()),
            );
            match &s.lease {
                Some(l) => check.detail(format!(
                    "lease {} on {} since {}, expires {}",
                    l.id, l.hostname, l.created_at, l.expires_at
                )),
                None => check,
            }
        }
        Ok(s) if s.stale => Check::new("daemon", CheckStatus::Warn, "daemon pid file is stale")
            .detail(paths.pid_file().display().to_string()),
        Ok(_) => Check::new("daemon", CheckStatus::Ok, "daemon is not running"),
        Err(e) => {
            Check::new("daemon", CheckStatus::Warn, "daemon state unknown").detail(e.to_string())
        }
    };
    (check, pid)
}

fn check_loops(store: &Store, exec: &ExecOptions) -> Vec<Check> {
    let mut checks = Vec::new();
    // The counts below (and `daemon status`'s) are kept by triggers; one
    // that drifted, which only a write bypassing them can cause, is
    // rewritten here and said. In order, nothing is added to the report.
    match store.recount_statuses() {
        Ok(false) => {}
        Ok(true) => checks.push(Check::new(
            "status-counts",
            CheckStatus::Warn,
            "the kept counts of loops and runs had drifted from the rows; recounted",
        )),
        Err(e) => checks.push(
            Check::new(
                "status-counts",
                CheckStatus::Warn,
                "the kept counts of loops and runs cannot be checked",
            )
            .detail(e.to_string()),
        ),
    }
    checks.push(match store.count_runs(Some(RunStatus::Failed)) {
        Ok(0) => Check::new("loop-runs", CheckStatus::Ok, "no failed loop runs recorded"),
        Ok(n) => Check::new(
            "loop-runs",
            CheckStatus::Warn,
            format!("{n} failed loop run(s) recorded"),
        ),
        Err(e) => Check::new(
            "loop-runs",
            CheckStatus::Warn,
            "loop runs cannot be counted",
        )
        .detail(e.to_string()),
    });
    let active = store.list_loops(&LoopFilter {
        status: Some(LoopStatus::Active),
        limit: Some(200),
    });
    match active {
        Ok(loops) => {
            checks.extend(loops.iter().map(|lp| preflight_loop(store, lp, exec)));
            checks.extend(
                loops
                    .iter()
                    .filter_map(|lp| failing::failing_loop(store, lp)),
            );
        }
        Err(e) => checks.push(
            Check::new("loops", CheckStatus::Warn, "active loops cannot be listed")
                .detail(e.to_string()),
        ),
    }
    checks
}

fn preflight_loop(store: &Store, lp: &Loop, exec: &ExecOptions) -> Check {
    let id = format!("loop:{}:preflight", lp.id);
    let ready = || {
        Check::new(
            id.clone(),
            CheckStatus::Ok,
            format!("active loop target is ready: {}", lp.name),
        )
    };
    let failed = |detail: String| {
        Check::new(
            id.clone(),
            CheckStatus::Warn,
            format!("active loop target preflight failed: {}", lp.name),
        )
        .detail(detail)
    };
    let Some(target) = lp.target.to_process() else {
        let Target::Workflow(w) = &lp.target else {
            return ready();
        };
        // SPEC §7.5: a workflow loop is checked step by step.
        return match store.get_workflow(&w.workflow_id) {
            Ok(Some(spec)) => match preflight_workflow(&spec, exec) {
                Ok(_) => ready(),
                Err(e) => failed(e.to_string()),
            },
            Ok(None) => failed(format!("workflow not found: {}", w.workflow_id)),
            Err(e) => failed(e.to_string()),
        };
    };
    let meta = RunMetadata {
        loop_id: Some(lp.id.to_string()),
        loop_name: Some(lp.name.clone()),
        ..RunMetadata::default()
    };
    match preflight_target(&target, &meta, exec) {
        Ok(_) => ready(),
        Err(e) => failed(e.to_string()),
    }
}
