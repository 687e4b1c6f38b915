//! The PostgreSQL backend: many hosts, one database (issue 15).
//!
//! [`Postgres`] holds one connection (reopened after it is lost, with
//! backoff), a cache of prepared statements, and the transaction state the
//! store's [`batch`](crate::Store::batch) and
//! [`transaction`](crate::Store::transaction) wrappers drive. Each table
//! module implements one operation trait of [`crate::backend`], with the
//! same contract as SQLite: every operation is one guarded statement or
//! one short transaction, and no transaction stays open while a job runs.
//!
//! Where SQLite serializes writers on one lock, PostgreSQL serializes the
//! writers of one loop on its row: an operation that decides from a loop's
//! state (a claim, an advance) first reads the loop `FOR UPDATE`. Every
//! guard is also in the `WHERE` clause of its write, which PostgreSQL
//! re-checks against the newest row version after waiting on a lock, so a
//! write that lost a race changes nothing. A unique violation never aborts
//! a larger transaction: inserts that may conflict use `ON CONFLICT`.

mod connect;
mod daemon;
mod gc;
pub(crate) mod listen;
mod open;
mod passfile;
#[cfg(test)]
mod plans;
pub(crate) mod rows;
mod runs;
mod sql;
mod tls;

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::Arc;

use loops_core::Liveness;
use postgres::types::ToSql;
use postgres::{Client, Row, Statement};

use self::connect::Connector;
pub use self::connect::{DatabaseUrl, mask_database_url};
pub use self::passfile::{MovedPassword, move_password};
use crate::backend::Transactions;
use crate::error::{DbError, OpenError, Result, StoreError};

/// Query parameters.
pub(crate) type Params<'a> = &'a [&'a (dyn ToSql + Sync)];

/// The PostgreSQL backend: a connection, its prepared statements, and the
/// liveness probe the recovery and claim guards ask about this host's
/// processes.
pub(crate) struct Postgres {
    url: DatabaseUrl,
    connector: Connector,
    client: RefCell<Option<Client>>,
    statements: RefCell<HashMap<String, Statement>>,
    /// A transaction (`BEGIN`) is open on the connection.
    open_tx: Cell<bool>,
    /// Inside a [`Store::transaction`](crate::Store::transaction):
    /// operations run without savepoints.
    whole: Cell<bool>,
    pub(crate) liveness: Arc<dyn Liveness>,
    /// This host's name, the first part of the runner ids of its daemons
    /// (`host:pid:suffix`): only a run claimed on this host can be checked
    /// with `liveness`; another host's run is taken over only after its
    /// lease and [`CROSS_HOST_GRACE_MS`] have passed.
    pub(crate) host: String,
    /// The labels this runner carries beside `host:<host>` (issue 30,
    /// [`Store::with_labels`](crate::Store::with_labels)).
    pub(crate) labels: Vec<String>,
}

/// How long after a run's lease expired another host may take it over:
/// its daemon may be stalled rather than dead, and the grace lets it renew
/// or notice the loss first (issue 15).
pub(crate) const CROSS_HOST_GRACE_MS: i64 = 30_000;

/// A connection lent to one operation, with the statement cache.
pub(crate) struct Conn<'a> {
    client: &'a mut Client,
    statements: &'a RefCell<HashMap<String, Statement>>,
}

impl Postgres {
    /// Connects to `url` as `role` (`cli`, `daemon`, `runner`: part of
    /// `application_name`), migrating the database first when needed.
    pub(crate) fn open(
        url: &DatabaseUrl,
        role: &str,
        host: &str,
        liveness: Arc<dyn Liveness>,
    ) -> Result<Postgres, OpenError> {
        let connector = Connector::new(url, role)?;
        let mut client = connector.connect()?;
        open::migrate(&mut client, url)?;
        Ok(Postgres {
            url: url.clone(),
            connector,
            client: RefCell::new(Some(client)),
            statements: RefCell::default(),
            open_tx: Cell::new(false),
            whole: Cell::new(false),
            liveness,
            host: host.to_owned(),
            labels: Vec::new(),
        })
    }

    /// The database's URL with its password masked.
    pub(crate) fn shown(&self) -> &str {
        self.connector.shown()
    }

    /// Starts a thread listening for wake-ups on a connection of its own
    /// (see [`listen::listen`]), named `loops:<role>`.
    pub(crate) fn listen(
        &self,
        role: &str,
        on_wake: Box<dyn Fn() + Send>,
        on_error: Box<dyn Fn(&str) + Send>,
    ) -> Result<listen::Listener> {
        let listener = listen::listen(
            Connector::new(&self.url, role)?.for_listener(),
            on_wake,
            on_error,
        )?;
        Ok(listener)
    }

    /// The database's URL.
    pub(crate) fn url(&self) -> &DatabaseUrl {
        &self.url
    }

