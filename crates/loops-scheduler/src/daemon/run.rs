//! `daemon run` (SPEC §7.6): start-up, the named steps of one turn of the
//! loop, the sleep until the next deadline, and the graceful shutdown. The
//! behaviour is described in the `daemon` module docs.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use loops_core::{DaemonLease, LeaseId, Loop, LoopRun, RunStatus, Timestamp};
use loops_exec::started_by;
use loops_store::{LeaseAcquire, LeaseHeartbeat, LeaseRequest, Store, StoreError, new_lease_id};

use super::database_clock::SkewReport;
use super::database_files::DatabaseFiles;
use super::describe::describe_run;
use super::gc::GcWorker;
use super::options::{DaemonOptions, POLL_ONLY_MAX_SLEEP};
use super::pidfile::{PidFile, PidRecord, read_pid_record};
use super::recover::recover_dead_daemons;
use super::wake::{WakeListener, WakeShared, start_listener};
use super::watch::Watches;
use crate::dispatch::{DispatchOptions, Dispatcher, FinalizeMode, Report, TickResult};

/// The reason recorded when another daemon took the lease.
const LEASE_LOST: &str = "daemon lease lost";
/// The reason recorded when `loops daemon stop` asked the daemon to stop.
const STOP_REQUESTED: &str = "stop requested by `loops daemon stop`";
/// The cancel reason of runs cut short by the end of the grace period.
const INTERRUPTED: &str = "interrupted by daemon shutdown";
/// The least the daemon sleeps after a failed turn (a locked database).
const ERROR_BACKOFF: Duration = Duration::from_secs(1);
/// The longest sleep when the wake-up socket could not be bound.
const UNSOCKETED_MAX_SLEEP: Duration = Duration::from_secs(1);
/// The reason recorded when the database file or its WAL was unlinked or
/// replaced under the daemon.
const DATABASE_REPLACED: &str = "database file replaced";

/// Why [`run_daemon`] could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DaemonError {
    /// Another daemon holds the database lease.
    #[error("another loops daemon holds the database lease: pid {pid} on {host} since {since}")]
    LeaseHeld {
        /// The holder's pid.
        pid: u32,
        /// The holder's host.
        host: String,
        /// When the holder took the lease.
        since: Timestamp,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A daemon file could not be written. The OS error is part of the
    /// message, not a `source`, so a printed chain does not repeat it.
    #[error("cannot write {path}: {error}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        error: std::io::Error,
    },
}

/// How [`run_daemon`] ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DaemonExit {
    /// Why it stopped: the stop token's reason, the reason of a stop
    /// request (`loops daemon stop`), `daemon lease lost` or `database file
    /// replaced`.
    pub reason: String,
    /// Runs cut short by the end of the grace period.
    pub interrupted: usize,
}

