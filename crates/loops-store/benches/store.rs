//! Store throughput on a real WAL database file.
//!
//! - `claim_finalize/*`: one claim plus one finalize per element, the
//!   daemon's write path per slot (SPEC §4.3), reported as runs per second.
//! - `due_loops/*`: the tick's due-loop selection (SPEC §3.1 step 4) with
//!   10,000 loops stored, half of them due.
//!
//! Run with `cargo bench -p loops-store --bench store`. Settings are short
//! so the whole run takes well under a minute.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use loops_core::{
    Anchor, CommandTarget, ExecutorResult, ExecutorStatus, NewLoop, Schedule, Target, Timestamp,
};
use loops_store::{Claim, Fence, Store};

const RUNNER: &str = "bench:1:aaaaaaaaaaaa";

fn t0() -> Timestamp {
    "2026-01-01T00:00:00.000Z".parse().unwrap()
}

fn new_loop(name: &str) -> NewLoop {
    let mut target = CommandTarget::new("echo hi");
    target.shell = Some(true);
    NewLoop::new(
        name,
        Schedule::Interval {
            every_ms: 60_000,
            anchor: Some(Anchor::FixedRate),
        },
        Target::Command(target),
    )
}

fn open(dir: &tempfile::TempDir) -> Store {
    Store::open(&dir.path().join("loops.db"), Arc::new(|_| false)).unwrap()
}

fn succeeded(at: Timestamp) -> ExecutorResult {
    ExecutorResult {
        status: ExecutorStatus::Succeeded,
        exit_code: Some(0),
        stdout: "hello\n".into(),
        stderr: String::new(),
        error: None,
        pid: Some(4242),
        started_at: at,
        finished_at: at.add_ms(5),
        duration_ms: 5,
        facts: Default::default(),
    }
}

fn claim_finalize(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let lp = store.create_loop(&new_loop("bench"), t0()).unwrap();
    let fence = Fence::new(RUNNER);
    let mut group = c.benchmark_group("claim_finalize");
    group.throughput(Throughput::Elements(1));
    let mut slot = 0i64;
    let mut next_slot = || {
        slot += 1;
        t0().add_ms(slot * 60_000)
    };

    group.bench_function("claim+finalize_and_advance", |b| {
        b.iter(|| {
            let at = next_slot();
            let Claim::Claimed { run, .. } = store.claim_run(&lp, at, RUNNER, at).unwrap() else {
                panic!("not claimed");
            };
            black_box(
                store
                    .finalize_and_advance(&run.id, &succeeded(at), &fence, at)
                    .unwrap(),
            );
        });
    });
    group.bench_function("claim+finalize_run", |b| {
        b.iter(|| {
            let at = next_slot();
            let Claim::Claimed { run, .. } = store.claim_run(&lp, at, RUNNER, at).unwrap() else {
                panic!("not claimed");
            };
            black_box(
                store
                    .finalize_run(&run.id, &succeeded(at), Some(&fence), at)
                    .unwrap(),
            );
        });
    });
    group.finish();
}

fn due_loops(c: &mut Criterion) {
    const LOOPS: usize = 10_000;
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    // Half the loops were created an hour early (due at t0), half an hour
    // late (due after t0).
    for i in 0..LOOPS {
        let created = if i % 2 == 0 {
            t0().add_ms(-3_600_000)
        } else {
            t0().add_ms(3_600_000)
        };
        store
            .create_loop(&new_loop(&format!("loop{i}")), created)
            .unwrap();
    }
    assert_eq!(store.due_loops(t0(), u32::MAX).unwrap().len(), LOOPS / 2);

    let mut group = c.benchmark_group("due_loops");
    group.throughput(Throughput::Elements((LOOPS / 2) as u64));
    group.bench_function("10k_loops_5k_due_all", |b| {
        b.iter(|| black_box(store.due_loops(black_box(t0()), 10_000).unwrap()));
    });
    group.throughput(Throughput::Elements(100));
    group.bench_function("10k_loops_5k_due_first_100", |b| {
        b.iter(|| black_box(store.due_loops(black_box(t0()), 100).unwrap()));
    });
    group.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
}

criterion_group! {
    name = benches;
    config = config();
    targets = claim_finalize, due_loops
}
criterion_main!(benches);
