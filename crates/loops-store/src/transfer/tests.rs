//! Export and import on real databases: a round trip keeps every column,
//! a dry run writes nothing, `replace` overwrites only what differs, a
//! taken unique key is a conflict, bad documents are refused before
//! anything is written, and SQLite → PostgreSQL → SQLite gives back the
//! same document.

use std::ops::ControlFlow;
use std::path::Path;
use std::sync::Arc;

use serde_json::{Value, json};

use super::*;
use crate::testing::fresh_database;
use crate::{Claim, DatabaseUrl, NotClaimed};

/// Rows in every table, with every additive column set: a loop whose
/// stale `paused_reason` outlived its pause and which has hooks, a paused one, runs with a
/// process start, a spawn id and a claim token (which must not travel),
/// a running run, a workflow run with its steps and events, nested event
/// payloads, and a command `env`.
const FIXTURE: &str = r#"
INSERT INTO workflow_specs (id, name, description, version, status, steps_json, max_parallel,
    created_at, updated_at) VALUES
  ('f00000000001', 'build', 'builds things', 1, 'active',
   '[{"id":"a","target":{"type":"command","command":"echo a","shell":true}},
     {"id":"b","target":{"type":"command","command":"echo b","shell":true},"dependsOn":["a"],
      "custom":{"x":1}}]',
   2, '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z'),
  ('f00000000002', 'build', NULL, 1, 'archived',
   '[{"id":"a","target":{"type":"command","command":"true"}}]',
   NULL, '2025-12-01T00:00:00.000Z', '2025-12-02T00:00:00.000Z');
INSERT INTO loops (id, name, description, status, schedule_json, target_json, next_run_at,
    retry_scheduled_for, catch_up, catch_up_limit, overlap, max_attempts, retry_delay_ms, lease_ms,
    expires_at, created_at, updated_at, paused_reason, on_failure, on_success,
    hook_show_output) VALUES
  ('a00000000001', 'nightly', 'with env', 'active',
   '{"type":"interval","everyMs":60000,"anchor":"fixed_rate"}',
   '{"type":"command","command":"printf hi","shell":true,"env":{"TOKEN":"s3cret","A":"b"}}',
   '2026-01-02T00:00:00.000Z', '2026-01-01T23:00:00.000Z', 'all', 7, 'allow', 3, 1000, 60000,
   '2027-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z', '2026-01-01T01:00:00.000Z',
   'stale reason', 'notify-send "$LOOPS_LOOP_NAME"', 'true', 1),
  ('a00000000002', 'paused one', NULL, 'paused', '{"type":"dynamic"}',
   '{"type":"agent","provider":"claude","prompt":"do the thing"}',
   NULL, NULL, 'latest', 50, 'skip', 1, 60000, 1800000, NULL,
   '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z', 'cannot plan', NULL, NULL, 0),
  ('a00000000003', 'flow', NULL, 'active', '{"type":"cron","expression":"0 9 * * *"}',
   '{"type":"workflow","workflowId":"f00000000001"}',
   '2026-01-02T09:00:00.000Z', NULL, 'none', 50, 'skip', 1, 60000, 1800000, NULL,
   '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z', NULL, NULL, NULL, 0);
INSERT INTO loop_runs (id, loop_id, loop_name, scheduled_for, attempt, status, started_at,
    finished_at, claimed_by, lease_expires_at, pid, exit_code, duration_ms, stdout, stderr, error,
    created_at, updated_at, pid_start_ms, spawn_id, claim_token) VALUES
  ('b00000000001', 'a00000000001', 'nightly', '2026-01-01T00:01:00.000Z', 2, 'failed',
   '2026-01-01T00:01:00.000Z', '2026-01-01T00:01:02.000Z', 'host:1:x', NULL, 123, 3, 2000,
   'out', 'err', 'exit 3', '2026-01-01T00:01:00.000Z', '2026-01-01T00:01:02.000Z',
   1767225660000, '9-ab-1', 'token-1'),
  ('b00000000002', 'a00000000001', 'nightly', '2026-01-01T00:02:00.000Z', 1, 'running',
   '2026-01-01T00:02:00.000Z', NULL, 'host:1:x', '2026-01-01T00:32:00.000Z', 124, NULL, NULL,
   NULL, NULL, NULL, '2026-01-01T00:02:00.000Z', '2026-01-01T00:02:00.000Z', NULL, NULL,
   'token-2'),
  ('b00000000003', 'a00000000003', 'flow', '2026-01-01T09:00:00.000Z', 1, 'succeeded',
   '2026-01-01T09:00:00.000Z', '2026-01-01T09:00:05.000Z', 'host:1:x', NULL, NULL, 0, 5000,
   NULL, NULL, NULL, '2026-01-01T09:00:00.000Z', '2026-01-01T09:00:05.000Z', NULL, NULL, NULL);
INSERT INTO workflow_runs (id, workflow_id, workflow_name, loop_id, loop_run_id, scheduled_for,
    idempotency_key, status, started_at, finished_at, duration_ms, error, created_at,
    updated_at) VALUES
  ('c00000000001', 'f00000000001', 'build', 'a00000000003', 'b00000000003',
   '2026-01-01T09:00:00.000Z', 'a00000000003:2026-01-01T09:00:00.000Z:attempt:1', 'succeeded',
   '2026-01-01T09:00:00.000Z', '2026-01-01T09:00:05.000Z', 5000, NULL,
   '2026-01-01T09:00:00.000Z', '2026-01-01T09:00:05.000Z'),
  ('c00000000002', 'f00000000001', 'build', NULL, NULL, NULL, NULL, 'running',
   '2026-01-01T10:00:00.000Z', NULL, NULL, NULL, '2026-01-01T10:00:00.000Z',
   '2026-01-01T10:00:00.000Z');
