//! Issue 30's part of the chaos run (`docs/triggers.md` X3): the hosts
//! carry different labels, and beside the scheduled loops run
//! - two placed loops, one on the label `gpu` (host 0's) and one pinned to
//!   host 2 with `--host`, each writing the host it ran on to a ledger;
//! - four members of a pool of at most 2, every 2 s, each run 1.5 s, so
//!   the pool is always full and its members always wait;
//! - a chain: `chaos-up` every 2 s and `chaos-down --trigger-only --after
//!   chaos-up`.
//!
//! Checked afterwards: a placed loop ran only on its host; the pool never
//! had 3 runs at once, by a sample of the database every 50 ms during the
//! whole run and by the runs' own start and end lines (a run without an
//! end line ends, at the latest, when the database recorded it ended);
//! every succeeded upstream run triggered exactly one downstream run.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use crate::postgres::Cluster;

/// The pool and its limit.
const POOL: &str = "chaos-pool";
const POOL_MAX: usize = 2;
/// Its members.
const MEMBERS: usize = 4;

/// The labels host `i` carries beside its host label.
pub(super) fn labels(i: usize) -> &'static [&'static str] {
    if i == 0 { &["--label", "gpu"] } else { &[] }
}

fn loops_cmd(loops: &Path, url: &str, admin: &Path, args: &[&str]) -> Result<(), String> {
    let out = Command::new(loops)
        .args(args)
        .env("LOOPS_DATA_DIR", admin)
        .env("LOOPS_DATABASE_URL", url)
        .output()
        .map_err(|e| format!("loops {}: {e}", args.join(" ")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "loops {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// Creates the pool and the loops of this part.
pub(super) fn create(loops: &Path, url: &str, admin: &Path, work: &Path) -> Result<(), String> {
    let run = |args: &[&str]| loops_cmd(loops, url, admin, args);
    run(&["pools", "set", POOL, "--max", &POOL_MAX.to_string()])?;
    let pool_ledger = work.join("pool-ledger");
    for i in 0..MEMBERS {
        let script = format!(
            "printf 'S %s %s %s %s\\n' \"$LOOPS_LOOP_ID\" \"$LOOPS_SCHEDULED_FOR\" \
             \"$LOOPS_RUN_ID\" \"$(date +%s%3N)\" >> {ledger}; sleep 1.5; \
             printf 'E %s %s %s %s\\n' \"$LOOPS_LOOP_ID\" \"$LOOPS_SCHEDULED_FOR\" \
             \"$LOOPS_RUN_ID\" \"$(date +%s%3N)\" >> {ledger}",
            ledger = pool_ledger.display()
        );
        let name = format!("chaos-pool-{i}");
        run(&[
            "create",
            "command",
            &name,
            "--every",
            "2s",
            "--catch-up",
            "all",
            "--lease",
            "6s",
            "--overlap",
            "allow",
            "--pool",
            POOL,
            "--cmd",
            &script,
        ])?;
    }
    let placed = work.join("placed-ledger");
    for (name, flag, value) in [
        ("chaos-gpu", "--runs-on", "gpu"),
        ("chaos-pinned", "--host", "chaos-host-2"),
    ] {
        let script = format!(
            "printf 'P %s %s\\n' {name} \"$LOOPS_HOSTNAME\" >> {ledger}",
            ledger = placed.display()
        );
        run(&[
            "create", "command", name, "--every", "2s", "--lease", "6s", flag, value, "--cmd",
            &script,
        ])?;
    }
    run(&[
        "create", "command", "chaos-up", "--every", "2s", "--lease", "6s", "--cmd", "true",
    ])?;
    run(&[
        "create",
        "command",
        "chaos-down",
        "--trigger-only",
        "--after",
        "chaos-up",
        "--catch-up",
        "all",
        "--overlap",
        "allow",
        "--lease",
        "6s",
        "--cmd",
        "true",
    ])
}

/// Samples the pool's running runs from the database every 50 ms.
#[derive(Default)]
pub(super) struct Sampler {
    stop: AtomicBool,
    max: AtomicUsize,
    samples: AtomicUsize,
}

impl Sampler {
    pub(super) fn run(&self, cluster: &Cluster, url: &str) {
        let sql =
            format!("SELECT count(*) FROM loop_runs WHERE pool = '{POOL}' AND status = 'running'");
        while !self.stop.load(Ordering::Relaxed) {
            // A restarting server answers nothing: that sample is skipped.
            if let Ok(n) = cluster.psql(url, &sql)
                && let Ok(n) = n.trim().parse::<usize>()
            {
                self.max.fetch_max(n, Ordering::Relaxed);
                self.samples.fetch_add(1, Ordering::Relaxed);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub(super) fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// What this part found: problems, and the figures for the report.
pub(super) struct Outcome {
    pub(super) problems: Vec<String>,
    pub(super) figures: Vec<String>,
}

fn rows(cluster: &Cluster, url: &str, sql: &str) -> Result<Vec<Vec<String>>, String> {
    Ok(cluster
        .psql(url, sql)?
        .lines()
        .map(|l| l.split('|').map(str::to_owned).collect())
        .collect())
}

fn one(cluster: &Cluster, url: &str, sql: &str) -> Result<i64, String> {
    let text = cluster.psql(url, sql)?;
    text.trim()
        .parse()
        .map_err(|_| format!("{sql}: not a number: {text}"))
}

/// Checks this part (see the module docs) after the daemons stopped.
pub(super) fn check(
    cluster: &Cluster,
    url: &str,
    work: &Path,
    sampler: &Sampler,
) -> Result<Outcome, String> {
    let mut problems = Vec::new();
    let mut figures = Vec::new();
    // Placement.
    let placed = std::fs::read_to_string(work.join("placed-ledger")).unwrap_or_default();
    for (name, host) in [
        ("chaos-gpu", "chaos-host-0"),
        ("chaos-pinned", "chaos-host-2"),
    ] {
        let hosts: Vec<&str> = placed
            .lines()
            .filter_map(|l| l.strip_prefix(&format!("P {name} ")))
            .collect();
        let wrong = hosts.iter().filter(|h| **h != host).count();
        figures.push(format!(
            "{name} ran {} times, {wrong} not on {host}",
            hosts.len()
        ));
        if hosts.is_empty() {
            problems.push(format!("{name} never ran"));
        }
        if wrong > 0 {
            problems.push(format!(
                "{name} ran {wrong} time(s) on a host other than {host}"
            ));
        }
    }
    // The pool, by the database's samples.
    let sampled = sampler.max.load(Ordering::Relaxed);
    figures.push(format!(
        "pool max {POOL_MAX}: at most {sampled} running in {} database samples",
        sampler.samples.load(Ordering::Relaxed)
    ));
    if sampled > POOL_MAX {
        problems.push(format!(
            "the database showed {sampled} runs of the pool running at once"
        ));
    }
    // The pool, by the runs' own lines; an unended execution ends when the
    // database says its run ended, or when the same run starts again.
    let ended: BTreeMap<String, i64> = rows(
        cluster,
        url,
        &format!(
            "SELECT id, (extract(epoch FROM finished_at) * 1000)::bigint FROM loop_runs \
             WHERE pool = '{POOL}' AND finished_at IS NOT NULL"
        ),
    )?
    .into_iter()
    .filter_map(|r| Some((r.first()?.clone(), r.get(1)?.parse().ok()?)))
    .collect();
    let ledger = std::fs::read_to_string(work.join("pool-ledger")).unwrap_or_default();
    let (most, executions) = most_at_once(&ledger, &ended);
    figures.push(format!(
        "pool max {POOL_MAX}: at most {most} running at once by the runs' own {executions} executions"
    ));
    if most > POOL_MAX {
        problems.push(format!(
            "the runs' own lines show {most} of the pool running at once"
        ));
    }
    if executions < 10 {
        problems.push(format!("the pool's members ran only {executions} times"));
    }
    // The chain.
    let up = "(SELECT id FROM loops WHERE name = 'chaos-up')";
    let down = "(SELECT id FROM loops WHERE name = 'chaos-down')";
    let succeeded = one(
        cluster,
        url,
        &format!("SELECT count(*) FROM loop_runs WHERE loop_id = {up} AND status = 'succeeded'"),
    )?;
    let not_once = one(
        cluster,
        url,
        &format!(
            "SELECT count(*) FROM loop_runs r WHERE r.loop_id = {up} AND r.status = 'succeeded' \
             AND (SELECT count(*) FROM loop_triggers t WHERE t.source_run_id = r.id \
                  AND t.loop_id = {down}) <> 1"
        ),
    )?;
    let pending = one(
        cluster,
        url,
        &format!(
            "SELECT count(*) FROM loop_triggers WHERE loop_id = {down} AND run_id IS NULL \
             AND coalesced_at IS NULL"
        ),
    )?;
    let twice = one(
        cluster,
        url,
        "SELECT count(*) FROM (SELECT trigger_id FROM loop_runs WHERE trigger_id IS NOT NULL \
         GROUP BY trigger_id HAVING count(*) > 1) AS t",
    )?;
    let downstream = one(
        cluster,
        url,
        &format!("SELECT count(*) FROM loop_runs WHERE loop_id = {down}"),
    )?;
    figures.push(format!(
        "chain: {succeeded} succeeded upstream runs, {downstream} downstream runs, \
         {not_once} upstream runs without exactly one trigger, {pending} triggers pending, \
         {twice} triggers run twice"
    ));
    if succeeded < 5 {
        problems.push(format!("chaos-up succeeded only {succeeded} times"));
    }
    if not_once > 0 {
        problems.push(format!(
            "{not_once} succeeded upstream run(s) without exactly one trigger"
        ));
    }
    if pending > 0 {
        problems.push(format!("{pending} trigger(s) never ran"));
    }
    if twice > 0 {
        problems.push(format!("{twice} trigger(s) started two runs"));
    }
    Ok(Outcome { problems, figures })
}

/// The most executions of `ledger` (`S|E loop slot run ms` lines) that
/// overlap, and how many there are. An execution without an end line ends
/// at the next start of its run, or at `ended[run]`, whichever is first.
fn most_at_once(ledger: &str, ended: &BTreeMap<String, i64>) -> (usize, usize) {
    let mut execs: Vec<(String, i64, Option<i64>)> = Vec::new();
    for line in ledger.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let [kind, _, _, run, at] = f[..] else {
            continue;
        };
        let Ok(at) = at.parse::<i64>() else { continue };
        match kind {
            "S" => execs.push((run.to_owned(), at, None)),
            "E" => {
                if let Some(e) = execs.iter_mut().rev().find(|e| e.0 == run && e.2.is_none()) {
                    e.2 = Some(at);
                }
            }
            _ => {}
        }
    }
    let mut edges: Vec<(i64, i32)> = Vec::new();
    for (i, (run, start, end)) in execs.iter().enumerate() {
        let next_start = execs[i + 1..]
            .iter()
            .filter(|e| &e.0 == run)
            .map(|e| e.1)
            .min();
        let end = end
            .or_else(|| {
                [next_start, ended.get(run).copied()]
                    .into_iter()
                    .flatten()
                    .min()
            })
            .unwrap_or(i64::MAX);
        edges.push((*start, 1));
        edges.push((end, -1));
    }
    // Ends before starts at one instant: back-to-back is not overlap.
    edges.sort_unstable();
    let (mut now, mut most) = (0i32, 0i32);
    for (_, d) in edges {
        now += d;
        most = most.max(now);
    }
    (usize::try_from(most).unwrap_or(0), execs.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn executions_at_once_are_counted_with_back_to_back_apart() {
        let ledger =
            "S l s r1 0\nS l s r2 10\nE l s r1 100\nS l s r3 100\nE l s r2 150\nE l s r3 200";
        assert_eq!(most_at_once(ledger, &BTreeMap::new()), (2, 3));
        let three =
            "S l s r1 0\nS l s r2 10\nS l s r3 20\nE l s r1 100\nE l s r2 100\nE l s r3 100";
        assert_eq!(most_at_once(three, &BTreeMap::new()).0, 3);
    }

    #[test]
    fn an_unended_execution_ends_when_the_database_says() {
        // r1 has no end line; the database ended it at 50, before r3.
        let ledger = "S l s r1 0\nS l s r2 10\nS l s r3 60\nE l s r2 100\nE l s r3 120";
        let ended = BTreeMap::from([("r1".to_owned(), 50)]);
        assert_eq!(most_at_once(ledger, &ended).0, 2);
        assert_eq!(most_at_once(ledger, &BTreeMap::new()).0, 3);
    }
}
