//! Helpers for the black-box tests: each test gets a temporary
//! `LOOPS_DATA_DIR`, `HOME` and a `bin` directory at the front of `PATH`
//! (for fake agent CLIs), and runs the built `loops` binary through a
//! builder in the style of just's `Test`:
//!
//! ```no_run
//! use loops_tests::TestEnv;
//! let env = TestEnv::new();
//! let ran = env.loops(["create", "command", "a", "--cmd", "true", "--every", "1m"]).run();
//! assert!(ran.stdout.starts_with("created loop "));
//! env.loops(["show", "nope"]).code(1).stderr_has("loop not found: nope").run();
//! ```
//!
//! Under `LOOPS_TEST_BACKEND=postgres` (with `LOOPS_TEST_DATABASE_URL`
//! naming a server) each `TestEnv` also gets a fresh PostgreSQL database,
//! which every command it runs uses through `LOOPS_DATABASE_URL`; the data
//! directory still holds the daemon's pid file, socket and log. A test
//! about the SQLite file itself starts with [`sqlite_only!`], which skips
//! it there, saying why.

pub mod tls;
pub mod webdriver;

use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

#[doc(hidden)]
pub use loops_store::testing as store_testing;
use loops_store::testing::{RawDb, TestDatabase};

/// Marks a test about the SQLite file (its path, modes, WAL, pages,
/// backups, the original's databases): under `LOOPS_TEST_BACKEND=postgres`
/// it prints `skipped <test> on postgres: <why>` and returns.
#[macro_export]
macro_rules! sqlite_only {
    ($why:expr) => {{
        fn here() {}
        if $crate::store_testing::sqlite_only(::std::any::type_name_of_val(&here), $why) {
            return;
        }
    }};
}

/// Starts a test that needs a PostgreSQL server whatever the backend of
/// the others (a database URL of its own): evaluates to a fresh
/// [`store_testing::TestDatabase`], or, without `LOOPS_TEST_DATABASE_URL`,
/// prints `skipped <test>: no PostgreSQL server (…)` and returns, so a
/// skip is never a silent pass.
#[macro_export]
macro_rules! postgres_only {
    () => {{
        fn here() {}
        let test = ::std::any::type_name_of_val(&here);
        let test = test.strip_suffix("::here").unwrap_or(test);
        let test = test.split_once("::").map_or(test, |(_, rest)| rest);
        match $crate::store_testing::fresh_database(test) {
            Some(db) => db,
            None => return,
        }
    }};
}

/// The "now" of human output in snapshots (`LOOPS_DISPLAY_NOW`): a
/// Monday, 13:00 in Berlin.
pub const DISPLAY_NOW: &str = "2026-01-05T12:00:00.000Z";

/// The variable that points `loops` at a PostgreSQL database.
pub const DATABASE_URL_ENV: &str = "LOOPS_DATABASE_URL";

/// The `loops` binary under test: `$LOOPS_BIN`, or the one cargo built next
/// to this test executable (as ripgrep's tests find `rg`).
pub fn loops_bin() -> PathBuf {
    if let Some(bin) = std::env::var_os("LOOPS_BIN") {
        return PathBuf::from(bin);
    }
    let exe = std::env::current_exe().expect("the test executable has a path");
    // target/<profile>/deps/blackbox-<hash> → target/<profile>/loops
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("test executables live in target/<profile>/deps");
    profile_dir.join("loops")
}

/// The `loops-daemon` helper binary under test (SPEC §7.6):
/// `$LOOPS_DAEMON_BIN`, or the one beside [`loops_bin`], where cargo builds
/// and installs it.
pub fn loops_daemon_bin() -> PathBuf {
    if let Some(bin) = std::env::var_os("LOOPS_DAEMON_BIN") {
        return PathBuf::from(bin);
    }
    loops_bin().with_file_name("loops-daemon")
}

/// A scratch environment: a data dir, a home dir and a bin dir, removed on
/// drop, and under `LOOPS_TEST_BACKEND=postgres` a fresh database, dropped
/// with it.
pub struct TestEnv {
    dir: tempfile::TempDir,
    pg: Option<TestDatabase>,
}

