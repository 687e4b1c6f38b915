//! What a run said and cost, and why it failed (issue 27): the facts a
//! finalize stores beside the result, and a loop's daily cost cap.

use loops_core::{
    AgentReport, ExecutorStatus, FailureClass, RunFacts, RunStatus, TokenUsage, Usd, run_json,
};
use loops_store::{Claim, Fence, ManualClaim};

use crate::common::*;

fn claimed(store: &loops_store::Store, lp: &loops_core::Loop) -> loops_core::LoopRun {
    match store.claim_run(lp, t0(), RUNNER_A, t0()).unwrap() {
        Claim::Claimed { run, .. } => run,
        other => panic!("not claimed: {other:?}"),
    }
}

#[test]
fn a_finalize_stores_the_agent_report_and_the_failure_class() {
    let fx = Fixture::new();
    let store = fx.store();
    let lp = create(&store, "agent", 1);
    let run = claimed(&store, &lp);
    let usage = TokenUsage {
        input_tokens: 10,
        output_tokens: 20,
        cache_read_tokens: 30,
        cache_write_tokens: 40,
    };
    let mut failed = result(ExecutorStatus::Failed, t0().add_ms(5_000));
    failed.stderr = "Error: 429 Too Many Requests".into();
    failed.facts = RunFacts {
        worktree: Some("/wt/repo/seed".into()),
        worktree_branch: Some("loops/repo/seed".into()),
        ..RunFacts::default()
    }
    .with_report(AgentReport {
        session_id: Some("sess-1".into()),
        result: Some("gave up".into()),
        cost_usd: Some(0.125),
        usage: Some(usage),
        is_error: Some(true),
    });
    let done = store
        .finalize_and_advance(&run.id, &failed, &Fence::new(RUNNER_A), t0().add_ms(5_000))
        .unwrap();
    let facts = &done.run.facts;
    assert_eq!(facts.failure_class, Some(FailureClass::RateLimit));
    let print = facts.failure_fingerprint.as_deref().unwrap();
    assert_eq!(print.len(), 16, "{print}");
    assert_eq!(facts.session_id.as_deref(), Some("sess-1"));
    assert_eq!(facts.cost_usd, Usd::from_dollars(0.125));
    assert_eq!(facts.usage, Some(usage));
    assert_eq!(facts.is_error, Some(true));
    assert_eq!(facts.worktree_branch.as_deref(), Some("loops/repo/seed"));
    // What the finalize returned is what is stored.
    let stored = store.get_run(&run.id).unwrap().unwrap();
    assert_eq!(&stored.facts, facts);
    let json = run_json(&stored, false);
    assert_eq!(json["failureClass"], "rate_limit");
    assert_eq!(json["costUsd"], 0.125);
    assert_eq!(json["usage"]["cacheWriteTokens"], 40);
    assert_eq!(json["result"], "[redacted 7 chars]");
    assert_eq!(run_json(&stored, true)["result"], "gave up");
}

#[test]
fn a_run_that_succeeded_has_no_class_and_a_command_no_facts() {
    let fx = Fixture::new();
    let store = fx.store();
    let lp = create(&store, "fine", 1);
    let run = claimed(&store, &lp);
    let ok = result(ExecutorStatus::Succeeded, t0().add_ms(1_000));
    let done = store
        .finalize_and_advance(&run.id, &ok, &Fence::new(RUNNER_A), t0().add_ms(1_000))
        .unwrap();
    assert_eq!(done.run.status, RunStatus::Succeeded);
    assert!(done.run.facts.is_empty(), "{:?}", done.run.facts);
    let json = run_json(&done.run, false);
    for key in [
        "failureClass",
        "failureFingerprint",
        "costUsd",
        "usage",
        "result",
    ] {
        assert!(json.get(key).is_none(), "{key}: {json}");
    }
}

