//! Time injection: the scheduler and daemon read "now" only through a
//! [`Clock`], so tests drive them with a [`ManualClock`].
//!
//! Instants come from the clock; durations and timeouts are measured with
//! `std::time::Instant`, which a manual clock does not move.

use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use loops_core::Timestamp;

/// A source of the current instant.
pub trait Clock: Send + Sync {
    /// The current instant.
    fn now(&self) -> Timestamp;
}

/// The system wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        let ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        // A wall clock outside the years 0000–9999 is a broken host; clamp
        // rather than fail every write.
        Timestamp::EPOCH.add_ms(ms)
    }
}

/// A clock that moves only when told to.
#[derive(Debug)]
pub struct ManualClock {
    now: Mutex<Timestamp>,
}

impl ManualClock {
    /// A clock reading `start`.
    pub fn new(start: Timestamp) -> ManualClock {
        ManualClock {
            now: Mutex::new(start),
        }
    }

    /// Moves the clock forward by `ms` milliseconds.
    pub fn advance(&self, ms: i64) {
        let mut now = self.now.lock().unwrap_or_else(|e| e.into_inner());
        *now = now.add_ms(ms);
    }

    /// Sets the clock.
    pub fn set(&self, to: Timestamp) {
        *self.now.lock().unwrap_or_else(|e| e.into_inner()) = to;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        *self.now.lock().unwrap_or_else(|e| e.into_inner())
    }
}