impl Default for TestEnv {
    fn default() -> Self {
        Self::new()
    }
}

impl TestEnv {
    /// A fresh environment.
    pub fn new() -> TestEnv {
        let dir = tempfile::tempdir().expect("a temp dir");
        std::fs::create_dir_all(dir.path().join("home")).expect("a home dir");
        std::fs::create_dir_all(dir.path().join("bin")).expect("a bin dir");
        let pg = store_testing::on_postgres().then(|| {
            store_testing::fresh_database("blackbox")
                .expect("LOOPS_TEST_DATABASE_URL is set when the backend is postgres")
        });
        TestEnv { dir, pg }
    }

    /// True when this environment's commands use PostgreSQL.
    pub fn on_postgres(&self) -> bool {
        self.pg.is_some()
    }

    /// The PostgreSQL database's connection string (`LOOPS_DATABASE_URL`),
    /// or `None` on SQLite.
    pub fn database_url(&self) -> Option<&str> {
        self.pg.as_ref().map(TestDatabase::url)
    }

    /// A connection for the test's own SQL on this environment's database,
    /// whichever backend holds it.
    pub fn raw(&self) -> RawDb {
        match &self.pg {
            None => RawDb::sqlite(&self.db_path()),
            Some(pg) => RawDb::postgres(pg.url()),
        }
    }

    /// Whether no command has opened the database yet: no SQLite file, or
    /// a PostgreSQL database without loops' tables.
    pub fn database_is_untouched(&self) -> bool {
        if self.pg.is_none() {
            return !self.db_path().exists();
        }
        let raw = self.raw();
        !raw.has_table("refinery_schema_history") && !raw.has_table("loops")
    }

    /// The data directory (`LOOPS_DATA_DIR`).
    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// Creates the data directory 0700 whatever the umask, as loops itself
    /// does (loops refuses one that group or others can write), and
    /// returns it.
    pub fn make_data_dir(&self) -> PathBuf {
        use std::os::unix::fs::DirBuilderExt;
        let dir = self.data_dir();
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .expect("a data directory");
        dir
    }

    /// The SQLite database file (none on PostgreSQL).
    pub fn db_path(&self) -> PathBuf {
        self.data_dir().join("loops.db")
    }

    /// The home directory (`HOME`).
    pub fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    /// Where `daemon install --platform linux` writes the systemd user unit.
    pub fn systemd_unit_path(&self) -> PathBuf {
        self.home()
            .join(".config/systemd/user/loops-daemon.service")
    }

    /// Where `daemon install --platform macos` writes the launchd plist.
    pub fn launchd_plist_path(&self) -> PathBuf {
        self.home()
            .join("Library/LaunchAgents/com.hasna.loops.daemon.plist")
    }

    /// A directory placed first on `PATH`.
    pub fn bin_dir(&self) -> PathBuf {
        self.dir.path().join("bin")
    }