#[test]
fn a_plain_failure_is_classified_unknown_with_a_stable_fingerprint() {
    let fx = Fixture::new();
    let store = fx.store();
    let mut prints = Vec::new();
    for name in ["first", "second"] {
        let lp = create(&store, name, 1);
        for slot in 0..2 {
            let run = if slot == 0 {
                claimed(&store, &lp)
            } else {
                let lp = store.get_loop(&lp.id).unwrap().unwrap();
                let next = lp.next_run_at.unwrap();
                match store.claim_run(&lp, next, RUNNER_A, next).unwrap() {
                    Claim::Claimed { run, .. } => run,
                    other => panic!("not claimed: {other:?}"),
                }
            };
            let at = run.scheduled_for.add_ms(1_000);
            let done = store
                .finalize_and_advance(
                    &run.id,
                    &result(ExecutorStatus::Failed, at),
                    &Fence::new(RUNNER_A),
                    at,
                )
                .unwrap();
            assert_eq!(done.run.facts.failure_class, Some(FailureClass::Unknown));
            prints.push(done.run.facts.failure_fingerprint.unwrap());
        }
    }
    // The same failure of one loop prints the same; another loop's differs.
    assert_eq!(prints[0], prints[1]);
    assert_ne!(prints[0], prints[2]);
    assert_eq!(prints[2], prints[3]);
}

#[test]
fn a_daily_cost_cap_is_stored_and_read_back() {
    let fx = Fixture::new();
    let store = fx.store();
    let mut new = interval_loop("capped");
    new.policy.max_cost_per_day = Usd::from_dollars(2.5);
    let lp = store.create_loop(&new, t0()).unwrap();
    assert_eq!(lp.policy.max_cost_per_day, Usd::from_dollars(2.5));
    let read = store.get_loop(&lp.id).unwrap().unwrap();
    assert_eq!(read.policy.max_cost_per_day, Usd::from_dollars(2.5));
    assert_eq!(
        serde_json::to_value(&read).unwrap()["maxCostPerDayUsd"],
        2.5
    );
}

#[test]
fn a_loops_cost_sums_its_runs_finished_since_an_instant() {
    let fx = Fixture::new();
    let store = fx.store();
    let mut finished = Vec::new();
    for (name, cost) in [("spender", 0.5), ("other", 7.0)] {
        let lp = create(&store, name, 1);
        let run = claimed(&store, &lp);
        let at = t0().add_ms(2_000);
        let mut ok = result(ExecutorStatus::Succeeded, at);
        ok.facts.cost_usd = Usd::from_dollars(cost);
        store
            .finalize_and_advance(&run.id, &ok, &Fence::new(RUNNER_A), at)
            .unwrap();
        finished.push(lp);
    }
    let spender = &finished[0].id;
    assert_eq!(
        store.loop_cost_since(spender, t0()).unwrap(),
        Usd::from_dollars(0.5).unwrap()
    );
    // A run that finished before the instant does not count.
    assert_eq!(
        store.loop_cost_since(spender, t0().add_ms(2_001)).unwrap(),
        Usd::ZERO
    );
}

/// An agent loop with three attempts.
fn agent_loop(store: &loops_store::Store, name: &str) -> loops_core::Loop {
    let mut new = interval_loop(name);
    let mut agent = loops_core::AgentTarget::new(loops_core::AgentProvider::Claude, "fix it");
    agent.cwd = Some("/tmp".into());
    new.target = loops_core::Target::Agent(agent);
    new.max_attempts = 3;
    store.create_loop(&new, t0()).unwrap()
}

#[test]
fn a_limit_that_names_its_reset_is_retried_then_plus_jitter() {
    let fx = Fixture::new();
    let store = fx.store();
    let lp = agent_loop(&store, "limited");
    let run = claimed(&store, &lp);
    let at = t0().add_ms(3_000);
    let mut failed = result(ExecutorStatus::Failed, at);
    failed.stderr = "API Error: 429 rate_limit_error; retry after 120s".into();
    let done = store
        .finalize_and_advance(&run.id, &failed, &Fence::new(RUNNER_A), at)
        .unwrap();
    assert_eq!(done.run.facts.failure_class, Some(FailureClass::RateLimit));
    let lp = done.loop_.unwrap();
    assert_eq!(lp.retry_scheduled_for, Some(run.scheduled_for));
    // A fixed backoff draws the middle of the jitter: 120 s + 6 s.
    assert_eq!(lp.next_run_at, Some(at.add_ms(126_000)));
}

#[test]
fn an_agent_that_failed_to_authenticate_pauses_its_loop() {
    let fx = Fixture::new();
    let store = fx.store();
    let lp = agent_loop(&store, "logged-out");
    let run = claimed(&store, &lp);
    let at = t0().add_ms(3_000);
    let mut failed = result(ExecutorStatus::Failed, at);
    failed.stderr = "Invalid API key · Please run /login".into();
    let done = store
        .finalize_and_advance(&run.id, &failed, &Fence::new(RUNNER_A), at)
        .unwrap();
    assert_eq!(done.run.facts.failure_class, Some(FailureClass::Auth));
    let lp = store.get_loop(&lp.id).unwrap().unwrap();
    assert_eq!(lp.status, loops_core::LoopStatus::Paused);
    let reason = lp.paused_reason.unwrap();
    assert!(
        reason.starts_with("claude failed to authenticate: Invalid API key"),
        "{reason}"
    );
    // Not retried: the attempts left are not burnt on it.
    assert_eq!(lp.retry_scheduled_for, None);
}

