//! `cargo xtask soak [--minutes N] [--bin PATH]` (issue 32): the daemon
//! under steady load for an hour, or N minutes, watched for growth. It
//! builds and soaks the debug `loops`, or the binary `--bin` names.
//!
//! 200 loops `--every 4s` (50 runs a second) on SQLite, each run a tiny
//! `sh -c` appending `$LOOPS_LOOP_ID $LOOPS_SCHEDULED_FOR $LOOPS_RUN_ID`
//! to a ledger. The daemon runs with its gc on (`--gc-max-age`), and
//! since its pass comes at most once an hour, a `loops gc --apply` beside
//! it every minute really deletes (keeping each loop's newest 25 runs);
//! backups stay on (`LOOPS_SKIP_BACKUP` is removed), so the first gc
//! backs up. `loops serve` runs on the same data directory, its API
//! polled every second.
//!
//! Every minute it prints a row: RSS, threads and fds of the daemon and of
//! `loops serve` (each the least of five readings 200 ms apart, so runs in
//! flight do not count), the database and WAL size, the runs started in
//! that minute and the p99 of their lateness (`started_at −
//! scheduled_for`, from the database), and the runs lost, doubled and
//! failed (`soak/tally.rs`). It fails on growth: RSS or fds of either
//! process up more than 10% from minute 10 (from minute 1 when N < 10) to
//! the end, each the least of five minutes when N ≥ 20 (the run pool's
//! size after a burst is not growth), a WAL over 64 MiB, a lost, doubled
//! or failed run, or API polls that failed. Linux only (it reads `/proc`); needs the `sqlite3`
//! shell.

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

mod tally;

use self::tally::{Minute, Tally, parse_db_runs};
use crate::bench::{loops, scratch_dir};
use crate::bench_daemon::{format_iso, now_ms};
use crate::bench_serve::Server;
use crate::{cargo, root, run};

const USAGE: &str = "usage: cargo xtask soak [--minutes N] [--bin PATH]";
const LOOPS: usize = 200;
const PERIOD_MS: i64 = 4_000;
/// How long after a minute ends its runs are looked at, so their ledger
/// lines are written.
const LAG_MS: i64 = 5_000;
const WAL_LIMIT: u64 = 64 * 1024 * 1024;
const GROWTH_LIMIT: f64 = 0.10;

/// Descriptors that may come and go without counting as growth.
const FD_SLACK: u64 = 3;
/// The minutes whose least reading is a level, at the start and at the end
/// of a soak of [`WINDOW_FROM`] minutes or more. The daemon's run pool keeps
/// its workers while runs come at least every 10 s, so one minute's reading
/// carries the pool's last burst (up to `--max-parallel` threads, their
/// stacks and malloc arenas): a 60-minute soak read 37 threads and 15,380
/// KiB at its last minute, 9 to 15 threads and 13,940 to 14,084 KiB in the
/// four before. A leak raises the least of five minutes; a burst does not.
const WINDOW: u64 = 5;
/// The shortest soak that measures levels over [`WINDOW`] minutes; a
/// shorter one compares single minutes.
const WINDOW_FROM: u64 = 20;
/// The runs of each loop the minutely gc keeps.
const GC_KEEP: &str = "25";

/// `/proc` readings of one process.
#[derive(Debug, Clone, Copy, Default)]
struct Proc {
    rss_kib: u64,
    threads: u64,
    fds: u64,
}

/// One row of the table.
#[derive(Debug, Clone, Default)]
struct Row {
    minute: u64,
    daemon: Proc,
    serve: Proc,
    db: u64,
    wal: u64,
    runs: Minute,
}

pub(crate) fn soak(args: &[String]) -> Result<(), String> {
    let mut minutes: u64 = 60;
    let mut given_bin = None;
    let mut rest = args.iter();
    while let Some(flag) = rest.next() {
        let value = rest.next().ok_or(USAGE)?;
        match flag.as_str() {
            "--minutes" => {
                minutes = value.parse().ok().filter(|n| *n > 0).ok_or_else(|| {
                    format!("--minutes takes a whole number above 0, not {value:?}")
                })?;
            }
            "--bin" => given_bin = Some(crate::bench::bin_path(value)?),
            _ => return Err(USAGE.into()),
        }
    }
    if !Path::new("/proc/self/status").exists() {
        return Err("soak needs Linux /proc".into());
    }
    // A given binary is soaked as it is, so a long soak can run beside a
    // rebuild of the tree.
    let bin = match given_bin {
        Some(bin) => bin,
        None => {
            let mut build = cargo();
            build.args(["build", "-p", "loops-cli"]);
            run("cargo build -p loops-cli", build)?;
            root().join("target/debug/loops")
        }
    };
    let scratch = scratch_dir("loops-soak")?;
    let result = drive(&bin, &scratch, minutes);
    match &result {
        Ok(()) => {
            let _ = std::fs::remove_dir_all(&scratch);
        }
        Err(_) => eprintln!("soak: the data directory is kept in {}", scratch.display()),
    }
    result
}

