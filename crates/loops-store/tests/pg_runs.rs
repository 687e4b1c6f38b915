//! The PostgreSQL backend's loops and runs with several hosts on one
//! database (issue 15): claims racing across connections, overlap skip
//! across hosts, claim tokens, takeovers after a grace, concurrent
//! recovery, COMMITs whose outcome was lost, and the same records as
//! SQLite for the everyday operations.
//!
//! Each test runs on a fresh database of the server in
//! `LOOPS_TEST_DATABASE_URL`, and skips (saying so) without it.

// `allow-unwrap-in-tests` covers only `#[test]` functions, not the helpers
// and threads.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{HashMap, HashSet};
use std::error::Error;
use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use loops_core::{
    CommandTarget, ExecutorResult, ExecutorStatus, Loop, LoopRun, NewLoop, Overlap, ProcessRef,
    RunId, RunStatus, Schedule, Target, Timestamp,
};
use loops_store::testing::{TestDatabase, fresh_database};
use loops_store::{
    Advance, Claim, DatabaseUrl, DeleteHistory, Fence, NotClaimed, Store, StoreError,
};

type TestResult = Result<(), Box<dyn Error>>;

/// The runner ids the tests claim as: two daemons on two hosts.
const RUNNER_A: &str = "host-a:100:aaaaaaaaaaaa";
const RUNNER_B: &str = "host-b:200:bbbbbbbbbbbb";

/// How long after its lease another host's run may be taken
/// (`CROSS_HOST_GRACE_MS` in the backend).
const GRACE_MS: i64 = 30_000;

/// A set of "alive" processes a store's liveness probe consults.
type Alive = Arc<Mutex<HashSet<u32>>>;

/// A store on `url` for host `host`, as `role` (its `application_name`
/// is `loops:<role>`), whose liveness probe answers from `alive`.
fn open_url(url: &str, role: &str, host: &str, alive: &Alive) -> Result<Store, Box<dyn Error>> {
    let alive = Arc::clone(alive);
    let probe = move |p: ProcessRef| alive.lock().unwrap().contains(&p.pid);
    Ok(Store::open_postgres(
        &DatabaseUrl::parse(url)?,
        role,
        host,
        Arc::new(probe),
    )?)
}

/// A store of host-a on the test database, with nothing alive.
fn open(db: &TestDatabase) -> Result<Store, Box<dyn Error>> {
    open_url(db.url(), "test", "host-a", &Alive::default())
}

/// A plain connection to the test database, for arranging and inspecting.
fn raw(db: &TestDatabase) -> postgres::Client {
    postgres::Client::connect(db.url(), postgres::NoTls).unwrap()
}

