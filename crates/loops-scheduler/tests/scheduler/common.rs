//! Shared fixtures: a temporary database file with a controllable liveness
//! probe, a scripted fake executor with gates, loop builders, and a
//! deadline-bounded poll.

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use loops_core::{
    Anchor, Clock, CommandTarget, ExecutorResult, ExecutorStatus, Loop, LoopId, LoopRun, NewLoop,
    ProcessRef, RunId, Schedule, Target, Timestamp,
};
use loops_exec::ExecError;
use loops_scheduler::{DEFAULT_MAX_PARALLEL, RunControl, RunError, RunExecutor, TickOptions};
use loops_store::{RunFilter, Store};
use tempfile::TempDir;

/// The runner id the scheduler under test claims as.
pub(crate) const RUNNER_A: &str = "host-a:100:aaaaaaaaaaaa";
/// Another runner sharing the database.
pub(crate) const RUNNER_B: &str = "host-b:200:bbbbbbbbbbbb";

/// How long any wait in these tests may take before it counts as a hang.
pub(crate) const DEADLINE: Duration = Duration::from_secs(10);

/// A temporary data directory with a database file, and the set of pids the
/// liveness probe reports alive.
pub(crate) struct Fixture {
    dir: TempDir,
    alive: Arc<Mutex<HashSet<u32>>>,
}

impl Fixture {
    pub(crate) fn new() -> Fixture {
        Fixture {
            dir: tempfile::tempdir().unwrap(),
            alive: Arc::default(),
        }
    }

    pub(crate) fn path(&self) -> PathBuf {
        self.dir.path().join("data").join("loops.db")
    }

    /// A new store handle (its own connection) on the fixture's file.
    pub(crate) fn store(&self) -> Store {
        let alive = Arc::clone(&self.alive);
        let probe = move |p: ProcessRef| alive.lock().unwrap().contains(&p.pid);
        Store::open(&self.path(), Arc::new(probe)).unwrap()
    }

    /// A store handle that probes real processes.
    pub(crate) fn system_store(&self) -> Store {
        Store::open(&self.path(), Arc::new(loops_exec::SystemProbe)).unwrap()
    }

    /// Makes the probe report `pid` alive.
    pub(crate) fn set_alive(&self, pid: u32) {
        self.alive.lock().unwrap().insert(pid);
    }
}

/// The instant the tests start at.
pub(crate) fn t0() -> Timestamp {
    "2026-01-01T00:00:00.000Z".parse().unwrap()
}

/// `t0` plus `secs` seconds.
pub(crate) fn at(secs: i64) -> Timestamp {
    t0().add_ms(secs * 1000)
}

/// A fixed-rate interval schedule.
pub(crate) fn every(ms: u64) -> Schedule {
    Schedule::Interval {
        every_ms: ms,
        anchor: Some(Anchor::FixedRate),
    }
}

/// A one-shot schedule.
pub(crate) fn once(at: Timestamp) -> Schedule {
    Schedule::Once { at }
}

/// A loop running the `true` command, with the SPEC defaults.
pub(crate) fn command_loop(name: &str, schedule: Schedule) -> NewLoop {
    NewLoop::new(name, schedule, Target::Command(CommandTarget::new("true")))
}

/// Tick options for [`RUNNER_A`] with no stop token and no callbacks.
pub(crate) fn opts<'a>(clock: &'a dyn Clock, executor: &'a dyn RunExecutor) -> TickOptions<'a> {
    TickOptions {
        hooks: loops_scheduler::HookSettings::none(),
        on_hook_error: None,
        runner_id: RUNNER_A,
        clock,
        executor,
        max_parallel: DEFAULT_MAX_PARALLEL,
        stop: None,
        on_run: None,
        on_error: None,
    }
}

/// Re-reads a loop.
pub(crate) fn reload(store: &Store, lp: &Loop) -> Loop {
    store.get_loop(&lp.id).unwrap().unwrap()
}

/// Every run of a loop, newest first.
pub(crate) fn runs_of(store: &Store, id: &LoopId) -> Vec<LoopRun> {
    store
        .list_runs(&RunFilter {
            loop_id: Some(*id),
            ..RunFilter::default()
        })
        .unwrap()
}

