//! The daemon's figures for `cargo xtask bench`, against the release build:
//! - lateness (`startedAt − scheduledFor`) of 20 loops due at the same
//!   instant, over several rounds (goal: p99 ≤ 5 ms);
//! - resident memory of an idle daemon with 100 loops stored (goal ≤ 8 MiB,
//!   `VmRSS` in `/proc/<pid>/status`);
//! - CPU time of that idle daemon over 10 s (goal ≤ 5 ms; `utime + stime`
//!   from `/proc/<pid>/stat`, in clock ticks, and the nanosecond
//!   `/proc/<pid>/task/*/schedstat` sum), and averaged over a minute, which
//!   includes its lease heartbeats and its once-a-minute look at the clock;
//! - time from SIGTERM to exit of an idle daemon (goal ≤ 50 ms).
//!
//! Linux only: the figures read `/proc`.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::bench::loops;

const DUE_LOOPS: usize = 20;
const ROUNDS: usize = 5;
const IDLE_LOOPS: usize = 100;
const IDLE_WINDOW: Duration = Duration::from_secs(10);
const LONG_WINDOW: Duration = Duration::from_secs(60);
const SIGTERM_SAMPLES: usize = 5;

pub(crate) fn figures(bin: &Path, scratch: &Path) -> Result<(), String> {
    if !Path::new("/proc/self/stat").exists() {
        println!("daemon: skipped (needs Linux /proc)");
        return Ok(());
    }
    // At the default limit (32) the 20 simultaneous runs all start at once;
    // a limit of 8 shows what queueing them in waves costs.
    lateness(bin, &scratch.join("daemon-lateness-default"), None)?;
    lateness(bin, &scratch.join("daemon-lateness-8"), Some("8"))?;
    idle(bin, &scratch.join("daemon-idle"))?;
    sigterm(bin, &scratch.join("daemon-idle"))
}

fn lateness(bin: &Path, data: &Path, max_parallel: Option<&str>) -> Result<(), String> {
    let mut start = vec!["daemon", "start"];
    if let Some(n) = max_parallel {
        start.extend(["--max-parallel", n]);
    }
    loops(bin, data, &start)?;
    let limit = max_parallel.map_or_else(
        || "default --max-parallel (32)".to_owned(),
        |n| format!("--max-parallel {n}"),
    );
    let result = (|| {
        let mut samples = Vec::new();
        let mut round_max = Vec::new();
        for round in 0..ROUNDS {
            // Due in two seconds: time enough to create them all first.
            let due = now_ms() + 2_000;
            let at = format_iso(due);
            for i in 0..DUE_LOOPS {
                let name = format!("due-{round}-{i}");
                loops(
                    bin,
                    data,
                    &[
                        "create",
                        "command",
                        &name,
                        "--at",
                        &at,
                        "--cmd",
                        "true",
                        "--no-shell",
                    ],
                )?;
            }
            let runs = wait_runs(bin, data, (round + 1) * DUE_LOOPS)?;
            let mut late: Vec<i64> = runs
                .iter()
                .filter(|(slot, _)| *slot == due)
                .map(|(slot, started)| started - slot)
                .collect();
            if late.len() != DUE_LOOPS {
                return Err(format!("round {round}: {} runs of {DUE_LOOPS}", late.len()));
            }
            late.sort();
            round_max.push(late[late.len() - 1]);
            samples.extend(late);
        }
        samples.sort();
        let pct = |p: f64| samples[((samples.len() as f64 * p).ceil() as usize).saturating_sub(1)];
        println!(
            "daemon lateness: {} runs ({ROUNDS} rounds of {DUE_LOOPS} loops due at one instant, {limit}): p50 {} ms, p99 {} ms, max {} ms (per-round max {:?} ms)",
            samples.len(),
            pct(0.50),
            pct(0.99),
            samples[samples.len() - 1],
            round_max
        );
        Ok(())
    })();
    let _ = loops(bin, data, &["daemon", "stop", "--grace", "5s"]);
    result
}