fn t(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn t0() -> Timestamp {
    t("2026-01-01T00:00:00.000Z")
}

/// An interval loop running `echo hi` every minute.
fn every_minute(name: &str, overlap: Overlap) -> NewLoop {
    let mut new = NewLoop::new(
        name,
        Schedule::Interval {
            every_ms: 60_000,
            anchor: None,
        },
        Target::Command(CommandTarget::new("true")),
    );
    new.overlap = overlap;
    new
}

fn result(status: ExecutorStatus, finished: Timestamp) -> ExecutorResult {
    let ok = status == ExecutorStatus::Succeeded;
    ExecutorResult {
        status,
        exit_code: Some(if ok { 0 } else { 3 }),
        stdout: "out".into(),
        stderr: String::new(),
        error: (!ok).then(|| "process exited with code 3".into()),
        pid: Some(4242),
        started_at: finished.add_ms(-1000),
        finished_at: finished,
        duration_ms: 1000,
        facts: Default::default(),
    }
}

fn claimed(c: Claim) -> LoopRun {
    match c {
        Claim::Claimed { run, .. } => run,
        other => panic!("expected a claim, got {other:?}"),
    }
}

fn not_claimed(c: Claim) -> NotClaimed {
    match c {
        Claim::NotClaimed(why) => why,
        other => panic!("expected no claim, got {other:?}"),
    }
}

/// Polls `check` until it holds, failing after ten seconds.
fn wait_until(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn two_stores_racing_for_the_slots_of_many_loops_claim_each_exactly_once() -> TestResult {
    let Some(db) = fresh_database("pg_runs::two_stores_racing") else {
        return Ok(());
    };
    const LOOPS: usize = 12;
    const SLOTS: i64 = 8;
    let store = open(&db)?;
    let loops: Vec<Loop> = (0..LOOPS)
        .map(|i| store.create_loop(&every_minute(&format!("l{i}"), Overlap::Allow), t0()))
        .collect::<Result<_, _>>()?;
    let barrier = Arc::new(Barrier::new(2));
    let handles: Vec<_> = [(RUNNER_A, "host-a"), (RUNNER_B, "host-b")]
        .into_iter()
        .enumerate()
        .map(|(n, (runner, host))| {
            let store = open_url(db.url(), "racer", host, &Alive::default()).unwrap();
            let barrier = Arc::clone(&barrier);
            let mut loops = loops.clone();
            // The second store asks in the opposite order: the claims lock
            // their loops in id order whatever the request order, so the
            // two transactions wait on each other but never deadlock.
            if n == 1 {
                loops.reverse();
            }
            std::thread::spawn(move || {
                let mut won = Vec::new();
                for i in 0..SLOTS {
                    let slot = t0().add_ms(60_000 * i);
                    barrier.wait();
                    let claims = if i % 2 == 0 {
                        let requests: Vec<(&Loop, Timestamp)> =
                            loops.iter().map(|lp| (lp, slot)).collect();
                        store.claim_runs(&requests, runner, slot).unwrap()
                    } else {
                        loops
                            .iter()
                            .map(|lp| store.claim_run(lp, slot, runner, slot).unwrap())
                            .collect()
                    };
                    for claim in claims {
                        if let Claim::Claimed { run, .. } = claim {
                            won.push((run.loop_id, run.scheduled_for));
                        }
                    }
                }
                won
            })
        })
        .collect();
    let mut seen = HashSet::new();
    for handle in handles {
        for slot in handle.join().unwrap() {
            assert!(seen.insert(slot), "{slot:?} was claimed twice");
        }
    }
    assert_eq!(seen.len(), LOOPS * SLOTS as usize, "every slot was claimed");
    assert_eq!(store.count_runs(None)?, (LOOPS * SLOTS as usize) as u64);
    assert_eq!(
        store.count_runs(Some(RunStatus::Running))?,
        seen.len() as u64
    );
    Ok(())
}

#[test]
fn a_skip_loop_claimed_from_two_hosts_at_once_runs_one_slot_at_a_time() -> TestResult {
    let Some(db) = fresh_database("pg_runs::skip_across_hosts") else {
        return Ok(());
    };
    const ROUNDS: usize = 10;
    let store = open(&db)?;
    let loops: Vec<Loop> = (0..ROUNDS)
        .map(|i| store.create_loop(&every_minute(&format!("skip{i}"), Overlap::Skip), t0()))
        .collect::<Result<_, _>>()?;
    let barrier = Arc::new(Barrier::new(2));
    // Two daemons plan two different due slots of the same loop.
    let handles: Vec<_> = [(RUNNER_A, "host-a", 0), (RUNNER_B, "host-b", 1)]
        .into_iter()
        .map(|(runner, host, nth)| {
            let store = open_url(db.url(), "skipper", host, &Alive::default()).unwrap();
            let barrier = Arc::clone(&barrier);
            let loops = loops.clone();
            std::thread::spawn(move || {
                loops
                    .iter()
                    .map(|lp| {
                        let slot = t0().add_ms(60_000 * nth);
                        barrier.wait();
                        store
                            .claim_run(lp, slot, runner, t0().add_ms(60_000))
                            .unwrap()
                    })
                    .collect::<Vec<Claim>>()
            })
        })
        .collect();
    let results: Vec<Vec<Claim>> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    for (round, (a, b)) in results[0].iter().zip(&results[1]).enumerate() {
        let (winner, loser) = match (a, b) {
            (Claim::Claimed { run, .. }, other) | (other, Claim::Claimed { run, .. }) => {
                (run, other)
            }
            _ => panic!("round {round}: neither claimed: {a:?} / {b:?}"),
        };
        match loser {
            Claim::NotClaimed(NotClaimed::OverlapRunning(running)) => {
                assert_eq!(running.id, winner.id, "round {round}");
            }
            // The loser found the loop locked by the winner's claim and
            // left it to that claim (a scheduled claim skips locked loops).
            Claim::NotClaimed(NotClaimed::Raced) => {}
            other => panic!("round {round}: both ran, or {other:?}"),
        }
    }
    assert_eq!(store.count_runs(None)?, ROUNDS as u64);
    Ok(())
}

#[test]
fn the_database_itself_refuses_a_second_running_run_of_a_skip_loop() -> TestResult {
    let Some(db) = fresh_database("pg_runs::one_running_index") else {
        return Ok(());
    };
    let store = open(&db)?;
    let lp = store.create_loop(&every_minute("exclusive", Overlap::Skip), t0())?;
    let run = claimed(store.claim_run(&lp, t0(), RUNNER_A, t0())?);
    let mut raw = raw(&db);
    let exclusive: bool = raw
        .query_one(
            "SELECT exclusive FROM loop_runs WHERE id = $1",
            &[&run.id.as_str()],
        )?
        .get(0);
    assert!(exclusive, "a skip loop's claim is exclusive");
    let second = raw.execute(
        "INSERT INTO loop_runs (id, loop_id, loop_name, scheduled_for, attempt, status,
           created_at, updated_at, exclusive)
         VALUES ('0000000000ff', $1, 'exclusive', now(), 1, 'running', now(), now(), true)",
        &[&lp.id.as_str()],
    );
    let err = second.expect_err("a second running exclusive run");
    assert_eq!(
        err.code().map(|c| c.code()),
        Some("23505"),
        "a unique violation: {err}"
    );
    // An allow loop's runs are not exclusive: they may overlap.
    let allow = store.create_loop(&every_minute("allow", Overlap::Allow), t0())?;
    claimed(store.claim_run(&allow, t0(), RUNNER_A, t0())?);
    claimed(store.claim_run(&allow, t0().add_ms(60_000), RUNNER_A, t0())?);
    Ok(())
}

#[test]
fn an_old_claims_finalize_changes_nothing_after_the_same_runner_claimed_again() -> TestResult {
    let Some(db) = fresh_database("pg_runs::token_fencing") else {
        return Ok(());
    };
    let store = open(&db)?;
    let lp = store.create_loop(&every_minute("fenced", Overlap::Skip), t0())?;
    let old = claimed(store.claim_run(&lp, t0(), RUNNER_A, t0())?);
    let expired = old.lease_expires_at.unwrap();
    // The same runner id takes its own expired run again: a new claim.
    let new = claimed(store.claim_run(&lp, t0(), RUNNER_A, expired)?);
    assert_eq!(new.id, old.id);
    assert_eq!(new.attempt, old.attempt);
    assert_ne!(new.claim_token, old.claim_token, "a new claim, a new token");

    let late = expired.add_ms(10);
    let stale = Fence::of_claim(RUNNER_A, &old);
    assert_eq!(
        store.heartbeat_run_lease(&old.id, &stale, 60_000, late)?,
        None
    );
    let done = result(ExecutorStatus::Succeeded, late);
    let fenced = store.finalize_and_advance(&old.id, &done, &stale, late)?;
    assert!(!fenced.applied);
    assert_eq!(fenced.advance, Advance::FencedOut);
    assert_eq!(fenced.run, new, "the new claim's row is untouched");
    assert_eq!(store.finalize_run(&old.id, &done, Some(&stale), late)?, new);

    let current = Fence::of_claim(RUNNER_A, &new);
    assert!(
        store
            .heartbeat_run_lease(&new.id, &current, 60_000, late)?
            .is_some()
    );
    let landed = store.finalize_and_advance(&new.id, &done, &current, late)?;
    assert!(landed.applied);
    assert_eq!(landed.run.status, RunStatus::Succeeded);
    Ok(())
}

#[test]
fn another_hosts_expired_run_is_taken_only_after_the_grace() -> TestResult {
    let Some(db) = fresh_database("pg_runs::cross_host_takeover") else {
        return Ok(());
    };
    let alive = Alive::default();
    let here = open_url(db.url(), "a", "host-a", &alive)?;
    let there = open_url(db.url(), "b", "host-b", &Alive::default())?;
    let lp = here.create_loop(&every_minute("taken", Overlap::Skip), t0())?;
    let theirs = claimed(there.claim_run(&lp, t0(), RUNNER_B, t0())?);
    there.mark_run_pid(&theirs.id, ProcessRef::pid(77), Some(RUNNER_B), t0())?;
    // Host-a's probe would call pid 77 alive, but a pid from another host
    // means nothing here: only the lease and the grace count.
    alive.lock().unwrap().insert(77);
    let expired = theirs.lease_expires_at.unwrap();
    for now in [expired, expired.add_ms(GRACE_MS - 1)] {
        assert!(
            matches!(
                not_claimed(here.claim_run(&lp, t0(), RUNNER_A, now)?),
                NotClaimed::LeaseHeld(ref held) if held.id == theirs.id
            ),
            "taken at {now}"
        );
        assert!(here.recover_expired_run_leases(now)?.is_empty());
    }
    let after = expired.add_ms(GRACE_MS);
    let mine = claimed(here.claim_run(&lp, t0(), RUNNER_A, after)?);
    assert_eq!((mine.id, mine.attempt), (theirs.id, theirs.attempt));
    assert_eq!(mine.claimed_by.as_deref(), Some(RUNNER_A));
    // The stalled daemon's finalize is fenced out.
    let late = result(ExecutorStatus::Succeeded, after.add_ms(1));
    let fenced = there.finalize_and_advance(
        &theirs.id,
        &late,
        &Fence::of_claim(RUNNER_B, &theirs),
        after.add_ms(1),
    )?;
    assert!(!fenced.applied);

    // This host's own expired run, with its process dead, goes at once.
    let slot = t0().add_ms(60_000);
    let other = here.create_loop(&every_minute("local", Overlap::Allow), t0())?;
    let local = claimed(here.claim_run(&other, slot, RUNNER_A, slot)?);
    let expiry = local.lease_expires_at.unwrap();
    let recovered = here.recover_expired_run_leases(expiry)?;
    assert_eq!(recovered.len(), 1);
    assert_eq!(recovered[0].run.id, local.id);
    Ok(())
}

#[test]
fn recovery_after_the_grace_takes_another_hosts_run_once() -> TestResult {
    let Some(db) = fresh_database("pg_runs::cross_host_recovery") else {
        return Ok(());
    };
    let here = open(&db)?;
    let lp = here.create_loop(&every_minute("recovered", Overlap::Skip), t0())?;
    let theirs = claimed(here.claim_run(&lp, t0(), RUNNER_B, t0())?);
    let after = theirs.lease_expires_at.unwrap().add_ms(GRACE_MS);
    let recovered = here.recover_expired_run_leases(after)?;
    assert_eq!(recovered.len(), 1);
    assert_eq!(recovered[0].run.status, RunStatus::Abandoned);
    assert_eq!(recovered[0].run.claimed_by.as_deref(), Some(RUNNER_B));
    assert!(here.recover_expired_run_leases(after)?.is_empty());
    Ok(())
}

/// The runner id of `loops tick` (the original's), which names no host.
const TICK: &str = "manual-tick:4242";

// Issue 25, item 12.
#[test]
fn a_tick_run_of_this_host_is_judged_by_its_process_not_the_grace() -> TestResult {
    let Some(db) = fresh_database("pg_runs::tick_run_of_this_host") else {
        return Ok(());
    };
    let alive = Alive::default();
    let here = open_url(db.url(), "a", "host-a", &alive)?;
    let lp = here.create_loop(&every_minute("ticked", Overlap::Allow), t0())?;
    let run = claimed(here.claim_run(&lp, t0(), TICK, t0())?);
    assert_eq!(run.claimed_by.as_deref(), Some(TICK));
    assert_eq!(run.claimed_host.as_deref(), Some("host-a"));
    here.mark_run_pid(&run.id, ProcessRef::pid(4242), Some(TICK), t0())?;
    let expiry = run.lease_expires_at.unwrap();
    // The daemon wakes at the lease's expiry, not after a grace.
    assert_eq!(
        here.next_wake(t0(), RUNNER_A, &[])?.lease_expiry,
        Some(expiry)
    );

    // While its process lives, the run is left alone.
    alive.lock().unwrap().insert(4242);
    assert!(matches!(
        not_claimed(here.claim_run(&lp, t0(), RUNNER_A, expiry)?),
        NotClaimed::ProcessAlive(_)
    ));
    assert!(here.recover_expired_run_leases(expiry)?.is_empty());

    // Its process is dead: taken at the lease's expiry, with no grace.
    alive.lock().unwrap().clear();
    let mine = claimed(here.claim_run(&lp, t0(), RUNNER_A, expiry)?);
    assert_eq!((mine.id, mine.attempt), (run.id, run.attempt));
    assert_eq!(mine.claimed_by.as_deref(), Some(RUNNER_A));

    // And recovered at the lease's expiry by a sweep.
    let slot = t0().add_ms(60_000);
    let other = claimed(here.claim_run(&lp, slot, TICK, slot)?);
    let expiry = other.lease_expires_at.unwrap();
    let recovered = here.recover_expired_run_leases(expiry)?;
    assert_eq!(recovered.len(), 1);
    assert_eq!(recovered[0].run.id, other.id);
    assert_eq!(recovered[0].run.status, RunStatus::Abandoned);
    // The claimant is kept for the record, and so is its host.
    assert_eq!(recovered[0].run.claimed_by.as_deref(), Some(TICK));
    assert_eq!(recovered[0].run.claimed_host.as_deref(), Some("host-a"));
    Ok(())
}

// Issue 25, item 12.
#[test]
fn a_tick_run_of_another_host_or_of_no_recorded_host_waits_out_the_grace() -> TestResult {
    let Some(db) = fresh_database("pg_runs::tick_run_of_another_host") else {
        return Ok(());
    };
    let here = open_url(db.url(), "a", "host-a", &Alive::default())?;
    let there = open_url(db.url(), "b", "host-b", &Alive::default())?;
    let lp = here.create_loop(&every_minute("ticked", Overlap::Allow), t0())?;
    let theirs = claimed(there.claim_run(&lp, t0(), TICK, t0())?);
    assert_eq!(theirs.claimed_host.as_deref(), Some("host-b"));
    // A run claimed before the host was recorded (or by the original):
    // its runner id names no host, so it is another host's, as before.
    let slot = t0().add_ms(60_000);
    let legacy = claimed(here.claim_run(&lp, slot, TICK, t0())?);
    let mut raw = raw(&db);
    raw.execute(
        "UPDATE loop_runs SET claimed_host = NULL WHERE id = $1",
        &[&legacy.id.as_str()],
    )?;
    let expiry = theirs.lease_expires_at.unwrap();
    assert_eq!(legacy.lease_expires_at, Some(expiry));
    assert_eq!(
        here.next_wake(t0(), RUNNER_A, &[])?.lease_expiry,
        Some(expiry.add_ms(GRACE_MS))
    );
    for now in [expiry, expiry.add_ms(GRACE_MS - 1)] {
        for s in [t0(), slot] {
            assert!(
                matches!(
                    not_claimed(here.claim_run(&lp, s, RUNNER_A, now)?),
                    NotClaimed::LeaseHeld(_)
                ),
                "slot {s} taken at {now}"
            );
        }
        assert!(here.recover_expired_run_leases(now)?.is_empty());
    }
    let after = expiry.add_ms(GRACE_MS);
    let recovered = here.recover_expired_run_leases(after)?;
    let mut ids: Vec<RunId> = recovered.iter().map(|r| r.run.id).collect();
    ids.sort_by(|a, b| a.as_str().cmp(b.as_str()));
    let mut expected = vec![theirs.id, legacy.id];
    expected.sort_by(|a, b| a.as_str().cmp(b.as_str()));
    assert_eq!(ids, expected);
    Ok(())
}

/// The pid of the backend a store opened as `role` is connected to.
fn backend_pid(raw: &mut postgres::Client, db: &TestDatabase, role: &str) -> i32 {
    let name = format!("loops:{role}");
    let rows = raw
        .query(
            "SELECT pid FROM pg_stat_activity WHERE datname = $1 AND application_name = $2",
            &[&db.name(), &name],
        )
        .unwrap();
    assert_eq!(rows.len(), 1, "one connection as {name}");
    rows[0].get(0)
}

/// Waits until the backend `pid` waits on a lock.
fn wait_for_lock_wait(raw: &mut postgres::Client, pid: i32) {
    wait_until("a writer to wait on the row lock", || {
        raw.query_one(
            "SELECT wait_event_type IS NOT DISTINCT FROM 'Lock' FROM pg_stat_activity
             WHERE pid = $1",
            &[&pid],
        )
        .map(|r| r.get::<_, bool>(0))
        .unwrap_or(false)
    });
}

#[test]
fn a_takeover_that_loses_to_a_late_finish_leaves_the_finished_run_alone() -> TestResult {
    let Some(db) = fresh_database("pg_runs::late_finish_wins") else {
        return Ok(());
    };
    let store = open(&db)?;
    let lp = store.create_loop(&every_minute("late", Overlap::Skip), t0())?;
    let theirs = claimed(store.claim_run(&lp, t0(), RUNNER_B, t0())?);
    let after = theirs.lease_expires_at.unwrap().add_ms(GRACE_MS);

    // Host-b's finish is being written, not yet committed, when host-a
    // decides the run is its to take.
    let mut finisher = raw(&db);
    let mut tx = finisher.transaction()?;
    tx.execute(
        "UPDATE loop_runs SET status = 'succeeded', finished_at = lease_expires_at,
           lease_expires_at = NULL WHERE id = $1",
        &[&theirs.id.as_str()],
    )?;
    let thief = std::thread::spawn({
        let url = db.url().to_owned();
        let lp = lp.clone();
        move || {
            let store = open_url(&url, "thief", "host-a", &Alive::default()).unwrap();
            store.claim_run(&lp, t0(), RUNNER_A, after).unwrap()
        }
    });
    let mut watcher = raw(&db);
    wait_until("the thief to connect", || {
        watcher
            .query(
                "SELECT 1 FROM pg_stat_activity WHERE application_name = 'loops:thief'",
                &[],
            )
            .is_ok_and(|r| !r.is_empty())
    });
    let pid = backend_pid(&mut watcher, &db, "thief");
    wait_for_lock_wait(&mut watcher, pid);
    tx.commit()?;
    let outcome = thief.join().unwrap();
    assert_eq!(not_claimed(outcome), NotClaimed::Raced);
    let stored = store.get_run(&theirs.id)?.unwrap();
    assert_eq!(stored.status, RunStatus::Succeeded);
    assert_eq!(stored.claimed_by.as_deref(), Some(RUNNER_B));
    assert!(store.recover_expired_run_leases(after)?.is_empty());
    Ok(())
}

#[test]
fn two_stores_recovering_at_once_recover_each_run_once() -> TestResult {
    let Some(db) = fresh_database("pg_runs::concurrent_recovery") else {
        return Ok(());
    };
    const RUNS: usize = 40;
    let store = open(&db)?;
    let mut expected = HashSet::new();
    for i in 0..RUNS {
        let lp = store.create_loop(&every_minute(&format!("r{i}"), Overlap::Skip), t0())?;
        // Half on this host (its processes dead), half on another, past
        // its grace.
        let runner = if i % 2 == 0 { RUNNER_A } else { RUNNER_B };
        expected.insert(claimed(store.claim_run(&lp, t0(), runner, t0())?).id);
    }
    let now = t0().add_ms(30 * 60_000 + GRACE_MS);
    let barrier = Arc::new(Barrier::new(2));
    let handles: Vec<_> = (0..2)
        .map(|_| {
            let store = open_url(db.url(), "sweeper", "host-a", &Alive::default()).unwrap();
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                barrier.wait();
                store
                    .recover_expired_run_leases(now)
                    .unwrap()
                    .into_iter()
                    .map(|r| r.run.id)
                    .collect::<Vec<RunId>>()
            })
        })
        .collect();
    let mut seen = HashSet::new();
    for handle in handles {
        for id in handle.join().unwrap() {
            assert!(seen.insert(id), "run {id} was recovered twice");
        }
    }
    assert_eq!(seen, expected);
    assert_eq!(store.count_runs(Some(RunStatus::Abandoned))?, RUNS as u64);
    Ok(())
}

