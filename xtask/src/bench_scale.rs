//! `cargo xtask bench --scale`: what the most frequent operations cost as
//! history grows (issue 14). It builds two databases the same way, a small
//! one (1,000 loops, 10,000 runs) and a large one (100,000 loops,
//! 1,000,000 runs): a few loops of each shape created through the CLI,
//! then copies and runs inserted in SQL (`bench_scale/seed.rs`). On each it
//! measures, with the same binary:
//! - the median wall time (of 7 after a warm-up, the two sizes taking
//!   turns) of `loops --json runs
//!   --limit 20`, `runs --status failed --limit 20`, `daemon status`, `tick`
//!   with nothing due, `runs <loop>` of a loop with 1% of the runs, `show
//!   <loop>` and `list --limit 10`;
//! - the daemon with 20 loops due every second for 25 s: lateness p50, p99
//!   and max, and its CPU per run (`bench_scale/daemon.rs`).
//!
//! The goals: every operation within 1.5× between the two sizes (the
//! table flags the ratios above), and a daemon lateness p99 of at most
//! 10 ms at 100,000 loops with 20 due per second. A cost that follows the
//! work a command does, not what is stored, meets both.
//!
//! The sizes, the daemon's window and the samples are options
//! ([`USAGE`]); `--scale-keep` keeps the data directories (the large one
//! is some 500 MB) and prints their paths, so commands can be run against
//! them again. Linux only for the daemon phase (it reads `/proc`); the
//! seeding needs the `sqlite3` shell.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::bench::loops;
use crate::bench_daemon::now_ms;

pub(crate) mod daemon;
mod seed;

/// What `--scale` accepts; printed on a bad flag.
const USAGE: &str = "usage: cargo xtask bench --scale [options]

  --bin PATH          measure this `loops` binary instead of building target/release/loops
  --small-loops N     loops in the small database [default: 1000]
  --small-runs N      runs in the small database [default: 10000]
  --large-loops N     loops in the large database [default: 100000]
  --large-runs N      runs in the large database [default: 1000000]
  --daemon-secs N     length of the daemon phase's window, in seconds (0 to 3600; 0 skips it) [default: 25]
  --samples N         timed runs of each command, after one warm-up; the median is shown (1 to 1000) [default: 7]
  --scale-keep        keep both data directories and print their paths (the large one is ~500 MB)

N is a whole number, with an optional k (thousand) or M (million): 100k, 1M.
Loops and runs: 100 to 100M each. Seeding needs the sqlite3 shell.";

/// The ratio above which an operation counts as growing with history.
const RATIO_GOAL: f64 = 1.5;
/// The most loops or runs a database may hold: the seed's ids and
/// products of row numbers stay within an i64.
const MAX_ROWS: u64 = 100_000_000;
/// The daemon's lateness goal at the large size, in ms.
const LATENESS_P99_GOAL_MS: i64 = 10;

/// How many loops and runs one database holds.
#[derive(Clone, Copy)]
pub(crate) struct Size {
    pub(crate) loops: u64,
    pub(crate) runs: u64,
}

/// The options of `--scale`.
pub(crate) struct Options {
    small: Size,
    large: Size,
    daemon_secs: u64,
    samples: usize,
    keep: bool,
}

/// The timed commands: the arguments after `loops`. `seed` is the loop
/// that holds 1% of the runs.
const OPERATIONS: [&[&str]; 7] = [
    &["--json", "runs", "--limit", "20"],
    &["--json", "runs", "--status", "failed", "--limit", "20"],
    &["--json", "daemon", "status"],
    &["--json", "tick"],
    &["--json", "runs", "seed"],
    &["--json", "show", "seed"],
    &["--json", "list", "--limit", "10"],
];

