//! The database clock: a daemon on a database other hosts share
//! (PostgreSQL, issue 15) keeps the database's time, not its host's.
//!
//! Every host must plan the same slots and compare the same lease expiries,
//! so the daemon's clock is its host clock corrected by the offset to the
//! database server's clock, measured at start and with every renewal of
//! its membership (a few round trips a minute). An offset above
//! [`SKEW_WARN_MS`] is logged: the host's own clock is wrong, and anything
//! else on it that trusts the time is too.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Instant;

use loops_core::{Clock, LeaseId, Timestamp};
use loops_store::{Store, StoreError};

/// The host clock's offset from the database's above which the daemon
/// warns (and `daemon status` does).
pub const SKEW_WARN_MS: i64 = 2_000;

/// Something whose offset to the database's clock a daemon measures.
pub trait ClockSync: Sync {
    /// Measures the offset against `store`'s database clock and applies
    /// it; returns the host clock's skew (database minus host, ms), or
    /// `None` when the database has no clock of its own (SQLite).
    fn sync(&self, store: &Store) -> Result<Option<i64>, StoreError>;
}

/// The host clock `C`, corrected by the offset to the database's clock.
#[derive(Debug)]
pub struct DatabaseClock<C> {
    host: C,
    offset_ms: AtomicI64,
}

impl<C: Clock> DatabaseClock<C> {
    /// `host`, uncorrected until the first [`ClockSync::sync`].
    pub fn new(host: C) -> DatabaseClock<C> {
        DatabaseClock {
            host,
            offset_ms: AtomicI64::new(0),
        }
    }

    /// The offset applied now (database minus host, ms).
    pub fn offset_ms(&self) -> i64 {
        self.offset_ms.load(Ordering::Relaxed)
    }
}

impl<C: Clock> Clock for DatabaseClock<C> {
    fn now(&self) -> Timestamp {
        self.host.now().add_ms(self.offset_ms())
    }
}

impl<C: Clock> ClockSync for DatabaseClock<C> {
    fn sync(&self, store: &Store) -> Result<Option<i64>, StoreError> {
        let before = self.host.now();
        let sent = Instant::now();
        let Some(database) = store.database_now()? else {
            return Ok(None);
        };
        // The server read its clock about halfway through the round trip.
        let half = i64::try_from(sent.elapsed().as_millis() / 2).unwrap_or(0);
        let skew = database.millis_since(before.add_ms(half));
        self.offset_ms.store(skew, Ordering::Relaxed);
        Ok(Some(skew))
    }
}

/// The clock skew the daemon last measured against a shared database, and
/// whether it was over [`SKEW_WARN_MS`], so the log says so when it
/// crosses the line, not every minute.
#[derive(Debug, Default)]
pub(super) struct SkewReport {
    warned: bool,
    last: Option<i64>,
}

impl SkewReport {
    /// Records the last skew in the daemon's membership row, for
    /// `daemon status` on any host.
    pub(super) fn record(&self, store: &Store, lease: &LeaseId, log: &dyn Fn(&str)) {
        if let Some(skew) = self.last
            && let Err(e) = store.record_daemon_skew(lease, skew)
        {
            log(&format!("error: recording the clock skew: {e}"));
        }
    }

    pub(super) fn apply(&mut self, skew: Option<i64>, log: &dyn Fn(&str)) {
        let Some(skew) = skew else { return };
        self.last = Some(skew);
        let over = skew.abs() > SKEW_WARN_MS;
        if over && !self.warned {
            log(&format!(
                "warning: this host's clock is {skew} ms off the database's (over {SKEW_WARN_MS} \
                 ms); loops plans from the database's clock, but fix this host's time \
                 (NTP) for everything else"
            ));
        } else if !over && self.warned {
            log(&format!(
                "this host's clock is back within {skew} ms of the database's"
            ));
        }
        self.warned = over;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use loops_core::ManualClock;

    use super::*;

    #[test]
    fn a_clock_on_sqlite_stays_the_host_clock() {
        let t: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let clock = DatabaseClock::new(ManualClock::new(t));
        let store = Store::open_in_memory(Arc::new(|_| false)).unwrap();
        assert_eq!(clock.sync(&store).unwrap(), None);
        assert_eq!(clock.now(), t);
    }

    #[test]
    fn a_clock_on_postgres_takes_the_database_time() {
        let Some(db) = loops_store::testing::fresh_database("daemon::database_clock") else {
            return;
        };
        let url = loops_store::DatabaseUrl::parse(db.url()).unwrap();
        let store = Store::open_postgres(&url, "test", "host-a", Arc::new(|_| false)).unwrap();
        // A host clock far in the past: the offset brings it to the server's.
        let past: Timestamp = "2001-01-01T00:00:00Z".parse().unwrap();
        let clock = DatabaseClock::new(ManualClock::new(past));
        let skew = clock.sync(&store).unwrap().unwrap();
        assert!(skew > 10 * 365 * 86_400_000, "{skew}");
        let server = store.database_now().unwrap().unwrap();
        let diff = clock.now().millis_since(server).abs();
        assert!(
            diff < 60_000,
            "corrected clock {} vs server {server}",
            clock.now()
        );
    }
}
