//! Retention (issue 14): one gc pass over the history, batch by batch
//! ([`collect_garbage`], which `loops gc` runs too), and the daemon's
//! periodic pass (`--gc-max-age`, `--gc-keep-per-loop`).
//!
//! A pass plans each batch without the write lock, deletes it in one short
//! write transaction, and then pauses, so writers waiting for the lock (the
//! daemon's claims and finalizes, a CLI command) get it between two
//! batches instead of racing the next one. The store's busy handler
//! retries a waiting writer every millisecond, so a pause of at least
//! 10 ms lets it in. The pause is also `PACE` times the batch's whole
//! cycle (planning, deleting, checkpointing), not only its write. Paced
//! on the write alone, a pass was busy about half of its time, and on a
//! small machine a daemon's runs beside it waited for a CPU that gc kept
//! busy (`docs/perf.md`, "Retention batches"). So gc now works at most a
//! third of the time, its write lock included.
//!
//! Deleting a run costs one page write in the table and in each of its six
//! indexes, and old runs lie scattered over the file, so a batch's time
//! depends on the disk and the cache more than on its size. The pass sizes
//! its batches by time instead: it starts small and aims each batch at
//! `TARGET_HOLD` of write lock, within the policy's batch size.
//!
//! The daemon runs its passes on a thread of their own, with its own
//! [`Store`], so the dispatch thread never waits for one. The serve loop
//! decides when a pass is due by its injected clock, first
//! [`GC_FIRST_DELAY`] after start, then every [`GC_PERIOD`] from the start
//! of the previous pass, and logs one line per pass when the thread
//! reports back.
//!
//! Run logs (`logs/<run-id>.log`) go with their runs: [`sweep_run_logs`]
//! removes each log whose run is no longer in the database. It costs one
//! lookup by primary key per log file, so the daemon sweeps only after a
//! pass that deleted runs (`loops gc --apply` and `remove --purge` sweep
//! too). On PostgreSQL with several hosts each host keeps, and sweeps, the
//! logs of the runs it ran.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender, TryRecvError, channel};
use std::thread::Scope;
use std::time::{Duration, Instant};

use loops_core::{RunId, Timestamp};
use loops_store::{
    AutoBackup, GcCounts, GcCursor, GcLoopTally, GcPolicy, Location, SpaceUsage, Store, StoreError,
};

use super::options::GcSettings;
use crate::dispatch::Report;

/// How long after the daemon starts its first gc pass runs.
pub const GC_FIRST_DELAY: Duration = Duration::from_secs(5);
/// How often the daemon runs a gc pass: at most once an hour.
pub const GC_PERIOD: Duration = Duration::from_secs(3600);
/// The shortest pause between two deleted batches.
const MIN_PAUSE: Duration = Duration::from_millis(10);
/// A pass rests this many times as long as each batch's cycle took.
const PACE: u32 = 2;
/// How long one batch aims to hold the write lock.
const TARGET_HOLD: Duration = Duration::from_millis(4);

/// The write-ahead log a pass lets grow before it checkpoints: under
/// SQLite's own threshold of 1,000 pages, so another process's commit
/// never has to copy gc's pages itself (issue 32).
const CHECKPOINT_AT: u64 = 3 * 1024 * 1024;
/// The runs of a pass's first batch: few, because it also reads the
/// indexes' upper pages into a cold cache (64 runs took 83 ms there, the
/// batches after them 1 to 5 ms).
const FIRST_BATCH: u32 = 16;
/// The fewest runs of any batch.
const MIN_BATCH: u32 = 8;

/// What one gc pass did (or, in a dry run, would do).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GcReport {
    /// The rows deleted, or that a dry run would delete.
    pub counts: GcCounts,
    /// The loop runs deleted per loop, most first.
    pub per_loop: Vec<GcLoopTally>,
    /// Batches that deleted (or would delete) something.
    pub batches: u64,
    /// The longest write transaction of one batch, from `BEGIN` to the
    /// end of `COMMIT` (zero in a dry run): the longest a writer running
    /// alongside waited for the lock because of the pass.
    pub longest_batch: Duration,
    /// All the batches' write transactions together.
    pub write_time: Duration,
    /// The database's pages before the pass.
    pub before: SpaceUsage,
    /// The database's pages after it.
    pub after: SpaceUsage,
    /// False when `stop` ended the pass early; what was deleted stays
    /// deleted, and the next pass goes on from the start.
    pub finished: bool,
    /// Run logs removed with their runs (the daemon's pass; `loops gc`
    /// calls [`sweep_run_logs`] itself).
    pub logs_removed: u64,
}

