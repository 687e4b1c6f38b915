//! When a running run may be taken from its claimant: re-claimed by a
//! runner, or abandoned by recovery (SPEC §1.5, §9 item 14; issue 15,
//! "Steals"). The rule is a pure function, [`takeover`], written once for
//! both backends and asked by the claim and the recovery.
//!
//! A run whose lease has not expired (or has none) is held. An expired run
//! whose processes this host can see is judged by them: taken at once,
//! unless its recorded process or a linked step process is still alive.
//! SQLite sees every claimant's processes (its database lives on one
//! machine); PostgreSQL sees only the runs claimed on this host. A run
//! claimed on another host (or on a host nothing names) is taken only once
//! its lease expired a grace ago: its daemon may be stalled rather than
//! dead, and the grace lets it notice the loss (its heartbeat no longer
//! renews an expired lease) and stop the run first. Either way the write
//! re-checks the lease against the [`Takeover::Now`] cutoff and the
//! claimant in its `WHERE`, so a run that was renewed, finished or taken
//! meanwhile is left as it is.
//!
//! Where a run was claimed ([`claim_host`]): a daemon's runner id
//! `host:pid:suffix` names its host; the runner ids of `tick` and
//! `run-now` (`manual-tick:<pid>`, `manual:<pid>`, the original's) name
//! none, and for those the host the claim recorded beside it
//! (`claimed_host`, issue 25) says. A run claimed before that column, or
//! by a binary that does not write it, has none: another host's.

use std::ops::ControlFlow;

use loops_core::{Liveness, LoopRun, ProcessRef, RunId, Timestamp};

use crate::columns::process_at;
use crate::error::Result;
use crate::postgres::CROSS_HOST_GRACE_MS;
use crate::sql::{Dialect, Sql};

/// The host of a runner id `host:pid:suffix`, split from the right (a host
/// name may hold colons); `None` for an id of another shape (`manual:12`).
pub(crate) fn host_of(runner_id: &str) -> Option<&str> {
    let mut parts = runner_id.rsplitn(3, ':');
    let _suffix = parts.next()?;
    let _pid = parts.next()?;
    parts.next()
}

/// The host `run` was claimed on: the one its runner id names, else the
/// one its claim recorded, else none (see the module docs).
///
/// The runner id wins where it names a host: a binary older than the
/// `claimed_host` column re-claims a run without rewriting the column, so
/// a recorded host may be an earlier claim's, while the runner id is
/// always the current claimant's.
pub(crate) fn claim_host(run: &LoopRun) -> Option<&str> {
    match run.claimed_by.as_deref().and_then(host_of) {
        Some(host) => Some(host),
        None => run.claimed_host.as_deref(),
    }
}

/// Which claimants' processes the liveness probe can see from here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Vantage<'a> {
    /// Every claimant's: the database lives on this machine (SQLite).
    Everywhere,
    /// Only those of runs claimed on host `name`; another host's run is
    /// taken once its lease expired `grace_ms` ago (PostgreSQL).
    Host {
        /// This host's name.
        name: &'a str,
        /// How long after its lease another host's run may be taken.
        grace_ms: i64,
    },
}

/// Where a connection of `dialect` on host `host` sees processes from:
/// SQLite everywhere, PostgreSQL on `host` only, with
/// [`CROSS_HOST_GRACE_MS`] for the runs of other hosts.
pub(crate) fn vantage(dialect: Dialect, host: Option<&str>) -> Vantage<'_> {
    match dialect {
        Dialect::Sqlite => Vantage::Everywhere,
        Dialect::Postgres => Vantage::Host {
            name: host.unwrap_or_default(),
            grace_ms: CROSS_HOST_GRACE_MS,
        },
    }
}

/// The running steps with a recorded pid of the workflow runs linked to a
/// loop run (`?1`) that are not terminal (SPEC §4.2 "live step
/// processes"); the list is checked against core's in a unit test.
const LINKED_STEP_PROCESSES: &str = "SELECT wsr.pid, wsr.pid_start_ms FROM workflow_runs wr
     JOIN workflow_step_runs wsr ON wsr.workflow_run_id = wr.id
     WHERE wr.loop_run_id = ?1
       AND wr.status NOT IN ('succeeded', 'failed', 'timed_out', 'cancelled')
       AND wsr.status = 'running' AND wsr.pid IS NOT NULL";