/// Polls `done` until it holds, failing the test after [`DEADLINE`].
pub(crate) fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + DEADLINE;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// What the fake executor does with one call.
#[derive(Debug, Clone)]
pub(crate) enum Outcome {
    /// Exit 0 with stdout `<loop> attempt <n>`.
    Succeed,
    /// Exit with this non-zero code.
    Fail(i32),
    /// Return `Err` (a failure of loops itself, such as an account error).
    Error(ExecError),
    /// Panic inside the executor.
    Panic,
    /// Succeed, the agent reporting this cost in dollars (issue 27).
    Costs(f64),
}

/// One call the fake executor received.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Call {
    pub(crate) loop_name: String,
    pub(crate) run_id: RunId,
    pub(crate) scheduled_for: Timestamp,
    pub(crate) attempt: u32,
}

#[derive(Debug, Default)]
struct Gate {
    open: bool,
    permits: usize,
}

#[derive(Debug, Default)]
struct State {
    outcomes: HashMap<String, VecDeque<Outcome>>,
    gates: HashMap<String, Gate>,
    spawns: HashMap<String, ProcessRef>,
    calls: Vec<Call>,
    in_flight: HashMap<String, usize>,
    current: usize,
    max: usize,
    max_per_loop: HashMap<String, usize>,
    waiting: HashMap<String, usize>,
    cancelled: Vec<(String, String)>,
}

/// A [`RunExecutor`] that spawns nothing: it returns scripted outcomes per
/// loop name, records its calls and concurrency, reports a scripted process
/// through `on_spawn`, and blocks gated loops until the test releases them
/// or the run is cancelled.
pub(crate) struct FakeExecutor<'c> {
    clock: &'c dyn Clock,
    state: Mutex<State>,
    changed: Condvar,
}

