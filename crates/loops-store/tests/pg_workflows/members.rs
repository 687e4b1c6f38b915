//! Daemon membership on PostgreSQL (the `daemons` table), the lease
//! operations on it, the daemon's reads across hosts, and `list_daemons`
//! on SQLite.

use std::sync::Arc;

use loops_core::{Anchor, CommandTarget, LeaseId, NewLoop, ProcessRef, Schedule, Target};
use loops_store::{
    Claim, DaemonMember, LeaseAcquire, LeaseHeartbeat, LeaseRelease, LeaseRequest, Store,
};

use crate::common::{DAY, at, database, loop_sql, pg_raw, pg_store, run_sql};

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
        LeaseAcquire::Acquired(lease) => lease,
        LeaseAcquire::Held(holder) => panic!("held by {holder:?}"),
    }
}

fn by_id<'a>(members: &'a [DaemonMember], id: &str) -> &'a DaemonMember {
    members.iter().find(|m| m.id.as_str() == id).unwrap()
}

#[test]
fn daemons_of_two_hosts_are_members_until_they_leave_or_lapse() {
    let Some(db) = database("members") else {
        return;
    };
    let a = pg_store(&db, "host-a", |_| false);
    let b = pg_store(&db, "host-b", |_| false);
    let lease_a = acquired(
        a.acquire_daemon_lease(&request("aaaaaaaaaaaa", 100, "host-a"), at(0))
            .unwrap(),
    );
    assert_eq!((lease_a.created_at, lease_a.expires_at), (at(0), at(60)));
    // Another host's live daemon does not stand in the way.
    let lease_b = acquired(
        b.acquire_daemon_lease(&request("bbbbbbbbbbbb", 200, "host-b"), at(1))
            .unwrap(),
    );
    assert_eq!(lease_b.hostname, "host-b");

    // One run in flight under daemon A's runner id.
    let members = a.list_daemons(at(2)).unwrap();
    let runner_a = by_id(&members, "aaaaaaaaaaaa").runner_id();
    assert_eq!(runner_a, "host-a:100:aaaaaaaaaaaa");
    let mut raw = pg_raw(&db);
    raw.batch_execute(&format!(
        "{}{}{}",
        loop_sql("cccccccccccc", None),
        run_sql(
            "dddddddddddd",
            "cccccccccccc",
            at(0),
            "running",
            Some(&runner_a),
            at(0)
        ),
        run_sql(
            "eeeeeeeeeeee",
            "cccccccccccc",
            at(-60),
            "succeeded",
            Some(&runner_a),
            at(-60)
        ),
    ))
    .unwrap();

    let members = b.list_daemons(at(2)).unwrap();
    let version = Some(env!("CARGO_PKG_VERSION").to_owned());
    assert_eq!(
        members,
        [
            DaemonMember {
                id: lease_a.id,
                hostname: "host-a".into(),
                pid: 100,
                version: version.clone(),
                started_at: at(0),
                heartbeat_at: at(0),
                expires_at: at(60),
                live: true,
                running_runs: 1,
                clock_skew_ms: None,
                labels: vec!["host:host-a".into()],
            },
            DaemonMember {
                id: lease_b.id,
                hostname: "host-b".into(),
                pid: 200,
                version,
                started_at: at(1),
                heartbeat_at: at(1),
                expires_at: at(61),
                live: true,
                running_runs: 0,
                clock_skew_ms: None,
                labels: vec!["host:host-b".into()],
            },
        ]
    );
    let json = serde_json::to_value(&members[0]).unwrap();
    assert_eq!(json["runningRuns"], 1);
    assert_eq!(json["startedAt"], "2026-01-01T00:00:00.000Z");

    // Each host's lease is its own daemon's, whoever beat last.
    assert_eq!(a.get_daemon_lease().unwrap().unwrap().id, lease_a.id);
    assert_eq!(b.get_daemon_lease().unwrap().unwrap().id, lease_b.id);
    let elsewhere = pg_store(&db, "host-c", |_| false);
    assert_eq!(
        elsewhere.get_daemon_lease().unwrap().unwrap().id,
        lease_b.id
    );

    // Heartbeats renew; registering again keeps the start.
    let renewed = a
        .heartbeat_daemon_lease(&lease_a.id, 60_000, at(10))
        .unwrap();
    assert!(matches!(renewed, LeaseHeartbeat::Renewed(l) if l.expires_at == at(70)));
    let again = acquired(
        a.acquire_daemon_lease(&request("aaaaaaaaaaaa", 100, "host-a"), at(20))
            .unwrap(),
    );
    assert_eq!((again.created_at, again.heartbeat_at), (at(0), at(20)));

    // B leaves.
    assert_eq!(
        b.release_daemon_lease(&lease_b.id).unwrap(),
        LeaseRelease::Released
    );
    assert_eq!(
        b.release_daemon_lease(&lease_b.id).unwrap(),
        LeaseRelease::NotHeld
    );
    let members = a.list_daemons(at(21)).unwrap();
    assert_eq!(members.len(), 1);
    assert_eq!(members[0].id, lease_a.id);
    assert!(matches!(
        b.heartbeat_daemon_lease(&lease_b.id, 60_000, at(22))
            .unwrap(),
        LeaseHeartbeat::Lost
    ));

    // A lapses (its row expired at 80 s): listed, not live, and its late
    // heartbeat is refused.
    let members = a.list_daemons(at(81)).unwrap();
    assert!(!members[0].live);
    assert_eq!(members[0].running_runs, 1);
    assert!(matches!(
        a.heartbeat_daemon_lease(&lease_a.id, 60_000, at(81))
            .unwrap(),
        LeaseHeartbeat::Lost
    ));
    // A day after it lapsed, the next daemon to register forgets it.
    let c = pg_store(&db, "host-c", |_| false);
    let lease_c = acquired(
        c.acquire_daemon_lease(&request("cccccccccccc", 300, "host-c"), at(80 + DAY - 1))
            .unwrap(),
    );
    assert_eq!(c.list_daemons(at(80 + DAY)).unwrap().len(), 2);
    c.heartbeat_daemon_lease(&lease_c.id, 60_000, at(80 + DAY + 1))
        .unwrap();
    acquired(
        c.acquire_daemon_lease(&request("cccccccccccc", 300, "host-c"), at(80 + DAY + 2))
            .unwrap(),
    );
    let members = c.list_daemons(at(80 + DAY + 2)).unwrap();
    assert_eq!(members.len(), 1);
    assert_eq!(members[0].id, lease_c.id);
}

