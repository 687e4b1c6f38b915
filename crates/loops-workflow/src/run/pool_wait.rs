//! Steps that wait for room in their pool (issue 30, `docs/triggers.md`
//! Q2): a ready step whose pool is full stays pending and is parked in the
//! plan, the steps not in that pool go on, and the parked steps are tried
//! again after a bounded backoff. The workflow timeout and a cancel still
//! end the run while they wait.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use loops_core::WorkflowRunStatus;

use super::ending::Deadline;
use super::{Runner, timeout_message};

/// The first wait before parked steps are tried again; it doubles up to
/// [`POOL_WAIT_MAX`] while their pools stay full.
pub(super) const POOL_WAIT_FIRST: Duration = Duration::from_millis(200);
/// The longest wait between two tries.
pub(super) const POOL_WAIT_MAX: Duration = Duration::from_secs(1);

/// What the runner knows of the pools its steps wait for.
#[derive(Debug)]
pub(super) struct PoolWait {
    /// When the parked steps are tried again.
    retry_at: Option<Instant>,
    /// The wait that led there.
    backoff: Duration,
    /// The pools found full in the current turn, with their limits: the
    /// other steps of such a pool are parked without asking again.
    full: HashMap<String, u32>,
    /// The steps (by position) already said to wait, so the callback hears
    /// of each wait once.
    said: HashSet<usize>,
}

impl PoolWait {
    pub(super) fn new() -> PoolWait {
        PoolWait {
            retry_at: None,
            backoff: POOL_WAIT_FIRST,
            full: HashMap::new(),
            said: HashSet::new(),
        }
    }

    /// When the parked steps are tried again, if any are.
    pub(super) fn retry_at(&self) -> Option<Instant> {
        self.retry_at
    }

    /// The limit of `pool` when the current turn found it full.
    pub(super) fn full_now(&self, pool: &str) -> Option<u32> {
        self.full.get(pool).copied()
    }
}

impl Runner<'_> {
    /// Parks the step at `pos`: its pool `pool` (of `max_running` places)
    /// is full. Says so once per wait.
    pub(super) fn park(&mut self, pos: usize, pool: &str, max_running: u32) {
        self.plan.park(pos);
        self.pool_wait.full.insert(pool.to_owned(), max_running);
        if self.pool_wait.said.insert(pos)
            && let Some(on_pool_wait) = self.opts.on_pool_wait
        {
            on_pool_wait(&self.plan.step(pos).id, pool, max_running);
        }
    }

    /// A step started: it no longer waits.
    pub(super) fn unparked(&mut self, pos: usize) {
        self.pool_wait.said.remove(&pos);
    }

    /// Before a turn's dispatch: the pools are counted afresh.
    pub(super) fn forget_full_pools(&mut self) {
        self.pool_wait.full.clear();
    }

    /// After a turn: schedules the next try of the parked steps, doubling
    /// the wait while some still wait, and starting over once none does.
    pub(super) fn schedule_pool_retry(&mut self) {
        if !self.plan.has_parked() || self.ending.is_halted() {
            self.pool_wait.retry_at = None;
            self.pool_wait.backoff = POOL_WAIT_FIRST;
            return;
        }
        if self.pool_wait.retry_at.is_none() {
            let wait = self.pool_wait.backoff;
            self.pool_wait.retry_at = Some(Instant::now() + wait);
            self.pool_wait.backoff = (wait * 2).min(POOL_WAIT_MAX);
        }
    }

    /// Makes the parked steps ready again once their retry is due.
    pub(super) fn retry_parked(&mut self) {
        if self
            .pool_wait
            .retry_at
            .is_some_and(|at| Instant::now() >= at)
        {
            self.pool_wait.retry_at = None;
            self.plan.unpark();
        }
    }

    /// Whether steps wait for their pools and the run can still start
    /// them: the runner keeps going for them.
    pub(super) fn waits_for_pools(&self) -> bool {
        self.plan.has_parked() && !self.ending.is_halted()
    }

    /// The workflow timeout fired while steps wait for their pools: they
    /// will never start, so the run times out (SPEC §6.4) even with no
    /// step running to report it.
    pub(super) fn time_out_waits(&mut self) {
        if let Deadline::Fired { ms } = self.deadline
            && self.waits_for_pools()
        {
            self.halt(WorkflowRunStatus::TimedOut, timeout_message(ms));
        }
    }
}
