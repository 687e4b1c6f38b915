//! The PostgreSQL side of [`crate::lease`] and [`crate::members`]: daemon
//! membership in the `daemons` table (migration V7).
//!
//! Many daemons share one PostgreSQL database, so there is no single lease
//! to hold: each daemon registers its own row when it takes "the lease",
//! renews it with its heartbeats, and deletes it when it stops. Taking the
//! lease never waits for another daemon; one daemon per host and database
//! is the local pid file's job. What decides who runs a slot is the claim
//! of each run, not membership.

use loops_core::{DaemonLease, LeaseId, Timestamp};
use postgres::Row;

use crate::backend::{LeaseOps, MemberOps};
use crate::error::{Result, StoreError};
use crate::lease::{LeaseAcquire, LeaseHeartbeat, LeaseRelease, LeaseRequest};
use crate::members::DaemonMember;
use crate::postgres::rows::{self, Ts, ts};
use crate::postgres::{Postgres, count};
use crate::runs::offset_ms;

/// A `daemons` row in the order of `lease_columns!` (`id, pid, hostname,
/// heartbeat_at, expires_at, created_at, updated_at`), for
/// [`rows::lease_row`]: a daemon's lease was created when it registered
/// and last changed at its last heartbeat.
macro_rules! daemon_as_lease {
    () => {
        "id, pid, hostname, heartbeat_at, expires_at, started_at, heartbeat_at"
    };
}

/// How long a daemon's row stays after it expired, so `daemon status` can
/// still show a daemon that died; the next daemon to register deletes it.
const FORGET_AFTER_MS: i64 = 24 * 60 * 60 * 1000;

const TABLE: &str = "daemons";

impl LeaseOps for Postgres {
    fn acquire_daemon_lease(&self, req: &LeaseRequest, now: Timestamp) -> Result<LeaseAcquire> {
        self.acquire_daemon_lease_with(req, now, &|_: &DaemonLease| false)
    }

    /// Registers the daemon: inserts its row, or renews it when this id
    /// registered before, and always returns it acquired. Other daemons,
    /// live or not, do not stand in the way (`holder_is_gone` is never
    /// asked).
    fn acquire_daemon_lease_with(
        &self,
        req: &LeaseRequest,
        now: Timestamp,
        _holder_is_gone: &dyn Fn(&DaemonLease) -> bool,
    ) -> Result<LeaseAcquire> {
        let forget = now.checked_add_ms(-FORGET_AFTER_MS).unwrap_or(now);
        self.write_tx(|c| {
            c.execute(
                "DELETE FROM daemons WHERE expires_at < $1",
                &[&ts(forget)],
                "forgetting daemons that expired a day ago",
            )?;
            let lease = c.query_opt(
                concat!(
                    "INSERT INTO daemons (id, hostname, pid, version, started_at, heartbeat_at,
                            expires_at)
                     VALUES ($1, $2, $3, $4, $5, $5, $6)
                     ON CONFLICT (id) DO UPDATE
                     SET hostname = EXCLUDED.hostname, pid = EXCLUDED.pid,
                         version = EXCLUDED.version, heartbeat_at = EXCLUDED.heartbeat_at,
                         expires_at = EXCLUDED.expires_at
                     RETURNING ",
                    daemon_as_lease!()
                ),
                &[
                    &req.id.as_str(),
                    &req.hostname,
                    &i64::from(req.pid),
                    &env!("CARGO_PKG_VERSION"),
                    &ts(now),
                    &ts(now.add_ms(offset_ms(req.ttl_ms))),
                ],
                (TABLE, "registering the daemon"),
                rows::lease_row,
            )?;
            lease
                .map(LeaseAcquire::Acquired)
                .ok_or_else(|| StoreError::Vanished {
                    kind: "daemon lease",
                    op: "acquire",
                    id: req.id.to_string(),
                })
        })
    }

    /// Renews the daemon's own row; [`LeaseHeartbeat::Lost`] when it is
    /// gone or already expired at `now` (another host may have taken over
    /// its runs since).
    fn heartbeat_daemon_lease(
        &self,
        id: &LeaseId,
        ttl_ms: u64,
        now: Timestamp,
    ) -> Result<LeaseHeartbeat> {
        let renewed = self.with(|c| {
            c.query_opt(
                concat!(
                    "UPDATE daemons SET heartbeat_at = $2, expires_at = $3
                     WHERE id = $1 AND expires_at > $2
                     RETURNING ",
                    daemon_as_lease!()
                ),
                &[&id.as_str(), &ts(now), &ts(now.add_ms(offset_ms(ttl_ms)))],
                (TABLE, "renewing the daemon's registration"),
                rows::lease_row,
            )
        })?;
        if renewed.is_some() {
            // Best effort: a fold that fails leaves the deltas to the next.
            let _ = self.fold_status_counts();
        }
        Ok(renewed.map_or(LeaseHeartbeat::Lost, LeaseHeartbeat::Renewed))
    }

    fn release_daemon_lease(&self, id: &LeaseId) -> Result<LeaseRelease> {
        let n = self.with(|c| {
            c.execute(
                "DELETE FROM daemons WHERE id = $1",
                &[&id.as_str()],
                "deleting the daemon's registration",
            )
        })?;
        Ok(if n > 0 {
            LeaseRelease::Released
        } else {
            LeaseRelease::NotHeld
        })
    }

    /// The newest heartbeat of a daemon of this host (the name the store
    /// was opened with), else of any host, expired or not: the pid file
    /// and `daemon start`, `stop` and `status` compare it with this host's
    /// daemon, which another host's newer heartbeat must not hide.
    fn get_daemon_lease(&self) -> Result<Option<DaemonLease>> {
        self.with(|c| {
            c.query_opt(
                concat!(
                    "SELECT ",
                    daemon_as_lease!(),
                    " FROM daemons ORDER BY hostname = $1 DESC, heartbeat_at DESC, id LIMIT 1"
                ),
                &[&self.host],
                (TABLE, "reading the daemons"),
                rows::lease_row,
            )
        })
    }
}