fn drive(bin: &Path, scratch: &Path, minutes: u64) -> Result<(), String> {
    let data = scratch.join("data");
    let ledger = scratch.join("ledger");
    let home = scratch.join("home");
    std::fs::create_dir_all(&home).map_err(|e| format!("creating {}: {e}", home.display()))?;
    let script = format!(
        "echo \"$LOOPS_LOOP_ID $LOOPS_SCHEDULED_FOR $LOOPS_RUN_ID\" >> '{}'",
        ledger.display()
    );
    let out = loops(
        bin,
        &data,
        &[
            "daemon",
            "start",
            "--gc-max-age",
            "1m",
            "--gc-keep-per-loop",
            GC_KEEP,
        ],
    )?;
    let daemon: u32 = out
        .trim()
        .strip_prefix("started pid=")
        .and_then(|p| p.parse().ok())
        .ok_or_else(|| format!("daemon start said {out:?}"))?;
    // Created with the daemon running, so their slots come due spread
    // over the creation, not all at once as a backlog when it starts.
    let result = (|| {
        eprintln!(
            "soak: creating {LOOPS} loops every 4s in {}",
            data.display()
        );
        for i in 0..LOOPS {
            let name = format!("soak-{i}");
            let args = [
                "create", "command", &name, "--every", "4s", "--cmd", &script,
            ];
            loops(bin, &data, &args)?;
        }
        let ids = sqlite(&data, "SELECT id FROM loops")?;
        let loop_ids: Vec<String> = ids.lines().map(str::to_owned).collect();
        let server = Server::start(bin, &data)?;
        watch(
            bin, &data, &ledger, &home, &loop_ids, daemon, &server, minutes,
        )
    })();
    let stopped = loops(bin, &data, &["daemon", "stop", "--grace", "10s"]);
    let rows = result?;
    stopped?;
    verdict(&rows, minutes)
}

/// Runs the load for `minutes`, printing a row a minute; the rows, and
/// the problems found on the way.
#[expect(clippy::too_many_arguments, reason = "one call site, all distinct")]
fn watch(
    bin: &Path,
    data: &Path,
    ledger: &Path,
    home: &Path,
    loop_ids: &[String],
    daemon: u32,
    server: &Server,
    minutes: u64,
) -> Result<(Vec<Row>, Vec<String>), String> {
    let stop = AtomicBool::new(false);
    let (polls, poll_errors) = (AtomicU64::new(0), AtomicU64::new(0));
    let (gc_deleted, gc_errors) = (AtomicU64::new(0), AtomicU64::new(0));
    let serve_pid = server.pid();
    std::thread::scope(|s| {
        s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                for path in ["/api/v1/loops?limit=200", "/api/v1/runs?limit=50"] {
                    let counter = if server.get(path).is_ok() {
                        &polls
                    } else {
                        &poll_errors
                    };
                    counter.fetch_add(1, Ordering::Relaxed);
                }
                pause(&stop, Duration::from_secs(1));
            }
        });
        s.spawn(|| {
            // Half a minute in, then every minute: between two samples.
            pause(&stop, Duration::from_secs(30));
            while !stop.load(Ordering::Relaxed) {
                match gc(bin, data, home) {
                    Ok(n) => gc_deleted.fetch_add(n, Ordering::Relaxed),
                    Err(e) => {
                        eprintln!("soak: gc: {e}");
                        gc_errors.fetch_add(1, Ordering::Relaxed)
                    }
                };
                pause(&stop, Duration::from_secs(60));
            }
        });
        let result = sample(data, ledger, loop_ids, daemon, serve_pid, minutes, |row| {
            let mib = |b: u64| b as f64 / 1_048_576.0;
            println!(
                "| {:>3} | {:>7} | {:>3} | {:>4} | {:>7} | {:>3} | {:>4} | {:>7.1} | {:>6.2} | {:>5} | {:>5} | {:>4} | {:>4} | {:>4} | {:>7} | {:>5} |",
                row.minute,
                row.daemon.rss_kib,
                row.daemon.threads,
                row.daemon.fds,
                row.serve.rss_kib,
                row.serve.threads,
                row.serve.fds,
                mib(row.db),
                mib(row.wal),
                row.runs.runs,
                row.runs
                    .late_p99
                    .map_or_else(|| "-".to_owned(), |v| v.to_string()),
                row.runs.lost,
                row.runs.doubled,
                row.runs.failed,
                gc_deleted.load(Ordering::Relaxed),
                polls.load(Ordering::Relaxed),
            );
        });
        stop.store(true, Ordering::Relaxed);
        let (rows, mut problems) = result?;
        let backups = std::fs::read_dir(data.join("backups")).map_or(0, Iterator::count);
        eprintln!(
            "soak: gc deleted {} runs ({} gc errors), {backups} backup(s); API polls {} ok, {} failed",
            gc_deleted.load(Ordering::Relaxed),
            gc_errors.load(Ordering::Relaxed),
            polls.load(Ordering::Relaxed),
            poll_errors.load(Ordering::Relaxed)
        );
        for (what, n) in [
            ("API poll(s) failed", poll_errors.load(Ordering::Relaxed)),
            ("gc run(s) failed", gc_errors.load(Ordering::Relaxed)),
        ] {
            if n > 0 {
                problems.push(format!("{n} {what}"));
            }
        }
        Ok((rows, problems))
    })
}

