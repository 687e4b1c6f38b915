//! [`LeaseOps`] written once for both backends.
//!
//! The two backends keep different leases. SQLite has one `daemon_lease`
//! row: taking it is refused while another daemon holds it live, and the
//! taker replaces every row with its own. PostgreSQL has one row per
//! daemon in `daemons` (migration V7): many daemons share the database, so
//! taking "the lease" registers the daemon and never waits for another;
//! one daemon per host and database is the local pid file's job, and what
//! decides who runs a slot is the claim of each run, not membership. A
//! PostgreSQL daemon's lease row is its `daemons` row read as
//! [`daemon_as_lease!`]. Only the acquire differs in its steps
//! ([`take_the_lease`], [`register`]); the rest differs in its text.

use loops_core::{DaemonLease, LeaseId, ProcessRef, Timestamp};

use crate::backend::LeaseOps;
use crate::columns::{self, lease_columns};
use crate::error::{Result, StoreError};
use crate::lease::{LeaseAcquire, LeaseHeartbeat, LeaseRelease, LeaseRequest};
use crate::runs::offset_ms;
use crate::sql::{Db, Dialect, Sql};

/// A `daemons` row in the order of `lease_columns!` (`id, pid, hostname,
/// heartbeat_at, expires_at, created_at, updated_at`), for
/// [`columns::lease_row`]: a daemon's lease was created when it registered
/// and last changed at its last heartbeat.
macro_rules! daemon_as_lease {
    () => {
        "id, pid, hostname, heartbeat_at, expires_at, started_at, heartbeat_at"
    };
}

/// How long a daemon's row stays after it expired, so `daemon status` can
/// still show a daemon that died; the next daemon to register deletes it
/// (PostgreSQL).
const FORGET_AFTER_MS: i64 = 24 * 60 * 60 * 1000;

/// The advisory lock of the fold of `status_counts`: one daemon at a time.
const FOLD_LOCK_KEY: i64 = 0x6c6f_6f70_7366_6f6c;

/// Folds the delta rows of `status_counts` into one row per status, when
/// no other daemon is folding: the rows visible now are deleted and their
/// sums inserted in the same transaction, while rows that other writers
/// append meanwhile are left for the next fold (see migration V6).
pub(crate) const FOLD_STATUS_COUNTS: &str =
    "WITH gone AS (DELETE FROM status_counts RETURNING tbl, status, n)
     INSERT INTO status_counts (tbl, status, n)
     SELECT tbl, status, SUM(n) FROM gone GROUP BY tbl, status HAVING SUM(n) <> 0";

/// Folds `status_counts` (see [`FOLD_STATUS_COUNTS`]) inside the caller's
/// write transaction unless another daemon is at it; true when this call
/// folded. PostgreSQL only: SQLite keeps no deltas.
pub(crate) fn fold_status_counts(c: &mut dyn Sql) -> Result<bool> {
    let mine = c.query_int(
        "SELECT (CASE WHEN pg_try_advisory_xact_lock(?1) THEN 1 ELSE 0 END)::bigint",
        &[FOLD_LOCK_KEY.into()],
        "taking the fold lock",
    )? == 1;
    if mine {
        c.execute(FOLD_STATUS_COUNTS, &[], "folding the status counts")?;
    }
    Ok(mine)
}

/// SQLite: takes the one lease row unless a live holder other than
/// `req.id` blocks it (a holder on this host that `holder_is_gone` does
/// not block), replacing every row with the caller's. `Err` is the holder.
fn take_the_lease(
    c: &mut dyn Sql,
    req: &LeaseRequest,
    now: Timestamp,
    labels: &str,
    holder_is_gone: &dyn Fn(&DaemonLease) -> bool,
) -> Result<std::result::Result<Option<DaemonLease>, DaemonLease>> {
    let holders = c.query_vec(
        concat!(
            "SELECT ",
            lease_columns!(),
            " FROM daemon_lease WHERE id <> ?1 AND expires_at > ?2
             ORDER BY expires_at DESC"
        ),
        &[req.id.as_str().into(), now.into()],
        ("daemon_lease", "reading the daemon lease"),
        columns::lease_row,
    )?;
    let blocking = holders
        .into_iter()
        .find(|h| !(h.hostname == req.hostname && holder_is_gone(h)));
    if let Some(holder) = blocking {
        return Ok(Err(holder));
    }
    c.execute("DELETE FROM daemon_lease", &[], "clearing the daemon lease")?;
    let lease = c.query_opt(
        concat!(
            "INSERT INTO daemon_lease (id, pid, hostname, heartbeat_at, expires_at, created_at,
               updated_at, labels)
             VALUES (?1, ?2, ?3, ?4, ?5, ?4, ?4, ?6)
             RETURNING ",
            lease_columns!()
        ),
        &[
            req.id.as_str().into(),
            req.pid.into(),
            req.hostname.as_str().into(),
            now.into(),
            now.add_ms(offset_ms(req.ttl_ms)).into(),
            crate::sql::json(labels),
        ],
        ("daemon_lease", "acquiring the daemon lease"),
        columns::lease_row,
    )?;
    Ok(Ok(lease))
}

