//! [`MemberOps`] written once for both backends: on PostgreSQL every
//! daemon's row of `daemons`, on SQLite the one `daemon_lease` row, read
//! in the same shape (SQLite's lease records no version and no skew).

use loops_core::{LeaseId, Timestamp};

use crate::backend::MemberOps;
use crate::columns::{instant, int, int_opt, json_opt, parsed, text, text_opt};
use crate::error::Result;
use crate::members::DaemonMember;
use crate::sql::{Col, Db, Dialect, Fields};

/// The columns [`member_row`] reads, in order.
const MEMBER_COLUMNS: &[&str] = &[
    "id",
    "hostname",
    "pid",
    "version",
    "started_at",
    "heartbeat_at",
    "expires_at",
    "running_runs",
    "clock_skew_ms",
    "labels",
];

/// Every daemon with its runs in flight, by host and then by start.
const LIST_DAEMONS: (&str, &str) = (
    "SELECT l.id, l.hostname, l.pid, NULL, l.created_at, l.heartbeat_at, l.expires_at,
            (SELECT COUNT(*) FROM loop_runs r WHERE r.status = 'running'
               AND r.claimed_by = l.hostname || ':' || l.pid || ':' || l.id),
            NULL, l.labels
     FROM daemon_lease l ORDER BY l.hostname, l.created_at, l.id",
    "SELECT d.id, d.hostname, d.pid, d.version, d.started_at, d.heartbeat_at,
            d.expires_at,
            (SELECT COUNT(*) FROM loop_runs r WHERE r.status = 'running'
               AND r.claimed_by = d.hostname || ':' || d.pid || ':' || d.id),
            d.clock_skew_ms, d.labels
     FROM daemons d ORDER BY d.hostname, d.started_at, d.id",
);

/// A [`LIST_DAEMONS`] row; `live` is false until the caller sets it.
fn member_row(row: &dyn Fields) -> Col<DaemonMember> {
    let n = MEMBER_COLUMNS;
    let running: i64 = int(row, n, 7)?;
    let hostname: String = text(row, n, 1)?;
    // Issue 30, P1: `host:<hostname>` always, first; a row registered
    // before labels were written has that label alone.
    let mut labels = vec![loops_core::host_label(&hostname)];
    for label in json_opt::<Vec<String>>(row, n, 9)?.unwrap_or_default() {
        if !labels.contains(&label) {
            labels.push(label);
        }
    }
    Ok(DaemonMember {
        id: parsed(row, n, 0)?,
        hostname,
        pid: int(row, n, 2)?,
        version: text_opt(row, n, 3)?,
        started_at: instant(row, n, 4)?,
        heartbeat_at: instant(row, n, 5)?,
        expires_at: instant(row, n, 6)?,
        live: false,
        running_runs: u64::try_from(running).unwrap_or(0),
        clock_skew_ms: int_opt(row, n, 8)?,
        labels,
    })
}

impl<D: Db> MemberOps for D {
    fn list_daemons(&self, now: Timestamp) -> Result<Vec<DaemonMember>> {
        let mut found = self.read(|c| {
            c.query_vec(
                c.dialect().pick(LIST_DAEMONS.0, LIST_DAEMONS.1),
                &[],
                ("daemons", "listing the daemons"),
                member_row,
            )
        })?;
        for member in &mut found {
            member.live = member.expires_at > now;
        }
        Ok(found)
    }

    /// Nothing on SQLite, whose clock is the host's.
    fn record_daemon_skew(&self, id: &LeaseId, skew_ms: i64) -> Result<()> {
        self.read(|c| {
            if c.dialect() == Dialect::Postgres {
                c.execute(
                    "UPDATE daemons SET clock_skew_ms = ?2 WHERE id = ?1",
                    &[id.as_str().into(), skew_ms.into()],
                    "recording the daemon's clock skew",
                )?;
            }
            Ok(())
        })
    }
}
