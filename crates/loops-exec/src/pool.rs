//! Worker threads that are reused from one job to the next.
//!
//! The workflow runner and the dispatcher (tick and daemon) each run their
//! jobs (a step, a loop run) on worker threads of a [`std::thread::scope`].
//! Starting a thread per job was a large part of a short step
//! (`docs/perf.md#worker-thread-pool`). A [`Pool`] starts a thread only
//! when every thread it has is busy, so it grows to the most jobs that ever
//! ran at once (the caller's parallel limit) and no further, and its
//! threads end with the pool.
//!
//! A job returns its report, which the worker sends to the caller's channel
//! *after* it has offered itself for the next job. So by the time the
//! caller hears that a job is done, its thread is free, and a job submitted
//! in answer never waits for a thread or starts one more.
//!
//! A job that panics still reports: the pool catches the panic and sends
//! the report the caller supplied for it, built from the panic's message.
//! Both callers wait for one report per job (and heartbeat the leases of
//! what runs meanwhile), so a job that never reported would hold them up
//! forever. The worker thread survives the panic and takes the next job.
//!
//! A worker that has waited [`IDLE`] for a job ends (issue 32: no thread
//! idles in a pool forever, so a daemon after a burst of runs goes back to
//! its idle size). Idle workers form a stack, and a job goes to the one
//! that became idle last: under a steady stream of jobs the few workers at
//! the top take them all, and the surplus below really waits [`IDLE`] and
//! ends. (Had they taken turns, each would get a job well within [`IDLE`]
//! and none would ever end.) Each idle worker waits on a channel of its
//! own, whose sender is its entry on the stack. A submitter pops the entry
//! and sends the job; a worker whose wait ran out removes its entry and
//! ends, both under the stack's lock. A worker that finds its entry gone
//! was popped by a submitter as it gave up, and waits for that job, so a
//! job never waits with no thread to take it.

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::mpsc::{self, RecvTimeoutError, SendError, Sender};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::Scope;
use std::time::Duration;

/// How long a worker waits for a job before it ends.
pub(crate) const IDLE: Duration = Duration::from_secs(10);

/// A job: runs on a worker, returns the report to send.
type Job<'scope, R> = Box<dyn FnOnce() -> R + Send + 'scope>;

/// The idle workers, and whether the pool is gone.
struct Idle<'scope, R> {
    /// Each idle worker's id and where to send its next job; the one that
    /// became idle last is on top.
    stack: Vec<(u64, Sender<Job<'scope, R>>)>,
    /// The pool was dropped: a worker that finishes its job ends.
    closed: bool,
}

/// What the pool and its workers share.
struct Shared<'scope, R> {
    idle: Mutex<Idle<'scope, R>>,
    /// Workers that have not ended.
    live: AtomicUsize,
}

impl<'scope, R> Shared<'scope, R> {
    fn idle(&self) -> MutexGuard<'_, Idle<'scope, R>> {
        // The lock is never held across a job, so a panic cannot poison it
        // halfway through a change.
        self.idle.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Worker threads of `scope` that run submitted jobs and send each job's
/// report to `reports`. Dropping the pool lets its idle threads end; a
/// running job finishes first (the scope joins it).
pub struct Pool<'scope, 'env, R> {
    scope: &'scope Scope<'scope, 'env>,
    shared: Arc<Shared<'scope, R>>,
    reports: Sender<R>,
    /// How long a worker waits for a job ([`IDLE`]).
    idle: Duration,
    /// The id of the next worker started.
    next_worker: u64,
}

impl<'scope, 'env, R: Send + 'scope> Pool<'scope, 'env, R> {
    /// An empty pool: no thread starts before the first job.
    pub fn new(scope: &'scope Scope<'scope, 'env>, reports: Sender<R>) -> Self {
        Self::with_idle(scope, reports, IDLE)
    }

    /// A pool whose workers end after `idle` without a job.
    pub fn with_idle(
        scope: &'scope Scope<'scope, 'env>,
        reports: Sender<R>,
        idle: Duration,
    ) -> Self {
        Pool {
            scope,
            shared: Arc::new(Shared {
                idle: Mutex::new(Idle {
                    stack: Vec::new(),
                    closed: false,
                }),
                live: AtomicUsize::new(0),
            }),
            reports,
            idle,
            next_worker: 0,
        }
    }

    /// Runs `job` on a free worker, starting one if none is free. If `job`
    /// panics, `on_panic` is called on the worker with the panic's message
    /// and its report is sent instead.
    ///
    /// Whatever `job` shares with the caller must stay usable after a
    /// panic: the caller goes on with it, as it would after any failed job.
    pub fn submit(
        &mut self,
        job: impl FnOnce() -> R + Send + 'scope,
        on_panic: impl FnOnce(String) -> R + Send + 'scope,
    ) {
        let job: Job<'scope, R> = Box::new(move || {
            catch_unwind(AssertUnwindSafe(job))
                .unwrap_or_else(|panic| on_panic(panic_message(&*panic)))
        });
        let top = self.shared.idle().stack.pop();
        let job = match top {
            // A popped worker waits for this send, even if its wait ran
            // out meanwhile; should it be gone after all, a new thread
            // takes the job.
            Some((_, worker)) => match worker.send(job) {
                Ok(()) => return,
                Err(SendError(job)) => job,
            },
            None => job,
        };
        self.start_thread(job);
    }

    /// The workers that have not ended.
    #[cfg(test)]
    fn threads(&self) -> usize {
        self.shared.live.load(SeqCst)
    }

    fn start_thread(&mut self, first: Job<'scope, R>) {
        let shared = Arc::clone(&self.shared);
        let reports = self.reports.clone();
        let idle = self.idle;
        let id = self.next_worker;
        self.next_worker += 1;
        shared.live.fetch_add(1, SeqCst);
        self.scope.spawn(move || {
            let mut job = first;
            while let Some(next) = run_and_wait(&shared, &reports, idle, id, job) {
                job = next;
            }
            shared.live.fetch_sub(1, SeqCst);
        });
    }
}

