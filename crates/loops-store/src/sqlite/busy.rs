//! How a SQLite writer waits for the lock another connection holds.

use super::open::BUSY_TIMEOUT_MS;

/// How long a waiting writer sleeps before it tries for the lock again.
const BUSY_RETRY_MS: u64 = 1;

/// The busy handler: whether to try again after `tries` failed tries, and
/// if so after sleeping [`BUSY_RETRY_MS`], until [`BUSY_TIMEOUT_MS`] is
/// spent.
///
/// SQLite's own handler (`busy_timeout`) sleeps 1, 2, 5, 10, 15 and 20 ms,
/// then 25, 50 and 100: a writer that has waited through a gc batch or two
/// then sleeps past the pause gc leaves between batches (10 ms at least)
/// and waits for the next ones too. Trying every millisecond gets in
/// within a millisecond of the lock's release: beside a gc pass over
/// 1,000,000 runs the daemon's runs started 6 ms late at p50 instead of
/// 16; p99 stayed near 100 ms, for reasons the retries do not reach
/// (`docs/perf.md`, "Retention batches").
pub(super) fn wait_for_the_lock(tries: i32) -> bool {
    let again = may_try_again(tries);
    if again {
        std::thread::sleep(std::time::Duration::from_millis(BUSY_RETRY_MS));
    }
    again
}

/// Whether a writer that failed `tries` times has time left to try again.
fn may_try_again(tries: i32) -> bool {
    u64::try_from(tries).is_ok_and(|n| n < BUSY_TIMEOUT_MS / BUSY_RETRY_MS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_waiting_writer_tries_every_millisecond_for_the_busy_timeout() {
        assert!(may_try_again(0));
        let last = i32::try_from(BUSY_TIMEOUT_MS / BUSY_RETRY_MS).unwrap() - 1;
        assert!(may_try_again(last));
        assert!(!may_try_again(last + 1));
        assert!(!may_try_again(-1));
        assert_eq!(BUSY_RETRY_MS, 1);
    }
}