INSERT INTO workflow_step_runs (id, workflow_run_id, step_id, sequence, status, started_at,
    finished_at, exit_code, pid, duration_ms, stdout, stderr, error, account_profile, account_tool,
    created_at, updated_at, pid_start_ms) VALUES
  ('d00000000001', 'c00000000001', 'a', 0, 'succeeded', '2026-01-01T09:00:00.000Z',
   '2026-01-01T09:00:02.000Z', 0, NULL, 2000, 'a', NULL, NULL, 'work', 'claude',
   '2026-01-01T09:00:00.000Z', '2026-01-01T09:00:02.000Z', NULL),
  ('d00000000002', 'c00000000002', 'a', 0, 'running', '2026-01-01T10:00:00.000Z', NULL, NULL,
   777, NULL, NULL, NULL, NULL, NULL, NULL, '2026-01-01T10:00:00.000Z',
   '2026-01-01T10:00:00.000Z', 1767261600000);
INSERT INTO workflow_events (id, workflow_run_id, sequence, event_type, step_id, payload_json,
    created_at) VALUES
  ('e00000000001', 'c00000000001', 1, 'created', NULL,
   '{"zeta":1,"alpha":{"list":[1,2.5,"x",null,true]},"mid":"é"}', '2026-01-01T09:00:00.000Z'),
  ('e00000000002', 'c00000000001', 2, 'step_started', 'a', NULL, '2026-01-01T09:00:00.000Z');
UPDATE loop_runs SET claimed_host = 'host' WHERE id = 'b00000000001';
"#;

fn no_probe() -> Arc<dyn loops_core::Liveness> {
    Arc::new(|_| false)
}

/// A store in a fresh data directory under `dir`.
fn sqlite(dir: &Path, name: &str) -> Store {
    Store::open_in_dir(&dir.join(name), no_probe()).unwrap()
}

/// A store in `dir` holding [`FIXTURE`].
fn fixture(dir: &Path) -> Store {
    let store = sqlite(dir, "source");
    let db = rusqlite::Connection::open(dir.join("source").join(crate::DB_FILE)).unwrap();
    db.execute_batch(FIXTURE).unwrap();
    store
}

fn at(s: &str) -> Timestamp {
    s.parse().unwrap()
}

/// `store`'s export document, as text.
fn export(store: &Store, history: bool) -> String {
    let mut out = Vec::new();
    store
        .export(
            &mut out,
            ExportOptions { history },
            at("2026-02-01T00:00:00Z"),
        )
        .unwrap();
    String::from_utf8(out).unwrap()
}

fn import(store: &Store, doc: &str, apply: bool, replace: bool) -> ImportReport {
    store
        .import(&mut doc.as_bytes(), ImportOptions { apply, replace })
        .unwrap()
}

fn import_err(store: &Store, doc: &str) -> TransferError {
    store
        .import(&mut doc.as_bytes(), ImportOptions::default())
        .unwrap_err()
}

/// A document as JSON without its `exportedAt`, for comparing exports.
fn content(doc: &str) -> Value {
    let mut v: Value = serde_json::from_str(doc).unwrap();
    v.as_object_mut().unwrap().remove("exportedAt");
    v
}

fn counts(report: &ImportReport, table: Table) -> (u64, u64, u64, u64, u64) {
    let t = report.table(table);
    (t.new, t.existing, t.differ, t.replaced, t.conflicts)
}

/// The fixture's `exportedAt`, as the document writes it.
const EXPORTED: &str = "2026-02-01T00:00:00.000Z";

/// `doc` as an import writes it (issue 25 item 3): the run, workflow run
/// and step run that were running come over finished at the export, with
/// the import's error, their lease and step pid cleared.
fn arrived(doc: &str) -> Value {
    let mut v = content(doc);
    let ended = |row: &mut Value, status: &str| {
        row["status"] = json!(status);
        row["finishedAt"] = json!(EXPORTED);
        row["updatedAt"] = json!(EXPORTED);
        row["error"] = json!(EXPORTED_WHILE_RUNNING);
    };
    let run = &mut v["runs"][1];
    assert_eq!(run["status"], "running");
    ended(run, "abandoned");
    run.as_object_mut().unwrap().remove("leaseExpiresAt");
    ended(&mut v["workflowRuns"][1], "failed");
    let step = &mut v["stepRuns"][1];
    ended(step, "skipped");
    step.as_object_mut().unwrap().remove("pid");
    step.as_object_mut().unwrap().remove("pidStartMs");
    v
}

/// Runs `check` on a fresh SQLite store and, when a PostgreSQL server is
/// configured, on a fresh PostgreSQL database.
fn on_both_backends(test: &str, check: impl Fn(&Store)) {
    let dir = tempfile::tempdir().unwrap();
    check(&sqlite(dir.path(), "sqlite"));
    if let Some(db) = fresh_database(test) {
        let url = DatabaseUrl::parse(db.url()).unwrap();
        check(&Store::open_postgres(&url, "test", "host-a", no_probe()).unwrap());
    }
}

/// The fixture's document, with `edit` applied.
fn edited_fixture(edit: impl FnOnce(&mut Value)) -> String {
    let dir = tempfile::tempdir().unwrap();
    let mut v: Value = serde_json::from_str(&export(&fixture(dir.path()), true)).unwrap();
    edit(&mut v);
    v.to_string()
}