/// Sleeps `d` in short slices, ending early once `stop` is set.
fn pause(stop: &AtomicBool, d: Duration) {
    let until = Instant::now() + d;
    while !stop.load(Ordering::Relaxed) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The minutes' rows, each given to `show` as it comes, and the problems
/// found at the end (loops that stopped running).
fn sample(
    data: &Path,
    ledger: &Path,
    loop_ids: &[String],
    daemon: u32,
    serve: u32,
    minutes: u64,
    mut show: impl FnMut(&Row),
) -> Result<(Vec<Row>, Vec<String>), String> {
    println!(
        "\n| min | daemon RSS KiB | thr | fds | serve RSS KiB | thr | fds | db MiB | WAL MiB | runs | p99 late ms | lost | doubled | failed | gc deleted | API polls |\n\
         |---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    let started = Instant::now();
    let mut window_start = now_ms();
    let mut tally = Tally::new(PERIOD_MS);
    let mut read = 0usize;
    let mut rows = Vec::new();
    let db = data.join("loops.db");
    let wal = data.join("loops.db-wal");
    for minute in 1..=minutes {
        let at = started + Duration::from_secs(60 * minute);
        std::thread::sleep(at.saturating_duration_since(Instant::now()));
        let daemon_now = probe(daemon)?;
        let serve_now = probe(serve)?;
        let size = |p: &Path| std::fs::metadata(p).map_or(0, |m| m.len());
        let (db_size, wal_size) = (size(&db), size(&wal));
        let window_end = now_ms() - LAG_MS;
        let text = std::fs::read(ledger).unwrap_or_default();
        tally.ledger(&String::from_utf8_lossy(
            text.get(read..).unwrap_or_default(),
        ));
        read = text.len();
        let runs = sqlite(
            data,
            &format!(
                "SELECT loop_id, scheduled_for, started_at, id, status FROM loop_runs \
                 WHERE started_at >= '{}' AND started_at < '{}'",
                format_iso(window_start),
                format_iso(window_end)
            ),
        )?;
        window_start = window_end;
        let row = Row {
            minute,
            daemon: daemon_now,
            serve: serve_now,
            db: db_size,
            wal: wal_size,
            runs: tally.window(parse_db_runs(&runs)),
        };
        show(&row);
        rows.push(row);
    }
    let mut problems = Vec::new();
    // Slots due a period before the last window ended had time to run.
    let (lost, never) = tally.unrun(loop_ids, window_start - PERIOD_MS);
    if lost > 0 {
        problems.push(format!(
            "{lost} slot(s) came due after their loop's last run and never ran"
        ));
    }
    if never > 0 {
        problems.push(format!("{never} loop(s) never ran"));
    }
    Ok((rows, problems))
}

/// RSS, threads and fds of `pid`: each the least of five readings 200 ms
/// apart.
fn probe(pid: u32) -> Result<Proc, String> {
    let mut least: Option<Proc> = None;
    for i in 0..5 {
        if i > 0 {
            std::thread::sleep(Duration::from_millis(200));
        }
        let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
            .map_err(|e| format!("process {pid} is gone ({e})"))?;
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
                .unwrap_or(0)
        };
        let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, Iterator::count);
        let now = Proc {
            rss_kib: field("VmRSS:"),
            threads: field("Threads:"),
            fds: u64::try_from(fds).unwrap_or(0),
        };
        least = Some(least.map_or(now, |l| Proc {
            rss_kib: l.rss_kib.min(now.rss_kib),
            threads: l.threads.min(now.threads),
            fds: l.fds.min(now.fds),
        }));
    }
    least.ok_or_else(|| "no reading".to_owned())
}

