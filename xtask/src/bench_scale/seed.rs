//! Builds one database of `cargo xtask bench --scale`: a few loops of each
//! shape created through the CLI (so every column holds what loops itself
//! writes), then copies of them and generated runs inserted in SQL through
//! the `sqlite3` shell.
//!
//! Every column of a copied row comes from a row the CLI wrote, except the
//! ones listed here (ids, names, instants, statuses), so a column a later
//! migration adds is copied too. Ids are 12 hex digits like the real ones,
//! from a hash of the row's number: distinct within a table, and scattered
//! over the index as random ids are.
//!
//! The copies are due hours from now, so nothing is due while the bench
//! measures. The runs spread over the 60 days before the last hour, one slot
//! per run, so `(loop_id, scheduled_for)` stays unique: 94% succeeded, 5%
//! failed and 1% skipped for command loops; the runs of the workflow loops
//! (1% of the loops) come with their workflow run, steps and events. The
//! loop `seed` gets 1% of all runs: the loop with a long history that
//! `runs <loop>` reads.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Instant;

use super::{Size, thousands};
use crate::bench::loops;

/// The loops the CLI creates, beside the copies.
pub(super) const SEED_LOOPS: u64 = 5;
/// Runs generated per statement, so progress shows while the large one
/// builds.
const CHUNK: u64 = 100_000;
const HOUR_MS: i64 = 3_600_000;
const DAY_MS: i64 = 24 * HOUR_MS;

/// The workflow of the `seed-workflow` loop: two steps, the second with
/// output, so a copied run has steps and events of both kinds.
const WORKFLOW: &str = r#"{"name":"seed-workflow","steps":[{"id":"a","target":{"type":"command","command":"true"}},{"id":"b","target":{"type":"command","command":"echo","args":["scale"]},"dependsOn":["a"]}]}"#;

/// Seeds `data` (a fresh, private directory) with `size`.
pub(super) fn build(bin: &Path, data: &Path, size: Size, now: i64) -> Result<(), String> {
    let started = Instant::now();
    cli_seed(bin, data)?;
    println!(
        "  CLI seed: {SEED_LOOPS} loops (interval, cron, workflow, once, paused) in {:.1} s",
        started.elapsed().as_secs_f64()
    );

    let mut sql = Shell::open(&data.join("loops.db"))?;
    // The rows go straight into the file: a rollback journal holds only
    // the few pages the CLI wrote, where the WAL would take every page
    // twice. The database is back in WAL mode at the end.
    sql.run(
        "PRAGMA journal_mode = DELETE; PRAGMA synchronous = OFF;
         PRAGMA cache_size = -1000000; PRAGMA temp_store = MEMORY;",
    )?;
    sql.run(
        "CREATE TEMP TABLE tpl AS SELECT
           (SELECT id FROM loops WHERE name = 'seed') AS seed,
           (SELECT r.id FROM loop_runs r JOIN loops l ON l.id = r.loop_id
             WHERE l.name = 'seed-once') AS run,
           w.id AS wr, w.loop_id AS wl, w.loop_run_id AS wlr
         FROM workflow_runs w JOIN loops l ON l.id = w.loop_id
         WHERE l.name = 'seed-workflow';",
    )?;
    let check = sql.run("SELECT count(*), count(seed), count(run), count(wlr) FROM tpl;")?;
    if check.first().map(String::as_str) != Some("1|1|1|1") {
        return Err(format!(
            "the CLI seed did not leave the rows to copy (tpl: {check:?})"
        ));
    }
    sql.run("BEGIN;")?;

    let t = Instant::now();
    let copies = size.loops - SEED_LOOPS;
    let insert = copy_loops(&mut sql, copies, now)?;
    sql.run(&insert)?;
    println!(
        "  loops: {} copies in {:.1} s",
        thousands(copies),
        t.elapsed().as_secs_f64()
    );

    let t = Instant::now();
    let inserts = run_inserts(&mut sql)?;
    let mut from = 0;
    while from < size.runs {
        let to = (from + CHUNK).min(size.runs);
        sql.run(&generated_runs(from, to, size.runs, copies, now))?;
        for insert in &inserts {
            sql.run(insert)?;
        }
        sql.run("DROP TABLE g;")?;
        from = to;
        println!(
            "  runs: {} of {} in {:.1} s",
            thousands(to),
            thousands(size.runs),
            t.elapsed().as_secs_f64()
        );
    }
    let t = Instant::now();
    sql.run("COMMIT; PRAGMA journal_mode = WAL;")?;
    let counts = sql.run(
        "SELECT (SELECT count(*) FROM loops), (SELECT count(*) FROM loop_runs),
                (SELECT count(*) FROM workflow_runs), (SELECT count(*) FROM workflow_events);",
    )?;
    sql.close()?;
    let counts: Vec<u64> = counts
        .first()
        .map(|l| l.split('|').filter_map(|n| n.parse().ok()).collect())
        .unwrap_or_default();
    let db_bytes = std::fs::metadata(data.join("loops.db")).map_or(0, |m| m.len());
    println!(
        "  commit in {:.1} s; {} loops, {} runs, {} workflow runs, {} workflow events; loops.db {} MB; seeded in {:.1} s",
        t.elapsed().as_secs_f64(),
        thousands(counts.first().copied().unwrap_or(0)),
        thousands(counts.get(1).copied().unwrap_or(0)),
        thousands(counts.get(2).copied().unwrap_or(0)),
        thousands(counts.get(3).copied().unwrap_or(0)),
        db_bytes / 1_000_000,
        started.elapsed().as_secs_f64()
    );
    if counts.first() != Some(&size.loops) || counts.get(1).is_none_or(|&n| n < size.runs) {
        return Err(format!(
            "the seeded database holds {counts:?} (loops, runs, ...), expected {} loops and {} runs",
            size.loops, size.runs
        ));
    }
    Ok(())
}

