//! The one context a command runs in, made in `app.rs` from the global
//! options: where the store is (the data directory, `--database-url`),
//! the output mode (`--json`), `-v/--verbose`, `-q/--quiet`, and the
//! warnings the command collects. Nothing about these is process-wide:
//! `loops mcp` gives each tool call a context of its own
//! ([`Context::for_call`]).
//!
//! Opening the store goes through [`Context::open_store`], the one place
//! that reads `--database-url` and `$LOOPS_DATABASE_URL`.

use std::borrow::Cow;
use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};

use std::sync::Arc;

use anyhow::{Context as _, Result};
use loops_core::Timestamp;
use loops_exec::{CancelToken, SystemProbe};
use loops_store::{Backup, DatabaseUrl, Store};

use crate::args::daemon::DaemonServeFlags;
use crate::render::{self, Printer};

/// Where the store is, how to print, and the warnings so far.
#[derive(Debug, Default)]
pub(crate) struct Context {
    /// `--database-url`, when given (it wins over the variable).
    database_url: Option<String>,
    /// `--json`.
    pub(crate) json: bool,
    /// `-v/--verbose`: errors keep the whole effective PATH.
    pub(crate) verbose: bool,
    /// `-q/--quiet`: nothing on stdout, nothing on stderr but errors.
    pub(crate) quiet: bool,
    /// Warnings about input (`request::Warnings`) wait here until the
    /// command has succeeded: a command that then fails says only its error,
    /// not also what it would have done with a value it never used.
    warnings: Mutex<Vec<String>>,
    /// What stops the runs a command starts, in place of SIGINT/SIGTERM
    /// handlers of its own: set for a `loops mcp` call, whose process is
    /// the server's ([`Context::with_stop`]).
    pub(crate) stop: Option<CancelToken>,
    /// What starts the HTTP server of `loops daemon run --serve`
    /// (`serve::in_daemon`), set by the binary's entry point: the server
    /// runs commands through `app`, which runs the daemon's, so the
    /// commands cannot name it.
    pub(crate) start_server: Option<StartServer>,
}

/// Starts the HTTP server as `--serve`, `--tls-cert` and `--tls-key` say,
/// writing its lines (the login URL) through the given function, and
/// returns the function that stops it.
pub(crate) type StartServer = fn(
    &Context,
    &DaemonServeFlags,
    &mut dyn FnMut(&str) -> Result<()>,
) -> Result<Box<dyn FnOnce() -> Result<()> + Send>>;

impl Context {
    /// The context of the global options.
    pub(crate) fn new(
        database_url: Option<String>,
        json: bool,
        verbose: bool,
        quiet: bool,
    ) -> Self {
        Context {
            database_url,
            json,
            verbose,
            quiet,
            warnings: Mutex::default(),
            stop: None,
            start_server: None,
        }
    }

    /// The same settings with no warnings yet, for one `loops mcp` call,
    /// which prints `--json`.
    pub(crate) fn for_call(&self) -> Context {
        let mut call = Context::new(self.database_url.clone(), true, self.verbose, self.quiet);
        call.stop.clone_from(&self.stop);
        call
    }

    /// The same settings under `--quiet`, for a full-screen program
    /// (`loops ui`): a hint or a note written to the terminal it draws on
    /// would break its screen.
    pub(crate) fn quieted(&self) -> Context {
        let mut quiet = Context::new(self.database_url.clone(), self.json, self.verbose, true);
        quiet.stop.clone_from(&self.stop);
        quiet
    }

    /// This context, its runs stopped by `stop` (a `loops mcp` call's: the
    /// client cancelled it, or the server stops) instead of by signals.
    pub(crate) fn with_stop(mut self, stop: CancelToken) -> Context {
        self.stop = Some(stop);
        self
    }

    /// The printer of this command's stdout (nowhere under `--quiet`).
    pub(crate) fn printer(&self) -> Printer {
        Printer::stdout(self.json, self.quiet)
    }

    /// The data directory. An empty variable counts as unset.
    pub(crate) fn data_dir(&self) -> Result<PathBuf> {
        crate::paths::data_dir()
    }

    /// Where `--database-url` came from, for a daemon started in the
    /// background, which must get it through its environment (never its
    /// command line, where `ps` would show a password).
    pub(crate) fn database_url_flag(&self) -> Option<&str> {
        self.database_url.as_deref()
    }

    /// The PostgreSQL database selected by `--database-url` or
    /// `$LOOPS_DATABASE_URL` (an empty variable counts as unset), or `None`
    /// for SQLite in the data directory.
    pub(crate) fn database_url(&self) -> Result<Option<DatabaseUrl>> {
        Ok(self.database_url_with_text()?.map(|(_, url)| url))
    }

    /// [`Context::database_url`], with the string it was parsed from (for a
    /// service file, which carries it as `$LOOPS_DATABASE_URL`).
    pub(crate) fn database_url_with_text(&self) -> Result<Option<(String, DatabaseUrl)>> {
        crate::paths::database_url_with_text(self.database_url.as_deref())
    }

    /// Opens (creating and migrating if needed) the store, with the
    /// production liveness probe.
    pub(crate) fn open_store(&self) -> Result<Store> {
        self.open_store_as("cli")
    }

    /// [`Context::open_store`], naming the connection's `role` on
    /// PostgreSQL (`application_name` `loops:<role>`).
    pub(crate) fn open_store_as(&self, role: &str) -> Result<Store> {
        self.open(role)
    }

