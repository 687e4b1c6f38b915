//! Issue 30's tables in a transfer: a pool and its member loop, a pending
//! trigger and one that started a run come over whole into an empty
//! store on either backend; an import of them again finds them there,
//! `replace` overwrites a pool but never reopens a started trigger, a
//! taken idempotency key is a conflict, `--no-runs` keeps the pools only,
//! and a document written before these tables still imports.

use loops_core::{
    CommandTarget, ExecutorResult, ExecutorStatus, LoopRun, NewLoop, Schedule, Target,
};

use super::*;
use crate::{Fence, NewTrigger};

const RUNNER: &str = "host:1:transfer";

/// A SQLite store under `dir` holding pool `gpu` (at most 2), loop
/// `train` in it, a pending manual trigger with a payload and a key, and
/// a trigger that started a run, since finished; and that run.
fn pooled(dir: &Path) -> (Store, LoopRun) {
    let store = sqlite(dir, "pooled");
    let t0 = at("2026-01-01T00:00:00Z");
    store.set_pool("gpu", 2, t0).unwrap();
    let mut new = NewLoop::new(
        "train",
        Schedule::Dynamic {
            min_interval_ms: None,
        },
        Target::Command(CommandTarget::new("true")),
    );
    new.policy.pool = Some("gpu".into());
    let lp = store.create_loop(&new, t0).unwrap();
    let first = NewTrigger {
        payload: Some(r#"{"model":"a"}"#.into()),
        idempotency_key: Some("first".into()),
    };
    let first = store.add_trigger(&lp.id, &first, t0).unwrap().unwrap();
    let Claim::Claimed { run, .. } = store
        .claim_trigger(&lp, &first.trigger.id, RUNNER, t0.add_ms(10))
        .unwrap()
    else {
        panic!("the trigger is claimed");
    };
    let done = t0.add_ms(2000);
    let result = ExecutorResult {
        status: ExecutorStatus::Succeeded,
        exit_code: Some(0),
        stdout: "trained".into(),
        stderr: String::new(),
        error: None,
        pid: Some(4242),
        started_at: t0.add_ms(10),
        finished_at: done,
        duration_ms: 1990,
        facts: Default::default(),
    };
    let finished = store
        .finalize_and_advance(&run.id, &result, &Fence::new(RUNNER), done)
        .unwrap();
    assert!(finished.applied);
    let second = NewTrigger {
        payload: Some(r#"{"model":"b"}"#.into()),
        idempotency_key: Some("second".into()),
    };
    store
        .add_trigger(&lp.id, &second, t0.add_ms(3000))
        .unwrap()
        .unwrap();
    (store, run)
}

#[test]
fn pools_and_triggers_round_trip_into_an_empty_store() {
    let dir = tempfile::tempdir().unwrap();
    let (source, run) = pooled(dir.path());
    let mut out = Vec::new();
    let summary = source
        .export(
            &mut out,
            ExportOptions { history: true },
            at("2026-02-01T00:00:00Z"),
        )
        .unwrap();
    assert_eq!(
        (summary.count(Table::Pools), summary.count(Table::Triggers)),
        (1, 2)
    );
    let doc = String::from_utf8(out).unwrap();
    let v: Value = serde_json::from_str(&doc).unwrap();
    assert_eq!(v["pools"][0]["name"], "gpu");
    assert_eq!(v["pools"][0]["maxRunning"], 2);
    // The run's pool and trigger, which its JSON leaves out.
    assert_eq!(v["runs"][0]["pool"], "gpu");
    let first = v["triggers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["runId"] == run.id.as_str());
    assert_eq!(v["runs"][0]["triggerId"], first.unwrap()["id"]);
    // The payload travels as stored, as a run's output does.
    assert!(doc.contains(r#""payload":"{\"model\":\"b\"}""#), "{doc}");
    on_both_backends("transfer::pools_and_triggers_round_trip", |target| {
        let empty = export(target, true);
        let dry = import(target, &doc, false, false);
        assert_eq!(counts(&dry, Table::Pools), (1, 0, 0, 0, 0));
        assert_eq!(counts(&dry, Table::Triggers), (2, 0, 0, 0, 0));
        assert_eq!(dry.table(Table::Triggers).records, 2);
        assert_eq!(dry.written(), 5, "{dry:?}");
        assert_eq!(export(target, true), empty, "a dry run writes nothing");

        let report = import(target, &doc, true, false);
        assert_eq!(report.written(), 5, "{report:?}");
        assert_eq!(content(&export(target, true)), content(&doc));
        let pools = target.list_pools().unwrap();
        assert_eq!(pools.len(), 1);
        assert_eq!(
            (
                pools[0].name.as_str(),
                pools[0].max_running,
                pools[0].members
            ),
            ("gpu", 2, 1)
        );
        let pending = target.pending_triggers().unwrap();
        assert_eq!(pending.len(), 1, "{pending:?}");
        assert_eq!(pending[0].idempotency_key.as_deref(), Some("second"));
        assert_eq!(pending[0].payload.as_deref(), Some(r#"{"model":"b"}"#));
        // `runs` can still say what started the run (T10).
        let started = target.triggers_of_runs(&[run.id]).unwrap();
        assert_eq!(started.len(), 1);
        assert_eq!(started[0].idempotency_key.as_deref(), Some("first"));

        let again = import(target, &doc, true, true);
        assert_eq!(again.written(), 0, "{again:?}");
        assert_eq!(counts(&again, Table::Pools), (0, 1, 0, 0, 0));
        assert_eq!(counts(&again, Table::Triggers), (0, 2, 0, 0, 0));
    });
}

#[test]
fn replace_overwrites_a_pool_but_never_reopens_a_started_trigger() {
    let dir = tempfile::tempdir().unwrap();
    let doc = export(&pooled(dir.path()).0, true);
    on_both_backends("transfer::replace_overwrites_a_pool", |target| {
        import(target, &doc, true, false);
        let mut v: Value = serde_json::from_str(&doc).unwrap();
        v["pools"][0]["maxRunning"] = json!(5);
        v["pools"][0]["updatedAt"] = json!("2026-03-01T00:00:00.000Z");
        let (started, pending) = if v["triggers"][0]["runId"].is_null() {
            (1, 0)
        } else {
            (0, 1)
        };
        let run_id = v["triggers"][started]["runId"].clone();
        // An older copy of the started trigger, from before its claim.
        v["triggers"][started]
            .as_object_mut()
            .unwrap()
            .remove("runId");
        v["triggers"][pending]["payload"] = json!(r#"{"model":"c"}"#);
        let edited = v.to_string();

        let kept = import(target, &edited, false, false);
        assert_eq!(counts(&kept, Table::Pools), (0, 1, 1, 0, 0));
        assert_eq!(kept.table(Table::Triggers).kept, 1, "{kept:?}");
        let report = import(target, &edited, true, true);
        assert_eq!(counts(&report, Table::Pools), (0, 1, 1, 1, 0));
        let triggers = report.table(Table::Triggers);
        assert_eq!(
            (triggers.existing, triggers.differ, triggers.replaced),
            (2, 2, 1)
        );
        assert_eq!(triggers.kept, 1);
        assert!(
            report.kept[0]
                .message
                .contains("newer in the store (started run"),
            "{:?}",
            report.kept
        );
        assert_eq!(target.pool("gpu").unwrap().unwrap().max_running, 5);
        let after: Value = serde_json::from_str(&export(target, true)).unwrap();
        assert_eq!(after["triggers"][started]["runId"], run_id);
        assert_eq!(after["triggers"][pending]["payload"], r#"{"model":"c"}"#);
        assert_eq!(target.pending_triggers().unwrap().len(), 1);

        // A new trigger under a key the loop has used: refused.
        let mut twin = v["triggers"][pending].clone();
        twin["id"] = json!("0000000000ff");
        let mut bad = v["triggers"][pending].clone();
        bad["id"] = json!("not-an-id");
        let mut pool = v["pools"][0].clone();
        pool["name"] = json!("-gpu");
        let mut w = v.clone();
        w["triggers"] = json!([twin, bad]);
        w["pools"] = json!([pool]);
        let refused = import(target, &w.to_string(), true, false);
        assert_eq!(refused.table(Table::Triggers).conflicts, 1);
        assert!(
            refused.conflicts[0]
                .message
                .contains("already has idempotency key \"second\""),
            "{:?}",
            refused.conflicts
        );
        assert_eq!(refused.table(Table::Triggers).invalid, 1);
        assert_eq!(refused.table(Table::Pools).invalid, 1);
        assert!(
            refused
                .invalid
                .iter()
                .any(|f| f.message.starts_with("refused as `loops pools set`")),
            "{:?}",
            refused.invalid
        );
        assert_eq!(target.list_pools().unwrap().len(), 1);
    });
}

#[test]
fn without_history_the_pools_travel_and_the_triggers_stay() {
    let dir = tempfile::tempdir().unwrap();
    let doc = export(&pooled(dir.path()).0, false);
    let v: Value = serde_json::from_str(&doc).unwrap();
    assert_eq!(v["pools"].as_array().unwrap().len(), 1);
    assert_eq!(v["triggers"], json!([]));
    let target = sqlite(dir.path(), "target");
    let report = import(&target, &doc, true, false);
    assert_eq!(counts(&report, Table::Pools), (1, 0, 0, 0, 0));
    assert_eq!(target.list_pools().unwrap()[0].members, 1);
    assert!(target.pending_triggers().unwrap().is_empty());
}

/// A document from before issue 30 has no `pools` or `triggers`: it
/// imports as it did, with nothing in the new tables.
#[test]
fn an_older_document_without_pools_or_triggers_imports() {
    let dir = tempfile::tempdir().unwrap();
    let v: Value = serde_json::from_str(&export(&fixture(dir.path()), true)).unwrap();
    let older: serde_json::Map<String, Value> = v
        .as_object()
        .unwrap()
        .iter()
        .filter(|(key, _)| !["pools", "triggers"].contains(&key.as_str()))
        .map(|(key, value)| match key.as_str() {
            "schemaVersion" => (key.clone(), json!(12)),
            _ => (key.clone(), value.clone()),
        })
        .collect();
    let older = Value::Object(older).to_string();
    assert!(!older.contains("\"pools\"") && older.find("workflows") < older.find("events"));
    on_both_backends("transfer::an_older_document_imports", |target| {
        let report = import(target, &older, true, false);
        assert_eq!(report.written(), 14, "{report:?}");
        assert_eq!(report.table(Table::Pools).records, 0);
        assert_eq!(report.table(Table::Triggers).records, 0);
        assert_eq!(target.count_loops(None).unwrap(), 3);
        assert!(target.list_pools().unwrap().is_empty());
    });
}

/// A document must list a pool before the loops that name it, and a
/// trigger after the runs it started.
#[test]
fn pools_and_triggers_must_come_in_their_place() {
    let dir = tempfile::tempdir().unwrap();
    let target = sqlite(dir.path(), "target");
    for (doc, key) in [
        (
            r#"{"format": "loops-export", "formatVersion": 1, "schemaVersion": 13,
                "loops": [], "pools": []}"#,
            "pools",
        ),
        (
            r#"{"format": "loops-export", "formatVersion": 1, "schemaVersion": 13,
                "stepRuns": [], "triggers": []}"#,
            "triggers",
        ),
    ] {
        let err = import_err(&target, doc).to_string();
        let expected = format!("it lists \"{key}\" after rows that point to them");
        assert!(err.contains(&expected), "{err}");
    }
}

/// A trigger claimed here between an import's read of it and its
/// overwrite with `replace` keeps its claim: the overwrite is guarded by
/// the trigger as read, and writes nothing. The claim goes through the
/// importing connection on SQLite and a second one on PostgreSQL.
#[test]
fn a_trigger_claimed_between_the_read_and_the_write_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let doc = export(&pooled(dir.path()).0, true);
    claimed_meanwhile(&doc, &sqlite(dir.path(), "sqlite"), None);
    if let Some(db) = fresh_database("transfer::a_trigger_claimed_between_the_read_and_write") {
        let url = DatabaseUrl::parse(db.url()).unwrap();
        let open = || Store::open_postgres(&url, "test", "host-a", no_probe()).unwrap();
        claimed_meanwhile(&doc, &open(), Some(open()));
    }
}

fn claimed_meanwhile(doc: &str, store: &Store, runner: Option<Store>) {
    use std::cell::RefCell;
    use std::rc::Rc;

    import(store, doc, true, false);
    let pending = store.pending_triggers().unwrap().remove(0);
    let lp = store.get_loop(&pending.loop_id).unwrap().unwrap();
    let mut v: Value = serde_json::from_str(doc).unwrap();
    for t in v["triggers"].as_array_mut().unwrap() {
        if t["id"] == pending.id.as_str() {
            t["payload"] = json!(r#"{"model":"late"}"#);
        }
    }
    let claimed = Rc::new(RefCell::new(None));
    let hook = {
        let (claimed, id) = (Rc::clone(&claimed), pending.id.clone());
        Box::new(move |importing: &Store, record: &Record| {
            if record.id() != id {
                return;
            }
            let claimer = runner.as_ref().unwrap_or(importing);
            let now = at("2026-02-02T00:00:00Z");
            let Claim::Claimed { run, .. } = claimer.claim_trigger(&lp, &id, RUNNER, now).unwrap()
            else {
                panic!("the pending trigger is claimable");
            };
            *claimed.borrow_mut() = Some(run.id);
        })
    };
    let report = import::seam::with_hook(hook, || import(store, &v.to_string(), true, true));
    let triggers = report.table(Table::Triggers);
    assert_eq!((triggers.kept, triggers.replaced), (1, 0), "{report:?}");
    let run = claimed.borrow_mut().take().expect("the hook claimed");
    assert_eq!(
        report.kept[0].message,
        format!("changed in the store during the import (now started run {run}); kept as stored")
    );
    let started = store.triggers_of_runs(&[run]).unwrap();
    assert_eq!(started.len(), 1, "the claim stands");
    assert_eq!(started[0].payload.as_deref(), Some(r#"{"model":"b"}"#));
    assert!(store.pending_triggers().unwrap().is_empty());
}