/// Waits until `n` runs have succeeded; returns `(scheduledFor, startedAt)`
/// of every run, in ms since the epoch.
fn wait_runs(bin: &Path, data: &Path, n: usize) -> Result<Vec<(i64, i64)>, String> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let out = loops(bin, data, &["--json", "runs", "--limit", "100000"])?;
        if out.matches("\"status\": \"succeeded\"").count() >= n {
            return Ok(parse_runs(&out));
        }
        if Instant::now() > deadline {
            return Err(format!("timed out waiting for {n} runs"));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `(scheduledFor, startedAt)` pairs from `loops --json runs`, read line by
/// line (xtask has no JSON parser).
pub(crate) fn parse_runs(json: &str) -> Vec<(i64, i64)> {
    let mut pairs = Vec::new();
    let mut slot = None;
    for line in json.lines() {
        let value = |key: &str| {
            line.trim()
                .strip_prefix(&format!("\"{key}\": \""))
                .and_then(|v| v.strip_suffix("\","))
                .and_then(parse_iso)
        };
        if let Some(s) = value("scheduledFor") {
            slot = Some(s);
        }
        if let (Some(started), Some(s)) = (value("startedAt"), slot) {
            pairs.push((s, started));
            slot = None;
        }
    }
    pairs
}

fn idle(bin: &Path, data: &Path) -> Result<(), String> {
    for i in 0..IDLE_LOOPS {
        crate::bench::create_true(bin, data, &format!("idle-{i}"), "1h")?;
    }
    let out = loops(bin, data, &["daemon", "start"])?;
    let pid: u32 = out
        .trim()
        .strip_prefix("started pid=")
        .and_then(|p| p.parse().ok())
        .ok_or_else(|| format!("daemon start said {out:?}"))?;
    let result = (|| {
        std::thread::sleep(Duration::from_secs(1));
        let rss = status_field(pid, "VmRSS:")?;
        let (ticks0, ns0) = (cpu_ticks(pid)?, cpu_ns(pid));
        std::thread::sleep(IDLE_WINDOW);
        let (ticks1, ns1) = (cpu_ticks(pid)?, cpu_ns(pid));
        let tick_ms = 1000.0 / 100.0;
        println!(
            "daemon idle: {IDLE_LOOPS} loops stored, VmRSS {rss}; CPU over {}s: {} ticks of utime+stime (~{:.0} ms), {:.3} ms by schedstat",
            IDLE_WINDOW.as_secs(),
            ticks1 - ticks0,
            (ticks1 - ticks0) as f64 * tick_ms,
            (ns1 - ns0) as f64 / 1e6
        );
        // The daemon wakes every 20 s to renew its lease, so a longer window
        // shows what those wake-ups cost on average.
        std::thread::sleep(LONG_WINDOW - IDLE_WINDOW);
        let (ticks2, ns2) = (cpu_ticks(pid)?, cpu_ns(pid));
        let per_10s = (ns2 - ns0) as f64 / 1e6 * 10.0 / LONG_WINDOW.as_secs_f64();
        println!(
            "daemon idle over {}s: {} ticks, {:.3} ms by schedstat = {per_10s:.3} ms per 10 s, VmRSS {}",
            LONG_WINDOW.as_secs(),
            ticks2 - ticks0,
            (ns2 - ns0) as f64 / 1e6,
            status_field(pid, "VmRSS:")?
        );
        Ok(())
    })();
    let _ = loops(bin, data, &["daemon", "stop", "--grace", "5s"]);
    // What the idle figure depends on most (crates/loops-cli/build.rs).
    match crate::hot_functions::listed_in(bin) {
        Ok((found, of)) => println!(
            "daemon idle: {found} of the {of} hot functions listed are in the binary \
             (fewer: `cargo xtask hot-functions` again)"
        ),
        Err(e) => println!("daemon idle: hot functions not checked: {e}"),
    }
    result
}

fn sigterm(bin: &Path, data: &Path) -> Result<(), String> {
    let mut samples = Vec::new();
    for _ in 0..SIGTERM_SAMPLES {
        let mut child = Command::new(bin)
            .args(["daemon", "run"])
            .env("LOOPS_DATA_DIR", data)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("starting the daemon: {e}"))?;
        let pid = child.id();
        wait_pid_file(data, pid, &mut child)?;
        std::thread::sleep(Duration::from_millis(500));
        let t = Instant::now();
        Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .map_err(|e| format!("kill: {e}"))?;
        child.wait().map_err(|e| format!("waiting: {e}"))?;
        samples.push(t.elapsed());
    }
    // What spawning `kill` alone costs, to read the figure against.
    let t = Instant::now();
    Command::new("kill")
        .args(["-0", &std::process::id().to_string()])
        .status()
        .map_err(|e| format!("kill: {e}"))?;
    let kill_cost = t.elapsed();
    samples.sort();
    println!(
        "daemon SIGTERM to exit (idle, {SIGTERM_SAMPLES} runs): median {:.1} ms, max {:.1} ms, including ~{:.1} ms to spawn `kill`",
        ms(samples[SIGTERM_SAMPLES / 2]),
        ms(samples[SIGTERM_SAMPLES - 1]),
        ms(kill_cost)
    );
    Ok(())
}