#[test]
fn a_claim_on_a_connection_killed_before_it_commits_claims_nothing_and_then_works() -> TestResult {
    let Some(db) = fresh_database("pg_runs::killed_before_commit") else {
        return Ok(());
    };
    let store = open_url(db.url(), "victim", "host-a", &Alive::default())?;
    let lp = store.create_loop(&every_minute("killed", Overlap::Skip), t0())?;
    let mut admin = raw(&db);
    let pid = backend_pid(&mut admin, &db, "victim");
    admin.execute("SELECT pg_terminate_backend($1)", &[&pid])?;
    wait_until("the backend to end", || {
        admin
            .query("SELECT 1 FROM pg_stat_activity WHERE pid = $1", &[&pid])
            .is_ok_and(|r| r.is_empty())
    });
    // The transaction died with its connection before anything was
    // written: the re-read finds no claim of this call.
    let outcome = store.claim_run(&lp, t0(), RUNNER_A, t0())?;
    assert_eq!(not_claimed(outcome), NotClaimed::Raced);
    assert_eq!(store.count_runs(None)?, 0);
    let run = claimed(store.claim_run(&lp, t0(), RUNNER_A, t0())?);

    // A finalize cut off the same way is reported, not guessed: the run is
    // still running, so the error says to try again.
    let pid = backend_pid(&mut admin, &db, "victim");
    admin.execute("SELECT pg_terminate_backend($1)", &[&pid])?;
    wait_until("the backend to end", || {
        admin
            .query("SELECT 1 FROM pg_stat_activity WHERE pid = $1", &[&pid])
            .is_ok_and(|r| r.is_empty())
    });
    let done = result(ExecutorStatus::Succeeded, t0().add_ms(5));
    let fence = Fence::of_claim(RUNNER_A, &run);
    let err = store
        .finalize_and_advance(&run.id, &done, &fence, t0().add_ms(5))
        .expect_err("the finalize's transaction was lost");
    assert!(err.is_transient(), "{err}");
    let landed = store.finalize_and_advance(&run.id, &done, &fence, t0().add_ms(5))?;
    assert!(landed.applied);
    Ok(())
}

