//! Shared fixtures: stores on a fresh PostgreSQL database and on a
//! SQLite file, raw connections to both for arranging and reading rows,
//! and instants.

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::sync::Arc;

use loops_core::{Liveness, ProcessRef, Timestamp};
use loops_store::testing::{TestDatabase, fresh_database};
use loops_store::{DatabaseUrl, Store};
use tempfile::TempDir;

/// `2026-01-01T00:00:00.000Z` plus `secs` seconds.
pub(crate) fn at(secs: i64) -> Timestamp {
    "2026-01-01T00:00:00Z"
        .parse::<Timestamp>()
        .unwrap()
        .add_ms(secs * 1000)
}

/// A day in seconds.
pub(crate) const DAY: i64 = 24 * 60 * 60;

/// A fresh database, or `None` (the test skips) without a server.
pub(crate) fn database(test: &str) -> Option<TestDatabase> {
    fresh_database(&format!("pg_workflows::{test}"))
}

/// A store on `db` as `host`, whose probe calls alive the processes
/// `alive` says.
pub(crate) fn pg_store(
    db: &TestDatabase,
    host: &str,
    alive: impl Fn(ProcessRef) -> bool + Send + Sync + 'static,
) -> Store {
    let liveness: Arc<dyn Liveness> = Arc::new(alive);
    Store::open_postgres(
        &DatabaseUrl::parse(db.url()).unwrap(),
        "test",
        host,
        liveness,
    )
    .unwrap()
}

/// A raw connection to `db`, for arranging and reading rows.
pub(crate) fn pg_raw(db: &TestDatabase) -> postgres::Client {
    postgres::Client::connect(db.url(), postgres::NoTls).unwrap()
}

/// A SQLite database file in a private temporary data directory.
pub(crate) struct SqliteFile {
    _dir: TempDir,
    pub(crate) path: PathBuf,
}

impl SqliteFile {
    pub(crate) fn new() -> SqliteFile {
        let dir = tempfile::Builder::new()
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir()
            .unwrap();
        let path = dir.path().join("loops.db");
        SqliteFile { _dir: dir, path }
    }

    /// A store on the file (created and migrated by the first one).
    pub(crate) fn store(&self) -> Store {
        Store::open(&self.path, Arc::new(|_| false)).unwrap()
    }

    /// A raw connection to the file.
    pub(crate) fn raw(&self) -> rusqlite::Connection {
        rusqlite::Connection::open(&self.path).unwrap()
    }
}

/// Runs `sql` (statements without parameters) on both databases.
pub(crate) fn on_both(sqlite: &SqliteFile, pg: &mut postgres::Client, sql: &str) {
    sqlite.raw().execute_batch(sql).unwrap();
    pg.batch_execute(sql).unwrap();
}

/// The ids of `table` on both databases, sorted: `(sqlite, postgres)`.
pub(crate) fn ids_on_both(
    sqlite: &SqliteFile,
    pg: &mut postgres::Client,
    table: &str,
) -> (Vec<String>, Vec<String>) {
    let sql = format!("SELECT id FROM {table} ORDER BY id");
    let conn = sqlite.raw();
    let mut stmt = conn.prepare(&sql).unwrap();
    let lite: Vec<String> = stmt
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    let pgs: Vec<String> = pg
        .query(&sql, &[])
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    (lite, pgs)
}

/// A bare loop row, with literal values both databases accept.
pub(crate) fn loop_sql(id: &str, retry_for: Option<Timestamp>) -> String {
    let retry = retry_for.map_or_else(|| "NULL".to_owned(), |t| format!("'{t}'"));
    format!(
        "INSERT INTO loops (id, name, status, schedule_json, target_json, retry_scheduled_for,
                catch_up, catch_up_limit, overlap, max_attempts, retry_delay_ms, lease_ms,
                created_at, updated_at)
         VALUES ('{id}', 'loop-{id}', 'active', '{{\"type\":\"dynamic\"}}',
                 '{{\"type\":\"command\",\"command\":\"true\"}}', {retry}, 'latest', 50, 'skip',
                 3, 60000, 1800000, '{t}', '{t}');",
        t = at(0)
    )
}

/// A bare loop run row of slot `slot` created at `created`.
pub(crate) fn run_sql(
    id: &str,
    loop_id: &str,
    slot: Timestamp,
    status: &str,
    claimed_by: Option<&str>,
    created: Timestamp,
) -> String {
    let claimed = claimed_by.map_or_else(|| "NULL".to_owned(), |c| format!("'{c}'"));
    format!(
        "INSERT INTO loop_runs (id, loop_id, loop_name, scheduled_for, attempt, status,
                claimed_by, lease_expires_at, created_at, updated_at)
         VALUES ('{id}', '{loop_id}', 'loop-{loop_id}', '{slot}', 1, '{status}', {claimed},
                 '{lease}', '{created}', '{created}');",
        lease = created.add_ms(60_000)
    )
}
