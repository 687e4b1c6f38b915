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

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::Scope;

/// A job: runs on a worker, returns the report to send.
type Job<'scope, R> = Box<dyn FnOnce() -> R + Send + 'scope>;

/// The queue and the counter the workers share.
struct Shared<'scope, R> {
    jobs: Mutex<Receiver<Job<'scope, R>>>,
    finished: AtomicUsize,
}

/// Worker threads of `scope` that run submitted jobs and send each job's
/// report to `reports`. Dropping the pool lets its idle threads end; a
/// running job finishes first (the scope joins it).
pub struct Pool<'scope, 'env, R> {
    scope: &'scope Scope<'scope, 'env>,
    jobs: Sender<Job<'scope, R>>,
    shared: Arc<Shared<'scope, R>>,
    reports: Sender<R>,
    submitted: usize,
    threads: usize,
}

impl<'scope, 'env, R: Send + 'scope> Pool<'scope, 'env, R> {
    /// An empty pool: no thread starts before the first job.
    pub fn new(scope: &'scope Scope<'scope, 'env>, reports: Sender<R>) -> Self {
        let (jobs, queue) = mpsc::channel();
        Pool {
            scope,
            jobs,
            shared: Arc::new(Shared {
                jobs: Mutex::new(queue),
                finished: AtomicUsize::new(0),
            }),
            reports,
            submitted: 0,
            threads: 0,
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
        self.submitted += 1;
        let running = self.submitted - self.shared.finished.load(Ordering::Acquire);
        if running > self.threads {
            self.start_thread();
        }
        let job = move || {
            catch_unwind(AssertUnwindSafe(job))
                .unwrap_or_else(|panic| on_panic(panic_message(&*panic)))
        };
        // The receiver lives as long as `shared`, which this pool holds.
        let _ = self.jobs.send(Box::new(job));
    }

    /// The threads started so far.
    #[cfg(test)]
    fn threads(&self) -> usize {
        self.threads
    }

    fn start_thread(&mut self) {
        let shared = Arc::clone(&self.shared);
        let reports = self.reports.clone();
        self.threads += 1;
        self.scope.spawn(move || {
            loop {
                // One idle worker waits on the queue while the others wait
                // for the lock; the lock is released before the job runs.
                let job = shared
                    .jobs
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .recv();
                // The pool was dropped: no more jobs.
                let Ok(job) = job else { return };
                let report = job();
                shared.finished.fetch_add(1, Ordering::Release);
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
