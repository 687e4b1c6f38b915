//! The cost-flat invariant on PostgreSQL (issues 14 and 26): the hot
//! queries `sqlite/plans.rs` checks on SQLite, in their PostgreSQL text,
//! read their index and cost what they return, not what is stored.
//!
//! A plan test prepares a statement the way the store does on a fresh
//! database, forces the generic plan a long-lived connection ends up with
//! (`plan_cache_mode = force_generic_plan`), turns sequential scans off
//! (a table of a few rows is always cheaper to scan, so without that an
//! empty database says nothing about its indexes) and reads
//! `EXPLAIN EXECUTE` with every parameter `NULL`: the plan names the index
//! and, where the index gives the order, sorts nothing. Under a `LIMIT`,
//! the rows an index range gave may be sorted by a tie-break the index
//! lacks (`id`); an empty table's estimates sort the whole range rather
//! than only its ties, so the cost test is what bounds those.
//!
//! A cost test runs each query with `EXPLAIN (ANALYZE, BUFFERS)` on a
//! small and on a large database, analyzed, with the planner's own
//! settings, and compares the rows every plan node produced or filtered
//! out: like SQLite's virtual-machine steps, an exact count of work that
//! does not depend on timing. Shared buffers touched are checked beside it,
//! more loosely (an index grows a level). Two plans that an empty table's
//! estimates get wrong are checked on the large database instead.
//!
//! Every test skips, saying so, without `LOOPS_TEST_DATABASE_URL`.

use postgres::{Client, NoTls, SimpleQueryMessage};
use serde_json::Value as Json;

use crate::DatabaseUrl;
use crate::lease::ops::FOLD_STATUS_COUNTS;
use crate::loops::statements::{
    COUNT_STATUS_PG, DUE_LOOPS_PG, EXPIRE_LOOPS_PG, HAS_RUNNING_RUN_PG,
};
use crate::runs::advance::ATTEMPT_CANCELLED_PG;
use crate::runs::facts::{COSTED_RUNS, FAILURE_GROUPS};
use crate::runs::list::list_statement;
use crate::runs::{EXPIRED_LEASES, RunFilter};
use crate::sql::{Dialect, dollar_placeholders};
use crate::testing::{TestDatabase, fresh_database};

use super::daemon::{NEXT_DUE, NEXT_EXPIRY, NEXT_LEASE_EXPIRY};

/// A fresh database migrated by the store, and a plain connection to it.
fn migrated(test: &str) -> Option<(TestDatabase, Client)> {
    let db = fresh_database(&format!("postgres::plans::{test}"))?;
    let mut client = Client::connect(db.url(), NoTls).unwrap();
    super::open::migrate(&mut client, &DatabaseUrl::parse(db.url()).unwrap()).unwrap();
    client
        .batch_execute("SET plan_cache_mode = force_generic_plan")
        .unwrap();
    Some((db, client))
}

/// Prepares `sql` (in the store's neutral or PostgreSQL text) as `q` and
/// returns the lines of `EXPLAIN (options) EXECUTE q(args)`; with no
/// `args`, every parameter is `NULL`.
fn explain(c: &mut Client, sql: &str, options: &str, args: &[&str]) -> Vec<String> {
    let sql = dollar_placeholders(sql);
    let nulls = vec!["NULL"; c.prepare(&sql).unwrap().params().len()];
    let args = if args.is_empty() { &nulls[..] } else { args };
    c.batch_execute(&format!("DEALLOCATE ALL; PREPARE q AS {sql}"))
        .unwrap();
    let args = if args.is_empty() {
        String::new()
    } else {
        format!("({})", args.join(", "))
    };
    let explained = format!("EXPLAIN ({options}) EXECUTE q{args}");
    c.simple_query(&explained)
        .unwrap()
        .iter()
        .filter_map(|message| match message {
            SimpleQueryMessage::Row(row) => row.get(0).map(str::to_owned),
            _ => None,
        })
        .collect()
}

