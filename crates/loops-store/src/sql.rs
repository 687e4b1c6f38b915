//! The seam the operations written once stand on: a connection that runs
//! statements in either dialect ([`Sql`]), a backend that lends one for a
//! read or a write transaction ([`Db`]), neutral parameter values
//! ([`Value`]) and rows read by position ([`Fields`]).
//!
//! A statement written once uses SQLite's numbered placeholders (`?1`);
//! the PostgreSQL backend renders them as `$1` the first time it prepares
//! the statement. Where the dialects differ (row locks, `SKIP LOCKED`,
//! casts), the operation picks its text with [`Dialect::pick`] or leaves
//! the statement to its backend. Instants bind as TEXT on SQLite and as
//! `timestamptz` on PostgreSQL; JSON as TEXT and as `json`.

use std::ops::ControlFlow;

use loops_core::{Liveness, Timestamp};

use crate::error::{Result, StoreError};

/// Which SQL a connection speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    Sqlite,
    Postgres,
}

impl Dialect {
    /// The text for this dialect of a statement the two write differently.
    pub(crate) fn pick(self, sqlite: &'static str, postgres: &'static str) -> &'static str {
        match self {
            Dialect::Sqlite => sqlite,
            Dialect::Postgres => postgres,
        }
    }
}

/// A parameter value, bound the way each dialect stores it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Value<'a> {
    Null,
    Int(i64),
    Text(&'a str),
    /// An instant: TEXT (`…T…Z`) on SQLite, `timestamptz` on PostgreSQL.
    Ts(Timestamp),
    /// JSON text: TEXT on SQLite, `json`/`jsonb` on PostgreSQL.
    Json(&'a str),
}

impl Value<'_> {
    /// What kind of value this is, for messages that must not show it.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Value::Null => "NULL",
            Value::Int(_) => "integer",
            Value::Text(_) => "text",
            Value::Ts(_) => "instant",
            Value::Json(_) => "JSON",
        }
    }
}

impl From<i64> for Value<'_> {
    fn from(v: i64) -> Self {
        Value::Int(v)
    }
}

impl From<u32> for Value<'_> {
    fn from(v: u32) -> Self {
        Value::Int(i64::from(v))
    }
}

impl From<i32> for Value<'_> {
    fn from(v: i32) -> Self {
        Value::Int(i64::from(v))
    }
}

impl From<u64> for Value<'_> {
    /// Saturates at `i64::MAX`, the largest INTEGER either dialect stores.
    fn from(v: u64) -> Self {
        Value::Int(i64::try_from(v).unwrap_or(i64::MAX))
    }
}

impl From<bool> for Value<'_> {
    /// A flag as the 0 or 1 both schemas store.
    fn from(v: bool) -> Self {
        Value::Int(i64::from(v))
    }
}

impl<'a> From<&'a str> for Value<'a> {
    fn from(v: &'a str) -> Self {
        Value::Text(v)
    }
}

impl<'a> From<&'a String> for Value<'a> {
    fn from(v: &'a String) -> Self {
        Value::Text(v)
    }
}

impl From<Timestamp> for Value<'_> {
    fn from(v: Timestamp) -> Self {
        Value::Ts(v)
    }
}

impl<'a, T: Into<Value<'a>>> From<Option<T>> for Value<'a> {
    fn from(v: Option<T>) -> Self {
        v.map_or(Value::Null, Into::into)
    }
}

/// JSON text as a parameter ([`Value::Json`]); `None` binds NULL.
pub(crate) fn json<'a>(text: impl Into<Option<&'a str>>) -> Value<'a> {
    text.into().map_or(Value::Null, Value::Json)
}

/// A column that did not decode: its name and what was wrong.
#[derive(Debug)]
pub(crate) struct ColumnError(pub(crate) String);

impl ColumnError {
    /// Names column `name` in `message`.
    pub(crate) fn new(name: &str, message: impl std::fmt::Display) -> ColumnError {
        ColumnError(format!("column {name}: {message}"))
    }
}

/// The result of reading one column.
pub(crate) type Col<T> = std::result::Result<T, ColumnError>;