/// PostgreSQL: registers the daemon (inserts its row, or renews it when
/// this id registered before, recording this loops' version), after
/// forgetting the daemons expired for over a day. Other daemons, live or
/// not, do not stand in the way. Its `labels` (a JSON array) are written
/// with the row, and kept as they are while it lives (P2).
fn register(
    c: &mut dyn Sql,
    req: &LeaseRequest,
    now: Timestamp,
    labels: &str,
) -> Result<Option<DaemonLease>> {
    let forget = now.checked_add_ms(-FORGET_AFTER_MS).unwrap_or(now);
    c.execute(
        "DELETE FROM daemons WHERE expires_at < ?1",
        &[forget.into()],
        "forgetting daemons that expired a day ago",
    )?;
    c.query_opt(
        concat!(
            "INSERT INTO daemons (id, hostname, pid, version, started_at, heartbeat_at,
                    expires_at, labels)
             VALUES (?1, ?2, ?3, ?4, ?5, ?5, ?6, ?7)
             ON CONFLICT (id) DO UPDATE
             SET hostname = EXCLUDED.hostname, pid = EXCLUDED.pid,
                 version = EXCLUDED.version, heartbeat_at = EXCLUDED.heartbeat_at,
                 expires_at = EXCLUDED.expires_at, labels = EXCLUDED.labels
             RETURNING ",
            daemon_as_lease!()
        ),
        &[
            req.id.as_str().into(),
            req.hostname.as_str().into(),
            req.pid.into(),
            env!("CARGO_PKG_VERSION").into(),
            now.into(),
            now.add_ms(offset_ms(req.ttl_ms)).into(),
            crate::sql::json(labels),
        ],
        ("daemons", "registering the daemon"),
        columns::lease_row,
    )
}

/// Renews the caller's lease row. On PostgreSQL a row already expired at
/// `now` is lost too: another host may have taken over its runs since.
const HEARTBEAT: (&str, &str) = (
    concat!(
        "UPDATE daemon_lease SET heartbeat_at = ?2, expires_at = ?3, updated_at = ?2
         WHERE id = ?1 RETURNING ",
        lease_columns!()
    ),
    concat!(
        "UPDATE daemons SET heartbeat_at = ?2, expires_at = ?3
         WHERE id = ?1 AND expires_at > ?2
         RETURNING ",
        daemon_as_lease!()
    ),
);

impl<D: Db> LeaseOps for D {
    fn acquire_daemon_lease(&self, req: &LeaseRequest, now: Timestamp) -> Result<LeaseAcquire> {
        // PostgreSQL never asks.
        self.acquire_daemon_lease_with(req, now, &|h: &DaemonLease| {
            !self.liveness().is_alive(ProcessRef::pid(h.pid))
        })
    }

    fn acquire_daemon_lease_with(
        &self,
        req: &LeaseRequest,
        now: Timestamp,
        holder_is_gone: &dyn Fn(&DaemonLease) -> bool,
    ) -> Result<LeaseAcquire> {
        // Issue 30, P1/P2: the labels this store claims with, which are
        // the daemon's (`daemon run --label`), beside `host:<host>`.
        let labels = serde_json::to_string(&self.labels())
            .map_err(|e| StoreError::Encode(format!("the daemon's labels: {e}")))?;
        self.write(|c| {
            let lease = match c.dialect() {
                Dialect::Sqlite => match take_the_lease(c, req, now, &labels, holder_is_gone)? {
                    Ok(lease) => lease,
                    Err(holder) => return Ok(LeaseAcquire::Held(holder)),
                },
                Dialect::Postgres => register(c, req, now, &labels)?,
            };
            lease
                .map(LeaseAcquire::Acquired)
                .ok_or_else(|| StoreError::Vanished {
                    kind: "daemon lease",
                    op: "acquire",
                    id: req.id.to_string(),
                })
        })
    }