/// `sqlite3` on the data directory's database; its output.
pub(crate) fn sqlite(data: &Path, sql: &str) -> Result<String, String> {
    let out = Command::new("sqlite3")
        .args(["-cmd", ".timeout 10000"])
        .arg(data.join("loops.db"))
        .arg(sql)
        .output()
        .map_err(|e| format!("running sqlite3 (the soak needs the sqlite3 shell): {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "sqlite3 failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// One `loops gc --apply` keeping each loop's newest [`GC_KEEP`] runs;
/// the loop runs it deleted. `HOME` is the scratch one, so its sweep of
/// agent worktrees finds none of this machine's.
fn gc(bin: &Path, data: &Path, home: &Path) -> Result<u64, String> {
    let out = Command::new(bin)
        .args(["--json", "gc", "--apply", "--max-age-days", "0"])
        .args(["--keep-per-loop", GC_KEEP])
        .env("LOOPS_DATA_DIR", data)
        .env("HOME", home)
        .env_remove("LOOPS_SKIP_BACKUP")
        .output()
        .map_err(|e| format!("running loops gc: {e}"))?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).trim().to_owned());
    }
    let text = String::from_utf8_lossy(&out.stdout);
    Ok(text
        .split_once("\"loopRuns\":")
        .and_then(|(_, rest)| {
            let digits: String = rest
                .trim_start()
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            digits.parse().ok()
        })
        .unwrap_or(0))
}