/// Runs the daemon until `opts.stop` is cancelled, `loops daemon stop` asks
/// it to stop, or the lease is lost (see the `daemon` module docs).
///
/// Fails before doing anything when another daemon holds the lease, or
/// when the pid file names a live daemon that held it.
pub fn run_daemon(store: &Store, opts: &DaemonOptions<'_>) -> Result<DaemonExit, DaemonError> {
    // On a shared database, the database's clock before anything is timed.
    let mut skew = SkewReport::default();
    if let Some(sync) = opts.clock_sync {
        skew.apply(sync.sync(store)?, opts.log);
    }
    let lease = acquire(store, opts)?;
    skew.record(store, &lease.id, opts.log);
    let runner_id = format!("{}:{}:{}", opts.host, opts.pid, lease.id);
    let pid_path = opts.paths.pid_file();
    let pid_file = match PidFile::write(&pid_path, opts.pid) {
        Ok(f) => f,
        Err(error) => {
            let _ = store.release_daemon_lease(&lease.id);
            return Err(DaemonError::Io {
                path: pid_path,
                error,
            });
        }
    };
    let log = opts.log;
    let on_run = |run: &LoopRun| {
        // A slot another runner holds is reported as it stands (SPEC §3.2).
        if run.status == RunStatus::Running && run.claimed_by.as_deref() != Some(&runner_id) {
            log(&format!(
                "slot {} of {} left alone: run {} is in flight under {}",
                run.scheduled_for,
                run.loop_name,
                run.id,
                run.claimed_by.as_deref().unwrap_or("another runner")
            ));
        } else {
            log(&describe_run(run));
        }
    };
    let on_error =
        |lp: &Loop, message: &str| log(&format!("loop {} ({}) failed: {message}", lp.name, lp.id));
    let on_hook_error = |message: &str| log(message);
    let exit = std::thread::scope(|scope| {
        let mut d = Dispatcher::new(
            scope,
            store,
            DispatchOptions {
                runner_id: &runner_id,
                clock: opts.clock,
                executor: opts.executor,
                max_parallel: opts.max_parallel,
                lanes: opts.lanes,
                mode: FinalizeMode::Advance,
                stop: None,
                on_run: Some(&on_run),
                on_error: Some(&on_error),
                hooks: &opts.hooks,
                on_hook_error: Some(&on_hook_error),
                overlap_in_flight: true,
                finalize_attempts: None,
                report_misplaced: false,
            },
        );
        let gc = opts.gc.and_then(|settings| {
            let database = store.location()?;
            Some(GcWorker::spawn(
                scope,
                database,
                settings,
                d.sender(),
                opts.clock.now(),
                opts.paths.dir().to_path_buf(),
            ))
        });
        log(&format!(
            "started pid={} lease={} host={} max-parallel={}{} grace={}ms{}{}",
            opts.pid,
            lease.id,
            opts.host,
            opts.max_parallel,
            describe_lanes(opts.lanes),
            opts.grace.as_millis(),
            gc.as_ref()
                .map_or_else(String::new, |gc| format!(" {}", gc.describe_settings())),
            if store.is_shared() {
                format!(
                    " database=\"{}\"{}",
                    store.backend_kind(),
                    if opts.poll_only { " poll-only" } else { "" }
                )
            } else {
                String::new()
            }
        ));
        let shared = Arc::new(WakeShared::default());
        let tx = d.sender();
        // A signal wakes the daemon, which then finds the token cancelled.
        let _stop_wake = opts.stop.subscribe(move || {
            let _ = tx.send(Report::Wake);
        });
        let socket = opts.paths.socket();
        let listener = match WakeListener::bind(&socket, d.sender(), Arc::clone(&shared)) {
            Ok(listener) => Some(listener),
            Err(e) => {
                log(&format!(
                    "warning: cannot listen on {}: {e}; changes made by the CLI are noticed within {}s",
                    socket.display(),
                    UNSOCKETED_MAX_SLEEP.as_secs()
                ));
                None
            }
        };
        // Wake-ups from other hosts (PostgreSQL); the lines of its thread
        // are logged by the serve loop.
        let listen_lines = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
        let db_listener = if store.is_shared() && !opts.poll_only {
            start_listener(store, &runner_id, &d, &listen_lines, log)
        } else {
            None
        };
        let mut daemon = Daemon {
            store,
            opts,
            polling: store.is_shared() && db_listener.is_none(),
            listen_lines,
            skew,
            lease_id: lease.id,
            runner_id: &runner_id,
            shared,
            grace: opts.grace,
            stop_requested: false,
            // On PostgreSQL there is no file to watch.
            files: DatabaseFiles::snapshot(store.path()),
            next_lease_heartbeat: Instant::now() + lease_period(opts.lease_ttl),
            listening: listener.is_some(),
            lease_lost: false,
            database_gone: false,
            zero_sleeps: 0,
            gc,
            watches: Watches::new(d.sender()),
        };
        recover_dead_daemons(store, opts, &runner_id);
        let reason = daemon.serve(&mut d);
        let interrupted = daemon.shutdown(&mut d, &reason);
        // Hooks still running end within their timeout; their failures
        // are logged before "stopped".
        d.wait_for_hooks();
        drop(listener);
        drop(db_listener);
        DaemonExit {
            reason,
            interrupted,
        }
    });
    drop(pid_file);
    if let Err(e) = store.release_daemon_lease(&lease.id) {
        log(&format!("error: releasing the daemon lease: {e}"));
    }
    log("stopped");
    Ok(exit)
}

