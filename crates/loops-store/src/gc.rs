//! Retention (issue 14): deleting old finished runs, a batch at a time, so
//! a `loops.db` stops growing with its history (`loops gc` and the
//! daemon's periodic gc).
//!
//! A pass walks the history with a [`GcCursor`]: [`Store::plan_gc_batch`]
//! reads the next batch of runs that may go, without taking the write lock;
//! [`Store::apply_gc_batch`] deletes a batch in one short write
//! transaction, checking every rule again under the lock; and
//! [`Store::count_gc_batch`] says what a batch would delete (a dry run).
//! Each batch stands alone: a pass stopped between two batches, by a crash
//! or a stop, leaves a consistent database and loses nothing that should
//! stay, and the next pass starts over.
//!
//! What may go:
//! - a **loop run** that is finished (any status but running), was created
//!   before [`GcPolicy::older_than`], and is not among the newest
//!   [`GcPolicy::keep_per_loop`] runs of its loop, by creation time. The
//!   newest run of a loop always stays, even with a keep of 0. A run
//!   whose loop waits to retry its slot stays (deleting it would restart
//!   the slot's attempts), and so does a run that a workflow run that has
//!   not finished points to. Its workflow runs go with it, with their step
//!   runs and events.
//! - a **standalone workflow run** (`loops workflows run`: no loop run, or
//!   one that no longer exists) that is finished and older than the cutoff,
//!   beyond the newest `keep_per_loop` standalone runs of its workflow
//!   (again at least one), with its step runs and events.
//! - a **coalesced trigger**: one that catch-up `latest` folded into a
//!   newer trigger of its loop before the cutoff. It never runs and names
//!   no run, so no run takes it along; a pass deletes these last
//!   ([`Store::plan_old_coalesced_triggers`]). Every other trigger goes
//!   with its run, or with its loop.
//!
//! Ages count from `created_at`, when a run was claimed (a retry keeps its
//! row's first claim), because that column is indexed per loop: the newest
//! runs of a loop and the oldest are both at the ends of an index range.
//! A status this version does not know counts as not finished, so a newer
//! version's states are kept.

use loops_core::Timestamp;

use crate::Store;
use crate::error::Result;

pub(crate) mod ops;

/// The most loop runs (or standalone workflow runs) one batch deletes,
/// unless a [`GcPolicy`] says otherwise. Old runs lie scattered over the
/// file, and deleting 500 of them with their index entries took 7 to 17 ms
/// on 1,000,000 runs, so a caller that shares the database sizes its
/// batches by time below this (`loops_scheduler::collect_garbage` does).
pub const DEFAULT_GC_BATCH: u32 = 500;

/// What a gc pass may delete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GcPolicy {
    /// Only runs created before this instant may go.
    pub older_than: Timestamp,
    /// The newest runs of each loop (and standalone runs of each workflow)
    /// that always stay, whatever their age. The newest one always stays,
    /// so 0 keeps one.
    pub keep_per_loop: u32,
    /// The most runs one batch deletes (at least 1).
    pub batch_size: u32,
}

impl GcPolicy {
    /// Runs older than `max_age_ms` at `now` may go, beyond the newest
    /// `keep_per_loop` of each loop; batches of [`DEFAULT_GC_BATCH`].
    pub fn new(max_age_ms: u64, keep_per_loop: u32, now: Timestamp) -> GcPolicy {
        let age = i64::try_from(max_age_ms).unwrap_or(i64::MAX);
        GcPolicy {
            older_than: now.checked_add_ms(-age).unwrap_or(Timestamp::EPOCH),
            keep_per_loop,
            batch_size: DEFAULT_GC_BATCH,
        }
    }

    /// How many of the newest runs of a group stay: at least one.
    pub(crate) fn kept(&self) -> u32 {
        self.keep_per_loop.max(1)
    }

    /// How many rows one batch deletes: at least one.
    pub(crate) fn batch(&self) -> u32 {
        self.batch_size.max(1)
    }
}

/// Where a gc pass is in the history: which phase, which group (a loop or
/// a workflow; on SQLite all loop runs are one group), and how far along
/// its runs. Start a pass with `GcCursor::default()` and
/// keep calling [`Store::plan_gc_batch`] until [`GcCursor::is_done`].
///
/// Its contents belong to the backend.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GcCursor {
    pub(crate) phase: GcPhase,
    /// The group the walk is in, or was in last: a loop id (phase one, on
    /// PostgreSQL; on SQLite the whole table, "") or a workflow id (phase
    /// two); `None` before the phase's first.
    pub(crate) key: Option<String>,
    /// Within `key`: the next run to look at is the first after this
    /// position, in the order the walk goes (newest first, but SQLite's
    /// loop runs oldest first): on SQLite `(created_at, rowid)`, on
    /// PostgreSQL, which has no row numbers, `(id, created_at in ms)`.
    /// `None` once `key` is done.
    pub(crate) after: Option<(String, i64)>,
}

