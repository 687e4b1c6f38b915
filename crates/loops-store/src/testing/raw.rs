//! Raw SQL on a test's database, whichever backend holds it: for tests
//! that arrange rows no store operation writes (an aged run, a drifted
//! count, a column another implementation left behind) or read columns no
//! record shows.
//!
//! Values travel inlined in the SQL ([`lit`]), which both backends read
//! the same way: an instant as its SPEC text (SQLite's TEXT column, the
//! input form of PostgreSQL's `timestamptz`), JSON as its text (jsonb's
//! input). What comes back is a [`Val`] per column; an instant reads as
//! its SPEC text on both, so a test compares it with
//! `Timestamp::to_string()` either way.

use std::cell::RefCell;
use std::path::Path;
use std::time::Duration;

use postgres::types::Type;

use crate::postgres::rows::{Json, Ts};

/// One column's value, as both backends return it.
#[derive(Debug, Clone, PartialEq)]
pub enum Val {
    /// SQL NULL.
    Null,
    /// An integer (a PostgreSQL boolean reads as 0 or 1, as SQLite stores
    /// it).
    Int(i64),
    /// A floating-point number.
    Real(f64),
    /// Text; an instant as its SPEC text, JSON as its text (PostgreSQL's
    /// jsonb as it normalizes it).
    Text(String),
}

impl Val {
    /// The integer, or `None` for NULL.
    ///
    /// # Panics
    /// When the value is not an integer.
    pub fn int(&self) -> Option<i64> {
        match self {
            Val::Null => None,
            Val::Int(n) => Some(*n),
            other => panic!("expected an integer, found {other:?}"),
        }
    }

    /// The text, or `None` for NULL.
    ///
    /// # Panics
    /// When the value is not text.
    pub fn text(&self) -> Option<&str> {
        match self {
            Val::Null => None,
            Val::Text(s) => Some(s),
            other => panic!("expected text, found {other:?}"),
        }
    }
}

/// `s` as an SQL string literal: in single quotes, each quote doubled.
pub fn lit(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// A connection for a test's own SQL, on SQLite or PostgreSQL.
///
/// Every method panics, naming the SQL, when the statement fails: it is a
/// test's arrangement, and a failure is the test's.
pub struct RawDb {
    conn: Conn,
}

enum Conn {
    Sqlite(rusqlite::Connection),
    Postgres(RefCell<postgres::Client>),
}

impl std::fmt::Debug for RawDb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.conn {
            Conn::Sqlite(_) => "sqlite",
            Conn::Postgres(_) => "postgres",
        };
        f.debug_struct("RawDb").field("backend", &kind).finish()
    }
}

impl RawDb {
    /// A connection to the SQLite file at `path`, waiting up to 10 s for
    /// its lock, with SQLite's defaults otherwise (foreign keys on, as the
    /// bundled SQLite has them; see [`RawDb::foreign_keys_off`]).
    ///
    /// # Panics
    /// When the file cannot be opened.
    pub fn sqlite(path: &Path) -> RawDb {
        let conn = rusqlite::Connection::open(path)
            .unwrap_or_else(|e| panic!("opening {}: {e}", path.display()));
        conn.busy_timeout(Duration::from_secs(10))
            .unwrap_or_else(|e| panic!("setting a busy timeout: {e}"));
        RawDb {
            conn: Conn::Sqlite(conn),
        }
    }

    /// A connection to the PostgreSQL database at `url`.
    ///
    /// # Panics
    /// When the server cannot be reached.
    pub fn postgres(url: &str) -> RawDb {
        let client = postgres::Client::connect(url, postgres::NoTls)
            .unwrap_or_else(|e| panic!("connecting to the test database: {e}"));
        RawDb {
            conn: Conn::Postgres(RefCell::new(client)),
        }
    }

    /// True on PostgreSQL, for the few arrangements whose SQL differs.
    pub fn is_postgres(&self) -> bool {
        matches!(self.conn, Conn::Postgres(_))
    }

    /// Lets this connection write rows whose references dangle, as loops
    /// itself runs SQLite (`PRAGMA foreign_keys = OFF`). On PostgreSQL,
    /// which always checks them, the session skips the foreign key
    /// triggers (`session_replication_role = replica`, which needs a
    /// superuser), and with them every user trigger: the status counts of
    /// `loops` and `loop_runs` do not follow what it writes there, so
    /// arrange only other tables with it.
    pub fn foreign_keys_off(&self) {
        match &self.conn {
            Conn::Sqlite(c) => c
                .pragma_update(None, "foreign_keys", "OFF")
                .unwrap_or_else(|e| panic!("turning foreign keys off: {e}")),
            Conn::Postgres(_) => self.batch("SET session_replication_role = replica"),
        }
    }

    /// Runs one statement; the number of rows it changed.
    pub fn exec(&self, sql: &str) -> u64 {
        match &self.conn {
            Conn::Sqlite(c) => c
                .execute(sql, [])
                .map(|n| n as u64)
                .unwrap_or_else(|e| panic!("{sql}: {e}")),
            Conn::Postgres(c) => c
                .borrow_mut()
                .execute(sql, &[])
                .unwrap_or_else(|e| panic!("{sql}: {}", pg_error(&e))),
        }
    }

