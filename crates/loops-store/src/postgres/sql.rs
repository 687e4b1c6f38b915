//! PostgreSQL under the seam of [`crate::sql`]: rows as [`Fields`],
//! neutral values bound by the type the server inferred, the connection as
//! [`Sql`] (rendering `?1` placeholders as `$1` once per statement) and
//! the backend as [`Db`].

use std::error::Error as StdError;
use std::ops::ControlFlow;

use bytes::BytesMut;
use loops_core::{Liveness, Timestamp};
use postgres::Row;
use postgres::types::{IsNull, ToSql, Type, to_sql_checked};

use crate::error::{Result, StoreError};
use crate::postgres::rows::{Json, Ts};
use crate::postgres::{Conn, Postgres};
use crate::sql::{Col, ColumnError, Db, Dialect, Fields, Sql, Value};

type BoxError = Box<dyn StdError + Sync + Send>;

impl ToSql for Value<'_> {
    fn to_sql(&self, ty: &Type, out: &mut BytesMut) -> std::result::Result<IsNull, BoxError> {
        match *self {
            Value::Null => Ok(IsNull::Yes),
            Value::Int(v) => match *ty {
                Type::INT8 => v.to_sql(ty, out),
                Type::INT4 => i32::try_from(v)?.to_sql(ty, out),
                Type::INT2 => i16::try_from(v)?.to_sql(ty, out),
                _ => Err(format!("an integer bound to a {ty} parameter").into()),
            },
            Value::Text(s) if <&str as ToSql>::accepts(ty) => s.to_sql(ty, out),
            Value::Text(s) | Value::Json(s) if Json::accepts(ty) => Json(s).to_sql(ty, out),
            Value::Json(s) if <&str as ToSql>::accepts(ty) => s.to_sql(ty, out),
            Value::Ts(t) if Ts::accepts(ty) => Ts(t).to_sql(ty, out),
            // The kind only: a value (a target's env, a hook) may hold a
            // secret, and this message reaches errors and logs.
            _ => Err(format!("a {} bound to a {ty} parameter", self.kind()).into()),
        }
    }

    fn accepts(_ty: &Type) -> bool {
        true
    }

    to_sql_checked!();
}

fn get<'a, T: postgres::types::FromSql<'a>>(row: &'a Row, i: usize, name: &str) -> Col<T> {
    row.try_get(i).map_err(|e| ColumnError::new(name, e))
}

impl Fields for Row {
    fn text(&self, i: usize, name: &str) -> Col<Option<&str>> {
        get(self, i, name)
    }

    fn int(&self, i: usize, name: &str) -> Col<Option<i64>> {
        get(self, i, name)
    }

    fn ts(&self, i: usize, name: &str) -> Col<Option<Timestamp>> {
        get::<Option<Ts>>(self, i, name).map(|t| t.map(|t| t.0))
    }

    fn json(&self, i: usize, name: &str) -> Col<Option<&str>> {
        get::<Option<Json<'_>>>(self, i, name).map(|j| j.map(|j| j.0))
    }
}

/// The parameters as the driver takes them.
fn bound<'a>(params: &'a [Value<'a>]) -> Vec<&'a (dyn ToSql + Sync)> {
    params.iter().map(|v| v as &(dyn ToSql + Sync)).collect()
}

impl Sql for Conn<'_> {
    fn dialect(&self) -> Dialect {
        Dialect::Postgres
    }

    fn execute(&mut self, sql: &str, params: &[Value<'_>], what: &'static str) -> Result<u64> {
        let stmt = self.prepare_neutral(sql, what)?;
        self.client
            .execute(&stmt, &bound(params))
            .map_err(StoreError::db(what))
    }

    fn query_rows(
        &mut self,
        sql: &str,
        params: &[Value<'_>],
        what: &'static str,
        each: &mut dyn FnMut(&dyn Fields) -> Result<ControlFlow<()>>,
    ) -> Result<()> {
        use postgres::fallible_iterator::FallibleIterator;
        let stmt = self.prepare_neutral(sql, what)?;
        let mut rows = self
            .client
            .query_raw(&stmt, params.iter())
            .map_err(StoreError::db(what))?;
        while let Some(row) = rows.next().map_err(StoreError::db(what))? {
            if each(&row)?.is_break() {
                break;
            }
        }
        Ok(())
    }

    fn notify(&mut self, payload: &str) -> Result<()> {
        Conn::notify(self, payload)
    }
}

impl Db for Postgres {
    fn read<T>(&self, f: impl FnOnce(&mut dyn Sql) -> Result<T>) -> Result<T> {
        self.with(|c| f(c))
    }

    fn write<T>(&self, f: impl FnOnce(&mut dyn Sql) -> Result<T>) -> Result<T> {
        self.write_tx(|c| f(c))
    }

    fn liveness(&self) -> &dyn Liveness {
        &*self.liveness
    }

    fn host(&self) -> Option<&str> {
        Some(&self.host)
    }

    fn extra_labels(&self) -> &[String] {
        &self.labels
    }
}