/// The loops of each shape, through the CLI. `seed-once` runs its slot
/// (the template of a command run) and `seed-workflow` runs once (the
/// template of a workflow run with its steps and events).
fn cli_seed(bin: &Path, data: &Path) -> Result<(), String> {
    let command = |name: &str, schedule: &[&str]| {
        let mut args = vec!["create", "command", name];
        args.extend(schedule);
        args.extend(["--cmd", "true", "--no-shell"]);
        loops(bin, data, &args)
    };
    command("seed", &["--every", "1h"])?;
    command("seed-cron", &["--cron", "0 0 1 1 *"])?;
    command("seed-once", &["--at", "2020-01-01T00:00:00Z"])?;
    command("seed-paused", &["--every", "1h"])?;
    loops(bin, data, &["pause", "seed-paused"])?;
    let file = data.join("seed-workflow.json");
    std::fs::write(&file, WORKFLOW).map_err(|e| format!("writing {}: {e}", file.display()))?;
    loops(
        bin,
        data,
        &["workflows", "create", &file.display().to_string()],
    )?;
    // The database holds the workflow now; the file is not loops' own.
    std::fs::remove_file(&file).map_err(|e| format!("removing {}: {e}", file.display()))?;
    loops(
        bin,
        data,
        &[
            "create",
            "workflow",
            "seed-workflow",
            "--workflow",
            "seed-workflow",
            "--every",
            "1h",
        ],
    )?;
    loops(bin, data, &["run-now", "seed-workflow"])?;
    // Runs seed-once's slot; `build` checks that its run is there.
    loops(bin, data, &["tick"])?;
    Ok(())
}

/// An id of 12 hex digits for row number `n` of table `table`: `n` times an
/// odd constant plus the table's offset, modulo 2^48 (a bijection, so
/// distinct for distinct `n`; the product fits an i64 for `n` below 3·10^9),
/// with its halves swapped, so consecutive rows land far apart in the
/// index as random ids do.
fn id(n: &str, table: u64) -> String {
    let x = format!("((({n}) * 2654435761 + {}) % 281474976710656)", table << 44);
    format!("printf('%012x', (({x} % 16777216) << 24) | ({x} >> 24))")
}

/// The instant `ms` (ms since the epoch) as loops writes it:
/// `YYYY-MM-DDTHH:MM:SS.mmmZ`.
fn ts(ms: &str) -> String {
    format!(
        "(strftime('%Y-%m-%dT%H:%M:%S', ({ms}) / 1000, 'unixepoch') || printf('.%03dZ', ({ms}) % 1000))"
    )
}