/// How a plan may order its rows.
#[derive(Clone, Copy, PartialEq)]
enum Order {
    /// The index gives them in order: no sort at all.
    Index,
    /// The rows the index range gave are sorted: the ties of a listing's
    /// leading key by id (an empty table's estimates sort the whole range
    /// under the `LIMIT`; the cost test bounds what that reads), the
    /// running runs, the loops that expire, a gc batch locked in id order.
    Range,
}

/// Asserts that `sql`'s generic plan, sequential scans off, reads `index`
/// and orders rows as `order` says.
fn assert_plan(c: &mut Client, sql: &str, index: &str, order: Order) {
    c.batch_execute("SET enable_seqscan = off").unwrap();
    let lines = explain(c, sql, "COSTS OFF", &[]);
    let plan = lines.join("\n");
    let names = |name: &str| {
        plan.split(|ch: char| !(ch.is_ascii_alphanumeric() || ch == '_'))
            .any(|word| word == name)
    };
    assert!(names(index), "{index} not used by\n{sql}\n{plan}");
    assert!(!plan.contains("Seq Scan"), "scans a table:\n{sql}\n{plan}");
    // A node's line is its name alone (`COSTS OFF`); `Sort Key:` is not one.
    let node =
        |line: &String, name: &str| line.trim_start().trim_start_matches("->").trim() == name;
    let sorts = lines
        .iter()
        .filter(|l| node(l, "Sort") || node(l, "Incremental Sort"))
        .count();
    if order == Order::Index {
        assert_eq!(sorts, 0, "sorts:\n{sql}\n{plan}");
    }
}

/// The PostgreSQL statement `runs` lists with `filter`.
fn listing(filter: &RunFilter) -> &'static str {
    list_statement(Dialect::Postgres, filter).0
}

fn failed() -> RunFilter {
    RunFilter {
        status: Some(loops_core::RunStatus::Failed),
        ..RunFilter::default()
    }
}

/// Runs of one loop: the statement only; the loop is an argument.
fn of_a_loop() -> RunFilter {
    RunFilter {
        loop_id: Some(loops_core::LoopId::from_bytes([0; 6])),
        ..RunFilter::default()
    }
}

#[test]
fn the_wake_up_and_the_tick_read_their_loop_and_lease_indexes() {
    let Some((_db, mut c)) = migrated("wake_up_and_tick") else {
        return;
    };
    let c = &mut c;
    assert_plan(c, DUE_LOOPS_PG, "idx_loops_status_next", Order::Range);
    assert_plan(c, NEXT_DUE, "idx_loops_status_next", Order::Index);
    assert_plan(c, NEXT_EXPIRY, "idx_loops_status_expires", Order::Index);
    // The expiring loops are locked in id order: a sort of those only.
    assert_plan(c, EXPIRE_LOOPS_PG, "idx_loops_status_expires", Order::Range);
    assert_plan(c, NEXT_LEASE_EXPIRY, "idx_runs_running_lease", Order::Index);
    assert_plan(c, EXPIRED_LEASES.1, "idx_runs_running_lease", Order::Range);
}

#[test]
fn the_overlap_finalize_and_count_checks_read_a_few_rows_by_index() {
    let Some((_db, mut c)) = migrated("overlap_finalize_counts") else {
        return;
    };
    let c = &mut c;
    assert_plan(
        c,
        HAS_RUNNING_RUN_PG,
        "idx_runs_running_lease",
        Order::Index,
    );
    assert_plan(c, COUNT_STATUS_PG, "idx_status_counts", Order::Index);
}

#[test]
fn each_run_listing_reads_its_index_newest_first() {
    let Some((_db, mut c)) = migrated("run_listings") else {
        return;
    };
    let c = &mut c;
    let all = RunFilter::default();
    assert_plan(c, listing(&all), "idx_runs_created", Order::Range);
    assert_plan(
        c,
        listing(&failed()),
        "idx_runs_status_created",
        Order::Range,
    );
    assert_plan(c, listing(&of_a_loop()), "idx_runs_loop", Order::Range);
}