impl<'c> FakeExecutor<'c> {
    pub(crate) fn new(clock: &'c dyn Clock) -> FakeExecutor<'c> {
        FakeExecutor {
            clock,
            state: Mutex::default(),
            changed: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues outcomes for a loop's next calls; later calls succeed.
    pub(crate) fn script(&self, loop_name: &str, outcomes: impl IntoIterator<Item = Outcome>) {
        self.lock()
            .outcomes
            .entry(loop_name.to_owned())
            .or_default()
            .extend(outcomes);
    }

    /// Makes every call of a loop block until released or cancelled.
    pub(crate) fn gate(&self, loop_name: &str) {
        self.lock()
            .gates
            .insert(loop_name.to_owned(), Gate::default());
    }

    /// Opens a loop's gate for good.
    pub(crate) fn release(&self, loop_name: &str) {
        self.lock()
            .gates
            .entry(loop_name.to_owned())
            .or_default()
            .open = true;
        self.changed.notify_all();
    }

    /// Lets exactly one blocked (or future) call of a loop through.
    pub(crate) fn release_one(&self, loop_name: &str) {
        self.lock()
            .gates
            .entry(loop_name.to_owned())
            .or_default()
            .permits += 1;
        self.changed.notify_all();
    }

    /// Makes a loop's calls report `process` through `on_spawn`.
    pub(crate) fn spawns(&self, loop_name: &str, process: ProcessRef) {
        self.lock().spawns.insert(loop_name.to_owned(), process);
    }

    /// Opens every gate when dropped, so a test that fails while a run is
    /// blocked fails at once instead of at the gate's deadline. Bind it
    /// first thing inside `thread::scope`.
    pub(crate) fn open_on_drop(&self) -> OpenOnDrop<'_, 'c> {
        OpenOnDrop(self)
    }

    pub(crate) fn calls(&self) -> Vec<Call> {
        self.lock().calls.clone()
    }

    pub(crate) fn calls_for(&self, loop_name: &str) -> Vec<Call> {
        self.calls()
            .into_iter()
            .filter(|c| c.loop_name == loop_name)
            .collect()
    }

    /// The most calls that were ever executing at once.
    pub(crate) fn max_concurrency(&self) -> usize {
        self.lock().max
    }

    /// The most calls of one loop that were ever executing at once.
    pub(crate) fn max_per_loop(&self, loop_name: &str) -> usize {
        self.lock()
            .max_per_loop
            .get(loop_name)
            .copied()
            .unwrap_or(0)
    }

    /// Calls executing right now.
    pub(crate) fn current(&self) -> usize {
        self.lock().current
    }

    /// Calls of a loop blocked at its gate right now.
    pub(crate) fn waiting(&self, loop_name: &str) -> usize {
        self.lock().waiting.get(loop_name).copied().unwrap_or(0)
    }

    /// `(loop, reason)` for every call that saw its run cancelled.
    pub(crate) fn cancellations(&self) -> Vec<(String, String)> {
        self.lock().cancelled.clone()
    }

    /// Blocks at the loop's gate, if it has one, until released or
    /// cancelled.
    fn pass_gate(&self, name: &str, control: &RunControl<'_>) {
        let deadline = Instant::now() + DEADLINE;
        let mut state = self.lock();
        if !state.gates.contains_key(name) {
            return;
        }
        *state.waiting.entry(name.to_owned()).or_default() += 1;
        loop {
            let gate = state.gates.entry(name.to_owned()).or_default();
            if gate.open {
                break;
            }
            if gate.permits > 0 {
                gate.permits -= 1;
                break;
            }
            if let Some(reason) = control.cancel.reason() {
                state.cancelled.push((name.to_owned(), reason));
                break;
            }
            assert!(
                Instant::now() < deadline,
                "run of {name} was neither released nor cancelled"
            );
            // The cancel token has no waker for us, so the wait is short.
            state = self
                .changed
                .wait_timeout(state, Duration::from_millis(2))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        *state.waiting.entry(name.to_owned()).or_default() -= 1;
    }
}

/// See [`FakeExecutor::open_on_drop`].
pub(crate) struct OpenOnDrop<'f, 'c>(&'f FakeExecutor<'c>);

impl Drop for OpenOnDrop<'_, '_> {
    fn drop(&mut self) {
        for gate in self.0.lock().gates.values_mut() {
            gate.open = true;
        }
        self.0.changed.notify_all();
    }
}

impl RunExecutor for FakeExecutor<'_> {
    fn execute(
        &self,
        lp: &Loop,
        run: &LoopRun,
        control: &RunControl<'_>,
    ) -> Result<ExecutorResult, RunError> {
        let name = lp.name.clone();
        let started = self.clock.now();
        let spawned = {
            let mut s = self.lock();
            s.calls.push(Call {
                loop_name: name.clone(),
                run_id: run.id,
                scheduled_for: run.scheduled_for,
                attempt: run.attempt,
            });
            s.current += 1;
            s.max = s.max.max(s.current);
            let n = s.in_flight.entry(name.clone()).or_default();
            *n += 1;
            let n = *n;
            let m = s.max_per_loop.entry(name.clone()).or_default();
            *m = (*m).max(n);
            s.spawns.get(&name).copied()
        };
        if let Some(process) = spawned {
            (control.on_spawn)(process);
        }
        self.pass_gate(&name, control);
        let outcome = {
            let mut s = self.lock();
            s.current -= 1;
            *s.in_flight.entry(name.clone()).or_default() -= 1;
            s.outcomes
                .get_mut(&name)
                .and_then(VecDeque::pop_front)
                .unwrap_or(Outcome::Succeed)
        };
        self.changed.notify_all();
        let finished = self.clock.now();
        let cost = match outcome {
            Outcome::Costs(dollars) => loops_core::Usd::from_dollars(dollars),
            _ => None,
        };
        let (status, code) = match outcome {
            Outcome::Succeed | Outcome::Costs(_) => (ExecutorStatus::Succeeded, 0),
            Outcome::Fail(code) => (ExecutorStatus::Failed, code),
            Outcome::Error(error) => return Err(RunError::Exec(error)),
            Outcome::Panic => panic!("fake executor told to panic"),
        };
        Ok(ExecutorResult {
            status,
            exit_code: Some(code),
            stdout: format!("{name} attempt {}", run.attempt),
            stderr: String::new(),
            error: (code != 0).then(|| format!("process exited with code {code}")),
            pid: spawned.map(|p| p.pid),
            started_at: started,
            finished_at: finished,
            duration_ms: finished.millis_since(started),
            facts: loops_core::RunFacts {
                cost_usd: cost,
                ..Default::default()
            },
        })
    }
}
