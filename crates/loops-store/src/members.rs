//! Daemon membership (issue 15): which daemons are registered on the
//! database, whether each is live, and how many runs each has in flight.
//!
//! On PostgreSQL every daemon has its own row in `daemons`, written when
//! it takes its lease ([`Store::acquire_daemon_lease`]) and renewed by its
//! heartbeats, so daemons on several hosts are listed side by side. On
//! SQLite the one `daemon_lease` row is the only member.
//!
//! A daemon's runner id, the `claimed_by` of the runs it claims, is
//! `<hostname>:<pid>:<id>` ([`DaemonMember::runner_id`]); its runs in
//! flight are counted by that id.

use loops_core::{LeaseId, Timestamp};
use serde::Serialize;

use crate::Store;
use crate::error::Result;

pub(crate) mod ops;

/// One daemon registered on the database, from [`Store::list_daemons`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DaemonMember {
    /// The daemon's lease id, fresh per daemon start.
    pub id: LeaseId,
    /// The host it runs on.
    pub hostname: String,
    /// Its pid on that host.
    pub pid: u32,
    /// The loops version it runs; `None` on SQLite, whose lease row does
    /// not record it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// When it registered (took its lease).
    pub started_at: Timestamp,
    /// Its last heartbeat.
    pub heartbeat_at: Timestamp,
    /// When its registration lapses without another heartbeat.
    pub expires_at: Timestamp,
    /// Its registration has not lapsed: `expires_at` is after the `now`
    /// the list was read at.
    pub live: bool,
    /// The running runs it claimed.
    pub running_runs: u64,
    /// The database's clock minus its host's, as it last measured them
    /// (PostgreSQL; `None` before its first measure and on SQLite).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clock_skew_ms: Option<i64>,
    /// The labels it runs with (issue 30, P1, P2): `host:<hostname>`
    /// first, then those of `daemon run --label`, as it registered them.
    pub labels: Vec<String>,
}

impl DaemonMember {
    /// The runner id of the daemon's claims, `<hostname>:<pid>:<id>`
    /// (SPEC §0).
    pub fn runner_id(&self) -> String {
        format!("{}:{}:{}", self.hostname, self.pid, self.id)
    }
}

impl Store {
    /// Every daemon registered on the database, live or not, by host and
    /// then by start (on PostgreSQL, a row expired for over a day is
    /// deleted by the next daemon that registers). `live` and the counts
    /// are as of `now`; only reads.
    pub fn list_daemons(&self, now: Timestamp) -> Result<Vec<DaemonMember>> {
        self.backend().list_daemons(now)
    }

    /// Records the clock skew (database minus host, ms) the daemon `id`
    /// measured, for `daemon status` on other hosts; nothing on SQLite,
    /// whose clock is the host's.
    pub fn record_daemon_skew(&self, id: &LeaseId, skew_ms: i64) -> Result<()> {
        self.backend().record_daemon_skew(id, skew_ms)
    }
}