#[test]
fn health_and_cost_read_only_the_runs_that_carry_what_they_report() {
    let Some((_db, mut c)) = migrated("health_and_cost") else {
        return;
    };
    let c = &mut c;
    // The failures since the instant are grouped (a sort or a hash of
    // those only), and each group's newest run found by the same index.
    assert_plan(c, FAILURE_GROUPS, "idx_runs_failure", Order::Range);
    assert_plan(c, COSTED_RUNS, "idx_runs_cost", Order::Range);
    assert_plan(c, COSTED_RUNS, "idx_runs_usage", Order::Range);
}

#[test]
fn gc_walks_each_group_down_its_index_and_batches_by_id() {
    use super::gc::*;
    let Some((_db, mut c)) = migrated("gc") else {
        return;
    };
    let c = &mut c;
    for sql in [FIRST_LOOP, NEXT_LOOP] {
        assert_plan(c, sql, "idx_runs_loop", Order::Index);
    }
    for sql in [LOOP_BOUNDARY, LOOP_CANDIDATES] {
        assert_plan(c, sql, "idx_runs_loop", Order::Range);
    }
    for sql in [FIRST_WORKFLOW, NEXT_WORKFLOW] {
        assert_plan(c, sql, "idx_workflow_runs_workflow_created", Order::Index);
    }
    for sql in [WORKFLOW_BOUNDARY, WORKFLOW_CANDIDATES] {
        assert_plan(c, sql, "idx_workflow_runs_workflow_created", Order::Range);
    }
    // A batch is locked, counted and deleted by the ids it names; the
    // locks are taken in id order, a sort of the batch.
    let by_id = [
        (LOCK_WORKFLOW_RUNS, "workflow_runs_pkey"),
        (LOCK_THEIR_WORKFLOW_RUNS, "idx_workflow_runs_loop_run"),
        (COUNT_LOOP_RUN_ROWS[0], "idx_workflow_events_run_sequence"),
        (
            COUNT_LOOP_RUN_ROWS[1],
            "idx_workflow_step_runs_run_sequence",
        ),
        (COUNT_LOOP_RUN_ROWS[2], "idx_workflow_runs_loop_run"),
        (COUNT_LOOP_RUN_ROWS[3], "loop_runs_pkey"),
        (
            COUNT_WORKFLOW_RUN_ROWS[0],
            "idx_workflow_events_run_sequence",
        ),
        (
            COUNT_WORKFLOW_RUN_ROWS[1],
            "idx_workflow_step_runs_run_sequence",
        ),
        (COUNT_WORKFLOW_RUN_ROWS[2], "workflow_runs_pkey"),
        (
            DELETE_WORKFLOW_RUN_ROWS[0],
            "idx_workflow_events_run_sequence",
        ),
        (
            DELETE_WORKFLOW_RUN_ROWS[1],
            "idx_workflow_step_runs_run_sequence",
        ),
        (DELETE_WORKFLOW_RUN_ROWS[2], "workflow_runs_pkey"),
        (DELETE_LOOP_RUNS, "loop_runs_pkey"),
    ];
    for (sql, index) in by_id {
        assert_plan(c, sql, index, Order::Range);
    }
}

/// The instant every seeded loop is measured at, as an SQL literal: each
/// loop's next run is after it, so nothing is due.
const AT: &str = "'2026-01-01T00:00:00Z'";