    /// Writes an executable `#!/bin/sh` script named `name` into the bin
    /// directory, so runs find it on `PATH`.
    pub fn write_script(&self, name: &str, body: &str) -> PathBuf {
        let path = self.bin_dir().join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).expect("a script");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
            .expect("an executable script");
        path
    }

    /// A `loops` command in this environment: its own data dir, home and
    /// PATH, its own database (`LOOPS_DATABASE_URL` on PostgreSQL, never
    /// one inherited from the caller), no colors, and a fixed terminal
    /// width for help text.
    pub fn cmd(&self) -> Command {
        let mut cmd = Command::new(loops_bin());
        let path = format!(
            "{}:{}",
            self.bin_dir().display(),
            std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".to_owned())
        );
        cmd.env("LOOPS_DATA_DIR", self.data_dir())
            .env("HOME", self.home())
            .env("PATH", path)
            .env("NO_COLOR", "1")
            .env("COLUMNS", "100")
            .stdin(Stdio::null());
        match &self.pg {
            Some(pg) => cmd.env(DATABASE_URL_ENV, pg.url()),
            None => cmd.env_remove(DATABASE_URL_ENV),
        };
        cmd
    }

    /// Runs `loops <args>` and returns its output.
    pub fn run(&self, args: &[&str]) -> Output {
        self.cmd().args(args).output().expect("loops runs")
    }

    /// A builder for `loops <args>` that expects exit code 0 unless told.
    pub fn loops<I, S>(&self, args: I) -> Test
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        Test::new(self.cmd()).args(args)
    }

    /// A `loops-daemon` command in this environment, with the same
    /// environment as [`TestEnv::cmd`].
    pub fn daemon_cmd(&self) -> Command {
        let base = self.cmd();
        let mut cmd = Command::new(loops_daemon_bin());
        for (key, value) in base.get_envs() {
            match value {
                Some(value) => cmd.env(key, value),
                None => cmd.env_remove(key),
            };
        }
        cmd.stdin(Stdio::null());
        cmd
    }

    /// A builder for `loops-daemon <args>` that expects exit code 0 unless
    /// told.
    pub fn loops_daemon<I, S>(&self, args: I) -> Test
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        Test::new(self.daemon_cmd()).args(args)
    }

    /// Rewrites the instants of `loop_name`'s runs: started (and
    /// scheduled) at `start`, finished at `finish`, taking `duration_ms`;
    /// for human output with frozen times ([`Test::frozen`]).
    pub fn set_run_times(&self, loop_name: &str, start: &str, finish: &str, duration_ms: i64) {
        use store_testing::lit;
        self.raw().exec(&format!(
            "UPDATE loop_runs SET scheduled_for = {s}, started_at = {s}, created_at = {s}, \
             finished_at = {f}, updated_at = {f}, duration_ms = {duration_ms} \
             WHERE loop_name = {n}",
            s = lit(start),
            f = lit(finish),
            n = lit(loop_name),
        ));
    }

    /// Creates a command loop and returns its id.
    pub fn create_command(&self, name: &str, command: &str, schedule: &[&str]) -> String {
        let ran = self
            .loops(["--json", "create", "command", name, "--cmd", command])
            .args(schedule)
            .run();
        ran.json()["id"]
            .as_str()
            .expect("create --json prints the loop id")
            .to_owned()
    }

    /// `loops daemon start <args>`; the pid from its `started pid=<pid>`
    /// line.
    pub fn start_daemon(&self, args: &[&str]) -> u32 {
        let ran = self.loops(["daemon", "start"]).args(args).run();
        ran.stdout
            .trim()
            .strip_prefix("started pid=")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("{}{}", ran.stdout, ran.stderr))
    }

    /// The pid the data directory's `daemon.pid` names (its first line,
    /// before the daemon's identity), if there is one.
    pub fn daemon_pid(&self) -> Option<u32> {
        let text = std::fs::read_to_string(self.data_dir().join("daemon.pid")).ok()?;
        Some(pid_file_pid(&text).unwrap_or(0))
    }

    /// A test's teardown of daemon `pid`: `loops daemon stop --grace 0`,
    /// then `kill -9` if it still runs.
    pub fn stop_daemon(&self, pid: u32) {
        let _ = self.run(&["daemon", "stop", "--grace", "0"]);
        if is_running(pid) {
            kill("-9", pid);
        }
    }

    /// An original 0.3.1 database in the data directory holding `rows`
    /// (see [`write_original_db`]); the data directory is made 0700 and the
    /// database 0600, whatever the umask, as loops refuses ones another
    /// user could write.
    pub fn original_db(&self, rows: &str) {
        self.make_data_dir();
        write_original_db(&self.db_path(), rows);
        std::fs::set_permissions(self.db_path(), std::fs::Permissions::from_mode(0o600))
            .expect("chmod");
    }

    /// Starts `loops <args>` without waiting for it.
    pub fn spawn(&self, args: &[&str]) -> Child {
        self.cmd()
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("loops starts")
    }
}

