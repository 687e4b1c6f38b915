//! The daemon phase of `cargo xtask bench --scale`, on a seeded database:
//! 20 loops every second (`--cmd true --no-shell`), `loops daemon start`,
//! then a window of `--daemon-secs` that starts one second after the start
//! returned (the warm-up: the catch-up run of each loop and the daemon's
//! start-up work fall before it).
//!
//! Over the runs of those 20 loops whose slot falls in the window:
//! lateness (`startedAt − scheduledFor`) p50, p99 and max, and the daemon's
//! CPU per run: its `utime + stime` (`/proc/<pid>/stat`, which counts
//! threads that ended too) and the nanosecond schedstat sum over its live
//! threads, read at the window's two ends, divided by those runs. The
//! children's own CPU is not the daemon's and is not counted.
//!
//! Afterwards the daemon is stopped and the 20 loops too, so a kept data
//! directory has nothing due.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::bench::loops;
use crate::bench_daemon::{cpu_ns, cpu_ticks, now_ms, parse_runs};

/// Loops due every second.
const DUE_LOOPS: usize = 20;
/// A run counts as slow when it starts later than this.
pub(crate) const SLOW_RUN_MS: i64 = 10;
/// What the window waits after `daemon start` returns.
const WARM_UP_MS: i64 = 1000;

/// The daemon's figures on one database.
pub(crate) struct Figures {
    /// Wall time of `loops daemon start`, in ms.
    pub(crate) start_ms: f64,
    /// Runs of the due loops whose slot fell in the window, and how many
    /// slots the window held.
    pub(crate) runs: usize,
    pub(crate) slots: usize,
    /// Lateness of those runs, in ms.
    pub(crate) p50: i64,
    pub(crate) p99: i64,
    pub(crate) max: i64,
    /// The runs that started more than [`SLOW_RUN_MS`] late, and the
    /// three latest, as (seconds into the window, lateness): whether a
    /// tail is one slow turn or many.
    pub(crate) slow_runs: usize,
    pub(crate) latest: Vec<(i64, i64)>,
    /// Daemon CPU per run in the window, in ms: from `utime + stime`, and
    /// from the threads' schedstat.
    pub(crate) cpu_ms: f64,
    pub(crate) sched_ms: f64,
}

/// Runs the phase for `secs` seconds on `data`.
pub(crate) fn measure(bin: &Path, data: &Path, secs: u64) -> Result<Figures, String> {
    let names: Vec<String> = (0..DUE_LOOPS).map(|k| format!("scale-due-{k}")).collect();
    for name in &names {
        crate::bench::create_true(bin, data, name, "1s")?;
    }
    let t = Instant::now();
    let out = loops(bin, data, &["daemon", "start"])?;
    let start_ms = t.elapsed().as_secs_f64() * 1000.0;
    let pid: u32 = out
        .trim()
        .strip_prefix("started pid=")
        .and_then(|p| p.parse().ok())
        .ok_or_else(|| format!("daemon start said {out:?}"))?;

    let window_start = now_ms() + WARM_UP_MS;
    let window_end = window_start + i64::try_from(secs).unwrap_or(i64::MAX / 2_000) * 1000;
    let cpu = (|| {
        sleep_until(window_start);
        let (ticks0, ns0) = (cpu_ticks(pid)?, cpu_ns(pid));
        sleep_until(window_end);
        let (ticks1, ns1) = (cpu_ticks(pid)?, cpu_ns(pid));
        // The window's last runs finish before the daemon is asked to stop.
        std::thread::sleep(Duration::from_secs(1));
        Ok::<_, String>((ticks1 - ticks0, ns1.saturating_sub(ns0)))
    })();
    let stopped = loops(bin, data, &["daemon", "stop", "--grace", "5s"]);
    let (ticks, ns) = cpu?;
    stopped?;

    // (seconds into the window, lateness) of every run in it.
    let mut runs = Vec::new();
    for name in &names {
        let out = loops(bin, data, &["--json", "runs", name, "--limit", "100000"])?;
        runs.extend(
            parse_runs(&out)
                .into_iter()
                .filter(|(slot, _)| (window_start..window_end).contains(slot))
                .map(|(slot, started)| ((slot - window_start) / 1000, started - slot)),
        );
        loops(bin, data, &["stop", name])?;
    }
    runs.sort_by_key(|&(_, late)| std::cmp::Reverse(late));
    let slow_runs = runs.iter().filter(|&&(_, late)| late > SLOW_RUN_MS).count();
    let latest = runs.iter().take(3).copied().collect();
    let mut late: Vec<i64> = runs.iter().map(|&(_, late)| late).collect();
    if late.is_empty() {
        return Err(format!(
            "no run of the {DUE_LOOPS} due loops started in the {secs} s window"
        ));
    }
    late.sort_unstable();
    let pct = |p: f64| late[((late.len() as f64 * p).ceil() as usize).saturating_sub(1)];
    let runs = late.len() as f64;
    Ok(Figures {
        start_ms,
        runs: late.len(),
        slots: DUE_LOOPS * usize::try_from(secs).unwrap_or(usize::MAX / DUE_LOOPS),
        p50: pct(0.50),
        p99: pct(0.99),
        max: late[late.len() - 1],
        slow_runs,
        latest,
        cpu_ms: ticks as f64 * 1000.0 / clock_ticks_per_s() / runs,
        sched_ms: ns as f64 / 1e6 / runs,
    })
}

fn sleep_until(ms: i64) {
    let left = ms - now_ms();
    if left > 0 {
        std::thread::sleep(Duration::from_millis(left.unsigned_abs()));
    }
}

/// `getconf CLK_TCK`: the unit of `utime` and `stime`; 100 if unknown.
pub(crate) fn clock_ticks_per_s() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .filter(|&t: &f64| t > 0.0)
        .unwrap_or(100.0)
}