fn wait_pid_file(data: &Path, pid: u32, child: &mut Child) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if std::fs::read_to_string(data.join("daemon.pid"))
            .is_ok_and(|p| p.lines().next().map(str::trim) == Some(&pid.to_string()))
        {
            return Ok(());
        }
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!("the daemon exited: {status}"));
        }
        if Instant::now() > deadline {
            return Err("the daemon wrote no pid file".to_owned());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn status_field(pid: u32, field: &str) -> Result<String, String> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .map_err(|e| format!("reading /proc/{pid}/status: {e}"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .map(|v| v.trim().to_owned())
        .ok_or_else(|| format!("no {field} in /proc/{pid}/status"))
}

/// `utime + stime` of the whole process, in clock ticks.
pub(crate) fn cpu_ticks(pid: u32) -> Result<u64, String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map_err(|e| format!("reading /proc/{pid}/stat: {e}"))?;
    let rest = stat
        .rfind(')')
        .map(|i| &stat[i + 1..])
        .ok_or("malformed stat")?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // Fields 14 and 15 of the line; the 12th and 13th after the name.
    let get = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    Ok(get(11) + get(12))
}

/// Time on CPU of every thread, in ns.
pub(crate) fn cpu_ns(pid: u32) -> u64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| {
            s.split_whitespace()
                .next()
                .and_then(|v| v.parse::<u64>().ok())
        })
        .sum()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The wall clock in milliseconds, which the daemons under measure read too.
#[expect(
    clippy::disallowed_methods,
    reason = "the daemons measured read the real clock, so the bench compares with it"
)]
pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(0))
}

/// Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub(crate) fn format_iso(ms: i64) -> String {
    let (days, rem) = (ms.div_euclid(86_400_000), ms.rem_euclid(86_400_000));
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3_600_000,
        rem / 60_000 % 60,
        rem / 1000 % 60,
        rem % 1000
    )
}

pub(crate) fn parse_iso(s: &str) -> Option<i64> {
    let num = |r: std::ops::Range<usize>| s.get(r)?.parse::<i64>().ok();
    let days = days_from_civil(num(0..4)?, num(5..7)?, num(8..10)?);
    Some(
        days * 86_400_000
            + num(11..13)? * 3_600_000
            + num(14..16)? * 60_000
            + num(17..19)? * 1000
            + num(20..23)?,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instants_round_trip() {
        for s in [
            "1970-01-01T00:00:00.000Z",
            "2026-11-30T09:00:00.123Z",
            "2028-02-29T23:59:59.999Z",
        ] {
            assert_eq!(format_iso(parse_iso(s).unwrap()), s);
        }
    }
}
