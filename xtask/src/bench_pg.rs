//! `cargo xtask bench --postgres`: the PostgreSQL backend's figures on a
//! throwaway server (issue 15), against the release build:
//! - 1,000 loops due at once, drained by 1 daemon and by 3 daemons
//!   (playing 3 hosts, `LOOPS_HOSTNAME`): the time until every slot has
//!   run, and that each ran exactly once (goal: 3 daemons no slower than
//!   1.25× one on this machine);
//! - lateness (`startedAt − scheduledFor`) p50/p99/max of 20 loops due
//!   every second, with 3 daemons, over 30 s;
//! - the CLI's latency on SQLite and on PostgreSQL, side by side (median
//!   of 9 samples each).

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::postgres::{Cluster, NO_CLUSTER};

const DRAIN_LOOPS: usize = 1_000;
const RATE_LOOPS: usize = 20;
const RATE_WINDOW: Duration = Duration::from_secs(30);
const CLI_SAMPLES: usize = 9;

pub(crate) fn figures(bin: &Path, scratch: &Path) -> Result<(), String> {
    let cluster = Cluster::start().map_err(|e| format!("{NO_CLUSTER}: {e}"))?;
    let one = drain(&cluster, bin, scratch, 1)?;
    let three = drain(&cluster, bin, scratch, 3)?;
    let ratio = three.as_secs_f64() / one.as_secs_f64();
    println!(
        "postgres: drain {DRAIN_LOOPS} due loops: 1 daemon {:.2} s, 3 daemons {:.2} s ({ratio:.2}×; goal ≤ 1.25×: {})",
        one.as_secs_f64(),
        three.as_secs_f64(),
        if ratio <= 1.25 { "met" } else { "NOT met" }
    );
    rate(&cluster, bin, scratch)?;
    cli(&cluster, bin, scratch)
}

/// A fresh database on the cluster, and its URL.
fn database(cluster: &Cluster, name: &str) -> Result<String, String> {
    cluster.psql(
        &cluster.url,
        &format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"),
    )?;
    cluster.psql(&cluster.url, &format!("CREATE DATABASE {name}"))?;
    Ok(cluster.url_of(name))
}

