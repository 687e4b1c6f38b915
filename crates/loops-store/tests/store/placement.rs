//! Placement (issue 30, `docs/triggers.md` P1, P2, P4–P6): a claim is
//! refused by a runner that lacks a label of the loop's `runsOn` and
//! writes nothing; a matching runner claims; a manual claim may bend the
//! rule; a daemon's labels are stored at registration and listed; expired
//! leases of a placed loop are recovered only where it may run.

use loops_core::{LeaseId, Loop, ProcessRef, RunStatus};
use loops_store::{Claim, LeaseAcquire, LeaseRequest, ManualClaim, NotClaimed, Store};

use crate::common::*;

fn labels(values: &[&str]) -> Vec<String> {
    values.iter().map(|s| (*s).to_owned()).collect()
}

/// An interval loop placed on `runs_on`.
fn placed(store: &Store, name: &str, runs_on: &[&str]) -> Loop {
    let mut new = interval_loop(name);
    new.policy.runs_on = labels(runs_on);
    store.create_loop(&new, t0()).unwrap()
}

fn not_placed(c: Claim) -> Vec<String> {
    match c {
        Claim::NotClaimed(NotClaimed::NotPlacedHere(missing)) => missing,
        other => panic!("expected NotPlacedHere, got {other:?}"),
    }
}

fn claimed(c: Claim) -> loops_core::LoopRun {
    match c {
        Claim::Claimed { run, .. } => run,
        other => panic!("expected a claim, got {other:?}"),
    }
}

#[test]
fn a_runner_without_the_labels_is_refused_and_writes_nothing() {
    let fx = Fixture::new();
    let store = fx.store().with_labels(&labels(&["arm"]));
    let lp = placed(&store, "gpu-job", &["gpu", "host:host-a"]);
    assert_eq!(store.labels(), labels(&["host:host-a", "arm"]));
    let missing = not_placed(store.claim_run(&lp, t0(), RUNNER_A, t0()).unwrap());
    assert_eq!(missing, ["gpu"]);
    assert_eq!(store.count_runs(None).unwrap(), 0, "nothing was written");
    assert_eq!(store.get_run_by_slot(&lp.id, t0()).unwrap(), None);
    // A manual claim is refused the same way unless it bends the rule.
    let missing = not_placed(
        store
            .claim_manual_run(&lp, t0(), RUNNER_A, t0(), ManualClaim::default())
            .unwrap(),
    );
    assert_eq!(missing, ["gpu"]);
    assert_eq!(store.count_runs(None).unwrap(), 0);
}

#[test]
fn a_matching_runner_claims_and_one_carrying_any_claims_everything() {
    let fx = Fixture::new();
    let gpu = fx.store().with_labels(&labels(&["gpu"]));
    let lp = placed(&gpu, "gpu-job", &["gpu", "host:host-a"]);
    let run = claimed(gpu.claim_run(&lp, t0(), RUNNER_A, t0()).unwrap());
    assert_eq!(run.status, RunStatus::Running);
    let other = placed(&gpu, "elsewhere", &["host:host-z"]);
    let anywhere = fx
        .store()
        .with_labels(&labels(&[loops_core::ANY_PLACEMENT]));
    claimed(anywhere.claim_run(&other, t0(), RUNNER_A, t0()).unwrap());
}

#[test]
fn a_batch_claims_the_loops_it_matches_and_refuses_the_others() {
    let fx = Fixture::new();
    let store = fx.store();
    let free = create(&store, "free", 1);
    let here = placed(&store, "here", &["host:host-a"]);
    let there = placed(&store, "there", &["host:host-b"]);
    let claims = store
        .claim_runs(
            &[(&free, t0()), (&there, t0()), (&here, t0())],
            RUNNER_A,
            t0(),
        )
        .unwrap();
    let mut claims = claims.into_iter();
    assert_eq!(claimed(claims.next().unwrap()).loop_id, free.id);
    assert_eq!(not_placed(claims.next().unwrap()), ["host:host-b"]);
    assert_eq!(claimed(claims.next().unwrap()).loop_id, here.id);
    assert_eq!(store.count_runs(None).unwrap(), 2);
    assert_eq!(store.get_run_by_slot(&there.id, t0()).unwrap(), None);
}

#[test]
fn a_manual_claim_anywhere_runs_a_loop_placed_elsewhere() {
    let fx = Fixture::new();
    let store = fx.store();
    let lp = placed(&store, "there", &["host:host-b", "gpu"]);
    let how = ManualClaim {
        anywhere: true,
        ignore_pool: false,
    };
    let run = claimed(
        store
            .claim_manual_run(&lp, t0(), RUNNER_A, t0(), how)
            .unwrap(),
    );
    assert_eq!(run.loop_id, lp.id);
    assert_eq!(store.count_runs(None).unwrap(), 1);
}

fn register(store: &Store, id: &str, pid: u32, host: &str) {
    let req = LeaseRequest {
        id: LeaseId::parse(id).unwrap(),
        pid,
        hostname: host.into(),
        ttl_ms: 60_000,
    };
    match store.acquire_daemon_lease(&req, t0()).unwrap() {
        LeaseAcquire::Acquired(_) => {}
        LeaseAcquire::Held(l) => panic!("held by {l:?}"),
    }
}

#[test]
fn a_daemons_labels_are_stored_at_registration_and_listed() {
    let fx = Fixture::new();
    let store = fx.store().with_labels(&labels(&["gpu", "zone=eu"]));
    register(&store, "aaaaaaaaaaaa", 10, "host-a");
    // Read by another handle, which carries no labels of its own.
    let members = fx.store().list_daemons(t0().add_ms(1000)).unwrap();
    assert_eq!(members.len(), 1);
    assert_eq!(members[0].labels, ["host:host-a", "gpu", "zone=eu"]);
    assert!(members[0].live);
    let json = serde_json::to_value(&members[0]).unwrap();
    assert_eq!(
        json["labels"],
        serde_json::json!(["host:host-a", "gpu", "zone=eu"])
    );
    // A store without extra labels registers its host label alone.
    fx.store().release_daemon_lease(&members[0].id).unwrap();
    register(&fx.store(), "bbbbbbbbbbbb", 20, "host-a");
    let members = fx.store().list_daemons(t0()).unwrap();
    assert_eq!(members.len(), 1);
    assert_eq!(members[0].labels, ["host:host-a"]);
}

#[test]
fn an_expired_run_of_a_placed_loop_is_recovered_only_where_it_may_run() {
    let fx = Fixture::new();
    let gpu = fx.store().with_labels(&labels(&["gpu"]));
    let lp = placed(&gpu, "gpu-job", &["gpu"]);
    let run = claimed(gpu.claim_run(&lp, t0(), RUNNER_A, t0()).unwrap());
    gpu.mark_run_pid(&run.id, ProcessRef::pid(11), None, t0())
        .unwrap();
    let now = run.lease_expires_at.unwrap();
    // A runner without `gpu` leaves it running: it could not run it again.
    let plain = fx.store();
    assert!(plain.recover_expired_run_leases(now).unwrap().is_empty());
    assert_eq!(
        plain.get_run(&run.id).unwrap().unwrap().status,
        RunStatus::Running
    );
    let recovered = gpu.recover_expired_run_leases(now).unwrap();
    assert_eq!(recovered.len(), 1);
    assert_eq!(recovered[0].run.id, run.id);
    assert_eq!(recovered[0].run.status, RunStatus::Abandoned);
}