    /// Runs statements separated by semicolons.
    pub fn batch(&self, sql: &str) {
        match &self.conn {
            Conn::Sqlite(c) => c
                .execute_batch(sql)
                .unwrap_or_else(|e| panic!("{sql}: {e}")),
            Conn::Postgres(c) => c
                .borrow_mut()
                .batch_execute(sql)
                .unwrap_or_else(|e| panic!("{sql}: {}", pg_error(&e))),
        }
    }

    /// Every row the query returns, each a value per column.
    pub fn rows(&self, sql: &str) -> Vec<Vec<Val>> {
        match &self.conn {
            Conn::Sqlite(c) => sqlite_rows(c, sql).unwrap_or_else(|e| panic!("{sql}: {e}")),
            Conn::Postgres(c) => {
                let rows = c
                    .borrow_mut()
                    .query(sql, &[])
                    .unwrap_or_else(|e| panic!("{sql}: {}", pg_error(&e)));
                rows.iter()
                    .map(|row| (0..row.len()).map(|i| pg_value(row, i, sql)).collect())
                    .collect()
            }
        }
    }

    /// The one row the query returns.
    ///
    /// # Panics
    /// When it returns none or several.
    pub fn row(&self, sql: &str) -> Vec<Val> {
        let mut rows = self.rows(sql);
        assert_eq!(rows.len(), 1, "{sql}: expected one row");
        rows.remove(0)
    }

    /// The first column of the one row the query returns, as an integer
    /// (`None` for NULL).
    pub fn int(&self, sql: &str) -> Option<i64> {
        self.row(sql)[0].int()
    }

    /// The first column of the one row the query returns, as text (`None`
    /// for NULL).
    pub fn text(&self, sql: &str) -> Option<String> {
        self.row(sql)[0].text().map(str::to_owned)
    }

    /// The first column of every row, as text.
    ///
    /// # Panics
    /// When one is NULL or not text.
    pub fn texts(&self, sql: &str) -> Vec<String> {
        self.rows(sql)
            .iter()
            .map(|r| {
                r[0].text()
                    .unwrap_or_else(|| panic!("{sql}: a NULL"))
                    .to_owned()
            })
            .collect()
    }

    /// Whether `table` exists (in the `public` schema on PostgreSQL): a
    /// database no loops opened has none of its tables.
    pub fn has_table(&self, table: &str) -> bool {
        let sql = match self.conn {
            Conn::Sqlite(_) => format!(
                "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = {}",
                lit(table)
            ),
            Conn::Postgres(_) => format!(
                "SELECT COUNT(*) FROM information_schema.tables
                 WHERE table_schema = 'public' AND table_name = {}",
                lit(table)
            ),
        };
        self.int(&sql).unwrap_or(0) > 0
    }
}

fn sqlite_rows(c: &rusqlite::Connection, sql: &str) -> rusqlite::Result<Vec<Vec<Val>>> {
    use rusqlite::types::ValueRef;
    let mut stmt = c.prepare(sql)?;
    let n = stmt.column_count();
    let mut rows = stmt.query([])?;
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        let mut vals = Vec::with_capacity(n);
        for i in 0..n {
            vals.push(match row.get_ref(i)? {
                ValueRef::Null => Val::Null,
                ValueRef::Integer(v) => Val::Int(v),
                ValueRef::Real(v) => Val::Real(v),
                ValueRef::Text(t) | ValueRef::Blob(t) => {
                    Val::Text(String::from_utf8_lossy(t).into_owned())
                }
            });
        }
        out.push(vals);
    }
    Ok(out)
}

/// Column `i` of `row`, decoded by its type.
fn pg_value(row: &postgres::Row, i: usize, sql: &str) -> Val {
    let ty = row.columns()[i].type_().clone();
    let bad = |e: postgres::Error| -> Val { panic!("{sql}: column {i} ({ty}): {e}") };
    let val = |v: Option<Val>| v.unwrap_or(Val::Null);
    match ty {
        Type::INT8 => row
            .try_get::<_, Option<i64>>(i)
            .map_or_else(bad, |v| val(v.map(Val::Int))),
        Type::INT4 => row
            .try_get::<_, Option<i32>>(i)
            .map_or_else(bad, |v| val(v.map(|n| Val::Int(n.into())))),
        Type::INT2 => row
            .try_get::<_, Option<i16>>(i)
            .map_or_else(bad, |v| val(v.map(|n| Val::Int(n.into())))),
        Type::BOOL => row
            .try_get::<_, Option<bool>>(i)
            .map_or_else(bad, |v| val(v.map(|b| Val::Int(b.into())))),
        Type::FLOAT8 => row
            .try_get::<_, Option<f64>>(i)
            .map_or_else(bad, |v| val(v.map(Val::Real))),
        Type::TIMESTAMPTZ | Type::TIMESTAMP => row
            .try_get::<_, Option<Ts>>(i)
            .map_or_else(bad, |v| val(v.map(|t| Val::Text(t.0.to_string())))),
        Type::JSONB | Type::JSON => row
            .try_get::<_, Option<Json<'_>>>(i)
            .map_or_else(bad, |v| val(v.map(|j| Val::Text(j.0.to_owned())))),
        _ => row
            .try_get::<_, Option<String>>(i)
            .map_or_else(bad, |v| val(v.map(Val::Text))),
    }
}

/// A PostgreSQL error with the server's message, which `Display` leaves
/// out.
fn pg_error(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{e}: {}", db.message()),
        None => e.to_string(),
    }
}