/// Finishes the fixture's running run, workflow run and step after the
/// export, as the source database would have: succeeded at `at`.
fn finished_since(v: &mut Value, at: &str) {
    for key in ["runs", "workflowRuns"] {
        let row = &mut v[key][1];
        row["status"] = json!("succeeded");
        row["finishedAt"] = json!(at);
        row["updatedAt"] = json!(at);
        row.as_object_mut().unwrap().remove("leaseExpiresAt");
    }
    v["runs"][1]["stdout"] = json!("the first run's output");
    v["runs"][1]["exitCode"] = json!(0);
    let step = &mut v["stepRuns"][1];
    step["status"] = json!("succeeded");
    step["finishedAt"] = json!(at);
    step["updatedAt"] = json!(at);
}

#[test]
fn an_import_into_an_empty_store_exports_the_same_document() {
    let dir = tempfile::tempdir().unwrap();
    let source = fixture(dir.path());
    let first = export(&source, true);
    let target = sqlite(dir.path(), "target");
    let report = import(&target, &first, true, false);
    assert!(report.applied);
    for (table, n) in [
        (Table::Workflows, 2),
        (Table::Loops, 3),
        (Table::Runs, 3),
        (Table::WorkflowRuns, 2),
        (Table::StepRuns, 2),
        (Table::Events, 2),
    ] {
        assert_eq!(report.table(table).records, n, "{table:?}");
        assert_eq!(counts(&report, table), (n, 0, 0, 0, 0), "{table:?}");
    }
    assert_eq!(report.table(Table::Runs).running, 1);
    assert_eq!(report.table(Table::WorkflowRuns).running, 1);
    assert_eq!(report.table(Table::StepRuns).running, 1);
    // Everything as it was, but what was running comes over finished.
    let second = export(&target, true);
    assert_eq!(arrived(&first), content(&second));
    // The status counts the triggers keep saw every row.
    assert_eq!(target.count_runs(Some(RunStatus::Running)).unwrap(), 0);
    assert_eq!(target.count_runs(Some(RunStatus::Abandoned)).unwrap(), 1);
    assert_eq!(
        target
            .count_loops(Some(loops_core::LoopStatus::Paused))
            .unwrap(),
        1
    );
    assert!(!target.recount_statuses().unwrap(), "the counts were right");
}

#[test]
fn the_document_keeps_the_additive_columns_and_drops_claim_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let doc = export(&fixture(dir.path()), true);
    let v: Value = serde_json::from_str(&doc).unwrap();
    assert_eq!(v["format"], "loops-export");
    assert_eq!(v["formatVersion"], 1);
    assert_eq!(v["schemaVersion"], crate::SCHEMA_VERSION);
    assert_eq!(v["exportedAt"], "2026-02-01T00:00:00.000Z");
    assert_eq!(v["history"], true);
    let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "format",
            "formatVersion",
            "schemaVersion",
            "exportedAt",
            "history",
            "pools",
            "workflows",
            "loops",
            "runs",
            "triggers",
            "workflowRuns",
            "stepRuns",
            "events"
        ]
    );
    assert_eq!(v["loops"][0]["pausedReason"], "stale reason");
    assert_eq!(v["loops"][0]["status"], "active");
    assert_eq!(v["loops"][0]["target"]["env"]["TOKEN"], "s3cret");
    assert_eq!(v["runs"][0]["pidStartMs"], 1_767_225_660_000_i64);
    assert_eq!(v["runs"][0]["spawnId"], "9-ab-1");
    assert_eq!(v["runs"][0]["claimedHost"], "host");
    assert_eq!(v["stepRuns"][1]["pidStartMs"], 1_767_261_600_000_i64);
    assert!(!doc.contains("token-1") && !doc.contains("claimToken"));
    assert_eq!(v["workflows"][0]["steps"][1]["custom"], json!({"x": 1}));
    // One record per line.
    assert!(doc.contains("\n    {\"id\":\"b00000000002\""));
}

#[test]
fn a_dry_run_counts_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let doc = export(&fixture(dir.path()), true);
    let target = sqlite(dir.path(), "target");
    let empty = export(&target, true);
    let report = import(&target, &doc, false, false);
    assert!(!report.applied);
    assert_eq!(counts(&report, Table::Loops), (3, 0, 0, 0, 0));
    assert_eq!(report.written(), 14);
    assert_eq!(export(&target, true), empty);
}

#[test]
fn importing_again_skips_what_is_there_and_replace_overwrites_what_differs() {
    let dir = tempfile::tempdir().unwrap();
    let source = fixture(dir.path());
    let doc = export(&source, true);
    let target = sqlite(dir.path(), "target");
    import(&target, &doc, true, false);

    // What was running arrives the same way each time: nothing differs.
    let again = import(&target, &doc, true, false);
    assert_eq!(again.written(), 0);
    assert_eq!(counts(&again, Table::Runs), (0, 3, 0, 0, 0));
    assert_eq!(again.table(Table::Runs).skipped(), 3);
    assert_eq!(counts(&again, Table::StepRuns), (0, 2, 0, 0, 0));

    // The running run finished on the source after the export, and a loop
    // was renamed.
    let mut v: Value = serde_json::from_str(&doc).unwrap();
    finished_since(&mut v, "2026-02-01T00:01:00.000Z");
    v["loops"][1]["name"] = json!("renamed");
    let changed = v.to_string();

    let kept = import(&target, &changed, true, false);
    assert_eq!(counts(&kept, Table::Runs), (0, 3, 1, 0, 0));
    assert_eq!(counts(&kept, Table::Loops), (0, 3, 1, 0, 0));
    assert_eq!(content(&export(&target, true)), arrived(&doc));

    let dry = import(&target, &changed, false, true);
    assert_eq!(counts(&dry, Table::Runs), (0, 3, 1, 1, 0));
    assert_eq!(dry.kept_count(), 0);
    assert_eq!(target.count_runs(Some(RunStatus::Abandoned)).unwrap(), 1);

    let replaced = import(&target, &changed, true, true);
    assert_eq!(counts(&replaced, Table::Runs), (0, 3, 1, 1, 0));
    assert_eq!(replaced.table(Table::Runs).skipped(), 2);
    assert_eq!(content(&export(&target, true)), content(&changed));
    assert_eq!(target.count_runs(Some(RunStatus::Abandoned)).unwrap(), 0);
    assert!(!target.recount_statuses().unwrap(), "the counts were right");
}