/// `table`'s columns, in order.
fn columns(sql: &mut Shell, table: &str) -> Result<Vec<String>, String> {
    let out = sql.run(&format!(
        "SELECT group_concat(name, ',') FROM pragma_table_info('{table}');"
    ))?;
    let cols: Vec<String> = out
        .first()
        .map(|l| l.split(',').map(str::to_owned).collect())
        .unwrap_or_default();
    if cols.len() < 2 {
        return Err(format!("no columns found for table {table}"));
    }
    Ok(cols)
}

/// `INSERT INTO table (every column) SELECT ...`: each column from
/// `overrides` if listed there, else `template.column`. Fails if an
/// override names a column the table lacks (the schema changed under the
/// bench).
fn copy_insert(
    sql: &mut Shell,
    table: &str,
    template: &str,
    overrides: &[(&str, String)],
    from: &str,
) -> Result<String, String> {
    let cols = columns(sql, table)?;
    let map: HashMap<&str, &String> = overrides.iter().map(|(c, e)| (*c, e)).collect();
    if let Some((missing, _)) = overrides
        .iter()
        .find(|(c, _)| !cols.iter().any(|col| col == c))
    {
        return Err(format!(
            "table {table} has no column {missing}; update xtask/src/bench_scale/seed.rs"
        ));
    }
    let values: Vec<String> = cols
        .iter()
        .map(|c| {
            map.get(c.as_str())
                .map_or_else(|| format!("{template}.{c}"), |e| (*e).clone())
        })
        .collect();
    Ok(format!(
        "INSERT INTO {table} ({}) SELECT {} FROM {from};",
        cols.join(", "),
        values.join(", ")
    ))
}

/// Copies of the seed loops, numbered 1 to `copies`: 1% workflow loops,
/// 10% cron, 2% stopped once loops, 2% paused, the rest hourly intervals.
/// Those with a next run are due 6 to 7 hours from `now`; the seeds too.
fn copy_loops(sql: &mut Shell, copies: u64, now: i64) -> Result<String, String> {
    let due = ts(&format!(
        "{} + s.value % 3600 * 1000 + s.value % 997",
        now + 6 * HOUR_MS
    ));
    let created = ts(&format!(
        "{} + s.value * {DAY_MS} / {copies}",
        now - 61 * DAY_MS
    ));
    let insert = copy_insert(
        sql,
        "loops",
        "l",
        &[
            ("id", id("s.value", 1)),
            ("name", "'loop-' || s.value".to_owned()),
            (
                "next_run_at",
                format!("CASE WHEN l.next_run_at IS NULL THEN NULL ELSE {due} END"),
            ),
            ("created_at", created.clone()),
            ("updated_at", created),
        ],
        &format!(
            "generate_series(1, {copies}) AS s JOIN loops l ON l.name = CASE
               WHEN s.value % 100 = 0 THEN 'seed-workflow'
               WHEN s.value % 50 = 1 THEN 'seed-once'
               WHEN s.value % 50 = 2 THEN 'seed-paused'
               WHEN s.value % 10 = 5 THEN 'seed-cron'
               ELSE 'seed' END"
        ),
    )?;
    Ok(format!(
        "{insert}\nUPDATE loops SET next_run_at = {} WHERE name LIKE 'seed%' AND next_run_at IS NOT NULL AND next_run_at < {};",
        ts(&(now + 6 * HOUR_MS).to_string()),
        ts(&(now + 6 * HOUR_MS).to_string()),
    ))
}