fn loops_at(bin: &Path, data: &Path, url: Option<&str>, args: &[&str]) -> Result<String, String> {
    let mut cmd = Command::new(bin);
    cmd.args(args).env("LOOPS_DATA_DIR", data);
    match url {
        Some(url) => cmd.env("LOOPS_DATABASE_URL", url),
        None => cmd.env_remove("LOOPS_DATABASE_URL"),
    };
    let out = cmd
        .output()
        .map_err(|e| format!("{}: {e}", bin.display()))?;
    if !out.status.success() {
        return Err(format!(
            "loops {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `count` copies of the loop named `template` (ids fresh, names numbered),
/// inserted in SQL: a thousand `loops create` would time the CLI instead.
fn copy_loop(cluster: &Cluster, url: &str, template: &str, count: usize) -> Result<(), String> {
    cluster.psql(
        url,
        &format!(
            "INSERT INTO loops (id, name, description, status, schedule_json, target_json,
               next_run_at, retry_scheduled_for, catch_up, catch_up_limit, overlap, max_attempts,
               retry_delay_ms, lease_ms, expires_at, created_at, updated_at, paused_reason)
             SELECT substr(md5(g::text || clock_timestamp()::text), 1, 12), name || '-' || g,
               description, status, schedule_json, target_json, next_run_at, retry_scheduled_for,
               catch_up, catch_up_limit, overlap, max_attempts, retry_delay_ms, lease_ms,
               expires_at, created_at, updated_at, paused_reason
             FROM loops, generate_series(2, {count}) g WHERE name = '{template}'"
        ),
    )?;
    Ok(())
}

fn start_daemons(bin: &Path, scratch: &Path, url: &str, n: usize) -> Result<Vec<Child>, String> {
    (0..n)
        .map(|i| {
            let data = scratch.join(format!("pg-host-{i}"));
            let _ = std::fs::remove_dir_all(&data);
            std::fs::create_dir_all(&data).map_err(|e| e.to_string())?;
            Command::new(bin)
                .args(["daemon", "run"])
                .env("LOOPS_DATA_DIR", &data)
                .env("LOOPS_DATABASE_URL", url)
                .env("LOOPS_HOSTNAME", format!("bench-host-{i}"))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .map_err(|e| format!("starting a daemon: {e}"))
        })
        .collect()
}

fn stop_daemons(daemons: Vec<Child>) {
    for d in &daemons {
        let _ = Command::new("kill").arg(d.id().to_string()).status();
    }
    for mut d in daemons {
        let _ = d.wait();
    }
}

/// Drains [`DRAIN_LOOPS`] loops due at once with `n` daemons; returns the
/// time from their start to the last run's finish.
fn drain(cluster: &Cluster, bin: &Path, scratch: &Path, n: usize) -> Result<Duration, String> {
    let url = database(cluster, &format!("bench_drain_{n}"))?;
    let data = scratch.join(format!("pg-drain-{n}"));
    let ledger = scratch.join(format!("pg-drain-{n}.ledger"));
    let _ = std::fs::remove_file(&ledger);
    let cmd = format!("echo \"$LOOPS_RUN_ID\" >> {}", ledger.display());
    loops_at(
        bin,
        &data,
        Some(&url),
        &[
            "create",
            "command",
            "drain",
            "--at",
            "2020-01-01T00:00:00Z",
            "--cmd",
            &cmd,
        ],
    )?;
    copy_loop(cluster, &url, "drain", DRAIN_LOOPS)?;
    let started = Instant::now();
    let daemons = start_daemons(bin, scratch, &url, n)?;
    let deadline = started + Duration::from_secs(300);
    let finished = loop {
        let done = cluster.psql(
            &url,
            "SELECT count(*) FROM loop_runs WHERE status NOT IN ('running')",
        )?;
        if done.trim().parse::<usize>().unwrap_or(0) >= DRAIN_LOOPS {
            break started.elapsed();
        }
        if Instant::now() > deadline {
            stop_daemons(daemons);
            return Err(format!(
                "{n} daemon(s) did not drain {DRAIN_LOOPS} loops in 300 s"
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    stop_daemons(daemons);
    let text = std::fs::read_to_string(&ledger).map_err(|e| format!("reading the ledger: {e}"))?;
    let mut ids: Vec<&str> = text.lines().collect();
    let executions = ids.len();
    ids.sort_unstable();
    ids.dedup();
    let statuses = cluster.psql(
        &url,
        "SELECT status || '=' || count(*) FROM loop_runs GROUP BY status ORDER BY 1",
    )?;
    println!(
        "postgres: {n} daemon(s) drained {DRAIN_LOOPS} loops in {:.2} s: {executions} executions of {} runs ({})",
        finished.as_secs_f64(),
        ids.len(),
        statuses.lines().collect::<Vec<_>>().join(", ")
    );
    if executions != DRAIN_LOOPS || ids.len() != DRAIN_LOOPS {
        return Err(format!(
            "{n} daemon(s): {executions} executions of {} distinct runs, expected exactly {DRAIN_LOOPS}",
            ids.len()
        ));
    }
    Ok(finished)
}

/// Lateness of [`RATE_LOOPS`] loops due every second, with 3 daemons.
fn rate(cluster: &Cluster, bin: &Path, scratch: &Path) -> Result<(), String> {
    let url = database(cluster, "bench_rate")?;
    let data = scratch.join("pg-rate");
    loops_at(
        bin,
        &data,
        Some(&url),
        &[
            "create", "command", "rate", "--every", "1s", "--cmd", "true",
        ],
    )?;
    copy_loop(cluster, &url, "rate", RATE_LOOPS)?;
    let daemons = start_daemons(bin, scratch, &url, 3)?;
    // The first seconds include start-up and the loops' first slots.
    std::thread::sleep(Duration::from_secs(3));
    let from = cluster.psql(&url, "SELECT now()")?;
    std::thread::sleep(RATE_WINDOW);
    stop_daemons(daemons);
    let rows = cluster.psql(
        &url,
        &format!(
            "SELECT (extract(epoch FROM started_at - scheduled_for) * 1000)::bigint
             FROM loop_runs WHERE scheduled_for >= '{}' AND started_at IS NOT NULL
             ORDER BY 1",
            from.trim()
        ),
    )?;
    let late: Vec<i64> = rows.lines().filter_map(|l| l.trim().parse().ok()).collect();
    if late.is_empty() {
        return Err("no run started in the rate window".into());
    }
    let pick = |q: f64| late[((late.len() - 1) as f64 * q).round() as usize];
    println!(
        "postgres: 3 daemons, {RATE_LOOPS} loops due every second for {} s: {} runs, lateness p50 {} ms, p99 {} ms, max {} ms",
        RATE_WINDOW.as_secs(),
        late.len(),
        pick(0.5),
        pick(0.99),
        late[late.len() - 1]
    );
    Ok(())
}

/// The CLI's latency on both backends.
fn cli(cluster: &Cluster, bin: &Path, scratch: &Path) -> Result<(), String> {
    let url = database(cluster, "bench_cli")?;
    let sqlite_dir = scratch.join("pg-cli-sqlite");
    let pg_dir = scratch.join("pg-cli-pg");
    for (dir, url) in [(&sqlite_dir, None), (&pg_dir, Some(url.as_str()))] {
        for i in 0..50 {
            loops_at(
                bin,
                dir,
                url,
                &[
                    "create",
                    "command",
                    &format!("c{i}"),
                    "--every",
                    "1h",
                    "--cmd",
                    "true",
                ],
            )?;
        }
        loops_at(bin, dir, url, &["run-now", "c0"])?;
    }
    let commands: [&[&str]; 5] = [
        &["--json", "list", "--limit", "10"],
        &["--json", "runs", "--limit", "20"],
        &["--json", "daemon", "status"],
        &["--json", "tick"],
        &["--json", "show", "c1"],
    ];
    println!("postgres: CLI latency, median of {CLI_SAMPLES} (SQLite | PostgreSQL):");
    for args in commands {
        let mut lite = Vec::new();
        let mut pg = Vec::new();
        for _ in 0..CLI_SAMPLES {
            let t = Instant::now();
            loops_at(bin, &sqlite_dir, None, args)?;
            lite.push(t.elapsed());
            let t = Instant::now();
            loops_at(bin, &pg_dir, Some(&url), args)?;
            pg.push(t.elapsed());
        }
        lite.sort_unstable();
        pg.sort_unstable();
        println!(
            "  loops {:<28} {:>6.1} ms | {:>6.1} ms",
            args.join(" "),
            lite[CLI_SAMPLES / 2].as_secs_f64() * 1e3,
            pg[CLI_SAMPLES / 2].as_secs_f64() * 1e3
        );
    }
    Ok(())
}
