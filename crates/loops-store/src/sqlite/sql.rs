//! SQLite under the seam of [`crate::sql`]: rows as [`Fields`], neutral
//! values bound as SQLite stores them, the connection as [`Sql`] and the
//! backend as [`Db`].

use std::ops::ControlFlow;

use loops_core::{Liveness, Timestamp};
use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{Connection, Row, ToSql};

use crate::error::{Result, StoreError};
use crate::sql::{Col, ColumnError, Db, Dialect, Fields, Sql, Value};
use crate::sqlite::Sqlite;

impl ToSql for Value<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match *self {
            Value::Null => ToSqlOutput::Borrowed(ValueRef::Null),
            Value::Int(v) => ToSqlOutput::Borrowed(ValueRef::Integer(v)),
            Value::Text(s) | Value::Json(s) => ToSqlOutput::Borrowed(ValueRef::Text(s.as_bytes())),
            Value::Ts(t) => ToSqlOutput::from(t.to_string()),
        })
    }
}

impl Fields for Row<'_> {
    fn text(&self, i: usize, name: &str) -> Col<Option<&str>> {
        match self.get_ref(i).map_err(|e| ColumnError::new(name, e))? {
            ValueRef::Null => Ok(None),
            other => other
                .as_str()
                .map(Some)
                .map_err(|e| ColumnError::new(name, e)),
        }
    }

    fn int(&self, i: usize, name: &str) -> Col<Option<i64>> {
        match self.get_ref(i).map_err(|e| ColumnError::new(name, e))? {
            ValueRef::Null => Ok(None),
            other => other
                .as_i64()
                .map(Some)
                .map_err(|e| ColumnError::new(name, e)),
        }
    }

    fn ts(&self, i: usize, name: &str) -> Col<Option<Timestamp>> {
        self.text(i, name)?
            .map(|s| s.parse().map_err(|e| ColumnError::new(name, e)))
            .transpose()
    }

    fn json(&self, i: usize, name: &str) -> Col<Option<&str>> {
        self.text(i, name)
    }
}

/// A SQLite connection lent to one operation.
pub(crate) struct Lent<'c>(pub(crate) &'c Connection);

impl Sql for Lent<'_> {
    fn dialect(&self) -> Dialect {
        Dialect::Sqlite
    }

    fn execute(&mut self, sql: &str, params: &[Value<'_>], what: &'static str) -> Result<u64> {
        // Cached: `Connection::execute` parses its SQL on every call, and
        // the hot writes run thousands of times per process.
        let mut stmt = self.0.prepare_cached(sql).map_err(StoreError::db(what))?;
        let changed = stmt
            .execute(rusqlite::params_from_iter(params))
            .map_err(StoreError::db(what))?;
        Ok(u64::try_from(changed).unwrap_or(u64::MAX))
    }

    fn query_rows(
        &mut self,
        sql: &str,
        params: &[Value<'_>],
        what: &'static str,
        each: &mut dyn FnMut(&dyn Fields) -> Result<ControlFlow<()>>,
    ) -> Result<()> {
        let mut stmt = self.0.prepare_cached(sql).map_err(StoreError::db(what))?;
        let mut rows = stmt
            .query(rusqlite::params_from_iter(params))
            .map_err(StoreError::db(what))?;
        while let Some(row) = rows.next().map_err(StoreError::db(what))? {
            if each(row)?.is_break() {
                break;
            }
        }
        Ok(())
    }

    fn notify(&mut self, _payload: &str) -> Result<()> {
        Ok(())
    }
}

impl Db for Sqlite {
    fn read<T>(&self, f: impl FnOnce(&mut dyn Sql) -> Result<T>) -> Result<T> {
        f(&mut Lent(&self.conn))
    }

    fn write<T>(&self, f: impl FnOnce(&mut dyn Sql) -> Result<T>) -> Result<T> {
        self.write_tx(|conn| f(&mut Lent(conn)))
    }

    fn liveness(&self) -> &dyn Liveness {
        &*self.liveness
    }

    fn host(&self) -> Option<&str> {
        self.host.as_deref()
    }

    fn extra_labels(&self) -> &[String] {
        &self.labels
    }
}