    fn heartbeat_daemon_lease(
        &self,
        id: &LeaseId,
        ttl_ms: u64,
        now: Timestamp,
    ) -> Result<LeaseHeartbeat> {
        let (renewed, dialect) = self.read(|c| {
            let renewed = c.query_opt(
                c.dialect().pick(HEARTBEAT.0, HEARTBEAT.1),
                &[
                    id.as_str().into(),
                    now.into(),
                    now.add_ms(offset_ms(ttl_ms)).into(),
                ],
                ("daemon_lease", "renewing the daemon lease"),
                columns::lease_row,
            )?;
            Ok((renewed, c.dialect()))
        })?;
        if renewed.is_some() && dialect == Dialect::Postgres {
            // Best effort: a fold that fails leaves the deltas to the next.
            let _ = self.write(fold_status_counts);
        }
        Ok(renewed.map_or(LeaseHeartbeat::Lost, LeaseHeartbeat::Renewed))
    }

    fn release_daemon_lease(&self, id: &LeaseId) -> Result<LeaseRelease> {
        let n = self.read(|c| {
            c.execute(
                c.dialect().pick(
                    "DELETE FROM daemon_lease WHERE id = ?1",
                    "DELETE FROM daemons WHERE id = ?1",
                ),
                &[id.as_str().into()],
                "releasing the daemon lease",
            )
        })?;
        Ok(if n > 0 {
            LeaseRelease::Released
        } else {
            LeaseRelease::NotHeld
        })
    }

    /// SQLite: the row with the latest expiry. PostgreSQL: the newest
    /// heartbeat of a daemon of this host (the name the store was opened
    /// with), else of any host, expired or not: the pid file and `daemon
    /// start`, `stop` and `status` compare it with this host's daemon,
    /// which another host's newer heartbeat must not hide.
    fn get_daemon_lease(&self) -> Result<Option<DaemonLease>> {
        let what = ("daemon_lease", "reading the daemon lease");
        self.read(|c| match c.dialect() {
            Dialect::Sqlite => c.query_opt(
                concat!(
                    "SELECT ",
                    lease_columns!(),
                    " FROM daemon_lease ORDER BY expires_at DESC LIMIT 1"
                ),
                &[],
                what,
                columns::lease_row,
            ),
            Dialect::Postgres => c.query_opt(
                concat!(
                    "SELECT ",
                    daemon_as_lease!(),
                    " FROM daemons ORDER BY hostname = ?1 DESC, heartbeat_at DESC, id LIMIT 1"
                ),
                &[self.host().into()],
                what,
                columns::lease_row,
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use loops_core::{CommandTarget, NewLoop, Schedule, Target};

    use super::fold_status_counts;
    use crate::sql::Db;
    use crate::{DatabaseUrl, Store};

    #[test]
    fn the_status_count_deltas_fold_into_one_row_per_status_and_count_the_same() {
        let Some(db) = crate::testing::fresh_database("lease::ops::fold") else {
            return;
        };
        let url = DatabaseUrl::parse(db.url()).unwrap();
        let store = Store::open_postgres(&url, "test", "host-a", Arc::new(|_| false)).unwrap();
        let now: loops_core::Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let target = Target::Command(CommandTarget::new("true"));
        for i in 0..5 {
            let lp = store
                .create_loop(
                    &NewLoop::new(format!("l{i}"), Schedule::Once { at: now }, target.clone()),
                    now,
                )
                .unwrap();
            if i % 2 == 0 {
                store.pause_loop(&lp.id, now).unwrap();
            }
        }
        let counts = |s: &Store| {
            (
                s.count_loops(None).unwrap(),
                s.count_loops(Some(loops_core::LoopStatus::Paused)).unwrap(),
                s.count_loops(Some(loops_core::LoopStatus::Active)).unwrap(),
            )
        };
        assert_eq!(counts(&store), (5, 3, 2));
        let mut admin = ::postgres::Client::connect(db.url(), ::postgres::NoTls).unwrap();
        let rows = |c: &mut ::postgres::Client| -> i64 {
            c.query_one("SELECT COUNT(*) FROM status_counts", &[])
                .unwrap()
                .get(0)
        };
        // Five creates and three pauses: one delta row each, two per pause.
        assert_eq!(rows(&mut admin), 11);
        let pg = store.postgres_backend().unwrap();
        assert!(pg.write(fold_status_counts).unwrap());
        assert_eq!(rows(&mut admin), 2, "one row per status");
        assert_eq!(counts(&store), (5, 3, 2));
        assert!(
            !store.recount_statuses().unwrap(),
            "the folded counts are right"
        );
    }
}
