//! The daemon lease: at most one daemon schedules a database at a time
//! (SPEC §4.3 "Daemon lease", §7.6, §10 item 31).
//!
//! SPEC §9 item 16: the original ignores the host name, so a crashed
//! daemon's unexpired lease blocks a restart for up to its TTL. Here a
//! lease held on the same host by a pid that is no longer alive is taken
//! over at once; a holder on another host is trusted until its lease
//! expires, since its pid means nothing here.

use loops_core::{DaemonLease, LeaseId, ProcessRef, Timestamp};
use rusqlite::params;

use crate::Store;
use crate::error::{Result, StoreError};
use crate::rows::{self, ts};
use crate::runs::offset_ms;

/// A daemon asking for the lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseRequest {
    /// The lease id, fresh per daemon start.
    pub id: LeaseId,
    /// The daemon's pid.
    pub pid: u32,
    /// The daemon's host name.
    pub hostname: String,
    /// How long the lease lasts without a heartbeat.
    pub ttl_ms: u64,
}

/// The result of [`Store::acquire_daemon_lease`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaseAcquire {
    /// The caller holds the lease, as stored.
    Acquired(DaemonLease),
    /// Another daemon holds a live lease; nothing was written.
    Held(DaemonLease),
}

/// The result of [`Store::heartbeat_daemon_lease`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaseHeartbeat {
    /// The lease was extended, as stored.
    Renewed(DaemonLease),
    /// The lease row is gone: another daemon took over or it was released.
    Lost,
}

/// The result of [`Store::release_daemon_lease`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseRelease {
    /// The caller's lease row was deleted.
    Released,
    /// The caller did not hold the lease; nothing was deleted.
    NotHeld,
}

const CONTEXT: (&str, &str) = ("daemon_lease", "reading the daemon lease");

impl Store {
    /// Acquires the daemon lease in one `BEGIN IMMEDIATE` transaction.
    ///
    /// Refused ([`LeaseAcquire::Held`]) while another id holds a lease with
    /// `expires_at > now`, unless that holder is on this host and its pid is
    /// not alive (SPEC §9 item 16). The same id may re-acquire. On success
    /// every lease row is replaced by the caller's, with heartbeat `now` and
    /// expiry `now + ttl_ms`.
    pub fn acquire_daemon_lease(&self, req: &LeaseRequest, now: Timestamp) -> Result<LeaseAcquire> {
        self.acquire_daemon_lease_with(req, now, &|h: &DaemonLease| {
            !self.liveness.is_alive(ProcessRef::pid(h.pid))
        })
    }

    /// [`Store::acquire_daemon_lease`] with the caller's own test of whether
    /// an unexpired holder on the caller's host is gone.
    ///
    /// `holder_is_gone` is asked only about holders whose `hostname` equals
    /// the request's; a holder on another host is trusted until its lease
    /// expires, since its pid means nothing here. A daemon passes a test
    /// that also compares the process start time with the lease's
    /// `created_at`, so a pid reused by an unrelated process does not block
    /// a restart (SPEC §9 items 14 and 16).
    pub fn acquire_daemon_lease_with(
        &self,
        req: &LeaseRequest,
        now: Timestamp,
        holder_is_gone: &dyn Fn(&DaemonLease) -> bool,
    ) -> Result<LeaseAcquire> {
        self.write_tx(|conn| {
            let holders = rows::query_vec(
                conn,
                "SELECT * FROM daemon_lease WHERE id <> ?1 AND expires_at > ?2
                 ORDER BY expires_at DESC",
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
                "INSERT INTO daemon_lease (id, pid, hostname, heartbeat_at, expires_at, created_at,
                   updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?4, ?4)
                 RETURNING *",
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

    /// Extends the caller's lease to `now + ttl_ms`. One guarded `UPDATE`
    /// by id; [`LeaseHeartbeat::Lost`] when the row is gone.
    pub fn heartbeat_daemon_lease(
        &self,
        id: &LeaseId,
        ttl_ms: u64,
        now: Timestamp,
    ) -> Result<LeaseHeartbeat> {
        let renewed = rows::query_opt(
            &self.conn,
            "UPDATE daemon_lease SET heartbeat_at = ?2, expires_at = ?3, updated_at = ?2
             WHERE id = ?1 RETURNING *",
            params![id.as_str(), ts(now), ts(now.add_ms(offset_ms(ttl_ms)))],
            ("daemon_lease", "renewing the daemon lease"),
            rows::lease_row,
        )?;
        Ok(renewed.map_or(LeaseHeartbeat::Lost, LeaseHeartbeat::Renewed))
    }

    /// Releases the caller's lease (deletes its row).
    pub fn release_daemon_lease(&self, id: &LeaseId) -> Result<LeaseRelease> {
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

    /// The current lease row, expired or not. When several rows exist (the
    /// original never leaves more than one), the latest expiry wins.
    pub fn get_daemon_lease(&self) -> Result<Option<DaemonLease>> {
        rows::query_opt(
            &self.conn,
            "SELECT * FROM daemon_lease ORDER BY expires_at DESC LIMIT 1",
            [],
            CONTEXT,
            rows::lease_row,
        )
    }
}