/// Takes the daemon lease (SPEC §7.6 startup steps 2–4, §9 item 16).
fn acquire(store: &Store, opts: &DaemonOptions<'_>) -> Result<DaemonLease, DaemonError> {
    let held = |h: &DaemonLease| DaemonError::LeaseHeld {
        pid: h.pid,
        host: h.hostname.clone(),
        since: h.created_at,
    };
    // SPEC §10 item 96: a pid file naming the live holder refuses, even
    // when its lease has expired (a daemon that was suspended).
    let record = read_pid_record(&opts.paths.pid_file());
    if let (Some(r), Some(holder)) = (record, store.get_daemon_lease()?)
        && r.pid != opts.pid
        && holder.pid == r.pid
        && holder.hostname == opts.host
        && holder_alive(&holder, record)
    {
        return Err(held(&holder));
    }
    let req = LeaseRequest {
        id: new_lease_id(),
        pid: opts.pid,
        hostname: opts.host.clone(),
        ttl_ms: millis(opts.lease_ttl),
    };
    // A holder with this very pid is this process: another daemon started
    // in it earlier, never a crashed one.
    let gone = |h: &DaemonLease| h.pid != opts.pid && !holder_alive(h, record);
    match store.acquire_daemon_lease_with(&req, opts.clock.now(), &gone)? {
        LeaseAcquire::Acquired(lease) => Ok(lease),
        LeaseAcquire::Held(holder) => Err(held(&holder)),
    }
}

/// Whether the lease holder's process still runs: its pid exists, is not
/// a zombie, and is the process that took the lease, not a reused pid.
/// When the pid file names the holder with its identity (issue 32), that
/// identity decides, which no wall-clock step moves; otherwise the holder
/// must have started before it took the lease by the wall clock.
fn holder_alive(holder: &DaemonLease, record: Option<PidRecord>) -> bool {
    match record.filter(|r| r.pid == holder.pid) {
        Some(r) => r.took_lease_at(holder.created_at),
        None => started_by(holder.pid, holder.created_at),
    }
}

struct Daemon<'o, 'a> {
    store: &'o Store,
    opts: &'o DaemonOptions<'a>,
    /// On a shared database without a wake-up listener: poll.
    polling: bool,
    /// Lines of the wake-up listener's thread, to log.
    listen_lines: Arc<std::sync::Mutex<Vec<String>>>,
    /// The last measured clock skew against the database.
    skew: SkewReport,
    lease_id: LeaseId,
    runner_id: &'o str,
    /// The pending wake-up and the ignored datagrams.
    shared: Arc<WakeShared>,
    /// How long runs in flight may take to finish on stop: the options',
    /// or the last one `loops daemon stop --grace` asked for.
    grace: Duration,
    /// `loops daemon stop` asked the daemon to stop.
    stop_requested: bool,
    /// The database file and its WAL as the daemon found them.
    files: DatabaseFiles,
    next_lease_heartbeat: Instant,
    listening: bool,
    lease_lost: bool,
    /// The database file or its WAL was unlinked or replaced.
    database_gone: bool,
    /// Consecutive turns that found work due at once, a guard against a
    /// plan that could not make progress.
    zero_sleeps: u32,
    /// The periodic gc, when asked for (`--gc-max-age`).
    gc: Option<GcWorker>,
    /// The paths of `--watch` loops (issue 30, T8).
    watches: Watches,
}

impl Daemon<'_, '_> {
    fn log(&self, message: &str) {
        (self.opts.log)(message);
    }

    /// Why the daemon is to stop: `loops daemon stop`, or the stop token.
    fn stop_reason(&self) -> Option<String> {
        if self.stop_requested {
            return Some(STOP_REQUESTED.to_owned());
        }
        self.opts.stop.reason()
    }