/// A proxy in front of the test server's Unix socket that, once armed,
/// lets the next `COMMIT` through to the server and closes the client's
/// connection as the answer comes back: the transaction is committed, and
/// the client cannot know it.
struct CommitCutter {
    dir: tempfile::TempDir,
    port: u16,
    armed: Arc<AtomicBool>,
}

/// A `COMMIT` sent as a simple query: `Q`, its length, the text.
const COMMIT_QUERY: &[u8] = b"Q\0\0\0\x0bCOMMIT\0";

impl CommitCutter {
    /// Starts the proxy, or `None` when the server is not on a Unix socket.
    fn start() -> Option<CommitCutter> {
        let url = std::env::var(loops_store::testing::TEST_DATABASE_URL).ok()?;
        let config: postgres::Config = url.parse().ok()?;
        let socket_dir = config.get_hosts().iter().find_map(|h| match h {
            postgres::config::Host::Unix(dir) => Some(dir.clone()),
            _ => None,
        })?;
        let port = config.get_ports().first().copied().unwrap_or(5432);
        let server: PathBuf = socket_dir.join(format!(".s.PGSQL.{port}"));
        let dir = tempfile::tempdir().ok()?;
        let listener = UnixListener::bind(dir.path().join(format!(".s.PGSQL.{port}"))).ok()?;
        let armed = Arc::new(AtomicBool::new(false));
        let armed_for_proxy = Arc::clone(&armed);
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                let Ok(upstream) = UnixStream::connect(&server) else {
                    return;
                };
                relay(client, upstream, Arc::clone(&armed_for_proxy));
            }
        });
        Some(CommitCutter { dir, port, armed })
    }

    /// A connection string to database `dbname` through the proxy.
    fn url(&self, dbname: &str) -> String {
        let user = std::env::var(loops_store::testing::TEST_DATABASE_URL)
            .ok()
            .and_then(|u| u.parse::<postgres::Config>().ok())
            .and_then(|c| c.get_user().map(str::to_owned))
            .unwrap_or_else(|| "postgres".to_owned());
        format!(
            "host={} port={} user={user} dbname={dbname}",
            self.dir.path().display(),
            self.port
        )
    }

    /// Cuts the connection that sends the next `COMMIT`.
    fn arm(&self) {
        self.armed.store(true, Ordering::SeqCst);
    }
}