#[test]
fn a_heartbeat_records_when_the_run_last_printed() {
    let fx = Fixture::new();
    let store = fx.store();
    let lp = create(&store, "chatty", 1);
    let run = claimed(&store, &lp);
    let fence = Fence::new(RUNNER_A);
    let printed = t0().add_ms(500);
    let beat = store
        .heartbeat_run_lease_with_output(&run.id, &fence, 60_000, t0().add_ms(1_000), Some(printed))
        .unwrap()
        .unwrap();
    assert_eq!(beat.last_output_at, Some(printed));
    // A heartbeat that saw nothing new keeps it; a plain one too.
    let again = store
        .heartbeat_run_lease_with_output(&run.id, &fence, 60_000, t0().add_ms(2_000), None)
        .unwrap()
        .unwrap();
    assert_eq!(again.last_output_at, Some(printed));
    let plain = store
        .heartbeat_run_lease(&run.id, &fence, 60_000, t0().add_ms(3_000))
        .unwrap()
        .unwrap();
    assert_eq!(plain.last_output_at, Some(printed));
    let shown = run_json(&plain, false);
    assert_eq!(shown["lastOutputAt"], "2026-01-01T00:00:00.500Z");
}

/// Claims `lp`'s slot `slot` (a manual claim: any instant is a slot) and
/// finalizes it with `result`, unfenced; returns the stored run.
fn finish(
    store: &loops_store::Store,
    lp: &loops_core::Loop,
    slot: loops_core::Timestamp,
    result: &loops_core::ExecutorResult,
) -> loops_core::LoopRun {
    let run = match store
        .claim_manual_run(lp, slot, RUNNER_A, slot, ManualClaim::default())
        .unwrap()
    {
        Claim::Claimed { run, .. } => run,
        other => panic!("not claimed: {other:?}"),
    };
    store
        .finalize_run(&run.id, result, None, result.finished_at)
        .unwrap()
}

/// A result of `status` finished `ms` after t0, with `stderr` and `error`.
fn ended(status: ExecutorStatus, ms: i64, stderr: &str, error: &str) -> loops_core::ExecutorResult {
    let mut r = result(status, t0().add_ms(ms));
    r.stderr = stderr.into();
    r.error = Some(error.into());
    r
}

#[test]
fn failures_are_grouped_by_loop_class_and_fingerprint_newest_first() {
    let fx = Fixture::new();
    let store = fx.store();
    let limited = create(&store, "limited", 1);
    let broken = create(&store, "broken", 1);
    let failed = ExecutorStatus::Failed;
    // Three rate limits of one loop, one of them before the instant asked.
    // Their errors differ only in an instant, which the fingerprint leaves
    // out (§7.2): one group, whose sample is the newest run's error.
    for (i, ms) in [1_000, 60_000, 120_000].into_iter().enumerate() {
        let error = format!("gave up at 2026-01-01T00:0{i}:00Z");
        let r = ended(failed, ms, "HTTP 429 Too Many Requests", &error);
        finish(&store, &limited, t0().add_ms(ms - 500), &r);
    }
    // Another loop: two kinds of failure, a success and a skip.
    finish(
        &store,
        &broken,
        t0().add_ms(10_000),
        &ended(failed, 10_500, "", "boom\nsecond line"),
    );
    finish(
        &store,
        &broken,
        t0().add_ms(20_000),
        &ended(ExecutorStatus::TimedOut, 20_500, "", "timed out after 1s"),
    );
    finish(
        &store,
        &broken,
        t0().add_ms(30_000),
        &result(ExecutorStatus::Succeeded, t0().add_ms(30_500)),
    );
    let long = "x".repeat(5_000);
    finish(
        &store,
        &broken,
        t0().add_ms(40_000),
        &ended(failed, 40_500, "", &long),
    );

    let groups = store.failure_groups_since(t0().add_ms(2_000)).unwrap();
    let shown: Vec<(&str, FailureClass, u64)> = groups
        .iter()
        .map(|g| (g.loop_name.as_str(), g.failure_class, g.count))
        .collect();
    assert_eq!(
        shown,
        [
            ("limited", FailureClass::RateLimit, 2),
            ("broken", FailureClass::Unknown, 1),
            ("broken", FailureClass::Timeout, 1),
            ("broken", FailureClass::Unknown, 1),
        ]
    );
    let limits = &groups[0];
    assert_eq!(limits.loop_id, limited.id);
    assert_eq!(limits.first_seen, t0().add_ms(60_000));
    assert_eq!(limits.last_seen, t0().add_ms(120_000));
    assert_eq!(
        limits.sample.as_deref(),
        Some("gave up at 2026-01-01T00:02:00Z")
    );
    assert_eq!(limits.failure_fingerprint.len(), 16);
    let stored = store
        .list_runs(&loops_store::RunFilter {
            loop_id: Some(limited.id),
            ..Default::default()
        })
        .unwrap();
    assert!(stored.iter().all(
        |r| r.facts.failure_fingerprint.as_deref() == Some(limits.failure_fingerprint.as_str())
    ));
    // A long error is cut in the database.
    let cut = groups[1].sample.as_deref().unwrap();
    assert_eq!(cut.chars().count(), loops_store::FAILURE_SAMPLE_CHARS);
    // Two errors of one loop and class are two fingerprints.
    assert_ne!(groups[1].failure_fingerprint, groups[3].failure_fingerprint);
    assert_eq!(groups[3].sample.as_deref(), Some("boom\nsecond line"));
    // From t0, the oldest rate limit counts too; after the newest, nothing.
    let all = store.failure_groups_since(t0()).unwrap();
    assert_eq!((all[0].count, all[0].first_seen), (3, t0().add_ms(1_000)));
    assert!(
        store
            .failure_groups_since(t0().add_ms(200_000))
            .unwrap()
            .is_empty()
    );
}

