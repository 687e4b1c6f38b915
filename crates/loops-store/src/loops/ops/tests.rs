//! The loop operations against both backends' statements, where a pure
//! decision states what a statement does set-wise.

use std::sync::Arc;

use loops_core::{CommandTarget, LoopStatus, NewLoop, Schedule, Target, Timestamp};

use crate::loops::decide::expires;
use crate::testing::fresh_database;
use crate::{DatabaseUrl, LoopFilter, Store};

fn t(s: &str) -> Timestamp {
    s.parse().unwrap()
}

/// Runs `check` on a SQLite store, then on PostgreSQL when a test database
/// is configured.
fn on_both_backends(test: &str, check: impl Fn(&Store)) {
    check(&Store::open_in_memory(Arc::new(|_| false)).unwrap());
    if let Some(db) = fresh_database(test) {
        let url = DatabaseUrl::parse(db.url()).unwrap();
        check(&Store::open_postgres(&url, "test", "host-a", Arc::new(|_| false)).unwrap());
    }
}

#[test]
fn expire_loops_expires_exactly_the_loops_the_expiry_decision_names() {
    on_both_backends("loops::expire_loops_expires_exactly", |store| {
        let created = t("2026-01-01T00:00:00.000Z");
        let now = t("2026-01-01T12:00:00.000Z");
        let cases = [
            ("no expiry", None, None),
            ("expires now", Some(now), None),
            ("expired earlier", Some(now.add_ms(-1)), None),
            ("expires later", Some(now.add_ms(1)), None),
            (
                "paused past expiry",
                Some(now.add_ms(-1)),
                Some(LoopStatus::Paused),
            ),
            (
                "stopped past expiry",
                Some(now.add_ms(-1)),
                Some(LoopStatus::Stopped),
            ),
        ];
        for (name, expires_at, status) in cases {
            let mut new = NewLoop::new(
                name,
                Schedule::Interval {
                    every_ms: 60_000,
                    anchor: None,
                },
                Target::Command(CommandTarget::new("true")),
            );
            new.expires_at = expires_at;
            let lp = store.create_loop(&new, created).unwrap();
            match status {
                Some(LoopStatus::Paused) => drop(store.pause_loop(&lp.id, created).unwrap()),
                Some(LoopStatus::Stopped) => drop(store.stop_loop(&lp.id, created).unwrap()),
                _ => {}
            }
        }
        let before = store.list_loops(&LoopFilter::default()).unwrap();
        let mut decided: Vec<String> = before
            .iter()
            .filter(|lp| expires(lp, now))
            .map(|lp| lp.name.clone())
            .collect();
        let mut expired: Vec<String> = store
            .expire_loops(now)
            .unwrap()
            .into_iter()
            .map(|lp| {
                assert_eq!(lp.status, LoopStatus::Expired);
                assert_eq!(lp.next_run_at, None);
                lp.name
            })
            .collect();
        decided.sort();
        expired.sort();
        assert_eq!(expired, ["expired earlier", "expires now"]);
        assert_eq!(expired, decided);
    });
}