/// Copies bytes both ways between a client and the server, cutting the
/// client off after an armed `COMMIT` went through (see [`CommitCutter`]).
fn relay(client: UnixStream, server: UnixStream, armed: Arc<AtomicBool>) {
    let cut = Arc::new(AtomicBool::new(false));
    let (mut from_client, mut to_server) =
        (client.try_clone().unwrap(), server.try_clone().unwrap());
    let cut_up = Arc::clone(&cut);
    std::thread::spawn(move || {
        let mut buf = [0u8; 65536];
        loop {
            let n = match from_client.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            let chunk = &buf[..n];
            // The client waits for each answer before it sends a COMMIT,
            // so whatever the server sends after this point answers it.
            if chunk.windows(COMMIT_QUERY.len()).any(|w| w == COMMIT_QUERY)
                && armed.swap(false, Ordering::SeqCst)
            {
                cut_up.store(true, Ordering::SeqCst);
            }
            if to_server.write_all(chunk).is_err() {
                break;
            }
        }
        let _ = to_server.shutdown(std::net::Shutdown::Both);
    });
    let (mut from_server, mut to_client) = (server, client);
    std::thread::spawn(move || {
        let mut buf = [0u8; 65536];
        loop {
            let n = match from_server.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            if cut.load(Ordering::SeqCst) {
                // The server answered the COMMIT, so it landed.
                break;
            }
            if to_client.write_all(&buf[..n]).is_err() {
                break;
            }
        }
        let _ = to_client.shutdown(std::net::Shutdown::Both);
        let _ = from_server.shutdown(std::net::Shutdown::Both);
    });
}