#[test]
fn the_next_wake_waits_out_the_grace_of_another_hosts_run() {
    let Some(db) = database("next_wake") else {
        return;
    };
    let a = pg_store(&db, "host-a", |_| false);
    let mut raw = pg_raw(&db);
    // Leases expire at 60 s (this host) and 120 s (host B).
    raw.batch_execute(&format!(
        "{}{}{}",
        loop_sql("cccccccccccc", None),
        run_sql(
            "dddddddddddd",
            "cccccccccccc",
            at(0),
            "running",
            Some("host-a:1:aaaaaaaaaaaa"),
            at(0)
        ),
        run_sql(
            "eeeeeeeeeeee",
            "cccccccccccc",
            at(60),
            "running",
            Some("host-b:2:bbbbbbbbbbbb"),
            at(60)
        ),
    ))
    .unwrap();
    let wake = a.next_wake(at(1), "host-a:9:ffffffffffff", &[]).unwrap();
    assert_eq!(wake.lease_expiry, Some(at(60)));
    // Host B's run may be taken over only after its lease and the grace.
    let wake = a.next_wake(at(61), "host-a:9:ffffffffffff", &[]).unwrap();
    assert_eq!(wake.lease_expiry, Some(at(150)));
    // Its own run is no wake-up for its holder.
    let wake = a.next_wake(at(1), "host-a:1:aaaaaaaaaaaa", &[]).unwrap();
    assert_eq!(wake.lease_expiry, Some(at(150)));
    // A loop in flight is no wake-up either.
    raw.batch_execute(&format!(
        "UPDATE loops SET next_run_at = '{}' WHERE id = 'cccccccccccc'",
        at(30)
    ))
    .unwrap();
    assert_eq!(a.next_wake(at(1), "x", &[]).unwrap().due, Some(at(30)));
    let excluded = [loops_core::LoopId::parse("cccccccccccc").unwrap()];
    assert_eq!(a.next_wake(at(1), "x", &excluded).unwrap().due, None);

    let runs = a
        .running_runs_of_host("host-a", "host-a:9:ffffffffffff")
        .unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].run.id.as_str(), "dddddddddddd");
    assert!(
        a.running_runs_of_host("host-a", "host-a:1:aaaaaaaaaaaa")
            .unwrap()
            .is_empty()
    );
    assert!(a.step_processes(&runs[0].run.id).unwrap().is_empty());
}

#[test]
fn on_sqlite_the_lease_holder_is_the_one_member() {
    let store = Store::open_in_memory(Arc::new(|_: ProcessRef| false)).unwrap();
    assert!(store.list_daemons(at(0)).unwrap().is_empty());
    let lease = acquired(
        store
            .acquire_daemon_lease(&request("aaaaaaaaaaaa", 100, "host-a"), at(0))
            .unwrap(),
    );
    let mut target = CommandTarget::new("echo hi");
    target.shell = Some(true);
    let new = NewLoop::new(
        "nightly",
        Schedule::Interval {
            every_ms: 60_000,
            anchor: Some(Anchor::FixedRate),
        },
        Target::Command(target),
    );
    let lp = store.create_loop(&new, at(0)).unwrap();
    let runner = format!("host-a:100:{}", lease.id);
    let claim = store
        .claim_run(&lp, lp.next_run_at.unwrap(), &runner, at(61))
        .unwrap();
    assert!(matches!(claim, Claim::Claimed { .. }), "{claim:?}");

    let members = store.list_daemons(at(1)).unwrap();
    assert_eq!(
        members,
        [DaemonMember {
            id: lease.id,
            hostname: "host-a".into(),
            pid: 100,
            version: None,
            started_at: at(0),
            heartbeat_at: at(0),
            expires_at: at(60),
            live: true,
            running_runs: 1,
            clock_skew_ms: None,
            labels: vec!["host:host-a".into()],
        }]
    );
    assert_eq!(members[0].runner_id(), runner);
    assert!(!store.list_daemons(at(60)).unwrap()[0].live);
    store.release_daemon_lease(&lease.id).unwrap();
    assert!(store.list_daemons(at(1)).unwrap().is_empty());
}
