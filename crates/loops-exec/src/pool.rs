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
//! A job returns its report, which the pool sends to the caller's channel
//! *after* counting the job as finished. So by the time the caller hears
//! that a job is done, its thread is free, and a job submitted in answer
//! never waits for a thread or starts one more.
//!
//! A job that panics still reports: the pool catches the panic and sends
//! the report the caller supplied for it, built from the panic's message.
//! Both callers wait for one report per job (and heartbeat the leases of
//! what runs meanwhile), so a job that never reported would hold them up
//! forever. The worker thread survives the panic and takes the next job.
//!
//! A worker that has waited [`IDLE`] for a job ends (issue 32: no thread
//! idles in a pool forever, so a daemon after a burst of runs goes back to
//! its idle size). It leaves only once no job is waiting for a thread: a
//! worker gives up its place (`live`) before it looks at the jobs sent and
//! not yet taken, and a submitter counts its job as sent before it looks at
//! `live`, so of the two, at least one sees the other, and a job never
//! waits with no thread to take it.

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::Scope;
use std::time::Duration;

/// How long a worker waits for a job before it ends.
pub(crate) const IDLE: Duration = Duration::from_secs(10);

/// A job: runs on a worker, returns the report to send.
type Job<'scope, R> = Box<dyn FnOnce() -> R + Send + 'scope>;

/// The queue and the counters the workers share.
struct Shared<'scope, R> {
    jobs: Mutex<Receiver<Job<'scope, R>>>,
    /// Jobs sent, taken by a worker, and finished.
    sent: AtomicUsize,
    taken: AtomicUsize,
    finished: AtomicUsize,
    /// Workers that have not ended.
    live: AtomicUsize,
}

/// Worker threads of `scope` that run submitted jobs and send each job's
/// report to `reports`. Dropping the pool lets its idle threads end; a
/// running job finishes first (the scope joins it).
pub struct Pool<'scope, 'env, R> {
    scope: &'scope Scope<'scope, 'env>,
    jobs: Sender<Job<'scope, R>>,
    shared: Arc<Shared<'scope, R>>,
    reports: Sender<R>,
    /// How long a worker waits for a job ([`IDLE`]).
    idle: Duration,
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
        let (jobs, queue) = mpsc::channel();
        Pool {
            scope,
            jobs,
            shared: Arc::new(Shared {
                jobs: Mutex::new(queue),
                sent: AtomicUsize::new(0),
                taken: AtomicUsize::new(0),
                finished: AtomicUsize::new(0),
                live: AtomicUsize::new(0),
            }),
            reports,
            idle,
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
        let job = move || {
            catch_unwind(AssertUnwindSafe(job))
                .unwrap_or_else(|panic| on_panic(panic_message(&*panic)))
        };
        let sent = self.shared.sent.fetch_add(1, SeqCst) + 1;
        // The receiver lives as long as `shared`, which this pool holds.
        let _ = self.jobs.send(Box::new(job));
        let running = sent - self.shared.finished.load(SeqCst);
        if running > self.shared.live.load(SeqCst) {
            self.start_thread();
        }
    }

    /// The workers that have not ended.
    #[cfg(test)]
    fn threads(&self) -> usize {
        self.shared.live.load(SeqCst)
    }

    fn start_thread(&mut self) {
        let shared = Arc::clone(&self.shared);
        let reports = self.reports.clone();
        let idle = self.idle;
        shared.live.fetch_add(1, SeqCst);
        self.scope.spawn(move || {
            loop {
                // One idle worker waits on the queue while the others wait
                // for the lock; the lock is released before the job runs.
                let job = {
                    let queue = shared.jobs.lock().unwrap_or_else(PoisonError::into_inner);
                    match queue.recv_timeout(idle) {
                        Ok(job) => Some(job),
                        // The pool was dropped: no more jobs.
                        Err(RecvTimeoutError::Disconnected) => None,
                        Err(RecvTimeoutError::Timeout) => {
                            shared.live.fetch_sub(1, SeqCst);
                            if shared.sent.load(SeqCst) == shared.taken.load(SeqCst) {
                                return;
                            }
                            // A job came as it gave up: take it after all.
                            shared.live.fetch_add(1, SeqCst);
                            continue;
                        }
                    }
                };
                let Some(job) = job else {
                    shared.live.fetch_sub(1, SeqCst);
                    return;
                };
                shared.taken.fetch_add(1, SeqCst);
                let report = job();
                shared.finished.fetch_add(1, SeqCst);
                // A closed channel means the caller stopped listening.
                let _ = reports.send(report);
            }
        });
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
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            while pool.threads() > 0 {
                assert!(
                    std::time::Instant::now() < deadline,
                    "the worker never ended"
                );
                std::thread::yield_now();
            }
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