/// Issue 25 items 6 and 8: a loop or workflow that `loops create` would
/// refuse is refused with create's message (cut short), in a dry run and
/// an applied one, and the rest of the document goes in.
#[test]
fn what_create_refuses_an_import_refuses_with_create_s_message() {
    on_both_backends("transfer::what_create_refuses_an_import_refuses", |store| {
        let huge = "n".repeat(5 << 20);
        let doc = edited_fixture(|v| {
            let base = v["loops"][0].clone();
            let variant = |id: &str, edit: &dyn Fn(&mut Value)| {
                let mut lp = base.clone();
                lp["id"] = json!(id);
                edit(&mut lp);
                lp
            };
            let loops = v["loops"].as_array_mut().unwrap();
            loops.push(variant("a0000000000a", &|l| {
                l["target"]["env"] = json!({"": "x"})
            }));
            loops.push(variant("a0000000000b", &|l| {
                l["target"]["env"] = json!({"A=B": "x"})
            }));
            loops.push(variant("a0000000000c", &|l| l["name"] = json!(huge)));
            loops.push(variant("a0000000000d", &|l| {
                l["target"] = json!({"type": "agent", "provider": "codex", "prompt": "fix it",
                    "model": "--dangerously-bypass-approvals-and-sandbox"});
            }));
            loops.push(variant("a0000000000e", &|l| l["onFailure"] = json!(" ")));
            let long_name = format!("{}=", "B".repeat(1 << 20));
            loops.push(variant("a0000000000f", &|l| {
                l["target"]["env"] = json!({ long_name.as_str(): "x" });
            }));
            v["workflows"][1]["steps"][0]["target"] = json!({"type": "agent",
                "provider": "claude", "prompt": "p", "agent": "-p"});
        });
        let env = "target.env has an invalid variable name";
        let expected = [
            (
                "f00000000002",
                "refused as `loops workflows create` refuses it: \
              workflow.steps[0].target.agent must not begin with \"-\": the agent would read it \
              as an option, not as the value of --agent; give the agent's name"
                    .to_owned(),
            ),
            (
                "a0000000000a",
                format!(
                    "refused as `loops create` refuses it: {env} \"\"; names \
              must match [A-Za-z_][A-Za-z0-9_]*"
                ),
            ),
            (
                "a0000000000b",
                format!(
                    "refused as `loops create` refuses it: {env} \"A=B\"; \
              names must match [A-Za-z_][A-Za-z0-9_]*"
                ),
            ),
            (
                "a0000000000c",
                "refused as `loops create` refuses it: name must be at most 200 \
              characters, got 5242880; use a shorter name and put details in the description"
                    .to_owned(),
            ),
            (
                "a0000000000d",
                "refused as `loops create` refuses it: target.model must not begin \
              with \"-\": the agent would read it as an option, not as the value of --model; \
              give the model's name, for example \"sonnet\""
                    .to_owned(),
            ),
            (
                "a0000000000e",
                "refused as `loops create` refuses it: onFailure must be a shell \
              command; leave it out for no hook"
                    .to_owned(),
            ),
        ];
        for apply in [false, true] {
            let report = import(store, &doc, apply, false);
            assert_eq!(report.table(Table::Loops).records, 9);
            assert_eq!(report.table(Table::Loops).new, 3, "{:?}", report.invalid);
            assert_eq!(report.table(Table::Loops).invalid, 6);
            assert_eq!(report.table(Table::Workflows).invalid, 1);
            assert_eq!(report.invalid_count(), 7);
            let found: Vec<(&str, &str)> = report
                .invalid
                .iter()
                .map(|f| (f.id.as_str(), f.message.as_str()))
                .collect();
            for (id, message) in &expected {
                assert!(found.contains(&(id, message.as_str())), "{id}: {found:?}");
            }
            // A huge name is quoted cut short, and the rule still shows.
            let (_, long) = found.iter().find(|(id, _)| *id == "a0000000000f").unwrap();
            assert_eq!(
                *long,
                format!(
                    "refused as `loops create` refuses it: {env} \"{}…\"; names must match \
                     [A-Za-z_][A-Za-z0-9_]*",
                    "B".repeat(64)
                )
            );
        }
        assert_eq!(store.count_loops(None).unwrap(), 3);
        for id in [
            "a0000000000a",
            "a0000000000c",
            "a0000000000d",
            "a0000000000f",
        ] {
            assert!(
                store.get_loop(&id.parse().unwrap()).unwrap().is_none(),
                "{id}"
            );
        }
        assert!(
            store
                .get_workflow(&"f00000000002".parse().unwrap())
                .unwrap()
                .is_none()
        );
    });
}

