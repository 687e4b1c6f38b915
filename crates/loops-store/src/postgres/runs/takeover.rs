//! When a running run whose lease expired may be taken from its claimant:
//! re-claimed by a runner, or abandoned by recovery (issue 15, "Steals").
//!
//! A runner id is `host:pid:suffix`. Only a run claimed on this host can
//! be judged by its processes: the liveness probe sees this host's
//! processes only, and a pid recorded on another host means nothing here.
//! Such a run follows SQLite's rules: taken as soon as its lease expired,
//! unless its process or a linked step process is still alive. A run
//! claimed on another host (or by a runner id that names no host) is taken
//! only once its lease expired [`CROSS_HOST_GRACE_MS`] ago: its daemon may
//! be stalled rather than dead, and the grace lets it notice the loss
//! (its heartbeat no longer renews an expired lease) and stop the run
//! first. Either way the write re-checks the lease and the claimant in its
//! `WHERE`, so a run that was renewed, finished or taken meanwhile is left
//! as it is.

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

impl Postgres {
    /// True when `claimed_by` names this host, whose processes the
    /// liveness probe can see.
    pub(super) fn is_this_host(&self, claimed_by: Option<&str>) -> bool {
        claimed_by.and_then(host_of) == Some(self.host.as_str())
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
        if self.is_this_host(run.claimed_by.as_deref()) {
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
    use super::host_of;

    #[test]
    fn the_host_is_what_precedes_the_pid_and_suffix() {
        assert_eq!(host_of("host-a:123:0123456789ab"), Some("host-a"));
        assert_eq!(host_of("fe80::1:123:0123456789ab"), Some("fe80::1"));
        assert_eq!(host_of("manual:12"), None);
        assert_eq!(host_of("runner-a"), None);
    }
}