/// Removes the run logs in `<data_dir>/logs` whose run is no longer in
/// `store`; returns how many. A missing `logs/`, or one that is a link,
/// removes nothing; a file that cannot be listed or removed is left for
/// the next sweep.
pub fn sweep_run_logs(store: &Store, data_dir: &Path) -> Result<u64, StoreError> {
    let dir = data_dir.join(loops_exec::LOGS_DIR);
    if !std::fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir()) {
        return Ok(0);
    }
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Ok(0);
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(id) = name
            .to_str()
            .and_then(loops_exec::run_id_of_log)
            .and_then(|id| RunId::parse(id).ok())
        else {
            continue;
        };
        if store.get_run(&id)?.is_none() && std::fs::remove_file(entry.path()).is_ok() {
            removed += 1;
        }
    }
    Ok(removed)
}

/// Runs one gc pass with `policy`: deletes the runs that may go when
/// `apply`, or only counts them (a dry run). `stop` is asked before each
/// batch; when it says so the pass ends there, every batch so far being
/// complete on its own. `progress` gets the counts so far after each
/// batch, for a long pass's live view. See the `gc` module of
/// `loops_store` for what may go.
pub fn collect_garbage(
    store: &Store,
    policy: &GcPolicy,
    apply: bool,
    stop: &dyn Fn() -> bool,
    progress: &dyn Fn(&GcCounts),
) -> Result<GcReport, StoreError> {
    let mut report = GcReport {
        before: store.space_usage()?,
        ..GcReport::default()
    };
    let mut cursor = GcCursor::default();
    // A dry run takes no lock: its batches are as large as the policy's.
    let mut sized = *policy;
    if apply {
        sized.batch_size = FIRST_BATCH.min(policy.batch_size).max(1);
    }
    while !cursor.is_done() {
        if stop() {
            return stopped(store, apply, report);
        }
        let cycle = Instant::now();
        let batch = store.plan_gc_batch(&sized, &mut cursor)?;
        if batch.is_empty() {
            continue;
        }
        let counts = if apply {
            paced_write(store, &mut report, &mut sized, policy, cycle, || {
                store.apply_gc_batch(&batch)
            })?
        } else {
            store.count_gc_batch(&batch)?
        };
        if counts.total() == 0 {
            continue;
        }
        report.batches += 1;
        report.counts.add(counts);
        progress(&report.counts);
        merge_tallies(&mut report.per_loop, batch.per_loop);
    }
    // Then the triggers that catch-up folded into others: they belong to
    // no run, so no batch above took them (issue 32). Each batch is read
    // without the lock, on from the last, and deleted by id.
    let mut after: Option<String> = None;
    loop {
        if stop() {
            return stopped(store, apply, report);
        }
        let cycle = Instant::now();
        let gone = if apply {
            let ids = store.plan_old_coalesced_triggers(
                policy.older_than,
                after.as_deref(),
                sized.batch_size,
            )?;
            let Some(last) = ids.last() else { break };
            after = Some(last.clone());
            paced_write(store, &mut report, &mut sized, policy, cycle, || {
                store.delete_old_coalesced_triggers(&ids, policy.older_than)
            })?
        } else {
            store.old_coalesced_triggers(policy.older_than)?
        };
        if gone > 0 {
            report.batches += 1;
            report.counts.coalesced_triggers += gone;
            progress(&report.counts);
        }
        if !apply {
            break;
        }
    }
    if apply {
        store.checkpoint_wal()?;
    }
    report.per_loop.sort_by_key(|t| std::cmp::Reverse(t.runs));
    report.after = store.space_usage()?;
    report.finished = true;
    Ok(report)
}

