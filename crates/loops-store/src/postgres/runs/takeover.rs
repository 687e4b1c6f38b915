//! Which runs this host's liveness probe can judge: those claimed on this
//! host (see [`crate::runs::takeover`], where the takeover rule lives).

use loops_core::LoopRun;

use crate::postgres::Postgres;
use crate::runs::takeover::claim_host;

impl Postgres {
    /// True when `run` was claimed on this host, whose processes the
    /// liveness probe can see.
    pub(super) fn claimed_here(&self, run: &LoopRun) -> bool {
        claim_host(run) == Some(self.host.as_str())
    }
}