/// Issue 25 item 3: an export taken while a run was in flight, imported
/// with `replace` after the run succeeded, leaves the finished run (and
/// its workflow run and step) as stored, and says so.
#[test]
fn an_older_export_never_moves_a_finished_run_back() {
    on_both_backends(
        "transfer::an_older_export_never_moves_a_finished_run_back",
        |store| {
            let old = edited_fixture(|_| {});
            let finished = edited_fixture(|v| finished_since(v, "2026-02-01T00:01:00.000Z"));
            import(store, &finished, true, false);
            let before = export(store, true);
            for apply in [false, true] {
                let report = import(store, &old, apply, true);
                for table in [Table::Runs, Table::WorkflowRuns, Table::StepRuns] {
                    let t = report.table(table);
                    assert_eq!(
                        (t.differ, t.kept, t.replaced),
                        (1, 1, 0),
                        "{table:?} {report:?}"
                    );
                }
                assert_eq!(report.kept_count(), 3);
                let run = report.kept.iter().find(|f| f.table == Table::Runs).unwrap();
                assert_eq!(run.id, "b00000000002");
                assert_eq!(
                    run.message,
                    "newer in the store (succeeded, attempt 1) than in the file (running, attempt \
                 1); kept as stored"
                );
            }
            assert_eq!(export(store, true), before, "nothing moved back");
            let run = store
                .get_run(&"b00000000002".parse().unwrap())
                .unwrap()
                .unwrap();
            assert_eq!(run.status, RunStatus::Succeeded);
            assert_eq!(run.stdout.as_deref(), Some("the first run's output"));
            assert_eq!(run.finished_at, Some(at("2026-02-01T00:01:00Z")));
            assert_eq!(store.count_runs(Some(RunStatus::Running)).unwrap(), 0);
        },
    );
}

/// Issue 25 item 3: a run of a later attempt is kept over the document's
/// earlier attempt, whatever their instants.
#[test]
fn a_later_attempt_in_the_store_is_kept_over_an_earlier_one() {
    on_both_backends(
        "transfer::a_later_attempt_in_the_store_is_kept_over_an_earlier_one",
        |store| {
            // Stored: attempt 2 failed. The document: attempt 1 failed, later
            // by its clock.
            let stored = edited_fixture(|_| {});
            let earlier = edited_fixture(|v| {
                let run = &mut v["runs"][0];
                run["attempt"] = json!(1);
                run["error"] = json!("exit 1");
                run["updatedAt"] = json!("2026-01-05T00:00:00.000Z");
            });
            import(store, &stored, true, false);
            let report = import(store, &earlier, true, true);
            assert_eq!(report.table(Table::Runs).kept, 1, "{report:?}");
            assert_eq!(report.kept[0].id, "b00000000001");
            assert!(
                report.kept[0]
                    .message
                    .contains("(failed, attempt 2) than in the file (failed, attempt 1)")
            );
            let run = store
                .get_run(&"b00000000001".parse().unwrap())
                .unwrap()
                .unwrap();
            assert_eq!((run.attempt, run.error.as_deref()), (2, Some("exit 3")));
        },
    );
}

/// Issue 25 item 3 (review): an import reads a stored row without a lock
/// and writes it later, so on PostgreSQL a runner may claim the slot's
/// retry in between (attempt 2 failed, attempt 3 running). The replacing
/// write is guarded by what was read: it changes nothing, the runner's
/// claim stands, and the record is reported kept. The hook claims on the
/// importing connection on SQLite, whose write lock the import holds, and
/// on a second connection on PostgreSQL.
#[test]
fn a_run_claimed_between_the_read_and_the_write_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    claimed_meanwhile(&sqlite(dir.path(), "sqlite"), None);
    if let Some(db) = fresh_database("transfer::a_run_claimed_between_the_read_and_the_write") {
        let url = DatabaseUrl::parse(db.url()).unwrap();
        let open = || Store::open_postgres(&url, "test", "host-a", no_probe()).unwrap();
        claimed_meanwhile(&open(), Some(open()));
    }
}

/// [`a_run_claimed_between_the_read_and_the_write_is_kept`] on `store`,
/// the runner claiming through `runner` (else `store`).
fn claimed_meanwhile(store: &Store, runner: Option<Store>) {
    use std::cell::RefCell;
    use std::rc::Rc;

    import(store, &edited_fixture(|_| {}), true, false);
    // The same attempt, changed later on the other database.
    let later = edited_fixture(|v| {
        v["runs"][0]["stdout"] = json!("later output");
        v["runs"][0]["updatedAt"] = json!("2026-01-01T00:01:03.000Z");
    });
    let id = "b00000000001".parse().unwrap();
    let stored = store.get_run(&id).unwrap().unwrap();
    assert_eq!((stored.status, stored.attempt), (RunStatus::Failed, 2));
    let lp = store.get_loop(&stored.loop_id).unwrap().unwrap();
    let claimed = Rc::new(RefCell::new(None));
    let hook = {
        let claimed = Rc::clone(&claimed);
        Box::new(move |importing: &Store, record: &Record| {
            if record.id() != "b00000000001" {
                return;
            }
            let claimer = runner.as_ref().unwrap_or(importing);
            let now = at("2026-02-02T00:00:00Z");
            let Claim::Claimed { run, .. } = claimer
                .claim_run(&lp, stored.scheduled_for, "runner-b", now)
                .unwrap()
            else {
                panic!("the failed slot's retry is claimable");
            };
            assert_eq!((run.status, run.attempt), (RunStatus::Running, 3));
            *claimed.borrow_mut() = Some(run);
        })
    };
    let report = import::seam::with_hook(hook, || import(store, &later, true, true));
    let runs = report.table(Table::Runs);
    assert_eq!((runs.kept, runs.replaced), (1, 0), "{report:?}");
    let kept = &report.kept[0];
    assert_eq!(kept.id, "b00000000001");
    assert_eq!(
        kept.message,
        "changed in the store during the import (now running, attempt 3); kept as stored"
    );
    let claimed = claimed.borrow_mut().take().expect("the hook claimed");
    assert_eq!(
        store.get_run(&id).unwrap(),
        Some(claimed),
        "the claim stands"
    );
}

