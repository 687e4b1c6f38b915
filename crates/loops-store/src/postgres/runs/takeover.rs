//! When a running run whose lease expired may be taken from its claimant:
//! re-claimed by a runner, or abandoned by recovery (issue 15, "Steals").
//!
//! Only a run claimed on this host can be judged by its processes: the
//! liveness probe sees this host's processes only, and a pid recorded on
//! another host means nothing here. Such a run follows SQLite's rules:
//! taken as soon as its lease expired, unless its process or a linked step
//! process is still alive. A run claimed on another host (or on a host
//! nothing names) is taken only once its lease expired
//! [`CROSS_HOST_GRACE_MS`] ago: its daemon may be stalled rather than
//! dead, and the grace lets it notice the loss (its heartbeat no longer
//! renews an expired lease) and stop the run first. Either way the write
//! re-checks the lease and the claimant in its `WHERE`, so a run that was
//! renewed, finished or taken meanwhile is left as it is.
//!
//! Where a run was claimed ([`claim_host`]): a daemon's runner id
//! `host:pid:suffix` names its host; the runner ids of `tick` and
//! `run-now` (`manual-tick:<pid>`, `manual:<pid>`, the original's) name
//! none, and for those the host the claim recorded beside it
//! (`claimed_host`, issue 25) says. A run claimed before that column, or
//! by a binary that does not write it, has none: another host's, as before.

use loops_core::{LoopRun, ProcessRef, Timestamp};

use crate::error::Result;
use crate::postgres::{CROSS_HOST_GRACE_MS, Conn, Postgres};

/// The host of a runner id `host:pid:suffix`, split from the right (a host
/// name may hold colons); `None` for an id of another shape (`manual:12`).
pub(super) fn host_of(runner_id: &str) -> Option<&str> {
    let mut parts = runner_id.rsplitn(3, ':');
    let _suffix = parts.next()?;
    let _pid = parts.next()?;
    parts.next()
}

/// Whether an expired run may be taken, and under which guard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Takeover {
    /// It may: the write applies while the row is still running, under
    /// the same claimant, with a lease that expired at or before `cutoff`.
    Now {
        /// The latest lease expiry the write accepts.
        cutoff: Timestamp,
    },
    /// Claimed on this host, and its recorded process is alive.
    ProcessAlive,
    /// Claimed on this host, and a linked step process is alive.
    StepProcessAlive,
    /// Claimed on another host, whose grace has not passed yet.
    InGrace,
}

/// The host `run` was claimed on: the one its runner id names, else the
/// one its claim recorded, else none (see the module docs).
///
/// The runner id wins where it names a host: a binary older than the
/// `claimed_host` column re-claims a run without rewriting the column, so
/// a recorded host may be an earlier claim's, while the runner id is
/// always the current claimant's.
pub(super) fn claim_host(run: &LoopRun) -> Option<&str> {
    match run.claimed_by.as_deref().and_then(host_of) {
        Some(host) => Some(host),
        None => run.claimed_host.as_deref(),
    }
}

impl Postgres {
    /// True when `run` was claimed on this host, whose processes the
    /// liveness probe can see.
    pub(super) fn claimed_here(&self, run: &LoopRun) -> bool {
        claim_host(run) == Some(self.host.as_str())
    }

    /// Decides whether `run`, running with a lease that expired at or
    /// before `now`, may be taken (see the module docs). `process` is its
    /// recorded process.
    pub(super) fn takeover(
        &self,
        c: &mut Conn<'_>,
        run: &LoopRun,
        process: Option<ProcessRef>,
        now: Timestamp,
    ) -> Result<Takeover> {
        if self.claimed_here(run) {
            if process.is_some_and(|p| self.liveness.is_alive(p)) {
                return Ok(Takeover::ProcessAlive);
            }
            if self.has_live_step_processes(c, &run.id)? {
                return Ok(Takeover::StepProcessAlive);
            }
            return Ok(Takeover::Now { cutoff: now });
        }
        let cutoff = now.add_ms(-CROSS_HOST_GRACE_MS);
        Ok(match run.lease_expires_at {
            Some(expiry) if expiry <= cutoff => Takeover::Now { cutoff },
            _ => Takeover::InGrace,
        })
    }
}

#[cfg(test)]
mod tests {
    use loops_core::{RunStatus, Timestamp};

    use super::*;

    #[test]
    fn the_host_is_what_precedes_the_pid_and_suffix() {
        assert_eq!(host_of("host-a:123:0123456789ab"), Some("host-a"));
        assert_eq!(host_of("fe80::1:123:0123456789ab"), Some("fe80::1"));
        assert_eq!(host_of("manual:12"), None);
        assert_eq!(host_of("runner-a"), None);
    }

    fn claimed(by: &str, host: Option<&str>) -> LoopRun {
        let t: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        LoopRun {
            id: "aaaaaaaaaaaa".parse().unwrap(),
            loop_id: "bbbbbbbbbbbb".parse().unwrap(),
            loop_name: "n".into(),
            scheduled_for: t,
            attempt: 1,
            status: RunStatus::Running,
            started_at: Some(t),
            finished_at: None,
            claimed_by: Some(by.into()),
            claimed_host: host.map(Into::into),
            lease_expires_at: Some(t),
            pid: None,
            exit_code: None,
            duration_ms: None,
            stdout: None,
            stderr: None,
            error: None,
            created_at: t,
            updated_at: t,
            claim_token: None,
        }
    }

    #[test]
    fn a_runner_id_without_a_host_is_placed_by_the_recorded_host() {
        let host = |by, recorded| claim_host(&claimed(by, recorded)).map(str::to_owned);
        assert_eq!(
            host("manual-tick:12", Some("host-a")).as_deref(),
            Some("host-a")
        );
        assert_eq!(host("manual:12", Some("host-b")).as_deref(), Some("host-b"));
        // Claimed before the column, or by a binary that does not write it.
        assert_eq!(host("manual-tick:12", None), None);
        assert_eq!(
            host("host-a:1:0123456789ab", None).as_deref(),
            Some("host-a")
        );
        // An older binary's re-claim left an earlier claim's host behind.
        assert_eq!(
            host("host-b:2:0123456789ab", Some("host-a")).as_deref(),
            Some("host-b")
        );
    }
}