/// A row's columns, read by position; a NULL reads as `None`. The index
/// is the column's position in the statement's column list; `name` is
/// the name to report when the value does not decode.
pub(crate) trait Fields {
    /// A TEXT column.
    fn text(&self, i: usize, name: &str) -> Col<Option<&str>>;
    /// An INTEGER (SQLite) or `bigint` (PostgreSQL) column.
    fn int(&self, i: usize, name: &str) -> Col<Option<i64>>;
    /// An instant column: TEXT on SQLite, `timestamptz` on PostgreSQL.
    fn ts(&self, i: usize, name: &str) -> Col<Option<Timestamp>>;
    /// A JSON column, as its text.
    fn json(&self, i: usize, name: &str) -> Col<Option<&str>>;
}

/// Maps one row to a record.
pub(crate) type Map<T> = fn(&dyn Fields) -> Col<T>;

/// A connection lent to one operation: it runs statements written once
/// and tells which dialect it speaks.
pub(crate) trait Sql {
    /// The dialect of this connection.
    fn dialect(&self) -> Dialect;

    /// Executes one statement, returning the number of rows it changed.
    fn execute(&mut self, sql: &str, params: &[Value<'_>], what: &'static str) -> Result<u64>;

    /// Runs a statement returning rows, handing each to `each` as it is
    /// read; a `Break` stops reading.
    fn query_rows(
        &mut self,
        sql: &str,
        params: &[Value<'_>],
        what: &'static str,
        each: &mut dyn FnMut(&dyn Fields) -> Result<ControlFlow<()>>,
    ) -> Result<()>;

    /// Wakes every listening daemon once the surrounding transaction
    /// commits (`pg_notify`); SQLite has no listeners and does nothing.
    fn notify(&mut self, payload: &str) -> Result<()>;
}

impl dyn Sql + '_ {
    /// Runs a statement returning rows of `table`, handing each decoded
    /// row to `each`; a `Break` stops reading.
    pub(crate) fn query_each<T>(
        &mut self,
        sql: &str,
        params: &[Value<'_>],
        (table, what): (&'static str, &'static str),
        map: Map<T>,
        mut each: impl FnMut(T) -> ControlFlow<()>,
    ) -> Result<()> {
        self.query_rows(sql, params, what, &mut |row| {
            Ok(each(decode(row, table, map)?))
        })
    }

    /// Runs a statement returning rows of `table`, decoded.
    pub(crate) fn query_vec<T>(
        &mut self,
        sql: &str,
        params: &[Value<'_>],
        what: (&'static str, &'static str),
        map: Map<T>,
    ) -> Result<Vec<T>> {
        let mut all = Vec::new();
        self.query_each(sql, params, what, map, |v| {
            all.push(v);
            ControlFlow::Continue(())
        })?;
        Ok(all)
    }

    /// Runs a statement returning at most one row of `table` (a `SELECT`
    /// or an `… RETURNING` write), decoded; later rows are not read.
    pub(crate) fn query_opt<T>(
        &mut self,
        sql: &str,
        params: &[Value<'_>],
        what: (&'static str, &'static str),
        map: Map<T>,
    ) -> Result<Option<T>> {
        let mut first = None;
        self.query_each(sql, params, what, map, |v| {
            first = Some(v);
            ControlFlow::Break(())
        })?;
        Ok(first)
    }

    /// Runs a statement returning one integer (a count, a sum), `0` when it
    /// returns no row or NULL.
    pub(crate) fn query_int(
        &mut self,
        sql: &str,
        params: &[Value<'_>],
        what: &'static str,
    ) -> Result<i64> {
        let mut out = 0;
        self.query_rows(sql, params, what, &mut |row| {
            out = row
                .int(0, "count")
                .map_err(|e| StoreError::Corrupt {
                    table: "",
                    id: String::new(),
                    reason: e.0,
                })?
                .unwrap_or(0);
            Ok(ControlFlow::Break(()))
        })?;
        Ok(out)
    }
}

/// Decodes one row of `table`, reporting a value that does not decode
/// (bad JSON, unknown status) as [`StoreError::Corrupt`] naming the row's
/// id: every column list starts with it.
pub(crate) fn decode<T>(row: &dyn Fields, table: &'static str, map: Map<T>) -> Result<T> {
    map(row).map_err(|e| StoreError::Corrupt {
        table,
        id: row
            .text(0, "id")
            .ok()
            .flatten()
            .unwrap_or_default()
            .to_owned(),
        reason: e.0,
    })
}

/// A backend, as the operations written once see it: it lends a
/// connection for a read or for a write transaction, and knows this
/// host's processes.
pub(crate) trait Db {
    /// Runs `f` on the connection, outside any transaction of its own.
    fn read<T>(&self, f: impl FnOnce(&mut dyn Sql) -> Result<T>) -> Result<T>;

    /// Runs `f` in a write transaction (a savepoint inside a batch),
    /// rolled back when it fails. SQLite takes the write lock up front
    /// (`BEGIN IMMEDIATE`); PostgreSQL relies on each operation's row
    /// locks and guarded writes.
    fn write<T>(&self, f: impl FnOnce(&mut dyn Sql) -> Result<T>) -> Result<T>;

    /// The probe the recovery and claim guards ask about this host's
    /// processes.
    fn liveness(&self) -> &dyn Liveness;

    /// This host's name, recorded as `claimed_host` with every claim.
    fn host(&self) -> Option<&str>;

    /// The labels this runner carries (issue 30, P1): `host:<host>` when
    /// the host is known, then those given to
    /// [`Store::with_labels`](crate::Store::with_labels). A claim refuses a
    /// loop placed on a label not among them.
    fn labels(&self) -> Vec<String> {
        let mut labels: Vec<String> = self
            .host()
            .map(loops_core::host_label)
            .into_iter()
            .collect();
        for label in self.extra_labels() {
            if !labels.contains(label) {
                labels.push(label.clone());
            }
        }
        labels
    }

    /// The labels given to [`Store::with_labels`](crate::Store::with_labels).
    fn extra_labels(&self) -> &[String];
}

/// Renders a statement written with SQLite's numbered placeholders (`?1`)
/// in PostgreSQL's (`$1`). A `?` not followed by a digit (PostgreSQL's
/// JSON operators) and anything inside a quoted string stays as it is.
pub(crate) fn dollar_placeholders(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut quoted = false;
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\'' {
            quoted = !quoted;
        }
        if c == '?' && !quoted && chars.peek().is_some_and(char::is_ascii_digit) {
            out.push('$');
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// One row of a [`Canned`] answer: its values by position.
    struct Cells<'r>(&'r [Value<'static>]);

    impl Cells<'_> {
        fn cell(&self, i: usize, name: &str) -> Col<Value<'static>> {
            self.0
                .get(i)
                .copied()
                .ok_or_else(|| ColumnError::new(name, "no such column"))
        }
    }

    fn mismatch<T>(v: Value<'_>, name: &str, want: &str) -> Col<T> {
        Err(ColumnError::new(
            name,
            format!("{} is not {want}", v.kind()),
        ))
    }

    impl Fields for Cells<'_> {
        fn text(&self, i: usize, name: &str) -> Col<Option<&str>> {
            match self.cell(i, name)? {
                Value::Null => Ok(None),
                Value::Text(s) => Ok(Some(s)),
                v => mismatch(v, name, "text"),
            }
        }

        fn int(&self, i: usize, name: &str) -> Col<Option<i64>> {
            match self.cell(i, name)? {
                Value::Null => Ok(None),
                Value::Int(n) => Ok(Some(n)),
                v => mismatch(v, name, "an integer"),
            }
        }

        fn ts(&self, i: usize, name: &str) -> Col<Option<Timestamp>> {
            match self.cell(i, name)? {
                Value::Null => Ok(None),
                Value::Ts(t) => Ok(Some(t)),
                v => mismatch(v, name, "an instant"),
            }
        }

        fn json(&self, i: usize, name: &str) -> Col<Option<&str>> {
            match self.cell(i, name)? {
                Value::Null => Ok(None),
                Value::Json(s) => Ok(Some(s)),
                v => mismatch(v, name, "JSON"),
            }
        }
    }

    /// A connection with no database behind it, for the unit tests of an
    /// operation's reads: `answer` gets each query's statement and
    /// parameters and returns its rows; a write fails the test. `read`
    /// counts the rows handed out.
    pub(crate) struct Canned<F> {
        dialect: Dialect,
        answer: F,
        pub(crate) read: usize,
    }

    impl<F> Canned<F>
    where
        F: FnMut(&str, &[Value<'_>]) -> Vec<Vec<Value<'static>>>,
    {
        /// A connection of `dialect` answering with `answer`.
        pub(crate) fn new(dialect: Dialect, answer: F) -> Canned<F> {
            Canned {
                dialect,
                answer,
                read: 0,
            }
        }
    }

    impl<F> Sql for Canned<F>
    where
        F: FnMut(&str, &[Value<'_>]) -> Vec<Vec<Value<'static>>>,
    {
        fn dialect(&self) -> Dialect {
            self.dialect
        }

        fn execute(&mut self, sql: &str, _: &[Value<'_>], _: &'static str) -> Result<u64> {
            panic!("unexpected write: {sql}")
        }

        fn query_rows(
            &mut self,
            sql: &str,
            params: &[Value<'_>],
            _: &'static str,
            each: &mut dyn FnMut(&dyn Fields) -> Result<ControlFlow<()>>,
        ) -> Result<()> {
            for row in (self.answer)(sql, params) {
                self.read += 1;
                if each(&Cells(&row))?.is_break() {
                    break;
                }
            }
            Ok(())
        }

        fn notify(&mut self, _: &str) -> Result<()> {
            Ok(())
        }
    }

    #[test]
    fn canned_rows_read_by_position_and_kind() {
        let mut c = Canned::new(Dialect::Postgres, |sql, params| {
            assert_eq!(sql, "SELECT n");
            assert_eq!(params, [Value::Int(1)]);
            vec![vec![Value::Int(7), Value::Null], vec![Value::Int(8)]]
        });
        let c: &mut dyn Sql = &mut c;
        assert_eq!(c.dialect(), Dialect::Postgres);
        assert_eq!(c.query_int("SELECT n", &[Value::Int(1)], "n").unwrap(), 7);
        let mut cells = Vec::new();
        c.query_rows("SELECT n", &[Value::Int(1)], "n", &mut |row| {
            let text = row.text(1, "t").map(|t| t.map(str::to_owned)).ok();
            cells.push((row.int(0, "n").unwrap(), text));
            Ok(ControlFlow::Continue(()))
        })
        .unwrap();
        assert_eq!(cells, [(Some(7), Some(None)), (Some(8), None)]);
    }

    #[test]
    fn placeholders_become_dollars_outside_strings() {
        assert_eq!(
            dollar_placeholders("SELECT a FROM t WHERE b = ?1 AND c = ?12 AND d ? 'k'"),
            "SELECT a FROM t WHERE b = $1 AND c = $12 AND d ? 'k'"
        );
        assert_eq!(
            dollar_placeholders("SELECT '?1', ?2 || 'it''s ?3'"),
            "SELECT '?1', $2 || 'it''s ?3'"
        );
    }

    #[test]
    fn values_convert_from_their_rust_types() {
        assert_eq!(Value::from(7_u32), Value::Int(7));
        assert_eq!(Value::from(u64::MAX), Value::Int(i64::MAX));
        assert_eq!(Value::from(true), Value::Int(1));
        assert_eq!(Value::from(None::<&str>), Value::Null);
        assert_eq!(Value::from(Some("a")), Value::Text("a"));
        assert_eq!(json(None), Value::Null);
        assert_eq!(json("{}"), Value::Json("{}"));
    }

    #[test]
    fn pick_chooses_by_dialect() {
        assert_eq!(Dialect::Sqlite.pick("a", "b"), "a");
        assert_eq!(Dialect::Postgres.pick("a", "b"), "b");
    }
}