    /// Runs `f` on the connection, reconnecting first when it was lost.
    /// A connection lost inside `f` is dropped (the next call reconnects)
    /// and its error returned; an open transaction is gone with it.
    pub(crate) fn with<T>(&self, f: impl FnOnce(&mut Conn<'_>) -> Result<T>) -> Result<T> {
        let mut slot = self.client.borrow_mut();
        if slot.as_ref().is_none_or(Client::is_closed) {
            if self.open_tx.get() {
                // The transaction died with its connection.
                *slot = None;
                return Err(StoreError::ConnectionLost);
            }
            self.statements.borrow_mut().clear();
            *slot = Some(self.connector.reconnect()?);
        }
        let Some(client) = slot.as_mut() else {
            unreachable!("connected above");
        };
        let mut conn = Conn {
            client,
            statements: &self.statements,
        };
        let out = f(&mut conn);
        if let Err(e) = &out
            && e.db_error().is_some_and(DbError::is_connection_lost)
        {
            *slot = None;
            self.statements.borrow_mut().clear();
            self.open_tx.set(false);
        }
        out
    }

    /// Runs `f` inside `BEGIN … COMMIT`, rolling back on error. Inside a
    /// [`Store::batch`](crate::Store::batch), `f` runs in a savepoint;
    /// inside a [`Store::transaction`](crate::Store::transaction) it runs
    /// as it is.
    pub(crate) fn write_tx<T>(&self, f: impl FnOnce(&mut Conn<'_>) -> Result<T>) -> Result<T> {
        if self.open_tx.get() {
            if self.whole.get() {
                return self.with(f);
            }
            return self.with(|c| {
                c.batch("SAVEPOINT write_tx", "starting a savepoint")?;
                match f(c) {
                    Ok(v) => {
                        c.batch("RELEASE write_tx", "releasing a savepoint")?;
                        Ok(v)
                    }
                    Err(e) => {
                        let _ = c.batch("ROLLBACK TO write_tx; RELEASE write_tx", "undoing");
                        Err(e)
                    }
                }
            });
        }
        self.with(|c| {
            c.batch("BEGIN", "starting a write transaction")?;
            let out = f(c).and_then(|v| {
                c.batch("COMMIT", "committing")?;
                Ok(v)
            });
            if out.is_err() {
                let _ = c.batch("ROLLBACK", "rolling back");
            }
            out
        })
    }

    /// Reads the database's clock (`clock_timestamp()`).
    pub(crate) fn database_now(&self) -> Result<loops_core::Timestamp> {
        self.with(|c| {
            let row = c.query_one(
                "SELECT clock_timestamp()",
                &[],
                "reading the database clock",
            )?;
            let t: rows::Ts = row
                .try_get(0)
                .map_err(StoreError::db("reading the database clock"))?;
            Ok(t.0)
        })
    }
}

impl Transactions for Postgres {
    fn in_transaction(&self) -> bool {
        self.open_tx.get()
    }

    fn begin(&self) -> Result<()> {
        self.with(|c| c.batch("BEGIN", "starting a write transaction"))?;
        self.open_tx.set(true);
        Ok(())
    }

    fn commit(&self) -> Result<()> {
        let out = self.with(|c| c.batch("COMMIT", "committing"));
        self.open_tx.set(false);
        out
    }

    fn rollback(&self) {
        let _ = self.with(|c| c.batch("ROLLBACK", "rolling back"));
        self.open_tx.set(false);
    }

    fn set_whole(&self, whole: bool) {
        self.whole.set(whole);
    }
}

impl Conn<'_> {
    /// Runs statements without parameters or results (`BEGIN`, DDL).
    pub(crate) fn batch(&mut self, sql: &str, context: &'static str) -> Result<()> {
        self.client
            .batch_execute(sql)
            .map_err(StoreError::db(context))
    }

    /// The prepared statement for `sql`, prepared once per connection.
    fn prepare(&mut self, sql: &str, context: &'static str) -> Result<Statement> {
        if let Some(stmt) = self.statements.borrow().get(sql) {
            return Ok(stmt.clone());
        }
        let stmt = self.client.prepare(sql).map_err(StoreError::db(context))?;
        self.statements
            .borrow_mut()
            .insert(sql.to_owned(), stmt.clone());
        Ok(stmt)
    }

    /// The prepared statement for `sql`, written with SQLite's `?1`
    /// placeholders ([`crate::sql`]): rendered with `$1` and prepared once
    /// per connection, cached under the text as written.
    fn prepare_neutral(&mut self, sql: &str, context: &'static str) -> Result<Statement> {
        if let Some(stmt) = self.statements.borrow().get(sql) {
            return Ok(stmt.clone());
        }
        let stmt = self
            .client
            .prepare(&crate::sql::dollar_placeholders(sql))
            .map_err(StoreError::db(context))?;
        self.statements
            .borrow_mut()
            .insert(sql.to_owned(), stmt.clone());
        Ok(stmt)
    }

    /// Executes one statement, returning the number of rows it changed.
    pub(crate) fn execute(
        &mut self,
        sql: &str,
        params: Params<'_>,
        context: &'static str,
    ) -> Result<u64> {
        let stmt = self.prepare(sql, context)?;
        self.client
            .execute(&stmt, params)
            .map_err(StoreError::db(context))
    }

    /// Runs a statement returning rows, undecoded.
    pub(crate) fn query(
        &mut self,
        sql: &str,
        params: Params<'_>,
        context: &'static str,
    ) -> Result<Vec<Row>> {
        let stmt = self.prepare(sql, context)?;
        self.client
            .query(&stmt, params)
            .map_err(StoreError::db(context))
    }

    /// Runs a statement returning exactly one row, undecoded.
    pub(crate) fn query_one(
        &mut self,
        sql: &str,
        params: Params<'_>,
        context: &'static str,
    ) -> Result<Row> {
        let stmt = self.prepare(sql, context)?;
        self.client
            .query_one(&stmt, params)
            .map_err(StoreError::db(context))
    }

    /// Wakes every listening daemon (`pg_notify`), delivered when the
    /// surrounding transaction commits, or at once outside one.
    pub(crate) fn notify(&mut self, payload: &str) -> Result<()> {
        self.query(
            "SELECT pg_notify('loops_wake', $1)",
            &[&payload],
            "waking the daemons",
        )
        .map(drop)
    }
}

/// A row count or bigint column as `u64`.
pub(crate) fn count(row: &Row, i: usize) -> Result<u64> {
    let n: i64 = row.try_get(i).map_err(StoreError::db("reading a count"))?;
    Ok(u64::try_from(n).unwrap_or(0))
}