/// The verdict on the rows: Ok, or every reason it failed.
fn verdict(found: &(Vec<Row>, Vec<String>), minutes: u64) -> Result<(), String> {
    let (rows, problems) = found;
    let mut problems = problems.clone();
    let base_minute = if minutes >= 10 { 10 } else { 1 };
    if minutes < 10 {
        println!(
            "soak: {minutes} minute(s), under 10: growth is measured from minute 1, not minute 10"
        );
    }
    let Some(last) = rows.last().map(|r| r.minute) else {
        return Err("soak: no rows".into());
    };
    let window = if minutes >= WINDOW_FROM { WINDOW } else { 1 };
    let start = base_minute..base_minute + window;
    let end = last.saturating_sub(window - 1)..last + 1;
    let span = |m: &std::ops::Range<u64>| match m.end - m.start {
        1 => format!("minute {}", m.start),
        _ => format!("the least of minutes {} to {}", m.start, m.end - 1),
    };
    type Reading = fn(&Row) -> u64;
    let readings: [(&str, &str, Reading, u64); 4] = [
        ("daemon", "RSS", |r| r.daemon.rss_kib, 0),
        ("daemon", "fds", |r| r.daemon.fds, FD_SLACK),
        ("loops serve", "RSS", |r| r.serve.rss_kib, 0),
        ("loops serve", "fds", |r| r.serve.fds, FD_SLACK),
    ];
    for (who, what, read, slack) in readings {
        let least = |m: &std::ops::Range<u64>| {
            rows.iter()
                .filter(|r| m.contains(&r.minute))
                .map(read)
                .min()
        };
        let (Some(from), Some(to)) = (least(&start), least(&end)) else {
            return Err(format!("soak: no row at {}", span(&start)));
        };
        // A handful of descriptors (a run's pipes caught in the sample) is
        // not growth, whatever share of a small count it is.
        let limit = (from as f64 * (1.0 + GROWTH_LIMIT)).max((from + slack) as f64);
        if to as f64 > limit {
            problems.push(format!(
                "{who} {what} grew from {from} at {} to {to} at {} (more than {:.0}%)",
                span(&start),
                span(&end),
                GROWTH_LIMIT * 100.0
            ));
        }
    }
    if let Some(r) = rows.iter().find(|r| r.wal > WAL_LIMIT) {
        problems.push(format!(
            "the WAL reached {} bytes at minute {} (limit 64 MiB)",
            r.wal, r.minute
        ));
    }
    let sum = |f: fn(&Minute) -> u64| rows.iter().map(|r| f(&r.runs)).sum::<u64>();
    for (what, n) in [
        ("lost", sum(|m| m.lost)),
        ("doubled", sum(|m| m.doubled)),
        ("failed", sum(|m| m.failed)),
    ] {
        if n > 0 {
            problems.push(format!("{n} run(s) {what}"));
        }
    }
    if problems.is_empty() {
        println!(
            "soak: passed: no RSS or fd growth over {:.0}% since minute {base_minute}, the WAL \
             under 64 MiB, no run lost, doubled or failed",
            GROWTH_LIMIT * 100.0
        );
        Ok(())
    } else {
        for p in &problems {
            println!("soak: FAILED: {p}");
        }
        Err(format!("soak: {} problem(s)", problems.len()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(minute: u64, rss_kib: u64, fds: u64, wal: u64, lost: u64) -> Row {
        let p = Proc {
            rss_kib,
            threads: 4,
            fds,
        };
        Row {
            minute,
            daemon: p,
            serve: p,
            wal,
            runs: Minute {
                lost,
                ..Minute::default()
            },
            ..Row::default()
        }
    }

    #[test]
    fn growth_a_big_wal_and_lost_runs_fail_the_soak() {
        let steady = vec![row(1, 1000, 10, 0, 0), row(3, 1100, 11, 0, 0)];
        assert!(verdict(&(steady, Vec::new()), 3).is_ok());
        let grew = vec![row(1, 1000, 10, 0, 0), row(3, 1101, 10, 0, 0)];
        assert!(verdict(&(grew, Vec::new()), 3).is_err());
        // Three descriptors more are slack; four are growth.
        let fds = |to| vec![row(1, 1000, 10, 0, 0), row(3, 1000, to, 0, 0)];
        assert!(verdict(&(fds(13), Vec::new()), 3).is_ok());
        assert!(verdict(&(fds(14), Vec::new()), 3).is_err());
        // From 10 minutes on, minute 10 is the base: minute 1 does not count.
        let mut long: Vec<Row> = (1..=12).map(|m| row(m, 2000, 20, 0, 0)).collect();
        long[0] = row(1, 1000, 10, 0, 0);
        assert!(verdict(&(long.clone(), Vec::new()), 12).is_ok());
        long[11].wal = WAL_LIMIT + 1;
        assert!(verdict(&(long, Vec::new()), 12).is_err());
        // From 20 minutes on, the levels are the least of five minutes:
        // a burst in the last minute is not growth, a raised floor is.
        let hour = |last_five: [u64; 5]| {
            let mut rows: Vec<Row> = (1..=60).map(|m| row(m, 2000, 20, 0, 0)).collect();
            for (r, rss) in rows[55..].iter_mut().zip(last_five) {
                r.daemon.rss_kib = rss;
            }
            verdict(&(rows, Vec::new()), 60)
        };
        assert!(hour([2000, 2000, 2000, 2000, 3000]).is_ok());
        assert!(hour([2200, 2300, 2200, 2250, 2300]).is_ok());
        let err = hour([2300, 2250, 2210, 2300, 3000]).unwrap_err();
        assert_eq!(err, "soak: 1 problem(s)");
        // The start's level is the least of minutes 10 to 14 too.
        let mut rows: Vec<Row> = (1..=60).map(|m| row(m, 2000, 20, 0, 0)).collect();
        rows[9].daemon.rss_kib = 1500;
        rows[55..].iter_mut().for_each(|r| r.daemon.rss_kib = 2100);
        assert!(verdict(&(rows, Vec::new()), 60).is_err());
        let lost = vec![row(1, 1000, 10, 0, 0), row(2, 1000, 10, 0, 1)];
        assert!(verdict(&(lost, Vec::new()), 2).is_err());
        let told = vec![row(1, 1000, 10, 0, 0)];
        assert!(verdict(&(told, vec!["1 loop(s) never ran".into()]), 1).is_err());
    }
}