/// The guard of an overwrite, table by table: a run, workflow run or
/// step run is overwritten from the row as read, and not from a row
/// read before its status or last change moved on; a loop is overwritten
/// as `replace` says.
#[test]
fn an_overwrite_from_a_stale_read_writes_nothing() {
    on_both_backends(
        "transfer::an_overwrite_from_a_stale_read_writes_nothing",
        |store| {
            import(store, &edited_fixture(|_| {}), true, false);
            let db = store.backend();
            let mut stored = Vec::new();
            let tables = [
                Table::Loops,
                Table::Runs,
                Table::WorkflowRuns,
                Table::StepRuns,
            ];
            db.export_rows(&tables, &mut |r| {
                stored.push(r);
                ControlFlow::Continue(())
            })
            .unwrap();
            let earlier = at("2025-12-31T00:00:00Z");
            for row in stored.iter().filter(|r| r.id().ends_with('1')) {
                let (mut changed, mut stale) = (row.clone(), row.clone());
                match (&mut changed, &mut stale) {
                    (Record::Loop(c), Record::Loop(s)) => {
                        c.description = Some("changed".into());
                        s.updated_at = earlier;
                    }
                    (Record::Run(c), Record::Run(s)) => {
                        c.run.stdout = Some("changed".into());
                        s.run.updated_at = earlier;
                    }
                    (Record::WorkflowRun(c), Record::WorkflowRun(s)) => {
                        c.error = Some("changed".into());
                        s.status = WorkflowRunStatus::Running;
                    }
                    (Record::StepRun(c), Record::StepRun(s)) => {
                        c.step.stdout = Some("changed".into());
                        s.step.updated_at = earlier;
                    }
                    _ => unreachable!("only these tables were read"),
                }
                let definition = row.table() == Table::Loops;
                let table = row.table();
                assert_eq!(
                    db.write_record(&changed, Some(&stale)).unwrap(),
                    definition,
                    "{table:?}"
                );
                assert!(db.write_record(&changed, Some(row)).unwrap(), "{table:?}");
                let now = db.matching_rows(&changed).unwrap();
                assert!(now.contains(&changed), "{table:?}");
            }
        },
    );
}

/// Issue 25 item 3: a run that was running, with nothing stored for it,
/// arrives abandoned (its workflow run failed, its step skipped) as this
/// store's recovery would record it, held by nobody; its loop is not
/// stuck: the slot's next claim retries it under the next attempt.
#[test]
fn a_running_run_arrives_abandoned_and_its_slot_runs_again() {
    on_both_backends(
        "transfer::a_running_run_arrives_abandoned_and_its_slot_runs_again",
        |store| {
            let doc = edited_fixture(|_| {});
            let report = import(store, &doc, true, false);
            assert_eq!(report.table(Table::Runs).running, 1);
            assert_eq!(content(&export(store, true)), arrived(&doc));
            assert_eq!(store.count_runs(Some(RunStatus::Running)).unwrap(), 0);
            assert_eq!(store.count_runs(Some(RunStatus::Abandoned)).unwrap(), 1);
            assert!(!store.recount_statuses().unwrap(), "the counts were right");
            let run = store
                .get_run(&"b00000000002".parse().unwrap())
                .unwrap()
                .unwrap();
            assert_eq!(run.lease_expires_at, None);
            assert_eq!(run.error.as_deref(), Some(EXPORTED_WHILE_RUNNING));
            // Nothing is left for recovery.
            assert!(
                store
                    .recover_expired_run_leases(at("2030-01-01T00:00:00Z"))
                    .unwrap()
                    .is_empty()
            );
            let lp = store
                .get_loop(&"a00000000001".parse().unwrap())
                .unwrap()
                .unwrap();
            let now = at("2026-02-02T00:00:00Z");
            let Claim::Claimed { run: again, .. } = store
                .claim_run(&lp, run.scheduled_for, "runner-b", now)
                .unwrap()
            else {
                panic!("the abandoned slot is claimable");
            };
            assert_eq!((again.id, again.attempt), (run.id, 2));
        },
    );
}

/// Issue 25 item 3 (review): an import does not advance the loop of a
/// run that arrives abandoned, as recovery would, and needs not for the
/// failure to count: on its last attempt the slot's next claim finds the
/// attempts spent, and settling the slot counts the failure, here
/// tripping `pauseAfterFailures`. (A run with attempts left is retried at
/// once, without the retry delay; recovery's advance keeps the streak as
/// it is on a retry, too.)
#[test]
fn a_run_arriving_abandoned_on_its_last_attempt_counts_as_a_failure() {
    on_both_backends(
        "transfer::a_run_arriving_abandoned_on_its_last_attempt_counts",
        |store| {
            let slot = "2026-01-01T00:02:00.000Z";
            let doc = edited_fixture(|v| {
                let lp = &mut v["loops"][0];
                lp["maxAttempts"] = json!(1);
                lp["pauseAfterFailures"] = json!(1);
                lp["consecutiveFailures"] = json!(0);
                lp["nextRunAt"] = json!(slot);
                lp.as_object_mut().unwrap().remove("retryScheduledFor");
            });
            let report = import(store, &doc, true, false);
            assert_eq!(report.table(Table::Loops).new, 3, "{report:?}");
            let lp = store
                .get_loop(&"a00000000001".parse().unwrap())
                .unwrap()
                .unwrap();
            let now = at("2026-02-02T00:00:00Z");
            let claim = store.claim_run(&lp, at(slot), "runner-b", now).unwrap();
            assert!(
                matches!(claim, Claim::NotClaimed(NotClaimed::AttemptsExhausted(_))),
                "{claim:?}"
            );
            let settled = store
                .settle_finished_slot(&lp, at(slot), now)
                .unwrap()
                .expect("the spent slot is settled");
            assert_eq!(settled.status, loops_core::LoopStatus::Paused);
            let reason = settled.paused_reason.unwrap();
            assert!(
                reason.starts_with("paused after 1 consecutive failures"),
                "{reason}"
            );
        },
    );
}