impl GcCursor {
    /// True when the pass has looked at every run.
    pub fn is_done(&self) -> bool {
        self.phase == GcPhase::Done
    }
}

/// The phases of a pass.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum GcPhase {
    /// Loop runs: oldest first on SQLite, loop by loop on PostgreSQL.
    #[default]
    LoopRuns,
    /// Standalone workflow runs, workflow by workflow.
    WorkflowRuns,
    /// Nothing left to look at.
    Done,
}

/// The runs one batch would delete, from [`Store::plan_gc_batch`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GcBatch {
    /// Ids of loop runs that may go.
    pub(crate) loop_runs: Vec<String>,
    /// Ids of standalone workflow runs that may go.
    pub(crate) workflow_runs: Vec<String>,
    /// The loop runs of the batch, a tally for each loop.
    pub per_loop: Vec<GcLoopTally>,
}

impl GcBatch {
    /// True when the batch deletes nothing.
    pub fn is_empty(&self) -> bool {
        self.loop_runs.is_empty() && self.workflow_runs.is_empty()
    }
}

/// How many runs of one loop a batch (or a pass) deletes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GcLoopTally {
    /// The loop's id as its runs record it (the loop may be gone).
    pub loop_id: String,
    /// The loop's name as its runs record it.
    pub loop_name: String,
    /// Loop runs deleted.
    pub runs: u64,
}

/// Rows a batch or a pass deleted, or would delete.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GcCounts {
    /// `loop_runs` rows.
    pub loop_runs: u64,
    /// `workflow_runs` rows: those of the deleted loop runs, and standalone
    /// ones.
    pub workflow_runs: u64,
    /// `workflow_step_runs` rows of those workflow runs.
    pub step_runs: u64,
    /// `workflow_events` rows of those workflow runs.
    pub events: u64,
    /// `loop_triggers` rows that catch-up folded into another trigger
    /// before the cutoff ([`Store::delete_old_coalesced_triggers`]); the
    /// triggers of deleted runs go with them, uncounted.
    pub coalesced_triggers: u64,
}

impl GcCounts {
    /// Adds `other` to these counts.
    pub fn add(&mut self, other: GcCounts) {
        self.loop_runs += other.loop_runs;
        self.workflow_runs += other.workflow_runs;
        self.step_runs += other.step_runs;
        self.events += other.events;
        self.coalesced_triggers += other.coalesced_triggers;
    }

    /// Every row.
    pub fn total(&self) -> u64 {
        self.loop_runs + self.workflow_runs + self.step_runs + self.events + self.coalesced_triggers
    }
}

/// How the database file uses its pages, from SQLite's own counters.
///
/// On PostgreSQL the pages are the server's blocks (`block_size`, 8 KiB
/// by default) and the count is the database's size on disk
/// (`pg_database_size`); there is no free list to read: autovacuum marks
/// the space deleted rows leave for reuse inside each table, so
/// `freelist_count` is 0 and [`SpaceUsage::vacuum_would_help`] is false.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SpaceUsage {
    /// Bytes per page (PostgreSQL: per block).
    pub page_size: u64,
    /// Pages in the database, free ones included (PostgreSQL: the
    /// database's size in blocks, rounded up).
    pub page_count: u64,
    /// Free pages: space deleted rows left, reused by later writes and
    /// given back to the file system only by a `VACUUM` (PostgreSQL:
    /// always 0, see above).
    pub freelist_count: u64,
}

impl SpaceUsage {
    /// Bytes of free pages.
    pub fn free_bytes(&self) -> u64 {
        self.page_size * self.freelist_count
    }

    /// Bytes of all pages.
    pub fn total_bytes(&self) -> u64 {
        self.page_size * self.page_count
    }

    /// Whether a `VACUUM` would give back a worthwhile share of the file:
    /// more than a fifth of its pages are free.
    pub fn vacuum_would_help(&self) -> bool {
        self.page_count > 0 && self.freelist_count * 5 > self.page_count
    }
}