/// True when a step process of a workflow run linked to loop run `run_id`
/// is alive ([`Alive::step_process`]). The probe answers for this host's
/// processes only: ask it about a run the [`Vantage`] sees.
pub(crate) fn live_step_process(
    c: &mut dyn Sql,
    liveness: &dyn Liveness,
    run_id: &RunId,
) -> Result<bool> {
    let mut alive = false;
    c.query_each(
        LINKED_STEP_PROCESSES,
        &[run_id.as_str().into()],
        ("workflow_step_runs", "reading linked step processes"),
        |row| process_at(row, 0),
        |p| {
            alive = p.is_some_and(|p| liveness.is_alive(p));
            if alive {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        },
    )?;
    Ok(alive)
}

/// What the takeover rule asks about a run whose processes it can see,
/// each asked only when the rule needs the answer.
pub(crate) trait Alive {
    /// True when the run's recorded process is alive (false without one).
    fn process(&mut self) -> bool;
    /// True when a step process of a workflow run linked to the run is
    /// alive.
    fn step_process(&mut self) -> Result<bool>;
}

/// The [`Alive`] answers about a run read in the caller's transaction: its
/// recorded process, and its linked step processes, read on the same
/// connection.
pub(crate) struct Processes<'a, 'c> {
    /// The connection of the transaction.
    pub(crate) c: &'a mut (dyn Sql + 'c),
    /// The backend's probe of this host's processes.
    pub(crate) liveness: &'a dyn Liveness,
    /// The run's recorded process.
    pub(crate) process: Option<ProcessRef>,
    /// The run; `None` when there is none (nothing is then alive).
    pub(crate) run_id: Option<RunId>,
}

impl Alive for Processes<'_, '_> {
    fn process(&mut self) -> bool {
        self.process.is_some_and(|p| self.liveness.is_alive(p))
    }

    fn step_process(&mut self) -> Result<bool> {
        match &self.run_id {
            Some(id) => live_step_process(self.c, self.liveness, id),
            None => Ok(false),
        }
    }
}

/// Whether a running run may be taken, and under which guard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Takeover {
    /// It may: the write applies while the row is still running, under
    /// the same claimant, with a lease that expired at or before `cutoff`.
    Now {
        /// The latest lease expiry the write accepts.
        cutoff: Timestamp,
    },
    /// Its lease has not expired, or it has none.
    Held,
    /// Its recorded process is alive.
    ProcessAlive,
    /// A linked step process is alive.
    StepProcessAlive,
    /// Claimed on another host, whose grace has not passed yet.
    InGrace,
}

