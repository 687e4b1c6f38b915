//! When a running process last printed (issue 27): the supervisor marks
//! every read of its stdout or stderr here, and the runner copies the
//! instant into the run's record at each heartbeat, so `runs <id>` can say
//! how long an agent has been silent.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use loops_core::Timestamp;

/// The last output of one run, shared between its supervisor and its
/// runner. Instants are measured on the monotonic clock from the moment it
/// was made, and shown on the wall clock the runner read then.
#[derive(Debug)]
pub struct OutputSeen {
    base: Timestamp,
    base_instant: Instant,
    /// Milliseconds from the base to the last output, plus one; 0 is none.
    last: AtomicU64,
}

impl OutputSeen {
    /// Nothing seen yet; `now` is the runner's clock at this moment.
    pub fn new(now: Timestamp) -> OutputSeen {
        OutputSeen {
            base: now,
            base_instant: Instant::now(),
            last: AtomicU64::new(0),
        }
    }

    /// Marks output read now.
    pub(crate) fn saw(&self) {
        let ms = u64::try_from(self.base_instant.elapsed().as_millis()).unwrap_or(u64::MAX - 1);
        self.last.store(ms.saturating_add(1), Ordering::Relaxed);
    }

    /// When output was last read, if ever.
    pub fn last(&self) -> Option<Timestamp> {
        match self.last.load(Ordering::Relaxed) {
            0 => None,
            n => self
                .base
                .checked_add_ms(i64::try_from(n - 1).unwrap_or(i64::MAX)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_is_seen_until_marked_then_the_mark_is_after_the_base() {
        let base: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let seen = OutputSeen::new(base);
        assert_eq!(seen.last(), None);
        seen.saw();
        let last = seen.last().unwrap();
        assert!(last >= base && last < base.add_ms(60_000), "{last}");
    }
}
