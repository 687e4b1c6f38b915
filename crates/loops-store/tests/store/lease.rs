//! The daemon lease (SPEC §4.3 "Daemon lease", §10 item 31, SPEC §9 item
//! 16).

use loops_core::{LeaseId, ProcessRef};
use loops_store::{LeaseAcquire, LeaseHeartbeat, LeaseRelease, LeaseRequest};

use crate::common::*;

fn request(id: &str, pid: u32, host: &str) -> LeaseRequest {
    LeaseRequest {
        id: LeaseId::parse(id).unwrap(),
        pid,
        hostname: host.into(),
        ttl_ms: 60_000,
    }
}

fn acquired(a: LeaseAcquire) -> loops_core::DaemonLease {
    match a {
        LeaseAcquire::Acquired(l) => l,
        LeaseAcquire::Held(l) => panic!("held by {l:?}"),
    }
}

// SPEC §10 item 31 (acquire after expiry, the old holder loses)
#[test]
fn another_id_acquires_only_after_expiry_and_the_old_holder_loses() {
    sqlite_only!(
        "one daemon lease for the whole database; on PostgreSQL each daemon registers in `daemons` and acquiring never refuses (tests/pg_workflows/members.rs)"
    );
    let fx = Fixture::new();
    let store = fx.store();
    let a = request("aaaaaaaaaaaa", 10, "host-a");
    let b = request("bbbbbbbbbbbb", 20, "host-b");
    fx.set_alive(ProcessRef::pid(10));
    let lease = acquired(store.acquire_daemon_lease(&a, t0()).unwrap());
    assert_eq!(lease.expires_at, t0().add_ms(60_000));
    assert_eq!(lease.heartbeat_at, t0());
    assert_eq!(store.get_daemon_lease().unwrap(), Some(lease.clone()));

    let before_expiry = t0().add_ms(59_999);
    assert_eq!(
        store.acquire_daemon_lease(&b, before_expiry).unwrap(),
        LeaseAcquire::Held(lease)
    );
    let at_expiry = t0().add_ms(60_000);
    let taken = acquired(fx.store().acquire_daemon_lease(&b, at_expiry).unwrap());
    assert_eq!(taken.id, b.id);
    assert_eq!(
        store
            .heartbeat_daemon_lease(&a.id, 60_000, at_expiry)
            .unwrap(),
        LeaseHeartbeat::Lost
    );
    assert_eq!(
        store.release_daemon_lease(&a.id).unwrap(),
        LeaseRelease::NotHeld
    );
    assert_eq!(store.get_daemon_lease().unwrap(), Some(taken));
}

#[test]
fn heartbeat_extends_and_release_deletes() {
    let fx = Fixture::new();
    let store = fx.store();
    let a = request("aaaaaaaaaaaa", 10, "host-a");
    acquired(store.acquire_daemon_lease(&a, t0()).unwrap());
    let later = t0().add_ms(30_000);
    let LeaseHeartbeat::Renewed(l) = store.heartbeat_daemon_lease(&a.id, 60_000, later).unwrap()
    else {
        panic!("lost");
    };
    assert_eq!(
        (l.heartbeat_at, l.expires_at),
        (later, later.add_ms(60_000))
    );
    assert_eq!(l.created_at, t0());
    assert_eq!(
        store.release_daemon_lease(&a.id).unwrap(),
        LeaseRelease::Released
    );
    assert_eq!(store.get_daemon_lease().unwrap(), None);
}

// SPEC §10 item 31 (the same id re-acquires)
#[test]
fn the_same_id_may_reacquire() {
    let fx = Fixture::new();
    let store = fx.store();
    let a = request("aaaaaaaaaaaa", 10, "host-a");
    fx.set_alive(ProcessRef::pid(10));
    acquired(store.acquire_daemon_lease(&a, t0()).unwrap());
    let again = acquired(store.acquire_daemon_lease(&a, t0().add_ms(1000)).unwrap());
    assert_eq!(again.expires_at, t0().add_ms(61_000));
}

#[test]
fn a_dead_holder_on_the_same_host_is_taken_over_at_once() {
    // SPEC §9 item 16: a crashed daemon no longer blocks a restart.
    let fx = Fixture::new();
    let store = fx.store();
    acquired(
        store
            .acquire_daemon_lease(&request("aaaaaaaaaaaa", 10, "host-a"), t0())
            .unwrap(),
    );
    let b = request("bbbbbbbbbbbb", 20, "host-a");
    let taken = acquired(store.acquire_daemon_lease(&b, t0().add_ms(1)).unwrap());
    assert_eq!(taken.id, b.id);
}

#[test]
fn a_live_holder_on_the_same_host_or_any_holder_elsewhere_is_respected() {
    sqlite_only!(
        "one daemon lease for the whole database; on PostgreSQL each daemon registers in `daemons` and acquiring never refuses (tests/pg_workflows/members.rs)"
    );
    let fx = Fixture::new();
    let store = fx.store();
    fx.set_alive(ProcessRef::pid(10));
    let held = acquired(
        store
            .acquire_daemon_lease(&request("aaaaaaaaaaaa", 10, "host-a"), t0())
            .unwrap(),
    );
    let same_host = request("bbbbbbbbbbbb", 20, "host-a");
    assert_eq!(
        store.acquire_daemon_lease(&same_host, t0()).unwrap(),
        LeaseAcquire::Held(held.clone())
    );
    // On another host the holder's pid means nothing here, dead or alive.
    fx.alive.lock().unwrap().clear();
    let elsewhere = request("cccccccccccc", 30, "host-b");
    assert_eq!(
        store.acquire_daemon_lease(&elsewhere, t0()).unwrap(),
        LeaseAcquire::Held(held)
    );
}