/// A daemon started by `loops daemon start`, stopped when dropped: resumed
/// in case the test suspended it, stopped gracefully, then killed.
pub struct Daemon<'a> {
    env: &'a TestEnv,
    /// Its pid.
    pub pid: u32,
}

impl<'a> Daemon<'a> {
    /// `loops daemon start <args>` in `env`.
    pub fn start(env: &'a TestEnv, args: &[&str]) -> Daemon<'a> {
        let pid = env.start_daemon(args);
        Daemon { env, pid }
    }
}

impl Drop for Daemon<'_> {
    fn drop(&mut self) {
        kill("-CONT", self.pid);
        self.env.stop_daemon(self.pid);
    }
}

/// One `loops` invocation and what it must produce.
#[must_use = "a Test does nothing until .run()"]
pub struct Test {
    cmd: Command,
    code: i32,
    stdout: Option<String>,
    stdout_has: Vec<String>,
    stderr_has: Vec<String>,
}

impl Test {
    /// A builder for `cmd` that expects exit code 0 unless told.
    fn new(cmd: Command) -> Test {
        Test {
            cmd,
            code: 0,
            stdout: None,
            stdout_has: Vec::new(),
            stderr_has: Vec::new(),
        }
    }

    /// More arguments.
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.cmd.args(args);
        self
    }

    /// Human output as of [`DISPLAY_NOW`], in Berlin's local time.
    pub fn frozen(self) -> Self {
        self.env("LOOPS_DISPLAY_NOW", Some(DISPLAY_NOW))
            .env("TZ", Some("Europe/Berlin"))
    }

    /// An environment variable for this run (or removes it when `None`).
    pub fn env(mut self, key: &str, value: Option<&str>) -> Self {
        match value {
            Some(v) => self.cmd.env(key, v),
            None => self.cmd.env_remove(key),
        };
        self
    }

    /// The expected exit code (0 by default).
    pub fn code(mut self, code: i32) -> Self {
        self.code = code;
        self
    }

    /// The exact expected stdout.
    pub fn stdout(mut self, text: &str) -> Self {
        self.stdout = Some(text.to_owned());
        self
    }

    /// Text stdout must contain.
    pub fn stdout_has(mut self, text: &str) -> Self {
        self.stdout_has.push(text.to_owned());
        self
    }

    /// Text stderr must contain.
    pub fn stderr_has(mut self, text: &str) -> Self {
        self.stderr_has.push(text.to_owned());
        self
    }

    /// Runs the command and checks every expectation.
    pub fn run(mut self) -> Ran {
        let out = self.cmd.output().expect("loops runs");
        let ran = Ran::from(out);
        assert_eq!(
            ran.code, self.code,
            "exit code of {:?}\nstdout:\n{}\nstderr:\n{}",
            self.cmd, ran.stdout, ran.stderr
        );
        if let Some(expected) = &self.stdout {
            assert_eq!(&ran.stdout, expected, "stdout of {:?}", self.cmd);
        }
        for text in &self.stdout_has {
            assert!(
                ran.stdout.contains(text.as_str()),
                "stdout of {:?} lacks {text:?}:\n{}",
                self.cmd,
                ran.stdout
            );
        }
        for text in &self.stderr_has {
            assert!(
                ran.stderr.contains(text.as_str()),
                "stderr of {:?} lacks {text:?}:\n{}",
                self.cmd,
                ran.stderr
            );
        }
        ran
    }
}

/// What a run of `loops` produced.
#[derive(Debug)]
pub struct Ran {
    /// Exit code (-1 when killed by a signal).
    pub code: i32,
    /// Stdout, lossily decoded.
    pub stdout: String,
    /// Stderr, lossily decoded.
    pub stderr: String,
}