/// The report of a pass that `stop` ended: every batch so far stands.
fn stopped(store: &Store, apply: bool, mut report: GcReport) -> Result<GcReport, StoreError> {
    if apply {
        store.checkpoint_wal()?;
    }
    report.after = store.space_usage()?;
    Ok(report)
}

/// One write of a pass whose cycle began at `cycle`: timed for the report,
/// the log checkpointed once it is long, the next batch sized by how long
/// this one held the lock, then the rest that lets other writers in.
fn paced_write<T>(
    store: &Store,
    report: &mut GcReport,
    sized: &mut GcPolicy,
    policy: &GcPolicy,
    cycle: Instant,
    write: impl FnOnce() -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    let started = Instant::now();
    let written = write()?;
    let held = started.elapsed();
    // Copied into the file once the log passes the threshold (or when its
    // size cannot be read), outside the write lock.
    if store.wal_backlog().is_none_or(|b| b >= CHECKPOINT_AT) {
        store.checkpoint_wal()?;
    }
    report.longest_batch = report.longest_batch.max(held);
    report.write_time += held;
    sized.batch_size = next_size(sized.batch_size, held, policy.batch_size);
    std::thread::sleep(pause_after(cycle.elapsed()));
    Ok(written)
}

/// The rest after a batch whose cycle (plan, delete, checkpoint) took
/// `work`: [`PACE`] times that, and at least [`MIN_PAUSE`], so a waiting
/// writer gets the lock.
fn pause_after(work: Duration) -> Duration {
    (work * PACE).max(MIN_PAUSE)
}

/// The size of the batch after one of `size` runs that held the lock for
/// `held`: scaled towards `TARGET_HOLD`, at most doubled or halved at
/// once, and within `MIN_BATCH` and `max`.
fn next_size(size: u32, held: Duration, max: u32) -> u32 {
    let held = held.as_micros().max(1);
    let aimed = u128::from(size) * TARGET_HOLD.as_micros() / held;
    let aimed = u32::try_from(aimed).unwrap_or(u32::MAX);
    aimed
        .clamp(size / 2, size.saturating_mul(2))
        .clamp(MIN_BATCH.min(max), max.max(1))
}

/// Adds a batch's tallies; a loop's runs come in order, so a loop that
/// spans two batches is the last tally of the first.
fn merge_tallies(all: &mut Vec<GcLoopTally>, batch: Vec<GcLoopTally>) {
    for tally in batch {
        match all.last_mut() {
            Some(last) if last.loop_id == tally.loop_id => last.runs += tally.runs,
            _ => all.push(tally),
        }
    }
}

/// The daemon's gc thread, as the serve loop sees it.
pub(super) struct GcWorker {
    settings: GcSettings,
    /// Asks the thread for a pass at the given instant; dropped to end it.
    jobs: Option<Sender<Timestamp>>,
    done: Receiver<Result<GcReport, StoreError>>,
    /// Ends a pass between two batches when the daemon stops.
    stop: Arc<AtomicBool>,
    /// When the next pass is due.
    next_at: Timestamp,
    /// A pass is running.
    busy: bool,
}