#[test]
fn a_record_whose_unique_key_another_row_holds_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let doc = export(&fixture(dir.path()), true);
    let target = sqlite(dir.path(), "target");
    import(&target, &doc, true, false);
    // The same slot under another run id, and an active workflow of the
    // same name under another id.
    let mut v: Value = serde_json::from_str(&doc).unwrap();
    v["runs"][0]["id"] = json!("b0000000000f");
    v["workflows"][0]["id"] = json!("f0000000000f");
    let report = import(&target, &v.to_string(), true, false);
    assert_eq!(counts(&report, Table::Runs), (0, 2, 0, 0, 1));
    assert_eq!(counts(&report, Table::Workflows), (0, 1, 0, 0, 1));
    assert_eq!(report.conflict_count(), 2);
    let messages: Vec<&str> = report
        .conflicts
        .iter()
        .map(|c| c.message.as_str())
        .collect();
    assert!(
        messages.contains(&"the active workflow f00000000001 already has the name \"build\""),
        "{messages:?}"
    );
    assert!(
        messages.contains(
            &"run b00000000001 already holds slot 2026-01-01T00:01:00.000Z of loop a00000000001"
        ),
        "{messages:?}"
    );
    assert!(
        target
            .get_run(&"b0000000000f".parse().unwrap())
            .unwrap()
            .is_none()
    );
}

#[test]
fn a_loop_named_like_a_stored_one_is_imported_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    let doc = export(&fixture(dir.path()), false);
    let target = sqlite(dir.path(), "target");
    let mut v: Value = serde_json::from_str(&doc).unwrap();
    let mut copy = v["loops"][0].clone();
    import(&target, &doc, true, false);
    copy["id"] = json!("a0000000000f");
    v["loops"] = json!([copy]);
    let report = import(&target, &v.to_string(), true, false);
    assert_eq!(counts(&report, Table::Loops), (1, 0, 0, 0, 0));
    assert_eq!(report.shared_name_count, 1);
    assert_eq!(report.shared_names[0].id, "a0000000000f");
    assert!(report.shared_names[0].message.contains("a00000000001"));
}

#[test]
fn without_history_only_workflows_and_loops_travel() {
    let dir = tempfile::tempdir().unwrap();
    let doc = export(&fixture(dir.path()), false);
    let v: Value = serde_json::from_str(&doc).unwrap();
    assert_eq!(v["history"], false);
    assert_eq!(v["loops"].as_array().unwrap().len(), 3);
    for key in ["runs", "workflowRuns", "stepRuns", "events"] {
        assert_eq!(v[key], json!([]), "{key}");
    }
    let target = sqlite(dir.path(), "target");
    let report = import(&target, &doc, true, false);
    assert!(!report.history);
    assert_eq!(report.written(), 5);
}

#[test]
fn a_failing_record_rolls_back_its_batch_and_names_itself() {
    let dir = tempfile::tempdir().unwrap();
    let doc = export(&fixture(dir.path()), false);
    let mut v: Value = serde_json::from_str(&doc).unwrap();
    // Parses as a u64, does not fit the column.
    v["loops"][2]["leaseMs"] = json!(u64::MAX);
    let target = sqlite(dir.path(), "target");
    let err = target
        .import(
            &mut v.to_string().as_bytes(),
            ImportOptions {
                apply: true,
                replace: false,
            },
        )
        .unwrap_err();
    let TransferError::Record {
        table, index, id, ..
    } = &err
    else {
        panic!("{err}");
    };
    assert_eq!(
        (*table, *index, id.as_str()),
        (Table::Loops, 3, "a00000000003")
    );
    assert!(
        err.to_string().contains("run the same import again"),
        "{err}"
    );
    // The loops' batch is gone; the workflows' committed before it.
    assert_eq!(target.count_loops(None).unwrap(), 0);
    assert_eq!(
        target.require_workflow("build").unwrap().id.as_str(),
        "f00000000001"
    );
}

#[test]
fn documents_this_binary_cannot_read_are_refused_before_any_write() {
    let dir = tempfile::tempdir().unwrap();
    let target = sqlite(dir.path(), "target");
    let good = export(&fixture(dir.path()), true);
    let edited = |f: &dyn Fn(&mut Value)| {
        let mut v: Value = serde_json::from_str(&good).unwrap();
        f(&mut v);
        v.to_string()
    };
    let newer_schema = format!("newer than the {} this loops knows", crate::SCHEMA_VERSION);
    let cases: Vec<(String, &str)> = vec![
        (
            edited(&|v| v["format"] = json!("something-else")),
            "its \"format\" is \"something-else\", not \"loops-export\"",
        ),
        (
            edited(&|v| {
                v.as_object_mut().unwrap().remove("format");
            }),
            "its \"format\" is missing",
        ),
        (
            edited(&|v| v["formatVersion"] = json!(2)),
            "format version 2, newer than the 1 this loops reads",
        ),
        (
            edited(&|v| v["schemaVersion"] = json!(crate::SCHEMA_VERSION + 1)),
            newer_schema.as_str(),
        ),
        ("[1, 2]".to_owned(), "expected a loops export document"),
        ("{\"format\": \"loops-export\"".to_owned(), "EOF"),
        (
            r#"{"format": "loops-export", "formatVersion": 1, "schemaVersion": 7,
                "runs": [], "loops": []}"#
                .to_owned(),
            "it lists \"loops\" after rows that point to them",
        ),
        (
            r#"{"format": "loops-export", "formatVersion": 1, "schemaVersion": 7,
                "loops": [], "loops": []}"#
                .to_owned(),
            "it lists \"loops\" twice",
        ),
        (
            edited(&|v| v["runs"][1]["status"] = json!("exploded")),
            "not a valid loops export: runs record 2: unknown variant `exploded`",
        ),
    ];
    for (doc, expected) in cases {
        let err = import_err(&target, &doc).to_string();
        assert!(err.contains(expected), "{expected:?} not in {err:?}");
    }
    assert_eq!(target.count_loops(None).unwrap(), 0);
    // A format from a later version of format 1 may carry more keys.
    let extended = edited(&|v| v["comment"] = json!({"any": ["thing"]}));
    assert_eq!(import(&target, &extended, false, false).written(), 14);
}

