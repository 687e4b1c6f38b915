//! What the reliability tests share: the long/short switch and the figure
//! lines they print.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Whether the long variants run (`LOOPS_RELIABILITY_LONG=1`, set by
/// `cargo xtask reliability`).
pub(crate) fn long() -> bool {
    std::env::var_os("LOOPS_RELIABILITY_LONG").is_some_and(|v| v != "0" && !v.is_empty())
}

/// `short` in the default run, `long` in the long one.
pub(crate) fn pick<T>(short: T, long_value: T) -> T {
    if long() { long_value } else { short }
}

/// Prints one figure line, `reliability: <test>: <text>`, to stdout (shown
/// with `--nocapture`, which `cargo xtask reliability` passes).
pub(crate) fn figure(test: &str, text: &str) {
    println!("reliability: {test}: {text}");
}

/// Prints the figure line `<what>: <n> failures in <secs>s` for `test`
/// (timed from `started`), then fails, showing the first five, unless
/// `failures` is empty.
pub(crate) fn report_failures(test: &str, what: &str, started: Instant, failures: &[String]) {
    figure(
        test,
        &format!(
            "{what}: {} failures in {:.1}s",
            failures.len(),
            started.elapsed().as_secs_f64()
        ),
    );
    assert!(
        failures.is_empty(),
        "{} failures, the first ones:\n{}",
        failures.len(),
        failures
            .iter()
            .take(5)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// Polls `check` every 10 ms until it returns `Some` or `within` passes.
pub(crate) fn wait_for<T>(within: Duration, mut check: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + within;
    loop {
        if let Some(v) = check() {
            return Some(v);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A xorshift64 random source, seeded from `LOOPS_RELIABILITY_SEED` or the
/// clock; the seed is printed as a figure so a failure can be replayed.
pub(crate) struct Rng(u64);

impl Rng {
    /// A source for `test`, announcing its seed.
    pub(crate) fn seeded(test: &str) -> Rng {
        let seed = std::env::var("LOOPS_RELIABILITY_SEED")
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
            .unwrap_or_else(|| {
                #[expect(
                    clippy::disallowed_methods,
                    reason = "entropy for a seed or a unique name, not a reading of time"
                )]
                let now = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .unwrap_or_default();
                now.as_secs()
                    ^ (u64::from(now.subsec_nanos()) << 20)
                    ^ u64::from(std::process::id())
            });
        figure(
            test,
            &format!("seed {seed} (replay with LOOPS_RELIABILITY_SEED={seed})"),
        );
        Rng(seed.max(1))
    }

    /// An independent source for another thread.
    pub(crate) fn fork(&mut self) -> Rng {
        Rng(self.next_u64().max(1))
    }

    /// The next 64 random bits.
    pub(crate) fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub(crate) fn below(&mut self, n: usize) -> usize {
        let n = u64::try_from(n).unwrap_or(u64::MAX).max(1);
        usize::try_from(self.next_u64() % n).unwrap_or(0)
    }

    /// True with probability `1/n`.
    pub(crate) fn one_in(&mut self, n: usize) -> bool {
        self.below(n) == 0
    }

    /// One of `items` (not empty).
    pub(crate) fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    /// A duration between `lo_ms` and `hi_ms` milliseconds.
    pub(crate) fn millis(&mut self, lo_ms: u64, hi_ms: u64) -> Duration {
        let span = usize::try_from(hi_ms.saturating_sub(lo_ms) + 1).unwrap_or(usize::MAX);
        Duration::from_millis(lo_ms + self.below(span) as u64)
    }
}