impl GcWorker {
    /// Starts the gc thread in `scope`; its first pass is due
    /// [`GC_FIRST_DELAY`] after `now`. When a pass ends the thread sends
    /// `wake`, so the serve loop logs it at once.
    pub(super) fn spawn<'scope>(
        scope: &'scope Scope<'scope, '_>,
        database: Location,
        settings: GcSettings,
        wake: Sender<Report>,
        now: Timestamp,
        data_dir: PathBuf,
    ) -> GcWorker {
        let (jobs, inbox) = channel::<Timestamp>();
        let (outbox, done) = channel();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        scope.spawn(move || {
            let mut store = None;
            for at in inbox {
                let result = pass(&mut store, &database, settings, at, &stopped, &data_dir);
                if outbox.send(result).is_err() || wake.send(Report::Wake).is_err() {
                    return;
                }
            }
        });
        GcWorker {
            settings,
            jobs: Some(jobs),
            done,
            stop,
            next_at: now.add_ms(millis(GC_FIRST_DELAY)),
            busy: false,
        }
    }

    /// Logs a pass that ended, and starts the next one when it is due.
    pub(super) fn poll(&mut self, now: Timestamp, log: &dyn Fn(&str)) {
        match self.done.try_recv() {
            Ok(Ok(report)) => {
                self.busy = false;
                log(&describe(&report));
            }
            Ok(Err(e)) => {
                self.busy = false;
                log(&format!("error: gc: {e}; trying again in an hour"));
            }
            Err(TryRecvError::Empty | TryRecvError::Disconnected) => {}
        }
        if self.busy || now < self.next_at {
            return;
        }
        let Some(jobs) = &self.jobs else { return };
        if jobs.send(now).is_ok() {
            self.busy = true;
            self.next_at = now.add_ms(millis(GC_PERIOD));
        } else {
            log("error: the gc thread is gone; no more gc passes until the daemon restarts");
            self.jobs = None;
        }
    }

    /// When the next pass is due, while none runs.
    pub(super) fn next_due(&self) -> Option<Timestamp> {
        (!self.busy && self.jobs.is_some()).then_some(self.next_at)
    }

    /// How the daemon's start-up line names its gc.
    pub(super) fn describe_settings(&self) -> String {
        format!(
            "gc-max-age={}ms gc-keep-per-loop={}",
            self.settings.max_age.as_millis(),
            self.settings.keep_per_loop
        )
    }
}

impl Drop for GcWorker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // The thread ends when its inbox closes.
        self.jobs = None;
    }
}

/// One pass on the gc thread, opening its store the first time.
fn pass(
    store: &mut Option<Store>,
    database: &Location,
    settings: GcSettings,
    at: Timestamp,
    stop: &AtomicBool,
    data_dir: &Path,
) -> Result<GcReport, StoreError> {
    let store = match store {
        Some(store) => store,
        None => {
            // The daemon's first pass: a backup first when asked (at most
            // one an hour); when none can be taken, the pass deletes
            // nothing and the next one tries again. A PostgreSQL
            // database is backed up with pg_dump, by its owner.
            if settings.backup_first
                && let Location::File(file) = database
            {
                loops_store::auto_backup(
                    file,
                    AutoBackup::at(at),
                    "before the daemon's first gc pass",
                )?;
            }
            store.insert(database.open("gc", Arc::new(loops_exec::SystemProbe))?)
        }
    };
    let policy = GcPolicy::new(
        u64::try_from(settings.max_age.as_millis()).unwrap_or(u64::MAX),
        settings.keep_per_loop,
        at,
    );
    let mut report = collect_garbage(
        store,
        &policy,
        true,
        &|| stop.load(Ordering::Relaxed),
        &|_| {},
    )?;
    if report.counts.loop_runs > 0 {
        report.logs_removed = sweep_run_logs(store, data_dir)?;
    }
    Ok(report)
}

/// The log line of a pass.
fn describe(report: &GcReport) -> String {
    let c = &report.counts;
    let mut line = format!(
        "gc: deleted {} loop run(s), {} workflow run(s), {} step run(s), {} event(s) in {} batch(es), longest {} ms",
        c.loop_runs,
        c.workflow_runs,
        c.step_runs,
        c.events,
        report.batches,
        report.longest_batch.as_millis()
    );
    if c.coalesced_triggers > 0 {
        line.push_str(&format!(", {} coalesced trigger(s)", c.coalesced_triggers));
    }
    if report.logs_removed > 0 {
        line.push_str(&format!(" and {} run log(s)", report.logs_removed));
    }
    if !report.finished {
        line.push_str("; stopped early, the daemon is stopping");
    }
    let after = &report.after;
    line.push_str(&format!(
        "; {} of {} KiB free in the database",
        after.free_bytes() / 1024,
        after.total_bytes() / 1024
    ));
    if after.vacuum_would_help() {
        line.push_str(" (`loops gc --vacuum`, with the daemon stopped, would give it back)");
    }
    line
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests;