/// A migrated database holding `loops` active loops (the first two expire
/// in 2027) with `per_loop` finished runs each (one in ten failed), one
/// cancelled workflow run per loop tied to one of its runs, and three
/// running runs of loop 1, one lease expired; the status count deltas
/// folded as the daemons fold them, and the statistics fresh.
fn seeded(test: &str, loops: u32, per_loop: u32) -> Option<(TestDatabase, Client)> {
    let (db, mut c) = migrated(test)?;
    c.batch_execute(&format!(
        "INSERT INTO loops (id, name, status, schedule_json, target_json, next_run_at, catch_up,
           catch_up_limit, overlap, max_attempts, retry_delay_ms, lease_ms, expires_at,
           created_at, updated_at)
         SELECT 'l' || lpad(g::text, 11, '0'), 'loop ' || g, 'active', '{{}}', '{{}}',
           {AT}::timestamptz + g * interval '1 minute', 'none', 1, 'allow', 1, 0, 60000,
           CASE WHEN g < 3 THEN timestamptz '2027-01-01T00:00:00Z' END, {AT}, {AT}
         FROM generate_series(1, {loops}) AS g;
         INSERT INTO loop_runs (id, loop_id, loop_name, scheduled_for, attempt, status,
           created_at, updated_at)
         SELECT 'r' || lpad(g::text, 11, '0'), 'l' || lpad((g % {loops} + 1)::text, 11, '0'),
           'x', t, 1, CASE g % 10 WHEN 0 THEN 'failed' ELSE 'succeeded' END, t, t
         FROM generate_series(0, {loops} * {per_loop} - 1) AS g,
           LATERAL (SELECT timestamptz '2025-01-01T00:00:00Z' + g * interval '1 second') AS s(t);
         INSERT INTO workflow_specs (id, name, version, status, steps_json, created_at,
           updated_at) VALUES ('w1', 'w', 1, 'active', '[]', {AT}, {AT});
         INSERT INTO workflow_runs (id, workflow_id, workflow_name, loop_id, loop_run_id,
           idempotency_key, status, created_at, updated_at)
         SELECT 'wr' || lpad(g::text, 10, '0'), 'w1', 'w', 'l' || lpad(g::text, 11, '0'),
           'r' || lpad((g - 1)::text, 11, '0'), 'key-' || g, 'cancelled', {AT}, {AT}
         FROM generate_series(1, {loops}) AS g;
         INSERT INTO loop_runs (id, loop_id, loop_name, scheduled_for, attempt, status,
           claimed_by, lease_expires_at, created_at, updated_at)
         SELECT 'running-' || g, 'l00000000001', 'x', {AT}::timestamptz - g * interval '1 hour',
           1, 'running', CASE g WHEN 3 THEN 'me' ELSE 'other:1' END,
           {AT}::timestamptz + (g * 5 - 6) * interval '1 minute', {AT}, {AT}
         FROM generate_series(1, 3) AS g;
         {FOLD_STATUS_COUNTS};"
    ))
    .unwrap();
    c.batch_execute("VACUUM ANALYZE").unwrap();
    Some((db, c))
}

/// The rows every node of `sql`'s plan produced or filtered out, and the
/// shared buffers it touched, run with `args` (SQL literals).
fn cost(c: &mut Client, sql: &str, args: &[&str]) -> (u64, u64) {
    let options = "ANALYZE, BUFFERS, COSTS OFF, TIMING OFF, FORMAT JSON";
    let text = explain(c, sql, options, args).concat();
    let doc: Json = serde_json::from_str(&text).unwrap();
    let top = &doc[0]["Plan"];
    let n = |node: &Json, key: &str| node[key].as_f64().unwrap_or(0.0) as u64;
    fn rows(node: &Json, n: &dyn Fn(&Json, &str) -> u64) -> u64 {
        let own = n(node, "Actual Rows") * n(node, "Actual Loops").max(1)
            + n(node, "Rows Removed by Filter")
            + n(node, "Rows Removed by Index Recheck");
        let children = node["Plans"].as_array().map_or(0, |plans| {
            plans.iter().map(|child| rows(child, n)).sum::<u64>()
        });
        own + children
    }
    (
        rows(top, &n),
        n(top, "Shared Hit Blocks") + n(top, "Shared Read Blocks"),
    )
}

