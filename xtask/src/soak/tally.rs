//! The soak's bookkeeping of runs (issue 32): the ledger the runs append
//! to (`$LOOPS_LOOP_ID $LOOPS_SCHEDULED_FOR $LOOPS_RUN_ID`, one line per
//! execution) against the runs the database recorded, minute by minute.
//!
//! - doubled: a slot (loop, scheduled instant) with two ledger lines;
//! - lost: a slot that came due and never ran: a gap of more than one
//!   period between two runs of a loop the database recorded, a
//!   succeeded run with no ledger line, and at the end, the slots of each
//!   loop due after its last run;
//! - failed: a finished run that did not succeed.

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::bench_daemon::parse_iso;

/// A run as the database recorded it, all instants in ms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DbRun {
    pub(crate) loop_id: String,
    pub(crate) slot: i64,
    pub(crate) started: i64,
    pub(crate) run_id: String,
    pub(crate) status: String,
}

/// Parses `sqlite3` output lines `loop_id|scheduled_for|started_at|id|status`.
pub(crate) fn parse_db_runs(text: &str) -> Vec<DbRun> {
    text.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split('|').collect();
            let [loop_id, slot, started, run_id, status] = f[..] else {
                return None;
            };
            Some(DbRun {
                loop_id: loop_id.to_owned(),
                slot: parse_iso(slot)?,
                started: parse_iso(started)?,
                run_id: run_id.to_owned(),
                status: status.to_owned(),
            })
        })
        .collect()
}

/// What one minute's window showed.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Minute {
    pub(crate) runs: usize,
    /// The p99 of `started − scheduled` of the window's runs, in ms.
    pub(crate) late_p99: Option<i64>,
    pub(crate) lost: u64,
    pub(crate) doubled: u64,
    pub(crate) failed: u64,
}

/// The state carried from minute to minute.
#[derive(Debug)]
pub(crate) struct Tally {
    period_ms: i64,
    /// Ledger lines per slot.
    slots: HashMap<(String, i64), u32>,
    /// Run ids with a ledger line.
    ledger_runs: HashSet<String>,
    /// A ledger line left unfinished at the end of the last read.
    partial: String,
    /// Doubles found in the ledger since the last window.
    new_doubles: u64,
    /// The newest slot the database showed ran, per loop.
    last_slot: BTreeMap<String, i64>,
}

impl Tally {
    pub(crate) fn new(period_ms: i64) -> Tally {
        Tally {
            period_ms,
            slots: HashMap::new(),
            ledger_runs: HashSet::new(),
            partial: String::new(),
            new_doubles: 0,
            last_slot: BTreeMap::new(),
        }
    }

    /// Takes in the ledger's text appended since the last call.
    pub(crate) fn ledger(&mut self, appended: &str) {
        let text = std::mem::take(&mut self.partial) + appended;
        let (whole, rest) = match text.rfind('\n') {
            Some(i) => text.split_at(i + 1),
            None => ("", text.as_str()),
        };
        for line in whole.lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            let [loop_id, slot, run_id] = f[..] else {
                continue;
            };
            let Some(slot) = parse_iso(slot) else {
                continue;
            };
            self.ledger_runs.insert(run_id.to_owned());
            let n = self.slots.entry((loop_id.to_owned(), slot)).or_insert(0);
            *n += 1;
            if *n == 2 {
                self.new_doubles += 1;
            }
        }
        self.partial = rest.to_owned();
    }

    /// Checks the runs the database says started in one window (the
    /// ledger read up to after they ran).
    pub(crate) fn window(&mut self, mut runs: Vec<DbRun>) -> Minute {
        runs.sort_by_key(|r| (r.started, r.slot));
        let mut minute = Minute {
            runs: runs.len(),
            doubled: std::mem::take(&mut self.new_doubles),
            ..Minute::default()
        };
        let mut late: Vec<i64> = runs.iter().map(|r| r.started - r.slot).collect();
        late.sort_unstable();
        if !late.is_empty() {
            let at = (late.len() * 99).div_ceil(100).saturating_sub(1);
            minute.late_p99 = late.get(at).copied();
        }
        for run in &runs {
            match run.status.as_str() {
                "succeeded" if !self.ledger_runs.contains(&run.run_id) => minute.lost += 1,
                "succeeded" | "running" => {}
                _ => minute.failed += 1,
            }
            let last = self
                .last_slot
                .entry(run.loop_id.clone())
                .or_insert(run.slot);
            if run.slot > *last {
                let skipped = (run.slot - *last) / self.period_ms - 1;
                minute.lost += u64::try_from(skipped).unwrap_or(0);
                *last = run.slot;
            }
        }
        minute
    }

    /// At the end: the slots of each loop due by `due_by` (ms) after the
    /// last one that ran, and the loops of `loop_ids` that never ran.
    pub(crate) fn unrun(&self, loop_ids: &[String], due_by: i64) -> (u64, usize) {
        let mut lost = 0;
        for last in self.last_slot.values() {
            if due_by > *last {
                lost += u64::try_from((due_by - *last) / self.period_ms).unwrap_or(0);
            }
        }
        let never = loop_ids
            .iter()
            .filter(|id| !self.last_slot.contains_key(*id))
            .count();
        (lost, never)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: &str = "2026-12-03T10:00:";

    fn run(loop_id: &str, sec: i64, late: i64, id: &str, status: &str) -> DbRun {
        let slot = parse_iso(&format!("{T}00.000Z")).unwrap() + sec * 1000;
        DbRun {
            loop_id: loop_id.to_owned(),
            slot,
            started: slot + late,
            run_id: id.to_owned(),
            status: status.to_owned(),
        }
    }

    #[test]
    fn doubles_gaps_missing_lines_and_failures_are_counted() {
        let mut t = Tally::new(4000);
        // A line split across two reads counts once, whole.
        t.ledger(&format!("l1 {T}00.000Z r1\nl1 {T}04.0"));
        t.ledger(&format!("00Z r2\nl1 {T}04.000Z r2\nl2 {T}00.000Z r3\n"));
        let m = t.window(vec![
            run("l1", 0, 3, "r1", "succeeded"),
            run("l1", 4, 5, "r2", "succeeded"),
            run("l2", 0, 7, "r3", "succeeded"),
        ]);
        assert_eq!((m.runs, m.doubled, m.lost, m.failed), (3, 1, 0, 0));
        assert_eq!(m.late_p99, Some(7));
        // l1 skips the slot at 8 s; l2's run at 4 s left no ledger line;
        // l2's run at 8 s failed.
        t.ledger(&format!("l1 {T}12.000Z r4\n"));
        let m = t.window(vec![
            run("l1", 12, 1, "r4", "succeeded"),
            run("l2", 4, 1, "r5", "succeeded"),
            run("l2", 8, 1, "r6", "failed"),
        ]);
        assert_eq!((m.doubled, m.lost, m.failed), (0, 2, 1));
        // Due by 20 s: l1 missed 16 and 20, l2 missed 12, 16 and 20.
        let base = parse_iso(&format!("{T}00.000Z")).unwrap();
        let ids = ["l1".to_owned(), "l2".to_owned(), "l3".to_owned()];
        assert_eq!(t.unrun(&ids, base + 20_000), (5, 1));
    }

    #[test]
    fn sqlite_lines_parse() {
        let runs = parse_db_runs(
            "l1|2026-12-03T10:00:00.000Z|2026-12-03T10:00:00.004Z|r1|succeeded\nbad\n",
        );
        assert_eq!(runs.len(), 1);
        assert_eq!(runs[0].started - runs[0].slot, 4);
    }
}