/// Reads the options of `--scale` from `args` (the arguments of `bench`);
/// `None` after printing the usage for `--help`.
pub(crate) fn options(args: &[String]) -> Result<Option<Options>, String> {
    let mut opts = Options {
        small: Size {
            loops: 1_000,
            runs: 10_000,
        },
        large: Size {
            loops: 100_000,
            runs: 1_000_000,
        },
        daemon_secs: 25,
        samples: 7,
        keep: false,
    };
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let mut value = || {
            args.next()
                .ok_or_else(|| format!("{arg} needs a value\n\n{USAGE}"))
        };
        match arg.as_str() {
            "--scale" => {}
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(None);
            }
            "--scale-keep" => opts.keep = true,
            // Read by `bench` itself.
            "--bin" => {
                value()?;
            }
            "--small-loops" => opts.small.loops = count(arg, value()?, 100, MAX_ROWS)?,
            "--small-runs" => opts.small.runs = count(arg, value()?, 100, MAX_ROWS)?,
            "--large-loops" => opts.large.loops = count(arg, value()?, 100, MAX_ROWS)?,
            "--large-runs" => opts.large.runs = count(arg, value()?, 100, MAX_ROWS)?,
            "--daemon-secs" => opts.daemon_secs = count(arg, value()?, 0, 3600)?,
            "--samples" => {
                let n = count(arg, value()?, 1, 1000)?;
                opts.samples = usize::try_from(n).unwrap_or(1000);
            }
            other => return Err(format!("unknown option {other:?} for --scale\n\n{USAGE}")),
        }
    }
    Ok(Some(opts))
}

/// `text` as a count from `min` to `max`: digits, with `_` or `,` between
/// them, and an optional `k` or `M`.
fn count(flag: &str, text: &str, min: u64, max: u64) -> Result<u64, String> {
    let (digits, unit) = match text.strip_suffix(['k', 'K']) {
        Some(d) => (d, 1_000),
        None => text.strip_suffix('M').map_or((text, 1), |d| (d, 1_000_000)),
    };
    let digits: String = digits.chars().filter(|c| !matches!(c, '_' | ',')).collect();
    let n = digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(unit))
        .ok_or_else(|| format!("{flag} {text}: not a whole number\n\n{USAGE}"))?;
    if n < min || n > max {
        return Err(format!(
            "{flag} {text}: must be {} to {}\n\n{USAGE}",
            thousands(min),
            thousands(max)
        ));
    }
    Ok(n)
}

/// What one size measured.
struct Measured {
    /// Median and minimum wall time of each of [`OPERATIONS`].
    medians: Vec<(Duration, Duration)>,
    daemon: Option<daemon::Figures>,
}