    /// Turns until a stop or a lost lease; returns the reason.
    fn serve(&mut self, d: &mut Dispatcher<'_, '_>) -> String {
        loop {
            if let Some(reason) = self.stop_reason() {
                return reason;
            }
            // Before anything is read: a datagram from now on asks for
            // another turn.
            self.shared.begin_turn();
            let lines = self
                .listen_lines
                .lock()
                .map(|mut l| std::mem::take(&mut *l))
                .unwrap_or_default();
            for line in lines {
                self.log(&line);
            }
            if let Some((n, uid)) = self.shared.take_rejected() {
                self.log(&format!(
                    "warning: ignored {n} datagram(s) on the wake-up socket from uid {uid}, \
                     not this daemon's user"
                ));
            }
            if let Some(changed) = self.files.changed() {
                self.log(&format!(
                    "error: {} was deleted or replaced while the daemon ran; stopping, \
                     so nothing is written into a deleted file (start the daemon again)",
                    changed.display()
                ));
                self.database_gone = true;
                return DATABASE_REPLACED.to_owned();
            }
            if !self.renew_lease() {
                return LEASE_LOST.to_owned();
            }
            let turn = self.turn(d);
            self.log_result(d.take_result());
            if let Some(gc) = &mut self.gc {
                gc.poll(self.opts.clock.now(), self.opts.log);
            }
            let failed = match turn {
                Ok(()) => false,
                Err(e) => {
                    self.log(&format!("error: {e}"));
                    true
                }
            };
            let sleep = self.next_sleep(d, failed);
            if let Some(on_sleep) = self.opts.on_sleep {
                on_sleep(sleep);
            }
            self.wait(d, sleep);
        }
    }

    /// One turn: file watches, plan, apply overlaps, start runs, renew
    /// run leases.
    fn turn(&mut self, d: &mut Dispatcher<'_, '_>) -> Result<(), StoreError> {
        let (now, log) = (self.opts.clock.now(), self.opts.log);
        self.watches.sync(self.store, &self.store.labels(), log)?;
        self.watches.take(now, log);
        self.watches.fire(self.store, now, log)?;
        d.plan(!d.has_queue())?;
        d.plan_overlaps()?;
        d.start_ready()?;
        d.heartbeat()?;
        Ok(())
    }

    /// Renews the daemon lease when due; false when it was lost.
    fn renew_lease(&mut self) -> bool {
        let now = Instant::now();
        if now < self.next_lease_heartbeat {
            return true;
        }
        let ttl = millis(self.opts.lease_ttl);
        match self
            .store
            .heartbeat_daemon_lease(&self.lease_id, ttl, self.opts.clock.now())
        {
            Ok(LeaseHeartbeat::Renewed(_)) => {
                self.next_lease_heartbeat = now + lease_period(self.opts.lease_ttl);
                if let Some(sync) = self.opts.clock_sync {
                    match sync.sync(self.store) {
                        Ok(skew) => {
                            self.skew.apply(skew, self.opts.log);
                            self.skew.record(self.store, &self.lease_id, self.opts.log);
                        }
                        Err(e) => self.log(&format!("error: reading the database clock: {e}")),
                    }
                }
                true
            }
            Ok(LeaseHeartbeat::Lost) => {
                self.lease_lost = true;
                false
            }
            Err(e) => {
                self.log(&format!("error: renewing the daemon lease: {e}"));
                self.next_lease_heartbeat = now + ERROR_BACKOFF;
                true
            }
        }
    }

    /// How long to sleep: until the earliest deadline (see the module docs
    /// of `daemon`).
    fn next_sleep(&mut self, d: &Dispatcher<'_, '_>, failed: bool) -> Duration {
        let now = self.opts.clock.now();
        let mut sleep = self.opts.max_sleep;
        if !self.listening {
            sleep = sleep.min(UNSOCKETED_MAX_SLEEP);
        }
        if self.polling {
            sleep = sleep.min(POLL_ONLY_MAX_SLEEP);
        }
        let mut failed = failed;
        let gc_due = self.gc.as_ref().and_then(GcWorker::next_due);
        let mut at = [d.next_overlap(), gc_due].into_iter().flatten().min();
        match self
            .store
            .next_wake(now, self.runner_id, &d.excluded_loops())
        {
            Ok(wake) => {
                // Queued work means every worker is busy: what else is due
                // waits for a report anyway.
                let due = if d.has_queue() { None } else { wake.due };
                at = [at, due, wake.expiry, wake.lease_expiry]
                    .into_iter()
                    .flatten()
                    .min();
            }
            Err(e) => {
                self.log(&format!("error: {e}"));
                failed = true;
            }
        }
        if let Some(at) = at {
            let ms = u64::try_from(at.millis_since(now)).unwrap_or(0);
            sleep = sleep.min(Duration::from_millis(ms));
        }
        let instant = Instant::now();
        for deadline in [
            d.next_heartbeat(),
            Some(self.next_lease_heartbeat),
            self.watches.next_deadline(),
        ]
        .into_iter()
        .flatten()
        {
            sleep = sleep.min(deadline.saturating_duration_since(instant));
        }
        if failed {
            sleep = sleep.max(ERROR_BACKOFF);
        }
        // A deadline that stays in the past would spin: it cannot, by
        // construction, but a bug here must not burn a core.
        if sleep.is_zero() {
            self.zero_sleeps += 1;
            if self.zero_sleeps > 100 {
                sleep = Duration::from_millis(100);
            }
        } else {
            self.zero_sleeps = 0;
        }
        sleep
    }