impl<R> Drop for Pool<'_, '_, R> {
    /// Idle workers end (their channels close); running ones end after
    /// their job.
    fn drop(&mut self) {
        let stack = {
            let mut idle = self.shared.idle();
            idle.closed = true;
            std::mem::take(&mut idle.stack)
        };
        drop(stack);
    }
}

/// Runs `job` on worker `id`, offers the worker for the next job, sends the
/// report, and waits up to `idle` for the next job: `None` when the worker
/// is to end.
fn run_and_wait<'scope, R>(
    shared: &Shared<'scope, R>,
    reports: &Sender<R>,
    idle: Duration,
    id: u64,
    job: Job<'scope, R>,
) -> Option<Job<'scope, R>> {
    let report = job();
    let (offer, next) = mpsc::channel();
    let offered = {
        let mut stack = shared.idle();
        if !stack.closed {
            stack.stack.push((id, offer));
        }
        !stack.closed
    };
    // Sent once the worker is free (see the module doc). A closed channel
    // means the caller stopped listening.
    let _ = reports.send(report);
    if !offered {
        return None;
    }
    match next.recv_timeout(idle) {
        Ok(job) => Some(job),
        // The pool was dropped and cleared the stack.
        Err(RecvTimeoutError::Disconnected) => None,
        Err(RecvTimeoutError::Timeout) => {
            let mut stack = shared.idle();
            if let Some(at) = stack.stack.iter().position(|(worker, _)| *worker == id) {
                stack.stack.remove(at);
                return None;
            }
            drop(stack);
            // A submitter popped this worker as its wait ran out: its job
            // (or, if the pool was dropped, a closed channel) is coming.
            next.recv().ok()
        }
    }
}