/// SQLite → PostgreSQL → SQLite: the three exports are the same document
/// (but for what was running, which arrives finished), and a second
/// import into PostgreSQL finds every row already there.
#[test]
fn sqlite_to_postgres_to_sqlite_loses_nothing() {
    let Some(db) = fresh_database("transfer::sqlite_to_postgres_to_sqlite_loses_nothing") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let first = export(&fixture(dir.path()), true);
    let url = DatabaseUrl::parse(db.url()).unwrap();
    let pg = Store::open_postgres(&url, "test", "host-a", no_probe()).unwrap();
    let report = import(&pg, &first, true, false);
    assert_eq!(report.written(), 14, "{report:?}");
    let second = export(&pg, true);
    // What was running arrives finished; nothing else changes.
    assert_eq!(arrived(&first), content(&second));

    let again = import(&pg, &second, false, true);
    assert_eq!(again.written(), 0, "{again:?}");
    assert_eq!(counts(&again, Table::Events), (0, 2, 0, 0, 0));

    let back = sqlite(dir.path(), "back");
    import(&back, &second, true, false);
    assert_eq!(content(&export(&back, true)), content(&second));
}

/// On PostgreSQL, `replace` overwrites through the same triggers, a run's
/// taken slot is a conflict, and a run that was running, of a `skip` loop,
/// arrives abandoned and so takes no one-running index.
#[test]
fn postgres_replaces_refuses_and_marks_exclusive_runs() {
    let Some(db) = fresh_database("transfer::postgres_replaces_refuses_and_marks_exclusive_runs")
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let doc = export(&fixture(dir.path()), true);
    let url = DatabaseUrl::parse(db.url()).unwrap();
    let pg = Store::open_postgres(&url, "test", "host-a", no_probe()).unwrap();
    let mut v: Value = serde_json::from_str(&doc).unwrap();
    // The running run belongs to a `skip` loop.
    v["loops"][0]["overlap"] = json!("skip");
    import(&pg, &v.to_string(), true, false);
    let mut admin = postgres::Client::connect(db.url(), postgres::NoTls).unwrap();
    let exclusive: Vec<(String, bool)> = admin
        .query("SELECT id, exclusive FROM loop_runs ORDER BY id", &[])
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(
        exclusive,
        [
            ("b00000000001".to_owned(), false),
            ("b00000000002".to_owned(), false),
            ("b00000000003".to_owned(), false)
        ]
    );

    finished_since(&mut v, "2026-02-01T00:01:00.000Z");
    v["runs"][0]["id"] = json!("b0000000000f");
    let report = import(&pg, &v.to_string(), true, true);
    assert_eq!(counts(&report, Table::Runs), (0, 2, 1, 1, 1), "{report:?}");
    let running: i64 = admin
        .query_one(
            "SELECT COALESCE(SUM(n), 0)::bigint FROM status_counts WHERE tbl = 'loop_runs' AND status = 'running'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(running, 0);
    let exclusive: bool = admin
        .query_one(
            "SELECT exclusive FROM loop_runs WHERE id = 'b00000000002'",
            &[],
        )
        .unwrap()
        .get(0);
    assert!(!exclusive, "a finished run holds no index");
}

/// On PostgreSQL, a workflow run whose loop is not in the database loses
/// the link (as `ON DELETE SET NULL` would have done), and a step of a
/// workflow run that is not there is refused.
#[test]
fn postgres_clears_dangling_links_and_refuses_orphans() {
    let Some(db) = fresh_database("transfer::postgres_clears_dangling_links_and_refuses_orphans")
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let doc = export(&fixture(dir.path()), true);
    let mut v: Value = serde_json::from_str(&doc).unwrap();
    v["loops"] = json!([]);
    v["stepRuns"][1]["workflowRunId"] = json!("c0000000000f");
    let url = DatabaseUrl::parse(db.url()).unwrap();
    let pg = Store::open_postgres(&url, "test", "host-a", no_probe()).unwrap();
    let report = import(&pg, &v.to_string(), true, false);
    assert_eq!(
        counts(&report, Table::StepRuns),
        (1, 0, 0, 0, 1),
        "{report:?}"
    );
    assert!(report.conflicts[0].message.contains("c0000000000f"));
    let mut admin = postgres::Client::connect(db.url(), postgres::NoTls).unwrap();
    let row = admin
        .query_one(
            "SELECT loop_id, loop_run_id FROM workflow_runs WHERE id = 'c00000000001'",
            &[],
        )
        .unwrap();
    let (loop_id, loop_run_id): (Option<String>, Option<String>) = (row.get(0), row.get(1));
    assert_eq!(loop_id, None);
    assert_eq!(loop_run_id.as_deref(), Some("b00000000003"));
}

mod pools;