#[test]
fn writes_whose_commit_landed_unseen_are_recognized_not_replayed() -> TestResult {
    let Some(db) = fresh_database("pg_runs::commit_landed_unseen") else {
        return Ok(());
    };
    let Some(cutter) = CommitCutter::start() else {
        eprintln!("skipped: the test server is not on a Unix socket");
        return Ok(());
    };
    let store = open_url(&cutter.url(db.name()), "cut", "host-a", &Alive::default())?;
    // A create: the loop exists, so it is returned rather than an error
    // that would have the user create it a second time.
    cutter.arm();
    let lp = store.create_loop(&every_minute("unseen", Overlap::Skip), t0())?;
    assert!(!cutter.armed.load(Ordering::SeqCst), "the COMMIT was cut");
    assert_eq!(store.get_loop(&lp.id)?.as_ref(), Some(&lp));
    let other = store.create_loop(&every_minute("unseen-2", Overlap::Skip), t0())?;

    // A claim: replayed blindly it would find its own run and report the
    // slot held; recognized by its token it is reported claimed.
    cutter.arm();
    let claims = store.claim_runs(&[(&lp, t0()), (&other, t0())], RUNNER_A, t0())?;
    let runs: Vec<LoopRun> = claims.into_iter().map(claimed).collect();
    assert_eq!(store.get_run(&runs[0].id)?.as_ref(), Some(&runs[0]));
    assert!(!cutter.armed.load(Ordering::SeqCst), "the COMMIT was cut");

    // A finalize-and-advance: the result is stored under this claim, so it
    // is reported applied; what the advance decided was lost.
    let done = result(ExecutorStatus::Succeeded, t0().add_ms(5));
    cutter.arm();
    let finalized = store.finalize_and_advance(
        &runs[0].id,
        &done,
        &Fence::of_claim(RUNNER_A, &runs[0]),
        t0().add_ms(5),
    )?;
    assert!(finalized.applied);
    assert_eq!(finalized.advance, Advance::Unconfirmed);
    assert_eq!(finalized.run.status, RunStatus::Succeeded);
    let stored_loop = store.get_loop(&lp.id)?;
    assert_eq!(finalized.loop_, stored_loop);
    assert_eq!(
        stored_loop.and_then(|l| l.next_run_at),
        Some(t0().add_ms(60_000)),
        "the advance committed with the finalize"
    );

    // A plain finalize.
    cutter.arm();
    let stored = store.finalize_run(
        &runs[1].id,
        &done,
        Some(&Fence::of_claim(RUNNER_A, &runs[1])),
        t0().add_ms(5),
    )?;
    assert_eq!(stored.status, RunStatus::Succeeded);
    assert_eq!(stored.finished_at, Some(done.finished_at));
    Ok(())
}

#[test]
fn what_other_daemons_must_see_at_once_wakes_them_at_commit() -> TestResult {
    let Some(db) = fresh_database("pg_runs::wake_ups") else {
        return Ok(());
    };
    let mut listener = raw(&db);
    listener.batch_execute("LISTEN loops_wake")?;
    let store = open(&db)?;
    // Collects the payloads delivered so far, waiting up to a deadline for
    // `want` of them.
    let mut heard = |want: usize| -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut got = Vec::new();
        while got.len() < want && Instant::now() < deadline {
            let mut notes = listener.notifications();
            let mut it = notes.timeout_iter(Duration::from_millis(100));
            while let Ok(Some(n)) = postgres::fallible_iterator::FallibleIterator::next(&mut it) {
                got.push(n.payload().to_owned());
            }
        }
        got
    };
    let lp = store.create_loop(&every_minute("woken", Overlap::Skip), t0())?;
    assert_eq!(heard(1), [lp.id.as_str()]);
    let slot = lp.next_run_at.unwrap();
    let run = claimed(store.claim_run(&lp, slot, RUNNER_A, slot)?);
    let done = result(ExecutorStatus::Succeeded, slot.add_ms(10));
    store.finalize_and_advance(
        &run.id,
        &done,
        &Fence::of_claim(RUNNER_A, &run),
        slot.add_ms(10),
    )?;
    // The finalize woke the listeners, with the loop's id.
    assert_eq!(heard(1), [lp.id.as_str()]);
    // A pause and a resume each wake them: dashboards show both (issue
    // 29), and a resume changes what is due.
    store.pause_loop(&lp.id, slot)?;
    assert_eq!(heard(1), [lp.id.as_str()]);
    store.resume_loop(&lp.id, slot)?;
    assert_eq!(heard(1), [lp.id.as_str()]);
    // So do a stop and a removal.
    store.stop_loop(&lp.id, slot)?;
    assert_eq!(heard(1), [lp.id.as_str()]);
    store.delete_loop(&lp.id, DeleteHistory::Keep)?;
    assert_eq!(heard(1), [lp.id.as_str()]);
    Ok(())
}

/// `pg` with the ids and claim token of `sq`, so that two stores' records
/// of the same calls compare equal when everything else is the same.
fn as_run(pg: &LoopRun, sq: &LoopRun) -> LoopRun {
    assert_eq!(pg.claim_token.is_some(), sq.claim_token.is_some());
    // A fingerprint hashes the loop's id, which differs between the two.
    assert_eq!(
        pg.facts.failure_fingerprint.is_some(),
        sq.facts.failure_fingerprint.is_some()
    );
    let mut facts = pg.facts.clone();
    facts.failure_fingerprint = sq.facts.failure_fingerprint.clone();
    LoopRun {
        id: sq.id,
        loop_id: sq.loop_id,
        claim_token: sq.claim_token.clone(),
        facts,
        ..pg.clone()
    }
}

fn as_loop(pg: &Loop, sq: &Loop) -> Loop {
    Loop {
        id: sq.id,
        ..pg.clone()
    }
}

fn same_runs(pg: &[LoopRun], sq: &[LoopRun]) {
    assert_eq!(pg.len(), sq.len(), "{pg:#?}\n{sq:#?}");
    for (p, s) in pg.iter().zip(sq) {
        assert_eq!(&as_run(p, s), s);
    }
}