/// The advisory lock of the fold of `status_counts`: one daemon at a time.
const FOLD_LOCK_KEY: i64 = 0x6c6f_6f70_7366_6f6c;

/// Folds the delta rows of `status_counts` into one row per status, when
/// no other daemon is folding: the rows visible now are deleted and their
/// sums inserted in the same transaction, while rows that other writers
/// append meanwhile are left for the next fold (see migration V6).
const FOLD_STATUS_COUNTS: &str = "WITH gone AS (DELETE FROM status_counts RETURNING tbl, status, n)
     INSERT INTO status_counts (tbl, status, n)
     SELECT tbl, status, SUM(n) FROM gone GROUP BY tbl, status HAVING SUM(n) <> 0";

impl Postgres {
    /// Folds `status_counts` (see [`FOLD_STATUS_COUNTS`]) unless another
    /// daemon is at it; true when this call folded.
    pub(crate) fn fold_status_counts(&self) -> Result<bool> {
        self.write_tx(|c| {
            let row = c.query_one(
                "SELECT pg_try_advisory_xact_lock($1)",
                &[&FOLD_LOCK_KEY],
                "taking the fold lock",
            )?;
            let mine: bool = row
                .try_get(0)
                .map_err(StoreError::db("taking the fold lock"))?;
            if mine {
                c.execute(FOLD_STATUS_COUNTS, &[], "folding the status counts")?;
            }
            Ok(mine)
        })
    }
}

impl MemberOps for Postgres {
    fn list_daemons(&self, now: Timestamp) -> Result<Vec<DaemonMember>> {
        let context = "listing the daemons";
        let found = self.with(|c| {
            c.query(
                "SELECT d.id, d.hostname, d.pid, d.version, d.started_at, d.heartbeat_at,
                        d.expires_at,
                        (SELECT COUNT(*) FROM loop_runs r WHERE r.status = 'running'
                           AND r.claimed_by = d.hostname || ':' || d.pid || ':' || d.id),
                        d.clock_skew_ms
                 FROM daemons d ORDER BY d.hostname, d.started_at, d.id",
                &[],
                context,
            )
        })?;
        found.iter().map(|row| member(row, now, context)).collect()
    }

    fn record_daemon_skew(&self, id: &LeaseId, skew_ms: i64) -> Result<()> {
        self.with(|c| {
            c.execute(
                "UPDATE daemons SET clock_skew_ms = $2 WHERE id = $1",
                &[&id.as_str(), &skew_ms],
                "recording the daemon's clock skew",
            )
        })
        .map(drop)
    }
}

/// One row of [`MemberOps::list_daemons`]'s query.
fn member(row: &Row, now: Timestamp, context: &'static str) -> Result<DaemonMember> {
    let id: String = row.try_get(0).map_err(StoreError::db(context))?;
    let corrupt = |reason: String| StoreError::Corrupt {
        table: TABLE,
        id: id.clone(),
        reason,
    };
    let at = |i: usize| -> Result<Timestamp> {
        let t: Ts = row.try_get(i).map_err(StoreError::db(context))?;
        Ok(t.0)
    };
    let pid: i64 = row.try_get(2).map_err(StoreError::db(context))?;
    let expires_at = at(6)?;
    Ok(DaemonMember {
        id: id.parse().map_err(|e| corrupt(format!("column id: {e}")))?,
        hostname: row.try_get(1).map_err(StoreError::db(context))?,
        pid: u32::try_from(pid).map_err(|e| corrupt(format!("column pid: {e}")))?,
        version: row.try_get(3).map_err(StoreError::db(context))?,
        started_at: at(4)?,
        heartbeat_at: at(5)?,
        expires_at,
        live: expires_at > now,
        running_runs: count(row, 7)?,
        clock_skew_ms: row.try_get(8).map_err(StoreError::db(context))?,
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use loops_core::{CommandTarget, NewLoop, Schedule, Target};

    use crate::{DatabaseUrl, Store};

    #[test]
    fn the_status_count_deltas_fold_into_one_row_per_status_and_count_the_same() {
        let Some(db) = crate::testing::fresh_database("postgres::lease::fold") else {
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
        assert!(pg.fold_status_counts().unwrap());
        assert_eq!(rows(&mut admin), 2, "one row per status");
        assert_eq!(counts(&store), (5, 3, 2));
        assert!(
            !store.recount_statuses().unwrap(),
            "the folded counts are right"
        );
    }
}