#[test]
fn skipped_runs_are_not_failures() {
    let fx = Fixture::new();
    let store = fx.store();
    let mut new = interval_loop("skips");
    new.policy.skip_exit_codes = vec![3];
    let lp = store.create_loop(&new, t0()).unwrap();
    let run = finish(
        &store,
        &lp,
        t0(),
        &result(ExecutorStatus::Failed, t0().add_ms(1_000)),
    );
    assert_eq!(run.status, RunStatus::Skipped);
    assert!(store.failure_groups_since(t0()).unwrap().is_empty());
}

#[test]
fn the_costed_runs_since_an_instant_are_those_that_reported_a_cost_or_usage() {
    let fx = Fixture::new();
    let store = fx.store();
    let lp = create(&store, "agent", 1);
    let usage = TokenUsage {
        input_tokens: 10,
        output_tokens: 5,
        cache_read_tokens: 2,
        cache_write_tokens: 1,
    };
    let ok = ExecutorStatus::Succeeded;
    let mut reported = Vec::new();
    for (ms, cost, usage) in [
        (1_000, Some(0.25), Some(usage)),
        (2_000, None, Some(usage)),
        (3_000, Some(1.5), None),
        (4_000, None, None),
    ] {
        let mut r = result(ok, t0().add_ms(ms));
        r.facts = RunFacts::default().with_report(AgentReport {
            cost_usd: cost,
            usage,
            ..AgentReport::default()
        });
        // A failed run's cost counts as much as a success's.
        if ms == 3_000 {
            r.status = ExecutorStatus::Failed;
            r.error = Some("process exited with code 1".into());
        }
        finish(&store, &lp, t0().add_ms(ms - 500), &r);
        reported.push((t0().add_ms(ms), cost.and_then(Usd::from_dollars), usage));
    }
    let read = |since| {
        let mut runs = Vec::new();
        store
            .for_each_run_cost_since(since, |run| {
                assert_eq!((run.loop_id, run.loop_name.as_str()), (lp.id, "agent"));
                runs.push((run.finished_at, run.cost_usd, run.usage));
                std::ops::ControlFlow::Continue(())
            })
            .unwrap();
        runs.sort_by_key(|r| r.0);
        runs
    };
    assert_eq!(read(t0()), reported[..3]);
    assert_eq!(read(t0().add_ms(1_500)), reported[1..3]);
    assert!(read(t0().add_ms(5_000)).is_empty());
    // A break stops reading.
    let mut seen = 0;
    store
        .for_each_run_cost_since(t0(), |_| {
            seen += 1;
            std::ops::ControlFlow::Break(())
        })
        .unwrap();
    assert_eq!(seen, 1);
}