/// The message of a caught panic: its text when it is a string (what
/// `panic!` makes), else a placeholder.
fn panic_message(panic: &(dyn Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("non-string panic payload")
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Barrier;

    #[test]
    fn runs_every_job_and_reuses_idle_threads() {
        let (tx, rx) = mpsc::channel();
        std::thread::scope(|s| {
            let mut pool = Pool::new(s, tx);
            // One at a time: each job is done before the next is submitted,
            // so one thread serves them all.
            for i in 0..20 {
                pool.submit(move || i * 2, |_| unreachable!());
                assert_eq!(rx.recv().unwrap(), i * 2);
            }
            assert_eq!(pool.threads(), 1);
        });
    }

    #[test]
    fn grows_to_the_jobs_running_at_once() {
        let (tx, rx) = mpsc::channel();
        let barrier = Barrier::new(4);
        std::thread::scope(|s| {
            let mut pool = Pool::new(s, tx);
            // Four jobs that can only finish together need four threads.
            for i in 0..4 {
                let barrier = &barrier;
                pool.submit(
                    move || {
                        barrier.wait();
                        i
                    },
                    |_| unreachable!(),
                );
            }
            let mut got: Vec<i32> = (0..4).map(|_| rx.recv().unwrap()).collect();
            got.sort_unstable();
            assert_eq!(got, [0, 1, 2, 3]);
            assert_eq!(pool.threads(), 4);
            // All four are free again: a fifth job starts no thread.
            pool.submit(|| 9, |_| unreachable!());
            assert_eq!(rx.recv().unwrap(), 9);
            assert_eq!(pool.threads(), 4);
        });
    }

    #[test]
    fn idle_workers_end_and_a_later_job_still_runs() {
        let (tx, rx) = mpsc::channel();
        std::thread::scope(|s| {
            let mut pool = Pool::with_idle(s, tx, Duration::from_millis(20));
            pool.submit(|| 1, |_| unreachable!());
            assert_eq!(rx.recv().unwrap(), 1);
            poll_until("the worker never ended", || pool.threads() == 0);
            pool.submit(|| 2, |_| unreachable!());
            assert_eq!(rx.recv().unwrap(), 2);
        });
    }

    #[test]
    fn a_job_sent_as_its_worker_gives_up_is_never_left_waiting() {
        let (tx, rx) = mpsc::channel();
        std::thread::scope(|s| {
            // Workers that give up at once: every submit races a retiring
            // worker, and every job must still report.
            let mut pool = Pool::with_idle(s, tx, Duration::from_micros(50));
            for round in 0..3_000_u32 {
                // Between rounds, a pause about as long as the idle time.
                let spin = std::time::Instant::now();
                while spin.elapsed() < Duration::from_micros(u64::from(round % 100)) {}
                for i in 0..3 {
                    pool.submit(move || round * 3 + i, |_| unreachable!());
                }
                for _ in 0..3 {
                    let got = rx.recv_timeout(Duration::from_secs(10));
                    assert!(
                        got.is_ok(),
                        "a job of round {round} was left with no worker"
                    );
                }
            }
        });
    }

    /// Calls `done` until it holds; fails with `what` after 10 s.
    fn poll_until(what: &str, mut done: impl FnMut() -> bool) {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !done() {
            assert!(std::time::Instant::now() < deadline, "{what}");
            std::thread::yield_now();
        }
    }

    #[test]
    fn surplus_workers_end_under_a_steady_stream_of_jobs() {
        let (tx, rx) = mpsc::channel();
        let barrier = Barrier::new(4);
        std::thread::scope(|s| {
            let mut pool = Pool::with_idle(s, tx, Duration::from_millis(30));
            // A burst: four jobs that can only finish together.
            for i in 0..4 {
                let barrier = &barrier;
                pool.submit(
                    move || {
                        barrier.wait();
                        i
                    },
                    |_| unreachable!(),
                );
            }
            for _ in 0..4 {
                rx.recv().unwrap();
            }
            assert_eq!(pool.threads(), 4);
            // Then a steady stream, one job at a time, much more often than
            // the idle time: one worker serves it and the other three end.
            let mut n = 0;
            let mut one_job = |pool: &mut Pool<'_, '_, i32>| {
                n += 1;
                pool.submit(move || n, |_| unreachable!());
                assert_eq!(rx.recv().unwrap(), n);
            };
            poll_until("surplus workers never ended under a steady stream", || {
                one_job(&mut pool);
                pool.threads() == 1
            });
            one_job(&mut pool);
            assert_eq!(pool.threads(), 1);
        });
    }

    #[test]
    fn dropping_the_pool_ends_idle_workers_and_running_ones_after_their_job() {
        let (tx, rx) = mpsc::channel();
        let (release, released) = mpsc::channel::<()>();
        std::thread::scope(|s| {
            // Workers that would idle far longer than the test waits.
            let mut pool = Pool::with_idle(s, tx, Duration::from_secs(60));
            pool.submit(
                move || {
                    released.recv().unwrap();
                    "slow"
                },
                |_| unreachable!(),
            );
            pool.submit(|| "quick", |_| unreachable!());
            assert_eq!(rx.recv().unwrap(), "quick");
            assert_eq!(pool.threads(), 2);
            let shared = Arc::clone(&pool.shared);
            let live = || shared.live.load(SeqCst);
            drop(pool);
            poll_until("the idle worker outlived its pool", || live() == 1);
            release.send(()).unwrap();
            assert_eq!(rx.recv().unwrap(), "slow");
            poll_until("the busy worker went idle in a dropped pool", || {
                live() == 0
            });
        });
    }

    #[test]
    fn a_panicking_job_reports_through_on_panic_and_its_thread_goes_on() {
        let (tx, rx) = mpsc::channel();
        std::thread::scope(|s| {
            let mut pool = Pool::new(s, tx);
            let failed = |message: String| format!("panicked: {message}");
            pool.submit(|| panic!("static text"), failed);
            assert_eq!(rx.recv().unwrap(), "panicked: static text");
            let n = 7;
            pool.submit(move || panic!("formatted {n}"), failed);
            assert_eq!(rx.recv().unwrap(), "panicked: formatted 7");
            pool.submit(|| std::panic::panic_any(42_u8), failed);
            assert_eq!(rx.recv().unwrap(), "panicked: non-string panic payload");
            // The thread that caught them runs the next job.
            pool.submit(|| "fine".to_owned(), failed);
            assert_eq!(rx.recv().unwrap(), "fine");
            assert_eq!(pool.threads(), 1);
        });
    }
}