/// The temporary table `g` of runs `from..to` of `total`: the run's number
/// `i`, its loop `j` (0 is `seed`), its slot, lateness, duration, status,
/// whether its loop runs a workflow, its ids and its instants as text.
fn generated_runs(from: u64, to: u64, total: u64, copies: u64, now: i64) -> String {
    let start = now - 60 * DAY_MS - HOUR_MS;
    let span = 60 * DAY_MS;
    format!(
        "CREATE TEMP TABLE g AS
         WITH s AS (
           SELECT value AS i,
                  CASE WHEN value % 100 = 0 THEN 0 ELSE value % {copies} + 1 END AS j,
                  {start} + value * {span} / {total} AS sched,
                  value % 7 AS late
           FROM generate_series({from}, {last})),
         w AS (SELECT s.*, j > 0 AND j % 100 = 0 AS wf FROM s),
         t AS (
           SELECT w.*,
                  CASE WHEN wf THEN 'succeeded' WHEN i % 20 = 3 THEN 'failed'
                       WHEN i % 50 = 7 THEN 'skipped' ELSE 'succeeded' END AS st,
                  CASE WHEN wf THEN 15 + i % 10 ELSE 1 + i * 7 % 40 END AS dur
           FROM w)
         SELECT t.*, {sched_ts} AS sched_ts, {start_ts} AS start_ts, {fin_ts} AS fin_ts,
                CASE WHEN j = 0 THEN tpl.seed ELSE {lid} END AS lid,
                CASE WHEN j = 0 THEN 'seed' ELSE 'loop-' || j END AS lname,
                {rid} AS rid, {wrid} AS wrid
         FROM t, tpl;",
        last = to - 1,
        sched_ts = ts("sched"),
        start_ts = ts("sched + late"),
        fin_ts = ts("sched + late + CASE WHEN st = 'skipped' THEN 0 ELSE dur END"),
        lid = id("j", 1),
        rid = id("i", 2),
        wrid = id("i", 3),
    )
}

/// The inserts that copy the rows of `g` into the tables: the runs, and
/// for the workflow loops' runs their workflow run, steps and events.
fn run_inserts(sql: &mut Shell) -> Result<Vec<String>, String> {
    let skipped = "g.st = 'skipped'";
    let started = "g.start_ts".to_owned();
    let finished = "g.fin_ts".to_owned();
    let runs = copy_insert(
        sql,
        "loop_runs",
        "r",
        &[
            ("id", "g.rid".to_owned()),
            ("loop_id", "g.lid".to_owned()),
            ("loop_name", "g.lname".to_owned()),
            ("scheduled_for", "g.sched_ts".to_owned()),
            ("attempt", "1".to_owned()),
            ("status", "g.st".to_owned()),
            (
                "started_at",
                format!("CASE WHEN {skipped} THEN NULL ELSE {started} END"),
            ),
            ("finished_at", finished.clone()),
            (
                "claimed_by",
                format!("CASE WHEN {skipped} THEN NULL ELSE 'scale-bench:4242:5ca1eb3ac400' END"),
            ),
            ("lease_expires_at", "NULL".to_owned()),
            (
                "pid",
                format!("CASE WHEN {skipped} OR g.wf THEN NULL ELSE 10000 + g.i % 50000 END"),
            ),
            (
                "exit_code",
                "CASE g.st WHEN 'succeeded' THEN 0 WHEN 'failed' THEN 1 END".to_owned(),
            ),
            (
                "duration_ms",
                format!("CASE WHEN {skipped} THEN NULL ELSE g.dur END"),
            ),
            (
                "stdout",
                format!(
                    "CASE WHEN {skipped} THEN NULL WHEN g.wf THEN
                       replace(replace(replace(w.stdout, tpl.wr, g.wrid), tpl.wlr, g.rid), tpl.wl, g.lid)
                     ELSE r.stdout END"
                ),
            ),
            (
                "stderr",
                format!("CASE WHEN {skipped} THEN NULL WHEN g.wf THEN w.stderr ELSE r.stderr END"),
            ),
            (
                "error",
                "CASE g.st WHEN 'failed' THEN 'process exited with code 1'
                   WHEN 'skipped' THEN 'previous run still active' END"
                    .to_owned(),
            ),
            ("created_at", started.clone()),
            ("updated_at", finished.clone()),
            (
                "pid_start_ms",
                format!("CASE WHEN {skipped} OR g.wf THEN NULL ELSE g.sched + g.late END"),
            ),
            (
                "spawn_id",
                format!(
                    "CASE WHEN {skipped} THEN NULL ELSE '4242-' || printf('%016x', g.i) || '-0' END"
                ),
            ),
        ],
        "g, tpl JOIN loop_runs r ON r.id = tpl.run JOIN loop_runs w ON w.id = tpl.wlr",
    )?;
    let wf_started = ts("g.sched + g.late + 1");
    let workflow_runs = copy_insert(
        sql,
        "workflow_runs",
        "w",
        &[
            ("id", "g.wrid".to_owned()),
            ("loop_id", "g.lid".to_owned()),
            ("loop_run_id", "g.rid".to_owned()),
            ("scheduled_for", "g.sched_ts".to_owned()),
            (
                "idempotency_key",
                "g.lid || ':' || g.sched_ts || ':attempt:1'".to_owned(),
            ),
            ("started_at", wf_started.clone()),
            ("finished_at", finished.clone()),
            ("duration_ms", "g.dur - 1".to_owned()),
            ("created_at", wf_started.clone()),
            ("updated_at", finished.clone()),
        ],
        "g, tpl JOIN workflow_runs w ON w.id = tpl.wr WHERE g.wf",
    )?;
    let step_start = "g.sched + g.late + 2 + s.sequence * 6";
    let steps = copy_insert(
        sql,
        "workflow_step_runs",
        "s",
        &[
            ("id", id("g.i * 4 + s.sequence", 4)),
            ("workflow_run_id", "g.wrid".to_owned()),
            ("started_at", ts(step_start)),
            ("finished_at", ts(&format!("{step_start} + 5"))),
            ("created_at", wf_started.clone()),
            ("updated_at", ts(&format!("{step_start} + 5"))),
        ],
        "g, tpl JOIN workflow_step_runs s ON s.workflow_run_id = tpl.wr WHERE g.wf",
    )?;
    let events = copy_insert(
        sql,
        "workflow_events",
        "e",
        &[
            ("id", id("g.i * 16 + e.sequence", 5)),
            ("workflow_run_id", "g.wrid".to_owned()),
            (
                "payload_json",
                "replace(replace(e.payload_json, tpl.wl, g.lid), tpl.wlr, g.rid)".to_owned(),
            ),
            ("created_at", ts("g.sched + g.late + 1 + e.sequence * 3")),
        ],
        "g, tpl JOIN workflow_events e ON e.workflow_run_id = tpl.wr WHERE g.wf",
    )?;
    Ok(vec![runs, workflow_runs, steps, events])
}