/// Decides whether `run`, which is running, may be taken at `now` seen
/// from `vantage` (see the module docs). `alive` is asked about its
/// processes only when they decide.
pub(crate) fn takeover(
    run: &LoopRun,
    now: Timestamp,
    vantage: Vantage<'_>,
    alive: &mut dyn Alive,
) -> Result<Takeover> {
    let Some(expiry) = run.lease_expires_at.filter(|e| *e <= now) else {
        return Ok(Takeover::Held);
    };
    match vantage {
        Vantage::Host { name, grace_ms } if claim_host(run) != Some(name) => {
            let cutoff = now.add_ms(-grace_ms);
            Ok(if expiry <= cutoff {
                Takeover::Now { cutoff }
            } else {
                Takeover::InGrace
            })
        }
        _ if alive.process() => Ok(Takeover::ProcessAlive),
        _ if alive.step_process()? => Ok(Takeover::StepProcessAlive),
        _ => Ok(Takeover::Now { cutoff: now }),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use loops_core::{RunStatus, WorkflowRunStatus};

    use super::*;
    use crate::sql::Value;
    use crate::sql::tests::Canned;

    /// The instant the test runs are claimed at.
    pub(crate) fn t0() -> Timestamp {
        "2026-01-01T00:00:00Z".parse().unwrap()
    }

    /// A run of `status` claimed by `by` (recording `host`), whose lease
    /// expires at `lease`.
    pub(crate) fn run(
        status: RunStatus,
        by: &str,
        host: Option<&str>,
        lease: Option<Timestamp>,
    ) -> LoopRun {
        let t = t0();
        LoopRun {
            id: "aaaaaaaaaaaa".parse().unwrap(),
            loop_id: "bbbbbbbbbbbb".parse().unwrap(),
            loop_name: "n".into(),
            scheduled_for: t,
            attempt: 1,
            status,
            started_at: Some(t),
            finished_at: None,
            claimed_by: Some(by.into()),
            claimed_host: host.map(Into::into),
            lease_expires_at: lease,
            pid: None,
            exit_code: None,
            duration_ms: None,
            stdout: None,
            stderr: None,
            error: None,
            created_at: t,
            updated_at: t,
            claim_token: None,
            facts: Default::default(),
            last_output_at: Default::default(),
            cancel_requested_at: Default::default(),
            cancelled_by: Default::default(),
        }
    }

    /// Fixed answers, counting the questions.
    #[derive(Default)]
    pub(crate) struct Answers {
        pub(crate) process: bool,
        pub(crate) step: bool,
        pub(crate) asked: u32,
    }

    impl Alive for Answers {
        fn process(&mut self) -> bool {
            self.asked += 1;
            self.process
        }

        fn step_process(&mut self) -> Result<bool> {
            self.asked += 1;
            Ok(self.step)
        }
    }

    const HOST_A: Vantage<'static> = Vantage::Host {
        name: "host-a",
        grace_ms: 30_000,
    };

    fn judge(run: &LoopRun, now: Timestamp, vantage: Vantage<'_>, alive: &mut Answers) -> Takeover {
        takeover(run, now, vantage, alive).unwrap()
    }

    #[test]
    fn the_linked_steps_are_those_of_workflow_runs_core_calls_open() {
        let listed = LINKED_STEP_PROCESSES
            .split("NOT IN (")
            .nth(1)
            .and_then(|rest| rest.split(')').next())
            .unwrap();
        let terminal: Vec<String> = WorkflowRunStatus::ALL
            .iter()
            .filter(|s| s.is_terminal())
            .map(|s| format!("'{}'", s.as_str()))
            .collect();
        assert_eq!(listed, terminal.join(", "));
    }

    #[test]
    fn the_host_is_what_precedes_the_pid_and_suffix() {
        assert_eq!(host_of("host-a:123:0123456789ab"), Some("host-a"));
        assert_eq!(host_of("fe80::1:123:0123456789ab"), Some("fe80::1"));
        assert_eq!(host_of("manual:12"), None);
        assert_eq!(host_of("runner-a"), None);
    }

    #[test]
    fn a_runner_id_without_a_host_is_placed_by_the_recorded_host() {
        let host = |by, recorded| {
            claim_host(&run(RunStatus::Running, by, recorded, None)).map(str::to_owned)
        };
        assert_eq!(
            host("manual-tick:12", Some("host-a")).as_deref(),
            Some("host-a")
        );
        assert_eq!(host("manual:12", Some("host-b")).as_deref(), Some("host-b"));
        // Claimed before the column, or by a binary that does not write it.
        assert_eq!(host("manual-tick:12", None), None);
        assert_eq!(
            host("host-a:1:0123456789ab", None).as_deref(),
            Some("host-a")
        );
        // An older binary's re-claim left an earlier claim's host behind.
        assert_eq!(
            host("host-b:2:0123456789ab", Some("host-a")).as_deref(),
            Some("host-b")
        );
    }

    #[test]
    fn an_unexpired_or_missing_lease_is_held_without_asking() {
        let now = t0();
        for lease in [None, Some(now.add_ms(1))] {
            let r = run(RunStatus::Running, "host-a:1:x", None, lease);
            for vantage in [Vantage::Everywhere, HOST_A] {
                let mut alive = Answers::default();
                assert_eq!(judge(&r, now, vantage, &mut alive), Takeover::Held);
                assert_eq!(alive.asked, 0);
            }
        }
    }

    #[test]
    fn a_visible_run_is_judged_by_its_processes() {
        let now = t0().add_ms(5);
        // Expired exactly now counts as expired.
        for lease in [now, t0()] {
            for (vantage, by) in [
                (Vantage::Everywhere, "anyone"),
                (HOST_A, "host-a:1:x"),
                (HOST_A, "manual:1"),
            ] {
                let r = run(RunStatus::Running, by, Some("host-a"), Some(lease));
                let mut alive = Answers {
                    process: true,
                    ..Answers::default()
                };
                assert_eq!(judge(&r, now, vantage, &mut alive), Takeover::ProcessAlive);
                let mut alive = Answers {
                    step: true,
                    ..Answers::default()
                };
                assert_eq!(
                    judge(&r, now, vantage, &mut alive),
                    Takeover::StepProcessAlive
                );
                let mut alive = Answers::default();
                assert_eq!(
                    judge(&r, now, vantage, &mut alive),
                    Takeover::Now { cutoff: now }
                );
                assert_eq!(alive.asked, 2);
            }
        }
    }

    #[test]
    fn another_hosts_run_waits_for_the_grace_whatever_its_processes() {
        let lease = t0();
        for (by, recorded) in [
            ("host-b:1:x", None),
            ("manual:1", Some("host-b")),
            ("manual-tick:1", None),
            ("host-b:1:x", Some("host-a")),
        ] {
            let r = run(RunStatus::Running, by, recorded, Some(lease));
            let mut alive = Answers {
                process: true,
                step: true,
                asked: 0,
            };
            let early = lease.add_ms(29_999);
            assert_eq!(judge(&r, early, HOST_A, &mut alive), Takeover::InGrace);
            let late = lease.add_ms(30_000);
            assert_eq!(
                judge(&r, late, HOST_A, &mut alive),
                Takeover::Now { cutoff: lease }
            );
            assert_eq!(alive.asked, 0, "another host's processes are not asked");
        }
    }

    /// Alive: the processes whose pid is odd.
    fn odd(p: ProcessRef) -> bool {
        p.pid % 2 == 1
    }

    /// A connection on which the linked running steps of run `id` have
    /// the pids `pids` (`None`: no pid recorded), and no other run's have
    /// any.
    fn steps(
        id: &RunId,
        pids: &[Option<i64>],
    ) -> Canned<impl FnMut(&str, &[Value<'_>]) -> Vec<Vec<Value<'static>>> + use<>> {
        let id = *id;
        let rows: Vec<Vec<Value<'static>>> = pids
            .iter()
            .map(|&pid| vec![pid.into(), Value::Null])
            .collect();
        Canned::new(Dialect::Sqlite, move |sql, params| {
            assert_eq!(sql, LINKED_STEP_PROCESSES);
            if params == [Value::Text(id.as_str())] {
                rows.clone()
            } else {
                Vec::new()
            }
        })
    }

    #[test]
    fn a_step_process_is_live_when_one_of_the_runs_steps_is() {
        let id = run(RunStatus::Running, "x", None, None).id;
        let live = |c: &mut dyn Sql| live_step_process(c, &odd, &id).unwrap();
        assert!(!live(&mut steps(&id, &[])));
        assert!(!live(&mut steps(&id, &[Some(2), None, Some(4)])));
        let mut c = steps(&id, &[Some(2), Some(3), Some(4), Some(5)]);
        assert!(live(&mut c));
        assert_eq!(c.read, 2, "the first live step decides");
        let other: RunId = "cccccccccccc".parse().unwrap();
        assert!(!live(&mut steps(&other, &[Some(3)])), "another run's step");
    }

    /// The [`Processes`] on `c` of a run that recorded `process`.
    fn processes<'a, 'c>(
        c: &'a mut (dyn Sql + 'c),
        process: Option<u32>,
        run_id: Option<&RunId>,
    ) -> Processes<'a, 'c> {
        Processes {
            c,
            liveness: &odd,
            process: process.map(ProcessRef::pid),
            run_id: run_id.copied(),
        }
    }

    #[test]
    fn a_runs_processes_are_its_recorded_one_and_its_linked_steps() {
        let id = run(RunStatus::Running, "x", None, None).id;
        let mut c = steps(&id, &[Some(2), Some(3)]);
        assert!(processes(&mut c, Some(7), Some(&id)).process());
        assert!(!processes(&mut c, Some(8), Some(&id)).process());
        assert!(!processes(&mut c, None, Some(&id)).process());
        assert_eq!(c.read, 0, "the recorded process is not read");
        assert!(processes(&mut c, None, Some(&id)).step_process().unwrap());
        let mut dead = steps(&id, &[Some(2), Some(4)]);
        assert!(
            !processes(&mut dead, Some(7), Some(&id))
                .step_process()
                .unwrap()
        );
        // Without a run there are no steps to read.
        assert!(!processes(&mut c, Some(7), None).step_process().unwrap());
    }
}