impl From<Output> for Ran {
    fn from(out: Output) -> Ran {
        Ran {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

impl Ran {
    /// Stdout parsed as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}):\n{}", self.stdout))
    }
}

/// The tables and indexes exactly as the original 0.3.1 creates them.
pub const ORIGINAL_0_3_1_SCHEMA: &str = include_str!("fixtures/original-0.3.1-schema.sql");

/// One due interval loop, as the original's `create command` writes it.
pub const ORIGINAL_LOOP: &str = r#"
INSERT INTO loops VALUES ('a1b2c3d4e5f6', 'legacy', NULL, 'active',
  '{"type":"interval","everyMs":60000,"anchor":"fixed_rate"}',
  '{"type":"command","command":"printf legacy","shell":true}',
  '2025-12-01T10:05:00.000Z', NULL, 'latest', 50, 'skip', 1, 60000, 1800000,
  NULL, '2025-12-01T10:00:00.000Z', '2025-12-01T10:00:00.000Z');
"#;

/// Writes a database at `path` as the original 0.3.1 does (WAL, its
/// schema) holding `rows` (SQL inserts, e.g. [`ORIGINAL_LOOP`]).
pub fn write_original_db(path: &Path, rows: &str) {
    let db = rusqlite::Connection::open(path).expect("a database");
    db.execute_batch("PRAGMA journal_mode = WAL;")
        .and_then(|()| db.execute_batch(ORIGINAL_0_3_1_SCHEMA))
        .and_then(|()| db.execute_batch(rows))
        .expect("the original's schema and rows");
}

/// Whether process `pid` runs: it exists and is not a zombie (a killed
/// daemon's parent may be slow to reap it).
pub fn is_running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let state = stat[stat.rfind(')')? + 1..].split_whitespace().next()?;
            Some(state != "Z" && state != "X")
        })
        .unwrap_or(false)
}

/// Runs `kill <signal> <pid>` (`signal` as kill takes it, e.g. `-9`);
/// whether it succeeded.
pub fn kill(signal: &str, pid: u32) -> bool {
    Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .is_ok_and(|s| s.success())
}

/// The instant `ms` milliseconds before now, as an SQL literal in the
/// SPEC's shape, which both backends read as an instant.
#[expect(
    clippy::disallowed_methods,
    reason = "the built binary reads the real clock, so the test compares with it"
)]
pub fn instant_ago(ms: i64) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("the clock is after 1970");
    let now = i64::try_from(now.as_millis()).expect("a millisecond count");
    let at = loops_core::Timestamp::from_millis(now - ms).expect("an instant in range");
    store_testing::lit(&at.to_string())
}

/// The path of program `name` on `PATH`, or `None` after saying why test
/// `test` skips; in CI (`CI` set), where `xtask ci` installs it, a missing
/// program fails the test instead.
pub fn program_on_path(test: &str, name: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join(name))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI is set and {name} is not installed (xtask ci installs it)"
        );
        eprintln!("skipped {test}: {name} is not installed");
    }
    found
}

/// Polls `check` until it returns `Some`, failing after `timeout`.
pub fn wait_for<T>(what: &str, timeout: Duration, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Insta settings that hide what changes between runs: ids, failure
/// fingerprints, instants, durations, pids, runner ids and host names.
pub fn snapshot_settings() -> insta::Settings {
    let mut settings = insta::Settings::clone_current();
    for (pattern, replacement) in [
        (
            r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z",
            "YYYY-MM-DDTHH:MM:SS.mmmZ",
        ),
        (r"\b[0-9a-f]{12}\b", "[id]"),
        // A failure fingerprint hashes the loop's id (issue 27).
        (r"\b[0-9a-f]{16}\b", "[fingerprint]"),
        (r#""durationMs": \d+"#, r#""durationMs": "[ms]""#),
        (r#""pid": \d+"#, r#""pid": "[pid]""#),
        (r"(manual(-tick)?):\d+", "$1:[pid]"),
        (r#""claimedHost": "[^"]*""#, r#""claimedHost": "[host]""#),
    ] {
        settings.add_filter(pattern, replacement);
    }
    settings
}

/// The pid a `daemon.pid` text names: its first line, as the original's
/// `parseInt` reads the leading digits (the second line is the daemon's
/// identity, issue 32).
pub fn pid_file_pid(text: &str) -> Option<u32> {
    text.lines().next()?.trim().parse().ok()
}