fn same_loops(pg: &[Loop], sq: &[Loop]) {
    assert_eq!(pg.len(), sq.len(), "{pg:#?}\n{sq:#?}");
    for (p, s) in pg.iter().zip(sq) {
        assert_eq!(&as_loop(p, s), s);
    }
}

/// A PostgreSQL store and an in-memory SQLite store fed the same calls.
struct Both {
    pg: Store,
    sq: Store,
    /// The PostgreSQL loop created with each SQLite loop, by its id.
    ids: HashMap<String, Loop>,
}

impl Both {
    /// The PostgreSQL loop created together with `sq`.
    fn pg_loop(&self, sq: &Loop) -> Loop {
        self.ids[sq.id.as_str()].clone()
    }
}

#[test]
fn the_everyday_operations_store_what_sqlite_stores() -> TestResult {
    use loops_core::LoopStatus;
    use loops_store::{
        DeleteHistory, DeleteOutcome, LoopChange, LoopFilter, RunFilter, SkipOutcome,
    };
    let Some(db) = fresh_database("pg_runs::same_as_sqlite") else {
        return Ok(());
    };
    let mut both = Both {
        pg: open(&db)?,
        sq: Store::open_in_memory(Arc::new(|_| false))?.with_host("host-a"),
        ids: HashMap::new(),
    };
    // Loops with distinct next runs, so every listing has one order.
    let mut news = vec![
        every_minute("minutely", Overlap::Skip),
        NewLoop::new(
            "once",
            Schedule::Once {
                at: t0().add_ms(300_000),
            },
            Target::Command(CommandTarget::new("true")),
        ),
    ];
    let mut flaky = every_minute("flaky", Overlap::Allow);
    flaky.schedule = Schedule::Interval {
        every_ms: 90_000,
        anchor: None,
    };
    flaky.max_attempts = 2;
    flaky.retry_delay_ms = 5_000;
    news.push(flaky);
    let mut brief = every_minute("brief", Overlap::Skip);
    brief.schedule = Schedule::Interval {
        every_ms: 45_000,
        anchor: None,
    };
    brief.expires_at = Some(t0().add_ms(600_000));
    news.push(brief);
    let mut sq_loops = Vec::new();
    for (i, new) in news.iter().enumerate() {
        let at = t0().add_ms(i as i64);
        let p = both.pg.create_loop(new, at)?;
        let s = both.sq.create_loop(new, at)?;
        assert_eq!(as_loop(&p, &s), s);
        both.ids.insert(s.id.as_str().to_owned(), p);
        sq_loops.push(s);
    }
    let [minutely, once, flaky, brief] = <[Loop; 4]>::try_from(sq_loops).unwrap();

    for filter in [
        LoopFilter::default(),
        LoopFilter {
            status: Some(LoopStatus::Active),
            limit: Some(3),
            offset: None,
        },
    ] {
        same_loops(&both.pg.list_loops(&filter)?, &both.sq.list_loops(&filter)?);
    }
    let later = t0().add_ms(120_000);
    same_loops(
        &both.pg.due_loops(later, 10)?,
        &both.sq.due_loops(later, 10)?,
    );
    assert_eq!(both.pg.require_loop("flaky")?.id, both.pg_loop(&flaky).id);

    // A success advances, a failure schedules its retry, the retry is
    // attempt 2, a skip advances as a success.
    let runner = RUNNER_A;
    let slot = minutely.next_run_at.unwrap();
    let p = claimed(
        both.pg
            .claim_run(&both.pg_loop(&minutely), slot, runner, slot)?,
    );
    let s = claimed(both.sq.claim_run(&minutely, slot, runner, slot)?);
    assert_eq!(as_run(&p, &s), s);
    let beat = slot.add_ms(1_000);
    let ph = both
        .pg
        .heartbeat_run_lease(&p.id, &Fence::of_claim(runner, &p), 60_000, beat)?;
    let sh = both
        .sq
        .heartbeat_run_lease(&s.id, &Fence::of_claim(runner, &s), 60_000, beat)?;
    same_runs(
        &ph.into_iter().collect::<Vec<_>>(),
        &sh.into_iter().collect::<Vec<_>>(),
    );
    let done = result(ExecutorStatus::Succeeded, slot.add_ms(2_000));
    let pf = both.pg.finalize_and_advance(
        &p.id,
        &done,
        &Fence::of_claim(runner, &p),
        done.finished_at,
    )?;
    let sf = both.sq.finalize_and_advance(
        &s.id,
        &done,
        &Fence::of_claim(runner, &s),
        done.finished_at,
    )?;
    assert_eq!(as_run(&pf.run, &sf.run), sf.run);
    assert_eq!((pf.applied, &pf.advance), (sf.applied, &sf.advance));
    assert_eq!(
        as_loop(pf.loop_.as_ref().unwrap(), sf.loop_.as_ref().unwrap()),
        sf.loop_.unwrap()
    );

    let fslot = flaky.next_run_at.unwrap();
    let p = claimed(
        both.pg
            .claim_run(&both.pg_loop(&flaky), fslot, runner, fslot)?,
    );
    let s = claimed(both.sq.claim_run(&flaky, fslot, runner, fslot)?);
    let failed = result(ExecutorStatus::Failed, fslot.add_ms(3_000));
    let pf = both.pg.finalize_and_advance(
        &p.id,
        &failed,
        &Fence::of_claim(runner, &p),
        failed.finished_at,
    )?;
    let sf = both.sq.finalize_and_advance(
        &s.id,
        &failed,
        &Fence::of_claim(runner, &s),
        failed.finished_at,
    )?;
    assert_eq!(as_run(&pf.run, &sf.run), sf.run);
    assert_eq!(pf.advance, sf.advance);
    let retry_at = sf.loop_.as_ref().unwrap().next_run_at.unwrap();
    let p = claimed(
        both.pg
            .claim_run(&both.pg_loop(&flaky), fslot, runner, retry_at)?,
    );
    let s = claimed(both.sq.claim_run(&flaky, fslot, runner, retry_at)?);
    assert_eq!(as_run(&p, &s), s);
    assert_eq!(s.attempt, 2);

    let next = minutely.next_run_at.unwrap().add_ms(60_000);
    let reason = loops_store::OVERLAP_SKIP_REASON;
    match (
        both.pg
            .create_skipped_run_and_advance(&both.pg_loop(&minutely), next, reason, next)?,
        both.sq
            .create_skipped_run_and_advance(&minutely, next, reason, next)?,
    ) {
        (
            SkipOutcome::Skipped {
                run: pr,
                loop_: pl,
                advance: pa,
            },
            SkipOutcome::Skipped {
                run: sr,
                loop_: sl,
                advance: sa,
            },
        ) => {
            assert_eq!(as_run(&pr, &sr), sr);
            assert_eq!(as_loop(&pl.unwrap(), sl.as_ref().unwrap()), sl.unwrap());
            assert_eq!(pa, sa);
        }
        other => panic!("{other:?}"),
    }

    // Status changes, each compared with its outcome.
    let at = t0().add_ms(400_000);
    let change = |p: LoopChange, s: LoopChange| match (&p, &s) {
        (LoopChange::Changed(pl), LoopChange::Changed(sl))
        | (LoopChange::Already(pl), LoopChange::Already(sl)) => assert_eq!(&as_loop(pl, sl), sl),
        (
            LoopChange::Refused {
                loop_: pl,
                reason: pr,
            },
            LoopChange::Refused {
                loop_: sl,
                reason: sr,
            },
        ) => {
            assert_eq!(&as_loop(pl, sl), sl);
            assert_eq!(pr, sr);
        }
        _ => panic!("{p:?} / {s:?}"),
    };
    let pm = both.pg_loop(&minutely).id;
    let po = both.pg_loop(&once).id;
    change(
        both.pg.pause_loop(&pm, at)?,
        both.sq.pause_loop(&minutely.id, at)?,
    );
    change(
        both.pg.pause_loop(&pm, at)?,
        both.sq.pause_loop(&minutely.id, at)?,
    );
    change(
        both.pg.resume_loop(&pm, at)?,
        both.sq.resume_loop(&minutely.id, at)?,
    );
    change(
        both.pg.stop_loop(&po, at)?,
        both.sq.stop_loop(&once.id, at)?,
    );
    change(
        both.pg.pause_loop(&po, at)?,
        both.sq.pause_loop(&once.id, at)?,
    );
    change(
        both.pg.resume_loop(&po, at)?,
        both.sq.resume_loop(&once.id, at)?,
    );
    let gone = t0().add_ms(700_000);
    same_loops(&both.pg.expire_loops(gone)?, &both.sq.expire_loops(gone)?);
    change(
        both.pg.resume_loop(&both.pg_loop(&brief).id, gone)?,
        both.sq.resume_loop(&brief.id, gone)?,
    );

    for status in [None, Some(LoopStatus::Active), Some(LoopStatus::Expired)] {
        assert_eq!(both.pg.count_loops(status)?, both.sq.count_loops(status)?);
    }
    for status in [None, Some(RunStatus::Running), Some(RunStatus::Skipped)] {
        assert_eq!(both.pg.count_runs(status)?, both.sq.count_runs(status)?);
    }
    assert!(!both.pg.recount_statuses()?);
    let pf = both.pg_loop(&flaky).id;
    for (pfilter, sfilter) in [
        (RunFilter::default(), RunFilter::default()),
        (
            RunFilter {
                loop_id: Some(pm),
                ..RunFilter::default()
            },
            RunFilter {
                loop_id: Some(minutely.id),
                ..RunFilter::default()
            },
        ),
        (
            RunFilter {
                status: Some(RunStatus::Running),
                ..RunFilter::default()
            },
            RunFilter {
                status: Some(RunStatus::Running),
                ..RunFilter::default()
            },
        ),
        (
            RunFilter {
                loop_id: Some(pf),
                status: Some(RunStatus::Running),
                limit: Some(1),
                offset: None,
            },
            RunFilter {
                loop_id: Some(flaky.id),
                status: Some(RunStatus::Running),
                limit: Some(1),
                offset: None,
            },
        ),
    ] {
        same_runs(&both.pg.list_runs(&pfilter)?, &both.sq.list_runs(&sfilter)?);
    }

    // Deleting keeps or purges the history the same way.
    assert_eq!(
        both.pg.delete_loop(&pm, DeleteHistory::Keep)?,
        both.sq.delete_loop(&minutely.id, DeleteHistory::Keep)?
    );
    assert_eq!(
        both.pg.delete_loop(&pf, DeleteHistory::Purge)?,
        both.sq.delete_loop(&flaky.id, DeleteHistory::Purge)?
    );
    assert_eq!(
        both.pg.delete_loop(&pf, DeleteHistory::Purge)?,
        DeleteOutcome::NotFound
    );
    assert_eq!(both.pg.count_runs(None)?, both.sq.count_runs(None)?);
    assert!(!both.pg.recount_statuses()?);
    Ok(())
}