/// Builds both databases, measures both and prints the table.
pub(crate) fn scale(bin: &Path, opts: &Options) -> Result<(), String> {
    check_sqlite3()?;
    let daemon_secs = if opts.daemon_secs > 0 && !Path::new("/proc/self/stat").exists() {
        println!("daemon phase: skipped (needs Linux /proc)");
        0
    } else {
        opts.daemon_secs
    };
    let mut dirs = Vec::new();
    let result = (|| {
        for (label, size) in [("small", opts.small), ("large", opts.large)] {
            let data = crate::bench::scratch_dir(&format!("loops-scale-{label}"))?;
            dirs.push(data.clone());
            seed_one(bin, &data, label, size)?;
        }
        // Alternating the sizes sample by sample, so a busy moment of the
        // machine weighs on both.
        println!(
            "timing {} commands on both, {} runs each after a warm-up, alternating",
            OPERATIONS.len(),
            opts.samples
        );
        let mut medians = [Vec::new(), Vec::new()];
        for args in OPERATIONS {
            for (size, data) in dirs.iter().enumerate() {
                let warm = loops(bin, data, args)?;
                if args.contains(&"tick") && !warm.contains("\"claimed\": []") {
                    return Err(format!(
                        "the tick found slots due in {}, so the seed is wrong (nothing should be due):\n{warm}",
                        data.display()
                    ));
                }
                medians[size].push((Duration::ZERO, Duration::ZERO));
            }
            let mut times = [Vec::new(), Vec::new()];
            for _ in 0..opts.samples {
                for (size, data) in dirs.iter().enumerate() {
                    let t = Instant::now();
                    loops(bin, data, args)?;
                    times[size].push(t.elapsed());
                }
            }
            for (size, mut times) in times.into_iter().enumerate() {
                times.sort();
                if let Some(last) = medians[size].last_mut() {
                    *last = (times[times.len() / 2], times[0]);
                }
            }
        }
        let mut measured = Vec::new();
        for ((label, data), medians) in ["small", "large"].iter().zip(&dirs).zip(medians) {
            let daemon = if daemon_secs > 0 {
                println!("{label}: daemon phase, 20 loops due every second for {daemon_secs} s");
                Some(daemon::measure(bin, data, daemon_secs)?)
            } else {
                None
            };
            measured.push(Measured { medians, daemon });
        }
        Ok::<_, String>(measured)
    })();
    if opts.keep {
        for dir in &dirs {
            println!("kept: {}", dir.display());
        }
    } else {
        for dir in &dirs {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
    let measured = result?;
    print_table(opts, daemon_secs, &measured[0], &measured[1]);
    Ok(())
}

/// Seeds `data`, made private first, with `size` and checks the result.
pub(crate) fn seed_one(bin: &Path, data: &Path, label: &str, size: Size) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(data, std::fs::Permissions::from_mode(0o700))
        .map_err(|e| format!("chmod 700 {}: {e}", data.display()))?;
    println!(
        "{label}: seeding {} loops and {} runs in {}",
        thousands(size.loops),
        thousands(size.runs),
        data.display()
    );
    seed::build(bin, data, size, now_ms())?;
    sanity(bin, data)
}

/// The `sqlite3` shell, with `generate_series`, or a message saying what
/// to install.
fn check_sqlite3() -> Result<(), String> {
    let out = Command::new("sqlite3")
        .args([":memory:", "SELECT sqlite_version(), count(*) FROM generate_series(1, 3);"])
        .output()
        .map_err(|e| {
            format!(
                "`cargo xtask bench --scale` seeds its databases with the sqlite3 shell, which did not start ({e}); install it (Debian: apt-get install sqlite3; macOS: brew install sqlite)"
            )
        })?;
    let said = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() || !said.trim().ends_with("|3") {
        return Err(format!(
            "the sqlite3 shell lacks generate_series, which the seeding uses; install a newer one (3.38 or later): {}{}",
            said.trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(())
}

/// `list` works and `doctor` finds the database intact.
fn sanity(bin: &Path, data: &Path) -> Result<(), String> {
    let list = loops(bin, data, &["--json", "list", "--limit", "1"])?;
    if !list.contains("\"id\"") {
        return Err(format!(
            "`loops --json list --limit 1` listed no loop: {list}"
        ));
    }
    let t = Instant::now();
    // `doctor` exits 1 on any failed check; the integrity check is the one
    // that matters here, so its output is read whatever the exit status.
    let out = Command::new(bin)
        .args(["--json", "doctor"])
        .env("LOOPS_DATA_DIR", data)
        .output()
        .map_err(|e| format!("running {} doctor: {e}", bin.display()))?;
    let doctor = String::from_utf8_lossy(&out.stdout);
    let integrity = doctor
        .split("\"id\": \"database-integrity\"")
        .nth(1)
        .and_then(|rest| rest.split("\"status\": \"").nth(1))
        .and_then(|rest| rest.split('"').next());
    if integrity != Some("ok") {
        return Err(format!(
            "`loops doctor` does not pass the seeded database (database-integrity: {integrity:?}):\n{doctor}"
        ));
    }
    println!(
        "  sanity: `loops --json list --limit 1` lists a loop; `loops doctor` says database-integrity ok ({:.1} s)",
        t.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The figures of both sizes side by side, as a Markdown table.
fn print_table(opts: &Options, daemon_secs: u64, small: &Measured, large: &Measured) {
    let mut rows: Vec<[String; 4]> = Vec::new();
    for (i, args) in OPERATIONS.iter().enumerate() {
        let ((s, s_min), (l, l_min)) = (small.medians[i], large.medians[i]);
        let (s, l) = (ms(s), ms(l));
        rows.push([
            format!("`loops {}`", args.join(" ")),
            format!("{s:.1} ms (min {:.1})", ms(s_min)),
            format!("{l:.1} ms (min {:.1})", ms(l_min)),
            ratio(s, l),
        ]);
    }
    if let (Some(s), Some(l)) = (&small.daemon, &large.daemon) {
        rows.push([
            "`loops daemon start` (wall time)".to_owned(),
            format!("{:.1} ms", s.start_ms),
            format!("{:.1} ms", l.start_ms),
            ratio(s.start_ms, l.start_ms),
        ]);
        rows.push([
            format!("daemon, runs in the {daemon_secs} s window (of slots)"),
            format!("{} of {}", s.runs, s.slots),
            format!("{} of {}", l.runs, l.slots),
            "—".to_owned(),
        ]);
        for (name, a, b) in [
            ("p50", s.p50, l.p50),
            ("p99", s.p99, l.p99),
            ("max", s.max, l.max),
        ] {
            let goal = if name == "p99" {
                if b > LATENESS_P99_GOAL_MS {
                    format!("over the goal (≤ {LATENESS_P99_GOAL_MS} ms)")
                } else {
                    format!("meets the goal (≤ {LATENESS_P99_GOAL_MS} ms)")
                }
            } else {
                "—".to_owned()
            };
            rows.push([
                format!("daemon lateness {name}"),
                format!("{a} ms"),
                format!("{b} ms"),
                goal,
            ]);
        }
        rows.push([
            "daemon CPU per run (utime+stime)".to_owned(),
            format!("{:.2} ms", s.cpu_ms),
            format!("{:.2} ms", l.cpu_ms),
            ratio(s.cpu_ms, l.cpu_ms),
        ]);
        rows.push([
            "daemon CPU per run (schedstat, live threads)".to_owned(),
            format!("{:.2} ms", s.sched_ms),
            format!("{:.2} ms", l.sched_ms),
            ratio(s.sched_ms, l.sched_ms),
        ]);
    }
    let head = [
        "operation".to_owned(),
        format!(
            "small ({} / {})",
            thousands(opts.small.loops),
            thousands(opts.small.runs)
        ),
        format!(
            "large ({} / {})",
            thousands(opts.large.loops),
            thousands(opts.large.runs)
        ),
        "ratio".to_owned(),
    ];
    let widths: Vec<usize> = (0..4)
        .map(|c| {
            rows.iter()
                .chain(std::iter::once(&head))
                .map(|r| r[c].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |r: &[String; 4]| {
        let cells: Vec<String> = r
            .iter()
            .zip(&widths)
            .map(|(cell, &w)| format!("{cell}{}", " ".repeat(w - cell.chars().count())))
            .collect();
        println!("| {} |", cells.join(" | "));
    };
    println!();
    line(&head);
    let rule: Vec<String> = widths.iter().map(|&w| "-".repeat(w)).collect();
    println!("|-{}-|", rule.join("-|-"));
    for r in &rows {
        line(r);
    }
    let over = rows.iter().filter(|r| r[3].contains("over")).count();
    println!(
        "\nCommands: median of {} runs (and the fastest); the ratio is of the medians.\n`seed` holds 1% of the runs ({} small, {} large); `runs seed` shows its newest 50.",
        opts.samples,
        thousands(opts.small.runs.div_ceil(100)),
        thousands(opts.large.runs.div_ceil(100))
    );
    println!(
        "{over} figure(s) over their goal (ratio ≤ {RATIO_GOAL}×, daemon lateness p99 ≤ {LATENESS_P99_GOAL_MS} ms at the large size)"
    );
}

/// `large / small`, flagged when above [`RATIO_GOAL`].
fn ratio(small: f64, large: f64) -> String {
    if small <= 0.0 {
        return "—".to_owned();
    }
    let r = large / small;
    if r > RATIO_GOAL {
        format!("{r:.2}× (over {RATIO_GOAL}×)")
    } else {
        format!("{r:.2}×")
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// `n` with a comma every three digits.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_take_separators_and_units() {
        assert_eq!(count("--n", "100000", 0, MAX_ROWS), Ok(100_000));
        assert_eq!(count("--n", "100_000", 0, MAX_ROWS), Ok(100_000));
        assert_eq!(count("--n", "1,000", 0, MAX_ROWS), Ok(1_000));
        assert_eq!(count("--n", "100k", 0, MAX_ROWS), Ok(100_000));
        assert_eq!(count("--n", "1M", 0, MAX_ROWS), Ok(1_000_000));
        for bad in ["", "5x", "-3", "1.5M", "k"] {
            let err = count("--n", bad, 0, MAX_ROWS).unwrap_err();
            assert!(
                err.starts_with(&format!("--n {bad}: not a whole number")),
                "{err}"
            );
        }
        let err = count("--large-runs", "99", 100, MAX_ROWS).unwrap_err();
        assert!(
            err.starts_with("--large-runs 99: must be 100 to 100,000,000"),
            "{err}"
        );
    }

    #[test]
    fn options_refuse_what_they_do_not_know() {
        let args = |a: &[&str]| a.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let opts = options(&args(&["--scale", "--large-loops", "1M", "--scale-keep"]))
            .unwrap()
            .unwrap();
        assert_eq!(opts.large.loops, 1_000_000);
        assert_eq!(opts.large.runs, 1_000_000);
        assert!(opts.keep);
        let err = options(&args(&["--scale", "--bogus"])).err().unwrap();
        assert!(err.starts_with("unknown option \"--bogus\""), "{err}");
        assert!(err.contains("usage: cargo xtask bench --scale"), "{err}");
        let err = options(&args(&["--scale", "--samples"])).err().unwrap();
        assert!(err.starts_with("--samples needs a value"), "{err}");
    }

    #[test]
    fn thousands_are_grouped() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_000), "1,000");
        assert_eq!(thousands(1_000_000), "1,000,000");
    }
}
