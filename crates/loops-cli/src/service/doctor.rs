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
use std::path::Path;
use std::sync::Arc;

use loops_core::Timestamp;
use loops_exec::{ExecOptions, SystemProbe};
use loops_store::Store;
use serde::Serialize;

use loops_scheduler::DaemonPaths;

use super::control::daemon_status;

mod accounts;
mod daemon;
mod data_dir;
mod database;
mod failing;
mod gc;
mod integrity;
mod loops;
mod path;
mod placement;
mod postgres;
pub(crate) mod providers;

use accounts::check_accounts;
use daemon::check_daemon;
use data_dir::check_data_dir;
use database::check_database;
use integrity::check_damage;
pub(crate) use integrity::recovery;
use loops::check_loops;

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
        let auto = crate::auto_backup::automatic_at(opts.now);
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
            checks.extend(check_loops(
                store,
                &exec,
                opts.env.get("TZ").map(String::as_str),
            ));
            checks.extend(placement::check_placement(store, opts.now));
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
