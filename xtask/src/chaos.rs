//! `cargo xtask chaos`: three daemons, playing three hosts, share one
//! PostgreSQL database while faults hit them and the server (issue 15).
//!
//! Each daemon has its own data directory and host name
//! (`LOOPS_HOSTNAME`), as separate machines would. Six loops run every
//! 2 s with `--catch-up all` and a 6 s lease, half with `--overlap skip`;
//! every run appends a start and an end line to a ledger file. For the
//! fault period (60 s by default) a fault strikes every few seconds, in
//! turn:
//! - `kill -9` of a daemon, restarted a second later;
//! - `SIGSTOP` of a daemon for 3 s (less than the lease), then `SIGCONT`;
//! - `pg_terminate_backend` of every loops connection;
//! - `pg_ctl restart -m fast` of the server.
//!
//! Then the daemons run undisturbed for a settling period, stop gracefully,
//! and the ledger and the database are checked:
//! 1. no two executions of one slot overlapped (a slot ran at most once at
//!    a time, whoever ran it);
//! 2. no two runs of a skip loop overlapped;
//! 3. nothing is left `running` once the daemons have stopped;
//! 4. work kept getting done: every 10 s window of the fault period saw
//!    runs start;
//! 5. placement, a pool and a chain held (issue 30, `chaos/x3.rs`).
//!
//! An execution the ledger shows no end for (its process group was killed
//! by a recovery) counts as running until the recovery could have killed
//! it: its start plus the lease plus the cross-host grace, a generous bound
//! that can only make an overlap more likely to be seen.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod x3;

use crate::bench_daemon::now_ms;
use crate::postgres::{Cluster, NO_CLUSTER};
use crate::{cargo, root, run};

/// How many daemons (hosts) share the database.
const HOSTS: usize = 3;
/// How many loops, every other one `--overlap skip`.
const LOOPS: usize = 6;
/// The loops' lease.
const LEASE: &str = "6s";
/// A run's length: half its loop's period, so a fault often finds runs in flight.
const RUN_SECONDS: &str = "1.0";
/// The bound on an execution without an end line (lease + grace + slack).
const UNENDED_MS: i64 = 6_000 + 30_000 + 5_000;

/// One daemon playing one host.
struct Host {
    name: String,
    /// `--label` arguments (issue 30).
    labels: &'static [&'static str],
    data_dir: PathBuf,
    child: Option<Child>,
}