/// What [`Store::vacuum`] gave back: the size on disk of the database
/// file and its WAL, before and after.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Vacuumed {
    /// Bytes of `loops.db` and `loops.db-wal` before the `VACUUM`.
    pub bytes_before: u64,
    /// Bytes of the two after it.
    pub bytes_after: u64,
}

impl Store {
    /// Reads the next batch of a gc pass (see the `gc` module docs for what
    /// may go): at most [`GcPolicy::batch_size`] runs, moving `cursor` past
    /// every run it looked at. It only reads, so it never blocks a writer.
    ///
    /// The batch may be empty before the pass is over (a batch also stops
    /// after looking at a bounded number of loops and runs); keep calling
    /// until [`GcCursor::is_done`]. A batch holds loop runs or standalone
    /// workflow runs, never both.
    pub fn plan_gc_batch(&self, policy: &GcPolicy, cursor: &mut GcCursor) -> Result<GcBatch> {
        self.backend().plan_gc_batch(policy, cursor)
    }

    /// The rows [`Store::apply_gc_batch`] would delete for `batch` now: its
    /// runs with their workflow runs, step runs and events. Only reads.
    pub fn count_gc_batch(&self, batch: &GcBatch) -> Result<GcCounts> {
        self.backend().count_gc_batch(batch)
    }

    /// Deletes `batch` in one write transaction: each run only if it may
    /// still go (finished, no unfinished workflow run pointing to it, no
    /// retry pending for its slot), together with its workflow runs, their
    /// step runs and events. A newer run can only push a planned run
    /// further from the newest of its loop, so the keep rule still holds.
    /// Returns the rows deleted; all of them go, or none.
    ///
    /// On PostgreSQL the daemons of several hosts may apply overlapping
    /// batches at once: each run is deleted by one of them, a run another
    /// one holds or deleted first is left to it, and the counts are the
    /// rows this call deleted.
    ///
    /// The commit does not checkpoint the write-ahead log, even when it
    /// has grown past SQLite's threshold, so the lock is released as soon
    /// as the rows are gone: call [`Store::checkpoint_wal`] after it. From
    /// the first call on, this handle leaves every checkpoint to that call.
    pub fn apply_gc_batch(&self, batch: &GcBatch) -> Result<GcCounts> {
        self.backend().apply_gc_batch(batch)
    }

    /// Copies what the write-ahead log holds into the database file, as far
    /// as readers allow, without taking the write lock or waiting for
    /// anyone (SQLite's passive checkpoint). Run after each
    /// [`Store::apply_gc_batch`], it keeps the log short, so the other
    /// processes' commits do not checkpoint the pages gc wrote. On
    /// PostgreSQL, which checkpoints by itself, it does nothing.
    pub fn checkpoint_wal(&self) -> Result<()> {
        self.backend().checkpoint_wal()
    }

    /// The bytes the write-ahead log holds that no checkpoint has copied
    /// into the database file yet, read from SQLite's shared-memory index
    /// (no lock, no query); `None` on PostgreSQL, or when it cannot be
    /// read. A gc pass checkpoints when this passes a threshold rather than
    /// after every batch, so a page that several batches change is copied
    /// into the file once (issue 32).
    pub fn wal_backlog(&self) -> Option<u64> {
        self.backend().wal_backlog()
    }

    /// The database's pages: their size, their number, and how many are
    /// free.
    pub fn space_usage(&self) -> Result<SpaceUsage> {
        self.backend().space_usage()
    }

