//! Test support: a fresh PostgreSQL database per test, from the server in
//! `LOOPS_TEST_DATABASE_URL` (which `cargo xtask ci` starts). Without the
//! variable the tests that need a server skip, saying so, so `cargo test`
//! passes on a machine without PostgreSQL.

use std::sync::atomic::{AtomicU32, Ordering};

/// The variable naming the test server.
pub const TEST_DATABASE_URL: &str = "LOOPS_TEST_DATABASE_URL";

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
/// When the variable is set but the server cannot be reached: a CI run
/// that started a server must not pass by skipping.
#[allow(clippy::expect_used)]
pub fn fresh_database(test: &str) -> Option<TestDatabase> {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let Ok(base) = std::env::var(TEST_DATABASE_URL) else {
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
