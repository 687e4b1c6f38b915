//! [`SystemClock`]: the one wall clock every crate reads "now" from in
//! production. The [`Clock`] trait and the tests' `ManualClock` live in
//! `loops_core`, which reads no clock itself.

use std::time::{SystemTime, UNIX_EPOCH};

use loops_core::{Clock, Timestamp};

/// The system wall clock, to the millisecond.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    #[expect(
        clippy::disallowed_methods,
        reason = "this is the one wall clock every runner reads"
    )]
    fn now(&self) -> Timestamp {
        let ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        // A wall clock outside the years 0000–9999 is a broken host; clamp
        // rather than fail every write.
        Timestamp::EPOCH.add_ms(ms)
    }
}
