//! The SQLite side of [`crate::lease`].

use loops_core::{DaemonLease, LeaseId, ProcessRef, Timestamp};
use rusqlite::params;

use crate::backend::{LeaseOps, MemberOps};
use crate::error::{Result, StoreError};
use crate::lease::{LeaseAcquire, LeaseHeartbeat, LeaseRelease, LeaseRequest};
use crate::members::DaemonMember;
use crate::runs::offset_ms;
use crate::sqlite::Sqlite;
use crate::sqlite::rows::{self, lease_columns, ts};

const CONTEXT: (&str, &str) = ("daemon_lease", "reading the daemon lease");

impl LeaseOps for Sqlite {
    fn acquire_daemon_lease(&self, req: &LeaseRequest, now: Timestamp) -> Result<LeaseAcquire> {
        self.acquire_daemon_lease_with(req, now, &|h: &DaemonLease| {
            !self.liveness.is_alive(ProcessRef::pid(h.pid))
        })
    }

    fn acquire_daemon_lease_with(
        &self,
        req: &LeaseRequest,
        now: Timestamp,
        holder_is_gone: &dyn Fn(&DaemonLease) -> bool,
    ) -> Result<LeaseAcquire> {
        self.write_tx(|conn| {
            let holders = rows::query_vec(
                conn,
                concat!(
                    "SELECT ",
                    lease_columns!(),
                    " FROM daemon_lease WHERE id <> ?1 AND expires_at > ?2
                     ORDER BY expires_at DESC"
                ),
                params![req.id.as_str(), ts(now)],
                CONTEXT,
                rows::lease_row,
            )?;
            let blocking = holders
                .into_iter()
                .find(|h| !(h.hostname == req.hostname && holder_is_gone(h)));
            if let Some(holder) = blocking {
                return Ok(LeaseAcquire::Held(holder));
            }
            conn.execute("DELETE FROM daemon_lease", [])
                .map_err(StoreError::db("clearing the daemon lease"))?;
            let lease = rows::query_opt(
                conn,
                concat!(
                    "INSERT INTO daemon_lease (id, pid, hostname, heartbeat_at, expires_at, created_at,
                       updated_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?4, ?4)
                     RETURNING ",
                    lease_columns!()
                ),
                params![
                    req.id.as_str(),
                    req.pid,
                    req.hostname,
                    ts(now),
                    ts(now.add_ms(offset_ms(req.ttl_ms))),
                ],
                ("daemon_lease", "acquiring the daemon lease"),
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

    fn heartbeat_daemon_lease(
        &self,
        id: &LeaseId,
        ttl_ms: u64,
        now: Timestamp,
    ) -> Result<LeaseHeartbeat> {
        let renewed = rows::query_opt(
            &self.conn,
            concat!(
                "UPDATE daemon_lease SET heartbeat_at = ?2, expires_at = ?3, updated_at = ?2
                 WHERE id = ?1 RETURNING ",
                lease_columns!()
            ),
            params![id.as_str(), ts(now), ts(now.add_ms(offset_ms(ttl_ms)))],
            ("daemon_lease", "renewing the daemon lease"),
            rows::lease_row,
        )?;
        Ok(renewed.map_or(LeaseHeartbeat::Lost, LeaseHeartbeat::Renewed))
    }

    fn release_daemon_lease(&self, id: &LeaseId) -> Result<LeaseRelease> {
        let n = self
            .conn
            .execute("DELETE FROM daemon_lease WHERE id = ?1", [id.as_str()])
            .map_err(StoreError::db("releasing the daemon lease"))?;
        Ok(if n > 0 {
            LeaseRelease::Released
        } else {
            LeaseRelease::NotHeld
        })
    }

    fn get_daemon_lease(&self) -> Result<Option<DaemonLease>> {
        rows::query_opt(
            &self.conn,
            concat!(
                "SELECT ",
                lease_columns!(),
                " FROM daemon_lease ORDER BY expires_at DESC LIMIT 1"
            ),
            [],
            CONTEXT,
            rows::lease_row,
        )
    }
}

impl MemberOps for Sqlite {
    /// The lease holder is the only member: there is at most one lease
    /// row, and it does not record a version.
    fn list_daemons(&self, now: Timestamp) -> Result<Vec<DaemonMember>> {
        let found = rows::query_vec(
            &self.conn,
            concat!(
                "SELECT ",
                lease_columns!(),
                ", (SELECT COUNT(*) FROM loop_runs r WHERE r.status = 'running'
                     AND r.claimed_by = l.hostname || ':' || l.pid || ':' || l.id)
                 FROM daemon_lease l ORDER BY l.hostname, l.created_at, l.id"
            ),
            [],
            ("daemon_lease", "listing the daemons"),
            |row| Ok((rows::lease_row(row)?, row.get::<_, i64>(7)?)),
        )?;
        Ok(found
            .into_iter()
            .map(|(lease, running)| DaemonMember {
                live: lease.expires_at > now,
                id: lease.id,
                hostname: lease.hostname,
                pid: lease.pid,
                version: None,
                started_at: lease.created_at,
                heartbeat_at: lease.heartbeat_at,
                expires_at: lease.expires_at,
                running_runs: u64::try_from(running).unwrap_or(0),
                clock_skew_ms: None,
            })
            .collect())
    }

    fn record_daemon_skew(&self, _id: &LeaseId, _skew_ms: i64) -> Result<()> {
        Ok(())
    }
}
