//! What the reliability tests share: the long/short switch and the figure
//! lines they print.

use std::time::{Duration, Instant};

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