#[test]
fn a_drifted_count_is_found_and_rewritten() -> TestResult {
    let Some(db) = fresh_database("pg_runs::recount") else {
        return Ok(());
    };
    let store = open(&db)?;
    let lp = store.create_loop(&every_minute("counted", Overlap::Skip), t0())?;
    claimed(store.claim_run(&lp, t0(), RUNNER_A, t0())?);
    raw(&db).execute(
        "UPDATE status_counts SET n = n + 5 WHERE tbl = 'loop_runs'",
        &[],
    )?;
    assert_eq!(store.count_runs(None)?, 6);
    assert!(store.recount_statuses()?);
    assert_eq!(store.count_runs(None)?, 1);
    assert_eq!(store.count_loops(None)?, 1);
    assert!(!store.recount_statuses()?);
    Ok(())
}

/// The store's errors stay typed: a lookup of a missing loop names it.
#[test]
fn a_missing_loop_is_not_found() -> TestResult {
    let Some(db) = fresh_database("pg_runs::missing_loop") else {
        return Ok(());
    };
    let store = open(&db)?;
    let err = store.require_loop("nope").unwrap_err();
    assert!(
        matches!(err, StoreError::NotFound { kind: "loop", .. }),
        "{err}"
    );
    assert_eq!(err.to_string(), "loop not found: nope");
    Ok(())
}
