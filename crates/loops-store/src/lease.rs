//! The daemon lease: at most one daemon schedules a database at a time
//! (SPEC §4.3 "Daemon lease", §7.6, §10 item 31).
//!
//! SPEC §9 item 16: the original ignores the host name, so a crashed
//! daemon's unexpired lease blocks a restart for up to its TTL. Here a
//! lease held on the same host by a pid that is no longer alive is taken
//! over at once; a holder on another host is trusted until its lease
//! expires, since its pid means nothing here.
//!
//! On PostgreSQL many daemons share the database (issue 15), so the lease
//! is each daemon's registration in the `daemons` table: acquiring it
//! always succeeds, a heartbeat renews the caller's own row, a release
//! deletes it, and [`Store::list_daemons`] lists them all. One daemon per
//! host and database is the local pid file's job.

use loops_core::{DaemonLease, LeaseId, Timestamp};

use crate::Store;
use crate::error::Result;

pub(crate) mod ops;

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

impl Store {
    /// Acquires the daemon lease in one `BEGIN IMMEDIATE` transaction.
    ///
    /// Refused ([`LeaseAcquire::Held`]) while another id holds a lease with
    /// `expires_at > now`, unless that holder is on this host and its pid is
    /// not alive (SPEC §9 item 16). The same id may re-acquire. On success
    /// every lease row is replaced by the caller's, with heartbeat `now` and
    /// expiry `now + ttl_ms`.
    ///
    /// On PostgreSQL it registers the daemon instead (inserts its row in
    /// `daemons`, or renews it for the same id, recording this loops'
    /// version) and is never refused: other daemons are members too. It
    /// also deletes the rows of daemons expired for over a day.
    pub fn acquire_daemon_lease(&self, req: &LeaseRequest, now: Timestamp) -> Result<LeaseAcquire> {
        self.backend().acquire_daemon_lease(req, now)
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
        self.backend()
            .acquire_daemon_lease_with(req, now, holder_is_gone)
    }

    /// Extends the caller's lease to `now + ttl_ms`. One guarded `UPDATE`
    /// by id; [`LeaseHeartbeat::Lost`] when the row is gone (on PostgreSQL
    /// also when it expired before `now`: another host may have taken over
    /// the daemon's runs since).
    pub fn heartbeat_daemon_lease(
        &self,
        id: &LeaseId,
        ttl_ms: u64,
        now: Timestamp,
    ) -> Result<LeaseHeartbeat> {
        self.backend().heartbeat_daemon_lease(id, ttl_ms, now)
    }

    /// Releases the caller's lease (deletes its row).
    pub fn release_daemon_lease(&self, id: &LeaseId) -> Result<LeaseRelease> {
        self.backend().release_daemon_lease(id)
    }

    /// The current lease row, expired or not. When several rows exist (the
    /// original never leaves more than one), the latest expiry wins.
    ///
    /// On PostgreSQL, where every daemon has a row, it is the one with the
    /// newest heartbeat among this host's daemons (the host name the store
    /// was opened with), else among all, so the pid file of this host is
    /// always compared with this host's daemon.
    pub fn get_daemon_lease(&self) -> Result<Option<DaemonLease>> {
        self.backend().get_daemon_lease()
    }
}