    /// The store when its database already exists, else `None`, creating
    /// nothing: no data directory, no database file (`create --dry-run`,
    /// issue 28). An existing SQLite database is opened as every command
    /// opens it (an older schema is migrated); a PostgreSQL database is
    /// connected to without preparing this host's data directory.
    pub(crate) fn open_existing_store(&self) -> Result<Option<Store>> {
        if let Some(url) = self.database_url()? {
            let host = loops_exec::hostname();
            return Store::open_postgres(&url, "cli", &host, Arc::new(SystemProbe))
                .with_context(|| format!("opening the loops database {}", url.shown()))
                .map(Some);
        }
        let dir = self.data_dir()?;
        if !dir.join(loops_store::DB_FILE).is_file() {
            return Ok(None);
        }
        self.open("cli").map(Some)
    }

    /// Queues a request's warnings, printed once it has succeeded.
    pub(crate) fn queue_warnings(&self, warnings: Vec<String>) {
        self.warnings
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend(warnings);
    }

    /// Takes the queued warnings.
    pub(crate) fn take_warnings(&self) -> Vec<String> {
        std::mem::take(&mut *self.warnings.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Prints the queued warnings (nothing under `--quiet`).
    pub(crate) fn print_warnings(&self) {
        for text in self.take_warnings() {
            self.note("warning", &text);
        }
    }

    /// Prints `<label>: <text>` on stderr; under `--quiet` only errors.
    pub(crate) fn note(&self, label: &str, text: &str) {
        if self.quiet && label != "error" {
            return;
        }
        render::note(label, text);
    }

    /// Prints a hint or an empty state (`no loops yet`) on stderr, so
    /// stdout stays what scripts expect; nothing under `--quiet`.
    pub(crate) fn hint(&self, text: &str) {
        if self.quiet {
            return;
        }
        // A hint comes after what the command did; the warnings about its
        // input come first.
        self.print_warnings();
        render::hint(text);
    }

    /// An error for human output: short unless `--verbose` (see `brief`).
    pub(crate) fn error_text<'a>(&self, text: &'a str) -> Cow<'a, str> {
        crate::brief::error(text, self.verbose)
    }

    /// [`Context::error_text`] on one line for a terminal.
    pub(crate) fn error_line(&self, text: &str) -> String {
        crate::brief::error_line(text, self.verbose)
    }

    /// Opens (creating and migrating if needed) the database `ctx` selects,
    /// with the production liveness probe, naming the connection's `role` on
    /// PostgreSQL (`application_name` `loops:<role>`). An existing SQLite
    /// database is backed up before a migration changes its schema (issue 14;
    /// see `auto_backup`).
    fn open(&self, role: &str) -> Result<Store> {
        if let Some(url) = self.database_url()? {
            // The data directory still holds this host's pid file, socket and
            // log, as with SQLite.
            let dir = self.data_dir()?;
            Store::prepare_data_dir(&dir)
                .with_context(|| format!("preparing the loops data directory {}", dir.display()))?;
            let host = loops_exec::hostname();
            return Store::open_postgres(&url, role, &host, Arc::new(SystemProbe))
                .with_context(|| format!("opening the loops database {}", url.shown()));
        }
        let dir = self.data_dir()?;
        let auto = crate::auto_backup::automatic();
        let (store, backup) = Store::open_in_dir_with(&dir, Arc::new(SystemProbe), auto)
            .with_context(|| format!("opening the loops database in {}", dir.display()))?;
        if let Some(backup) = &backup {
            self.report_backup(backup, "before migrating its schema");
        }
        // Recorded with each run it claims, as on PostgreSQL, so a run's
        // record is the same on both backends.
        Ok(store.with_host(&loops_exec::hostname()))
    }

    /// Says on stderr that an automatic backup was taken, and why.
    pub(crate) fn report_backup(&self, backup: &Backup, before: &str) {
        self.note(
            "note",
            &format!(
                "backed up the database to {} {before}",
                backup.path.display()
            ),
        );
    }

    /// The automatic backup of `store`'s database `before` a change that
    /// cannot be undone (`"before loops gc --apply"`), at `now`: at most one
    /// an hour (none when the newest backup is younger), keeping the newest
    /// three, reported on stderr; skipped when `LOOPS_SKIP_BACKUP` says so, or for a
    /// database in memory.
    ///
    /// An error means no backup could be taken, and its message names the
    /// cause and `LOOPS_SKIP_BACKUP`: the caller should stop before the change.
    pub(crate) fn auto_backup(
        &self,
        store: &Store,
        now: Timestamp,
        before: &'static str,
    ) -> Result<Option<Backup>> {
        let Some(db) = store.path() else {
            return Ok(None);
        };
        let Some(auto) = crate::auto_backup::automatic_at(now) else {
            return Ok(None);
        };
        let taken = loops_store::auto_backup(db, auto, before)?;
        let backup = taken.map(|t| t.backup);
        if let Some(backup) = &backup {
            self.report_backup(backup, before);
        }
        Ok(backup)
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;
    use std::sync::Arc;

    use super::Context;

    #[test]
    fn an_automatic_backup_is_taken_at_most_hourly() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        let store = loops_store::Store::open_in_dir(dir.path(), Arc::new(|_| false)).unwrap();
        let at = |t: &str| t.parse().unwrap();
        let before = "before a test";
        let ctx = Context::default();
        let first = ctx
            .auto_backup(&store, at("2026-12-01T17:00:00Z"), before)
            .unwrap();
        let first = first.expect("a first backup");
        assert!(first.path.starts_with(dir.path().join("backups")));
        let again = ctx
            .auto_backup(&store, at("2026-12-01T17:59:00Z"), before)
            .unwrap();
        assert_eq!(again, None);
        let later = ctx
            .auto_backup(&store, at("2026-12-01T18:00:00Z"), before)
            .unwrap();
        assert!(later.is_some());
    }
}
