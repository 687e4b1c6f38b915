//! Per-kind lanes (issue 17): the daemon's `--command-concurrency` and
//! `--agent-concurrency`, limits beside `--max-parallel` on the runs of
//! one kind in flight, so slow, costly agents cannot take every slot from
//! fast commands.
//!
//! A workflow loop is in neither lane: its steps mix commands and agents
//! and have their own `maxParallel`, so only `--max-parallel` limits it.

use loops_core::{Loop, Target, Timestamp};

use super::{Dispatcher, LoopWork};

/// The limits of the lanes; `None` is no limit of its own (only
/// `max_parallel` applies, as without lanes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Lanes {
    /// Most command runs in flight at once.
    pub command: Option<usize>,
    /// Most agent runs in flight at once.
    pub agent: Option<usize>,
}

/// The lane a loop's target runs in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Lane {
    /// A command loop.
    Command,
    /// An agent loop.
    Agent,
    /// A workflow loop: no lane, only `max_parallel`.
    Free,
}

impl Lane {
    /// The lane of `target`.
    pub(super) fn of(target: &Target) -> Lane {
        match target {
            Target::Command(_) => Lane::Command,
            Target::Agent(_) => Lane::Agent,
            Target::Workflow(_) => Lane::Free,
        }
    }
}

impl Lanes {
    /// The limit of `lane`, if it has one.
    pub(super) fn limit(&self, lane: Lane) -> Option<usize> {
        match lane {
            Lane::Command => self.command,
            Lane::Agent => self.agent,
            Lane::Free => None,
        }
    }

    /// Whether one more run fits in `lane` with `running` runs of it in
    /// flight (a limit of 0 counts as 1, as `max_parallel` does).
    pub(super) fn has_room(&self, lane: Lane, running: usize) -> bool {
        self.limit(lane).is_none_or(|limit| running < limit.max(1))
    }
}

impl Dispatcher<'_, '_> {
    /// Whether `lp`'s lane has no room left, counting the runs in flight
    /// and those about to start in `batch`.
    pub(super) fn lane_is_full(&self, lp: &Loop, batch: &[(LoopWork, Timestamp)]) -> bool {
        let lane = Lane::of(&lp.target);
        if self.opts.lanes.limit(lane).is_none() {
            return false;
        }
        let in_flight = self
            .inflight
            .values()
            .filter(|f| Lane::of(&f.work.lp.target) == lane)
            .count();
        let starting = batch
            .iter()
            .filter(|(w, _)| Lane::of(&w.lp.target) == lane)
            .count();
        !self.opts.lanes.has_room(lane, in_flight + starting)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_lane_with_a_limit_fills_up() {
        let lanes = Lanes {
            command: None,
            agent: Some(1),
        };
        assert!(lanes.has_room(Lane::Agent, 0));
        assert!(!lanes.has_room(Lane::Agent, 1));
        assert!(lanes.has_room(Lane::Command, 1000));
        assert!(lanes.has_room(Lane::Free, 1000));
        assert!(Lanes::default().has_room(Lane::Agent, 1000));
    }
}
