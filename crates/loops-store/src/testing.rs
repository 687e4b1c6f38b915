//! Test support: a fresh PostgreSQL database per test, from the server in
//! `LOOPS_TEST_DATABASE_URL` (which `cargo xtask ci` starts). Without the
//! variable the tests that need a server skip, saying so, so `cargo test`
//! passes on a machine without PostgreSQL; with `LOOPS_REQUIRE_POSTGRES=1`
//! (CI sets it in `.ci/run`) such a skip is a failure instead.
//!
//! `LOOPS_TEST_BACKEND=postgres` runs the store's operation tests and the
//! black-box tests on PostgreSQL instead of SQLite ([`test_backend`]), a
//! fresh database per test; a test about SQLite itself (its files, WAL,
//! pages, the original's databases) then skips, saying so
//! ([`sqlite_only`]). [`RawDb`] runs a test's own SQL on either backend.

mod raw;

use std::sync::atomic::{AtomicU32, Ordering};

pub use self::raw::{RawDb, Val, lit};

/// The variable naming the test server.
pub const TEST_DATABASE_URL: &str = "LOOPS_TEST_DATABASE_URL";

/// Set to `1` (or `true`), a test that would skip for want of a
/// PostgreSQL server fails instead: a CI run must not pass vacuously.
pub const REQUIRE_POSTGRES: &str = "LOOPS_REQUIRE_POSTGRES";

/// Whether `LOOPS_REQUIRE_POSTGRES` forbids skipping without a server.
pub fn postgres_required() -> bool {
    std::env::var(REQUIRE_POSTGRES).is_ok_and(|v| matches!(v.trim(), "1" | "true"))
}

/// A database created for one test and dropped with it.
#[derive(Debug)]
pub struct TestDatabase {
    base: String,
    name: String,
    url: String,
}

impl TestDatabase {
    /// The connection string of the fresh database.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The database's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The connection string of the server's maintenance database, for
    /// tests that act on the server (`pg_terminate_backend`).
    pub fn admin_url(&self) -> &str {
        &self.base
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        if let Ok(mut c) = postgres::Client::connect(&self.base, postgres::NoTls) {
            let _ = c.batch_execute(&format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.name
            ));
        }
    }
}

/// `base` with its database replaced by `dbname`: a `key=value` string
/// gets a later `dbname=`, which wins; a URL gets a `dbname` query
/// parameter, which wins over its path.
pub fn with_dbname(base: &str, dbname: &str) -> String {
    if base.starts_with("postgres://") || base.starts_with("postgresql://") {
        let sep = if base.contains('?') { '&' } else { '?' };
        format!("{base}{sep}dbname={dbname}")
    } else {
        format!("{base} dbname={dbname}")
    }
}

/// A fresh, empty database on the test server, or `None` (after printing
/// why, naming `test`) when `LOOPS_TEST_DATABASE_URL` is not set.
///
/// # Panics
/// When the variable is set but the server cannot be reached, or when it
/// is not set and `LOOPS_REQUIRE_POSTGRES` is: a CI run must not pass by
/// skipping.
#[expect(clippy::expect_used)]
pub fn fresh_database(test: &str) -> Option<TestDatabase> {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let Ok(base) = std::env::var(TEST_DATABASE_URL) else {
        assert!(
            !postgres_required(),
            "{REQUIRE_POSTGRES} is set, and {test} has no PostgreSQL server \
             ({TEST_DATABASE_URL} is not set): run it under `cargo xtask postgres`"
        );
        eprintln!("skipped {test}: no PostgreSQL server ({TEST_DATABASE_URL} is not set)");
        return None;
    };
    let name = format!(
        "loops_t_{}_{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed),
        crate::random_id_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    );
    let mut admin = postgres::Client::connect(&base, postgres::NoTls)
        .expect("LOOPS_TEST_DATABASE_URL is set, but its server cannot be reached");
    admin
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .expect("creating a test database");
    Some(TestDatabase {
        url: with_dbname(&base, &name),
        base,
        name,
    })
}

/// The variable that chooses the backend the store's operation tests and
/// the black-box tests run on: `sqlite` (the default) or `postgres`.
pub const TEST_BACKEND: &str = "LOOPS_TEST_BACKEND";

/// The backend the tests run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TestBackend {
    /// A database file in the test's temporary data directory.
    Sqlite,
    /// A fresh database on the server in `LOOPS_TEST_DATABASE_URL`.
    Postgres,
}

/// The backend `LOOPS_TEST_BACKEND` names: SQLite when it is unset, empty
/// or `sqlite`, PostgreSQL when it is `postgres`.
///
/// # Panics
/// When it names another backend, or `postgres` while
/// `LOOPS_TEST_DATABASE_URL` is unset: a run that asked for PostgreSQL
/// must not pass on SQLite, nor by skipping.
pub fn test_backend() -> TestBackend {
    match std::env::var(TEST_BACKEND).as_deref() {
        Err(_) | Ok("" | "sqlite") => TestBackend::Sqlite,
        Ok("postgres") => {
            assert!(
                std::env::var_os(TEST_DATABASE_URL).is_some_and(|u| !u.is_empty()),
                "{TEST_BACKEND}=postgres, but {TEST_DATABASE_URL} is not set: set it to a \
                 PostgreSQL server's URL, or run under `cargo xtask postgres`, which starts one"
            );
            TestBackend::Postgres
        }
        Ok(other) => panic!("{TEST_BACKEND}={other:?}: expected `sqlite` or `postgres`"),
    }
}

/// True when the tests run on PostgreSQL.
pub fn on_postgres() -> bool {
    test_backend() == TestBackend::Postgres
}

/// For a test about SQLite itself: on PostgreSQL prints `skipped <test> on
/// postgres: <why>` and returns true, and the test returns; on SQLite
/// returns false and the test runs. `test` may be a function's full path
/// (`store::compat::a_test::here`, as `std::any::type_name_of_val` gives
/// it inside the test): its crate and a trailing `::here` are dropped.
pub fn sqlite_only(test: &str, why: &str) -> bool {
    if !on_postgres() {
        return false;
    }
    let test = test.strip_suffix("::here").unwrap_or(test);
    let test = test.split_once("::").map_or(test, |(_, rest)| rest);
    eprintln!("skipped {test} on postgres: {why}");
    true
}