    /// Gives the free pages of a SQLite database file back to the file
    /// system (`loops gc --vacuum`): SQLite's `VACUUM` rewrites the
    /// database without them, then the WAL is checkpointed into the file
    /// and emptied. Returns the size of the file and its WAL before and
    /// after.
    ///
    /// It holds the write lock for as long as rewriting the whole file
    /// takes, and needs as much free disk as the database takes, so run it
    /// with no daemon on the database. `None`, and nothing done, on
    /// PostgreSQL, where autovacuum makes the space deleted rows leave
    /// reusable and giving it back (`VACUUM FULL`, which locks each table)
    /// is the server administrator's call; and in memory.
    pub fn vacuum(&self) -> Result<Option<Vacuumed>> {
        let (crate::Db::Sqlite(sq), Some(path)) = (&self.conn, self.path.as_deref()) else {
            return Ok(None);
        };
        let size = || {
            let wal = {
                let mut name = path.as_os_str().to_owned();
                name.push("-wal");
                std::path::PathBuf::from(name)
            };
            [path, wal.as_path()]
                .iter()
                .filter_map(|p| std::fs::metadata(p).ok())
                .map(|m| m.len())
                .sum::<u64>()
        };
        let bytes_before = size();
        sq.vacuum()?;
        Ok(Some(Vacuumed {
            bytes_before,
            bytes_after: size(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::Store;
    use crate::sqlite::open::testing::private_tempdir;

    #[test]
    fn vacuum_gives_free_pages_back_on_a_file_only() {
        let dir = private_tempdir();
        let db = dir.path().join(crate::DB_FILE);
        let store = Store::open(&db, Arc::new(|_| false)).unwrap();
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.execute_batch(
            "CREATE TABLE filler (x BLOB);
             WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000)
             INSERT INTO filler SELECT randomblob(1000) FROM n;
             DELETE FROM filler;",
        )
        .unwrap();
        drop(conn);
        let vacuumed = store.vacuum().unwrap().expect("a file to vacuum");
        assert!(
            vacuumed.bytes_after * 4 < vacuumed.bytes_before,
            "{vacuumed:?}"
        );
        let on_disk = std::fs::metadata(&db).unwrap().len();
        assert_eq!(vacuumed.bytes_after, on_disk, "the WAL is empty");
        assert_eq!(store.space_usage().unwrap().freelist_count, 0);

        let memory = Store::open_in_memory(Arc::new(|_| false)).unwrap();
        assert_eq!(memory.vacuum().unwrap(), None);
    }

    #[test]
    fn the_wal_backlog_is_what_a_checkpoint_has_not_copied() {
        let dir = private_tempdir();
        let db = dir.path().join(crate::DB_FILE);
        let store = Store::open(&db, Arc::new(|_| false)).unwrap();
        store.checkpoint_wal().unwrap();
        assert_eq!(store.wal_backlog(), Some(0));
        // Another connection writes 100 pages and leaves them in the log.
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.execute_batch(
            "PRAGMA wal_autocheckpoint = 0; CREATE TABLE filler (x BLOB);
             WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100)
             INSERT INTO filler SELECT randomblob(3000) FROM n;",
        )
        .unwrap();
        let page = store.space_usage().unwrap().page_size;
        let backlog = store.wal_backlog().expect("the log's header");
        assert!(
            backlog >= 100 * page && backlog < 120 * page,
            "{backlog} bytes, pages of {page}"
        );
        store.checkpoint_wal().unwrap();
        assert_eq!(store.wal_backlog(), Some(0));
        drop(conn);
        let memory = Store::open_in_memory(Arc::new(|_| false)).unwrap();
        assert_eq!(memory.wal_backlog(), None);
    }

    /// The POSIX locks this process holds on the file at `path`, from
    /// `/proc/locks` (`N: POSIX ADVISORY READ <pid> <maj>:<min>:<inode> …`).
    /// The kernel lists the locks a page at a time, and a list that other
    /// processes change between two pages can skip a line, so this is the
    /// most of five readings: a lock that is gone is missing from all.
    fn own_locks(path: &std::path::Path) -> usize {
        use std::os::unix::fs::MetadataExt;
        let inode = format!(":{} ", std::fs::metadata(path).unwrap().ino());
        let pid = format!(" {} ", std::process::id());
        (0..5)
            .map(|_| {
                std::fs::read_to_string("/proc/locks")
                    .unwrap()
                    .lines()
                    .filter(|l| l.contains("POSIX") && l.contains(&pid) && l.contains(&inode))
                    .count()
            })
            .max()
            .unwrap_or(0)
    }

    #[test]
    fn reading_the_wal_backlog_keeps_sqlites_locks_on_the_shared_memory() {
        if !std::path::Path::new("/proc/locks").exists() {
            eprintln!("skipped: no /proc/locks");
            return;
        }
        let dir = private_tempdir();
        let db = dir.path().join(crate::DB_FILE);
        let store = Store::open(&db, Arc::new(|_| false)).unwrap();
        store.checkpoint_wal().unwrap();
        let shm = dir.path().join(format!("{}-shm", crate::DB_FILE));
        let held = own_locks(&shm);
        assert!(held > 0, "SQLite holds a lock on {}", shm.display());
        for _ in 0..3 {
            assert!(store.wal_backlog().is_some());
            // Closing a descriptor of the file would drop them all, and
            // another process would truncate the memory under this one.
            assert_eq!(own_locks(&shm), held, "the locks after reading the backlog");
        }
    }
}