    /// Blocks for up to `sleep` until a report arrives, then applies it and
    /// every report already waiting.
    fn wait(&mut self, d: &mut Dispatcher<'_, '_>, sleep: Duration) {
        let mut next = d.wait(sleep);
        while let Some(report) = next {
            if let Report::Stop { grace } = report {
                // The grace a stop request names wins over the options', also
                // when the stop has begun (SIGTERM before the request).
                self.stop_requested = true;
                self.grace = grace.unwrap_or(self.grace);
                next = d.poll();
                continue;
            }
            if matches!(report, Report::Wake) {
                self.watches.woken();
            }
            // One batch for the reports waiting now; an error is logged and
            // the others are still applied.
            let applied = d.handle_waiting(report, |result| {
                if let Err(e) = result {
                    self.log(&format!("error: {e}"));
                }
                Ok(())
            });
            if let Err(e) = applied {
                self.log(&format!("error: {e}"));
            }
            next = d.poll();
        }
    }

    /// Stops gracefully (SPEC §9 item 17); returns how many runs were cut
    /// short.
    fn shutdown(&mut self, d: &mut Dispatcher<'_, '_>, reason: &str) -> usize {
        if self.lease_lost {
            self.log(LEASE_LOST);
        } else {
            self.log(&format!("stop signal received ({reason})"));
        }
        d.drain_queue();
        let started = Instant::now();
        let mut interrupted = 0;
        let mut announced = false;
        while d.in_flight() > 0 {
            // Another daemon owns the database now, or the file is gone:
            // nothing of ours may keep running unrecorded.
            let grace = if self.lease_lost || self.database_gone {
                Duration::ZERO
            } else {
                self.grace
            };
            // The grace is capped at 100 years; an Instant that cannot go
            // that far means "never".
            let deadline = started.checked_add(grace);
            if !announced {
                announced = true;
                self.log(&format!(
                    "waiting up to {}ms for {} run(s) to finish",
                    grace.as_millis(),
                    d.in_flight()
                ));
            }
            if interrupted == 0 && deadline.is_some_and(|d| Instant::now() >= d) {
                interrupted = d.in_flight();
                self.log(&format!(
                    "grace period over: interrupting {interrupted} run(s)"
                ));
                d.interrupt_all(INTERRUPTED);
            }
            if !self.lease_lost {
                self.renew_lease();
            }
            if let Err(e) = d.heartbeat() {
                self.log(&format!("error: {e}"));
            }
            let instant = Instant::now();
            let mut sleep = if interrupted == 0 {
                deadline.map_or(self.opts.max_sleep, |d| {
                    d.saturating_duration_since(instant)
                })
            } else {
                ERROR_BACKOFF
            };
            for deadline in [d.next_heartbeat(), Some(self.next_lease_heartbeat)]
                .into_iter()
                .flatten()
            {
                sleep = sleep.min(deadline.saturating_duration_since(instant));
            }
            self.wait(d, sleep);
            self.log_result(d.take_result());
        }
        interrupted
    }

    /// Logs what the dispatcher did that `on_run` does not report.
    fn log_result(&self, result: TickResult) {
        for run in &result.recovered {
            self.log(&describe_run(run));
        }
        for lp in &result.expired {
            self.log(&format!("loop {} ({}) expired", lp.name, lp.id));
        }
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// How often the daemon lease is renewed: a third of its time to live.
fn lease_period(ttl: Duration) -> Duration {
    (ttl / 3).max(Duration::from_millis(10))
}

/// The lanes of the start line, when the daemon has any (issue 17).
fn describe_lanes(lanes: crate::Lanes) -> String {
    let mut text = String::new();
    if let Some(n) = lanes.command {
        text.push_str(&format!(" command-concurrency={n}"));
    }
    if let Some(n) = lanes.agent {
        text.push_str(&format!(" agent-concurrency={n}"));
    }
    text
}