/// Every hot query, with its arguments, on a seeded database.
fn measured(c: &mut Client) -> Vec<(&'static str, (u64, u64))> {
    let loop_1 = "'l00000000001'";
    let hot: [(&str, &str, &[&str]); 15] = [
        ("due loops (tick)", DUE_LOOPS_PG, &[AT, "100"]),
        ("next due loop (wake-up)", NEXT_DUE, &["'{l00000000001}'"]),
        ("next expiry (wake-up)", NEXT_EXPIRY, &[]),
        ("expire loops (tick)", EXPIRE_LOOPS_PG, &[AT]),
        (
            "next lease expiry (wake-up)",
            NEXT_LEASE_EXPIRY,
            &[AT, "'me'", "'host-a:'", "30000", "'host-a'"],
        ),
        ("expired run leases (tick)", EXPIRED_LEASES.1, &[AT]),
        ("running run of a busy loop", HAS_RUNNING_RUN_PG, &[loop_1]),
        (
            "running run of an idle loop",
            HAS_RUNNING_RUN_PG,
            &["'l00000000002'"],
        ),
        // A run without a workflow run: the search finds nothing, where
        // reading the wrong index would cost the most.
        (
            "cancelled attempt",
            ATTEMPT_CANCELLED_PG,
            &["'r99999999999'", "'key-0'"],
        ),
        (
            "count of every run",
            COUNT_STATUS_PG,
            &["'loop_runs'", "NULL"],
        ),
        (
            "count of failed runs",
            COUNT_STATUS_PG,
            &["'loop_runs'", "'failed'"],
        ),
        (
            "count of active loops",
            COUNT_STATUS_PG,
            &["'loops'", "'active'"],
        ),
        ("newest runs", listing(&RunFilter::default()), &["20", "0"]),
        (
            "newest failed runs",
            listing(&failed()),
            &["'failed'", "20", "0"],
        ),
        (
            "newest runs of a loop",
            listing(&of_a_loop()),
            &["'l00000000003'", "20", "0"],
        ),
    ];
    hot.into_iter()
        .map(|(name, sql, args)| {
            if args.is_empty() {
                // `explain` reads no arguments as every one NULL.
                assert!(!sql.contains("$1"), "{name} takes arguments");
            }
            (name, cost(c, sql, args))
        })
        .collect()
}

/// 40 times the loops and twice the runs per loop (80 times the runs):
/// every hot query examines about the rows it did on the small database,
/// where reading every loop or run would examine hundreds of times more.
#[test]
fn no_hot_query_grows_with_what_is_stored() {
    let Some((_small_db, mut small)) = seeded("cost_small", 50, 20) else {
        return;
    };
    let Some((_large_db, mut large)) = seeded("cost_large", 2_000, 40) else {
        return;
    };
    let at_small = measured(&mut small);
    let at_large = measured(&mut large);
    let mut report = Vec::new();
    let mut grown = Vec::new();
    for ((name, (s_rows, s_bufs)), (_, (l_rows, l_bufs))) in at_small.iter().zip(&at_large) {
        let line = format!("{name}: rows {s_rows} -> {l_rows}, buffers {s_bufs} -> {l_bufs}");
        if *l_rows > s_rows * 3 / 2 + 20 || *l_bufs > s_bufs * 2 + 10 {
            grown.push(line.clone());
        }
        report.push(line);
    }
    eprintln!("{}", report.join("\n"));
    let grown = grown.join("\n");
    assert!(grown.is_empty(), "work grows with what is stored:\n{grown}");
    // The measure does see growth: counting by a status no index holds
    // reads every run.
    let every_run = "SELECT COUNT(*) FROM loop_runs WHERE status || '' = 'failed'";
    let (small_rows, small_bufs) = cost(&mut small, every_run, &[]);
    let (large_rows, large_bufs) = cost(&mut large, every_run, &[]);
    assert!(large_rows > 50 * small_rows, "{small_rows} -> {large_rows}");
    assert!(large_bufs > 20 * small_bufs, "{small_bufs} -> {large_bufs}");
    // With an empty table's estimates, the cancelled-attempt check reads
    // the second column of `idx_workflow_runs_idempotency`, and gc's lock
    // of a loop-run batch every finished run by status: with statistics,
    // each reads the rows it names.
    let by_statistics = [
        (
            ATTEMPT_CANCELLED_PG,
            "idx_workflow_runs_loop_run",
            Order::Index,
        ),
        (super::gc::LOCK_LOOP_RUNS, "loop_runs_pkey", Order::Range),
    ];
    for (sql, index, order) in by_statistics {
        assert_plan(&mut large, sql, index, order);
    }
}