impl Host {
    fn start(&mut self, loops: &Path, url: &str) -> Result<(), String> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.data_dir.join("stdio.log"))
            .map_err(|e| format!("opening the daemon's stdio log: {e}"))?;
        let err = log.try_clone().map_err(|e| e.to_string())?;
        let child = Command::new(loops)
            .args(["daemon", "run", "--interval-ms", "1000"])
            .args(self.labels)
            .env("LOOPS_DATA_DIR", &self.data_dir)
            .env("LOOPS_DATABASE_URL", url)
            .env("LOOPS_HOSTNAME", &self.name)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("starting the daemon of {}: {e}", self.name))?;
        self.child = Some(child);
        Ok(())
    }

    fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    fn signal(&self, signal: &str) {
        if let Some(pid) = self.pid() {
            let _ = Command::new("kill")
                .args([format!("-{signal}"), pid.to_string()])
                .status();
        }
    }

    fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERM, then waits for a graceful exit (at most 60 s).
    fn stop(&mut self) -> Result<(), String> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        self.signal_child(&child, "TERM");
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                return if status.success() {
                    Ok(())
                } else {
                    Err(format!("the daemon of {} exited with {status}", self.name))
                };
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                return Err(format!(
                    "the daemon of {} did not stop within 60 s",
                    self.name
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn signal_child(&self, child: &Child, signal: &str) {
        let _ = Command::new("kill")
            .args([format!("-{signal}"), child.id().to_string()])
            .status();
    }
}

/// `cargo xtask chaos [--seconds N]`.
pub(crate) fn chaos(args: &[String]) -> Result<(), String> {
    let seconds = match args {
        [] => 60,
        [flag, n] if flag == "--seconds" => n
            .parse()
            .map_err(|_| format!("--seconds takes a number of seconds, not {n}"))?,
        _ => return Err("usage: cargo xtask chaos [--seconds N]".into()),
    };
    let mut build = cargo();
    build.args(["build", "-p", "loops-cli"]);
    run("cargo build -p loops-cli", build)?;
    let loops = root().join("target/debug/loops");
    let cluster = Cluster::start().map_err(|e| format!("{NO_CLUSTER}: {e}"))?;
    cluster.psql(&cluster.url, "CREATE DATABASE chaos")?;
    let url = cluster.url_of("chaos");
    let work = std::env::temp_dir().join(format!("loops-chaos-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).map_err(|e| format!("creating {}: {e}", work.display()))?;
    let sampler = x3::Sampler::default();
    let outcome = std::thread::scope(|s| {
        s.spawn(|| sampler.run(&cluster, &url));
        let outcome = drive(
            &cluster,
            &loops,
            &url,
            &work,
            Duration::from_secs(seconds),
            &sampler,
        );
        sampler.stop();
        outcome
    });
    match &outcome {
        Ok(()) => {
            let _ = std::fs::remove_dir_all(&work);
        }
        Err(_) => eprintln!("chaos: the daemons' logs are kept in {}", work.display()),
    }
    outcome
}

fn drive(
    cluster: &Cluster,
    loops: &Path,
    url: &str,
    work: &Path,
    fault_period: Duration,
    sampler: &x3::Sampler,
) -> Result<(), String> {
    let ledger = work.join("ledger");
    // The loops, created through the CLI on the shared database.
    let admin_dir = work.join("admin");
    for i in 0..LOOPS {
        let overlap = if i % 2 == 0 { "skip" } else { "allow" };
        let script = format!(
            "printf 'S %s %s %s %s\\n' \"$LOOPS_LOOP_ID\" \"$LOOPS_SCHEDULED_FOR\" \
             \"$LOOPS_RUN_ID\" \"$(date +%s%3N)\" >> {ledger}; sleep {RUN_SECONDS}; \
             printf 'E %s %s %s %s\\n' \"$LOOPS_LOOP_ID\" \"$LOOPS_SCHEDULED_FOR\" \
             \"$LOOPS_RUN_ID\" \"$(date +%s%3N)\" >> {ledger}",
            ledger = ledger.display()
        );
        let out = Command::new(loops)
            .args(["create", "command", &format!("chaos-{i}-{overlap}")])
            .args(["--every", "2s", "--catch-up", "all", "--lease", LEASE])
            .args(["--overlap", overlap, "--cmd", &script])
            .env("LOOPS_DATA_DIR", &admin_dir)
            .env("LOOPS_DATABASE_URL", url)
            .output()
            .map_err(|e| format!("loops create: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "loops create failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    x3::create(loops, url, &admin_dir, work)?;
    let mut hosts: Vec<Host> = (0..HOSTS)
        .map(|i| Host {
            name: format!("chaos-host-{i}"),
            labels: x3::labels(i),
            data_dir: work.join(format!("host-{i}")),
            child: None,
        })
        .collect();
    for h in &mut hosts {
        std::fs::create_dir_all(&h.data_dir).map_err(|e| e.to_string())?;
        h.start(loops, url)?;
    }
    let started = Instant::now();
    let epoch_ms = now_ms();
    let mut faults: Vec<String> = Vec::new();
    let mut turn = 0usize;
    while started.elapsed() < fault_period {
        // A phase that moves against the loops' 2 s period, so faults land
        // both while runs are in flight and between them.
        let phase = u64::try_from(turn).unwrap_or(0) * 700 % 2_000;
        std::thread::sleep(Duration::from_millis(4_000 + phase));
        let victim = turn % HOSTS;
        let fault = match turn % 4 {
            0 => {
                hosts[victim].kill9();
                std::thread::sleep(Duration::from_secs(1));
                hosts[victim].start(loops, url)?;
                format!("kill -9 and restart of {}", hosts[victim].name)
            }
            1 => {
                hosts[victim].signal("STOP");
                std::thread::sleep(Duration::from_secs(3));
                hosts[victim].signal("CONT");
                format!("SIGSTOP for 3 s of {}", hosts[victim].name)
            }
            2 => {
                cluster.psql(
                    &cluster.url,
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
                     WHERE application_name LIKE 'loops:%'",
                )?;
                "pg_terminate_backend of every loops connection".to_owned()
            }
            _ => {
                cluster.restart()?;
                "pg_ctl restart -m fast".to_owned()
            }
        };
        eprintln!("chaos: {:>5.1}s {fault}", started.elapsed().as_secs_f64());
        faults.push(fault);
        turn += 1;
    }
    let fault_end_ms = now_ms();
    // Settle: undisturbed, long enough for a stalled or killed host's runs
    // to be recovered.
    std::thread::sleep(Duration::from_secs(12));
    let mut stop_errors = Vec::new();
    for h in &mut hosts {
        if let Err(e) = h.stop() {
            stop_errors.push(e);
        }
    }
    let text = std::fs::read_to_string(&ledger).map_err(|e| format!("reading the ledger: {e}"))?;
    let skip_loops: Vec<String> = cluster
        .psql(url, "SELECT id FROM loops WHERE overlap = 'skip'")?
        .lines()
        .map(str::to_owned)
        .collect();
    let running = cluster.psql(
        url,
        "SELECT count(*) FROM loop_runs WHERE status = 'running'",
    )?;
    let statuses = cluster.psql(
        url,
        "SELECT status || '=' || count(*) FROM loop_runs GROUP BY status ORDER BY status",
    )?;
    let report = check(&text, &skip_loops, epoch_ms, fault_end_ms);
    eprintln!("chaos: {} faults: {}", faults.len(), faults.join("; "));
    eprintln!(
        "chaos: runs by status after the stop: {}",
        statuses.lines().collect::<Vec<_>>().join(", ")
    );
    eprintln!(
        "chaos: {} executions in the ledger ({} without an end line); runs started per 10 s \
         window of the fault period: {:?}",
        report.executions, report.unended, report.windows
    );
    let mut problems = report.problems;
    problems.extend(stop_errors);
    let placed = x3::check(cluster, url, work, sampler)?;
    for figure in &placed.figures {
        eprintln!("chaos: {figure}");
    }
    problems.extend(placed.problems);
    if running.trim() != "0" {
        problems.push(format!(
            "{} run(s) still running after every daemon stopped",
            running.trim()
        ));
    }
    if report.windows.contains(&0) {
        problems.push(format!(
            "a 10 s window of the fault period saw no run start: {:?}",
            report.windows
        ));
    }
    if problems.is_empty() {
        eprintln!(
            "chaos: passed: no slot ran twice at once, no skip loop overlapped, nothing left \
             running, work done in every window, placed loops only on their hosts, the pool \
             never over its limit, one downstream run per upstream run"
        );
        Ok(())
    } else {
        for p in &problems {
            eprintln!("chaos: FAILED: {p}");
        }
        Err(format!("chaos: {} problem(s)", problems.len()))
    }
}

/// What the ledger shows.
#[derive(Debug, Default)]
struct Report {
    executions: usize,
    unended: usize,
    /// Run starts per 10 s window of the fault period.
    windows: Vec<usize>,
    problems: Vec<String>,
}

/// One execution: its loop, slot, run, start and end (ms).
#[derive(Debug, Clone)]
struct Execution {
    loop_id: String,
    slot: String,
    run_id: String,
    start: i64,
    end: Option<i64>,
}

impl Execution {
    fn end_or_bound(&self) -> i64 {
        self.end.unwrap_or(self.start + UNENDED_MS)
    }
}

/// Parses the ledger and checks it (see the module docs).
fn check(ledger: &str, skip_loops: &[String], from_ms: i64, to_ms: i64) -> Report {
    let mut open: BTreeMap<(String, String, String), Vec<usize>> = BTreeMap::new();
    let mut all: Vec<Execution> = Vec::new();
    for line in ledger.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let [kind, loop_id, slot, run_id, at] = f[..] else {
            continue;
        };
        let Ok(at) = at.parse::<i64>() else { continue };
        let key = (loop_id.to_owned(), slot.to_owned(), run_id.to_owned());
        match kind {
            "S" => {
                open.entry(key).or_default().push(all.len());
                all.push(Execution {
                    loop_id: loop_id.to_owned(),
                    slot: slot.to_owned(),
                    run_id: run_id.to_owned(),
                    start: at,
                    end: None,
                });
            }
            "E" => {
                // The newest open execution of this run ends: an older one
                // without an end was killed.
                if let Some(list) = open.get_mut(&key)
                    && let Some(pos) = list.iter().rposition(|i| all[*i].end.is_none())
                {
                    let i = list.remove(pos);
                    all[i].end = Some(at);
                }
            }
            _ => {}
        }
    }
    let mut report = Report {
        executions: all.len(),
        unended: all.iter().filter(|e| e.end.is_none()).count(),
        ..Report::default()
    };
    // 1. One slot, one execution at a time.
    let mut by_slot: BTreeMap<(&str, &str), Vec<&Execution>> = BTreeMap::new();
    for e in &all {
        by_slot.entry((&e.loop_id, &e.slot)).or_default().push(e);
    }
    for ((loop_id, slot), list) in &by_slot {
        if let Some((a, b)) = first_overlap(list) {
            report.problems.push(format!(
                "slot {slot} of loop {loop_id} ran twice at once: run {} from {} to {} and run \
                 {} from {}",
                a.run_id,
                a.start,
                a.end_or_bound(),
                b.run_id,
                b.start
            ));
        }
    }
    // 2. A skip loop, one run at a time.
    for loop_id in skip_loops {
        let list: Vec<&Execution> = all.iter().filter(|e| &e.loop_id == loop_id).collect();
        if let Some((a, b)) = first_overlap(&list) {
            report.problems.push(format!(
                "skip loop {loop_id} ran two slots at once: {} (run {}, {}..{}) and {} (run {}, \
                 from {})",
                a.slot,
                a.run_id,
                a.start,
                a.end_or_bound(),
                b.slot,
                b.run_id,
                b.start
            ));
        }
    }
    // 4. Work in every window.
    let windows = usize::try_from((to_ms - from_ms).max(0) / 10_000).unwrap_or(0);
    report.windows = (0..windows)
        .map(|w| {
            let lo = from_ms + i64::try_from(w).unwrap_or(0) * 10_000;
            all.iter()
                .filter(|e| e.start >= lo && e.start < lo + 10_000)
                .count()
        })
        .collect();
    report
}

/// The first two executions of `list` whose times overlap.
fn first_overlap<'a>(list: &[&'a Execution]) -> Option<(&'a Execution, &'a Execution)> {
    let mut sorted = list.to_vec();
    sorted.sort_by_key(|e| e.start);
    let mut latest: Option<&Execution> = None;
    for e in sorted {
        if let Some(prev) = latest {
            if e.start < prev.end_or_bound() {
                return Some((prev, e));
            }
            if e.end_or_bound() > prev.end_or_bound() {
                latest = Some(e);
            }
        } else {
            latest = Some(e);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ledger(lines: &[&str]) -> String {
        lines.join("\n")
    }

    #[test]
    fn overlapping_executions_of_one_slot_are_found() {
        let text = ledger(&[
            "S l1 s1 r1 1000",
            "S l1 s1 r1 1200",
            "E l1 s1 r1 1400",
            "E l1 s1 r1 1600",
        ]);
        let r = check(&text, &[], 0, 0);
        assert_eq!(r.problems.len(), 1, "{:?}", r.problems);
    }

    #[test]
    fn a_skip_loop_running_two_slots_at_once_is_found_but_allow_is_not() {
        let text = ledger(&[
            "S l1 s1 r1 1000",
            "S l1 s2 r2 1100",
            "E l1 s1 r1 1400",
            "E l1 s2 r2 1500",
        ]);
        assert!(check(&text, &[], 0, 0).problems.is_empty());
        assert_eq!(check(&text, &["l1".into()], 0, 0).problems.len(), 1);
    }

    #[test]
    fn back_to_back_runs_and_windows_count() {
        let text = ledger(&[
            "S l1 s1 r1 1000",
            "E l1 s1 r1 1400",
            "S l1 s1 r1 1400",
            "E l1 s1 r1 1800",
            "S l1 s2 r2 12000",
            "E l1 s2 r2 12400",
        ]);
        let r = check(&text, &["l1".into()], 0, 20_000);
        assert!(r.problems.is_empty(), "{:?}", r.problems);
        assert_eq!(r.windows, vec![2, 1]);
    }

    #[test]
    fn an_execution_without_an_end_is_bounded_not_endless() {
        let text = ledger(&["S l1 s1 r1 1000", "S l1 s1 r1 100000", "E l1 s1 r1 100400"]);
        assert!(check(&text, &[], 0, 0).problems.is_empty());
    }
}
