//! Tearing a run down: the state of its leader and group (SIGTERM to the
//! group, a grace period, SIGKILL, the reap) and the escapees, the
//! processes that left the group but carry the spawn cookie, found by
//! scanning `/proc` and signalled with the group.

use std::process::{Child, ExitStatus};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use nix::unistd::Pid;

use crate::cookie;
use crate::group;

use super::Cause;
use super::watch::ExitWatch;

/// How often a teardown rescans `/proc` for processes that carry the spawn
/// cookie while it last found some: a scan costs milliseconds.
const ESCAPEE_RECHECK: Duration = Duration::from_millis(50);

/// The state of one run's leader and group.
pub(super) struct Supervisor {
    pub(super) child: Child,
    pub(super) pgid: Pid,
    pub(super) watch: ExitWatch,
    /// Set once the leader has been reaped.
    pub(super) status: Option<ExitStatus>,
    /// When the loop learned that the leader exited.
    pub(super) exited_at: Option<Instant>,
    pub(super) cause: Option<Cause>,
    /// When SIGTERM went to the group.
    pub(super) term_at: Option<Instant>,
    /// When SIGKILL went to the group.
    pub(super) kill_at: Option<Instant>,
    /// The processes that left the group but carry the spawn cookie.
    pub(super) escapees: Escapees,
}

impl Supervisor {
    pub(super) fn leader_exited(&mut self) -> bool {
        match &self.watch {
            #[cfg(any(target_os = "linux", target_os = "android"))]
            ExitWatch::Pidfd { exited, .. } => *exited,
            ExitWatch::Waiter { exited, .. } => exited.load(std::sync::atomic::Ordering::Acquire),
            ExitWatch::Polling => match self.child.try_wait() {
                Ok(Some(status)) => {
                    self.status = Some(status);
                    true
                }
                Ok(None) => false,
                // ECHILD: someone else reaped it. Either way it is gone.
                Err(_) => true,
            },
        }
    }

    /// Whether anything in the group can still run. Only asked once the
    /// leader has exited.
    pub(super) fn group_alive(&mut self) -> bool {
        // The leader has exited: reap it, so that a probe of the group no
        // longer counts it, then probe. An empty group (the common case)
        // costs one system call.
        if self.status.is_none() {
            self.status = self.child.try_wait().ok().flatten();
        }
        if self.status.is_some() && !group::exists(self.pgid) {
            return false;
        }
        // Members remain, and zombies among them must not count: they
        // cannot run, and only their parent can remove them.
        if let Some(alive) = group::has_live_members(self.pgid) {
            return alive;
        }
        self.status.is_none() || group::exists(self.pgid)
    }

    pub(super) fn terminate(&mut self, now: Instant) {
        self.signal(Signal::SIGTERM);
        self.escapees.signal(Signal::SIGTERM, now);
        self.term_at = Some(now);
    }

    pub(super) fn kill(&mut self, now: Instant) {
        self.signal(Signal::SIGKILL);
        self.escapees.signal(Signal::SIGKILL, now);
        self.kill_at = Some(now);
    }

    fn signal(&mut self, signal: Signal) {
        // An unreaped leader (running or zombie) still owns the group id.
        // After the reap the id is only safe while members remain in it.
        if self.status.is_some() && !group::exists(self.pgid) {
            return;
        }
        group::signal(self.pgid, signal);
    }

    /// Reaps the leader (it has exited by now) and stops the waiter thread.
    pub(super) fn reap(&mut self) -> Option<ExitStatus> {
        if self.status.is_none() {
            self.status = self.child.wait().ok();
        }
        if let ExitWatch::Waiter { thread, .. } =
            std::mem::replace(&mut self.watch, ExitWatch::Polling)
        {
            // The waiter returned as soon as the leader became a zombie.
            let _ = thread.join();
        }
        self.status
    }
}

/// The processes of a run that left its process group, found by the spawn
/// cookie in their environment (`cookie.rs`). Nothing is scanned until a
/// teardown begins.
pub(super) struct Escapees {
    cookie: String,
    /// Set by the first signal: from then on the teardown follows them.
    following: bool,
    /// The last scan, if it found carriers.
    seen_at: Option<Instant>,
}

impl Escapees {
    pub(super) fn new(cookie: String) -> Escapees {
        Escapees {
            cookie,
            following: false,
            seen_at: None,
        }
    }

    /// Sends `signal` to every carrier of the cookie, and follows them from
    /// now on.
    fn signal(&mut self, signal: Signal, now: Instant) {
        self.following = true;
        self.record(cookie::signal_carriers(&self.cookie, Some(signal)), now);
    }

    /// Whether carriers may still be alive; always `false` before the
    /// teardown began. Once SIGKILL has gone out (`killing`), every scan
    /// sends it again. A positive answer may be up to [`ESCAPEE_RECHECK`]
    /// old; a negative one is always fresh, since it ends the teardown.
    pub(super) fn alive(&mut self, now: Instant, killing: bool) -> bool {
        if !self.following {
            return false;
        }
        if let Some(seen) = self.seen_at
            && now < seen + ESCAPEE_RECHECK
        {
            return true;
        }
        let signal = killing.then_some(Signal::SIGKILL);
        self.record(cookie::signal_carriers(&self.cookie, signal), now);
        self.seen_at.is_some()
    }

    fn record(&mut self, found: usize, now: Instant) {
        self.seen_at = (found > 0).then_some(now);
    }
}