/// The `sqlite3` shell on one database, fed statements through a pipe; it
/// stops at the first error (`-bail`).
struct Shell {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

/// What the shell prints after each batch, so the reader knows it is done.
const DONE: &str = "-- xtask: done --";

impl Shell {
    fn open(db: &Path) -> Result<Shell, String> {
        let mut child = Command::new("sqlite3")
            .args(["-batch", "-bail"])
            .arg(db)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("starting sqlite3: {e}"))?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err("sqlite3 has no stdin or stdout pipe".to_owned());
        };
        Ok(Shell {
            child,
            stdin,
            stdout: BufReader::new(stdout),
        })
    }

    /// Runs `statements`; returns what they printed, a line per row.
    fn run(&mut self, statements: &str) -> Result<Vec<String>, String> {
        let sent =
            writeln!(self.stdin, "{statements}\n.print '{DONE}'").and_then(|()| self.stdin.flush());
        let mut lines = Vec::new();
        if sent.is_ok() {
            loop {
                let mut line = String::new();
                match self.stdout.read_line(&mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) if line.trim_end() == DONE => return Ok(lines),
                    Ok(_) => lines.push(line.trim_end().to_owned()),
                }
            }
        }
        // The shell stopped: say why.
        let _ = self.child.wait();
        let mut stderr = String::new();
        if let Some(mut pipe) = self.child.stderr.take() {
            let _ = pipe.read_to_string(&mut stderr);
        }
        let head: String = statements.chars().take(300).collect();
        Err(format!("sqlite3 failed: {}\nin: {head}...", stderr.trim()))
    }

    fn close(mut self) -> Result<(), String> {
        writeln!(self.stdin, ".quit").map_err(|e| format!("closing sqlite3: {e}"))?;
        drop(self.stdin);
        let status = self
            .child
            .wait()
            .map_err(|e| format!("waiting for sqlite3: {e}"))?;
        if status.success() {
            Ok(())
        } else {
            Err(format!("sqlite3 exited with {status}"))
        }
    }
}
