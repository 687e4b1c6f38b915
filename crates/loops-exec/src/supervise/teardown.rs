//! Tearing a run down: the [`Phase`] a run is in, the state of its leader
//! and group (SIGTERM to the group, a grace period, SIGKILL, the reap) and
//! the escapees, the processes that left the group but carry the spawn
//! cookie, found by scanning `/proc` and signalled with the group.

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

/// Where a supervised run is. It only moves forward: from running, through
/// draining when the leader exits on its own, to terminating and killing
/// when a teardown begins.
pub(super) enum Phase {
    /// The leader runs, and nothing has been signalled.
    Running,
    /// The leader exited on its own at `exited_at`; the pipes are drained
    /// until both reach EOF or the leak timeout passes.
    Draining { exited_at: Instant },
    /// SIGTERM went to the group and its escapees; SIGKILL follows a grace
    /// period later.
    Terminating(Teardown),
    /// SIGKILL went to the group and its escapees; a member still there a
    /// grace period later is given up on.
    Killing(Teardown),
}

/// A teardown under way.
pub(super) struct Teardown {
    /// When this phase's signal went out.
    pub(super) since: Instant,
    /// Why the supervisor began it: a timeout or a cancel while the leader
    /// ran. `None` when the leader exited on its own and left members
    /// behind, whose exit status is then the result.
    pub(super) cause: Option<Cause>,
    /// Whether the loop has seen the leader exit (it stays unreaped until
    /// the end).
    pub(super) leader_exited: bool,
}

impl Phase {
    /// Whether the loop has seen the leader exit.
    pub(super) fn leader_exited(&self) -> bool {
        match self {
            Phase::Running => false,
            Phase::Draining { .. } => true,
            Phase::Terminating(t) | Phase::Killing(t) => t.leader_exited,
        }
    }

    /// The loop saw the leader exit at `now`.
    pub(super) fn exit(&mut self, now: Instant) {
        match self {
            Phase::Running => *self = Phase::Draining { exited_at: now },
            Phase::Draining { .. } => {}
            Phase::Terminating(t) | Phase::Killing(t) => t.leader_exited = true,
        }
    }

    /// Why the supervisor killed the group, if it did.
    pub(super) fn into_cause(self) -> Option<Cause> {
        match self {
            Phase::Running | Phase::Draining { .. } => None,
            Phase::Terminating(t) | Phase::Killing(t) => t.cause,
        }
    }
}

/// The state of one run's leader and group.
pub(super) struct Supervisor {
    pub(super) child: Child,
    pub(super) pgid: Pid,
    pub(super) watch: ExitWatch,
    /// Set once the leader has been reaped.
    pub(super) status: Option<ExitStatus>,
    pub(super) phase: Phase,
    /// The processes that left the group but carry the spawn cookie.
    pub(super) escapees: Escapees,
}

impl Supervisor {
    /// Whether the leader has exited, by its [`ExitWatch`]. The phase
    /// records what the loop made of it.
    pub(super) fn poll_exit(&mut self) -> bool {
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

    /// Begins the teardown: SIGTERM to the group and its escapees. `cause`
    /// is set when the leader still runs (a timeout or a cancel).
    pub(super) fn terminate(&mut self, now: Instant, cause: Option<Cause>) {
        self.signal(Signal::SIGTERM);
        // The group has it already: one SIGTERM each.
        self.escapees.signal(Signal::SIGTERM, now, Some(self.pgid));
        let leader_exited = self.phase.leader_exited();
        self.phase = Phase::Terminating(Teardown {
            since: now,
            cause,
            leader_exited,
        });
    }

    /// SIGKILL to the group and its escapees, a grace period after the
    /// SIGTERM.
    pub(super) fn kill(&mut self, now: Instant) {
        self.signal(Signal::SIGKILL);
        self.escapees.signal(Signal::SIGKILL, now, None);
        let teardown = match std::mem::replace(&mut self.phase, Phase::Running) {
            Phase::Terminating(t) | Phase::Killing(t) => Teardown { since: now, ..t },
            before => Teardown {
                since: now,
                cause: None,
                leader_exited: before.leader_exited(),
            },
        };
        self.phase = Phase::Killing(teardown);
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

    /// Sends `signal` to every carrier of the cookie outside group `spare`,
    /// and follows them from now on.
    fn signal(&mut self, signal: Signal, now: Instant, spare: Option<Pid>) {
        self.following = true;
        self.record(
            cookie::signal_carriers(&self.cookie, Some(signal), spare),
            now,
        );
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
        self.record(cookie::signal_carriers(&self.cookie, signal, None), now);
        self.seen_at.is_some()
    }

    fn record(&mut self, found: usize, now: Instant) {
        self.seen_at = (found > 0).then_some(now);
    }
}
