//! Time injection: the executor, the workflow runner, the scheduler and the
//! daemon read "now" only through a [`Clock`], so tests drive them with a
//! [`ManualClock`]. The system clock (`loops_exec::SystemClock`) lives with
//! the I/O: this crate reads no clock.
//!
//! Instants come from the clock; durations and timeouts are measured with
//! `std::time::Instant`, which a manual clock does not move.

use std::sync::Mutex;

use crate::Timestamp;

/// A source of the current instant.
pub trait Clock: Send + Sync {
    /// The current instant.
    fn now(&self) -> Timestamp;
}

impl<C: Clock + ?Sized> Clock for &C {
    fn now(&self) -> Timestamp {
        (**self).now()
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
