//! `loops next <loop> [-n 5]`, `loops next --cron <expr> [--tz Z]` and
//! `loops next --every <duration>` (issue 28): the next fire times, as
//! `systemd-analyze calendar --iterations` lists them, with the schedule
//! (a cron expression also in words).
//!
//! The times come from core's schedule math (`fire_times`), from the
//! loop's stored next run; nothing is written. A paused loop lists the
//! times it would fire once resumed (it keeps its next run); a stopped or
//! expired loop has none. `next` only shows, so "now" is
//! [`human::display_now`], which tests freeze, in `--json` too.

use anyhow::{Result, anyhow};
use loops_core::{
    Anchor, Loop, LoopStatus, Schedule, Timestamp, fire_times, initial_next_run, is_expired,
};
use serde_json::{Value, json};

use crate::args::next::{MAX_ITERATIONS, NextArgs};
use crate::context::Context;
use crate::exit::Outcome;
use crate::human;
use crate::render::Printer;
use crate::request::{self, Document, Request, Warnings};
use crate::resolve;

/// `next`.
pub(crate) fn run(ctx: &Context, args: &NextArgs, out: &mut Printer) -> Result<Outcome> {
    request::serve(ctx, out, |_| {
        let count = iterations(&args.iterations)?;
        let subject = match (&args.target, &args.cron, &args.every) {
            (_, Some(expression), _) => Subject::Schedule(Schedule::Cron {
                expression: expression.clone(),
                timezone: args.tz.as_ref().map(|tz| tz.trim().to_owned()),
            }),
            (_, None, Some(every)) => Subject::Schedule(Schedule::Interval {
                every_ms: resolve::positive_duration(every, "--every")?,
                anchor: Some(Anchor::FixedRate),
            }),
            (Some(target), None, None) => Subject::Loop(target.clone()),
            // clap requires one of them.
            (None, None, None) => return Err(anyhow!("give a loop, --cron or --every")),
        };
        Ok(Next { subject, count })
    })
}

/// `-n`: 1 to [`MAX_ITERATIONS`].
fn iterations(value: &str) -> Result<usize> {
    value
        .trim()
        .parse::<u32>()
        .ok()
        .filter(|n| (1..=MAX_ITERATIONS).contains(n))
        .map(|n| n as usize)
        .ok_or_else(|| anyhow!("-n must be an integer from 1 to {MAX_ITERATIONS}, not {value}"))
}

/// What `next` lists the times of.
enum Subject {
    /// A stored loop, by id or name.
    Loop(String),
    /// A schedule from the command line, as if a loop were created now.
    Schedule(Schedule),
}

/// The typed request of `next`.
struct Next {
    subject: Subject,
    count: usize,
}

/// What `next` returns.
struct NextTimes {
    /// The loop, when one was named.
    lp: Option<Loop>,
    schedule: Schedule,
    times: Vec<Timestamp>,
    now: Timestamp,
}

impl Request for Next {
    type Document = NextTimes;

    fn run(self, ctx: &Context, _: &mut Warnings) -> Result<NextTimes> {
        let now = human::display_now();
        match self.subject {
            Subject::Loop(target) => {
                let lp = ctx.open_store()?.require_loop(&target)?;
                let times = loop_times(&lp, now, self.count)?;
                Ok(NextTimes {
                    schedule: lp.schedule.clone(),
                    lp: Some(lp),
                    times,
                    now,
                })
            }
            Subject::Schedule(schedule) => {
                let times = match initial_next_run(&schedule, now)? {
                    Some(first) => fire_times(&schedule, first, now, None, self.count)?,
                    None => Vec::new(),
                };
                Ok(NextTimes {
                    lp: None,
                    schedule,
                    times,
                    now,
                })
            }
        }
    }
}

/// A loop's next `count` fire times from its stored next run: none for a
/// stopped or expired loop, none at or after its expiry.
pub(crate) fn loop_times(lp: &Loop, now: Timestamp, count: usize) -> Result<Vec<Timestamp>> {
    let Some(first) = lp.next_run_at else {
        return Ok(Vec::new());
    };
    let scheduled = matches!(lp.status, LoopStatus::Active | LoopStatus::Paused);
    if !scheduled || is_expired(lp, now) {
        return Ok(Vec::new());
    }
    Ok(fire_times(&lp.schedule, first, now, lp.expires_at, count)?)
}

impl Document for NextTimes {
    /// `{loop?: {id, name, status}, schedule, times: [ISO UTC…]}`.
    fn json(&self, out: &mut Printer) -> Result<()> {
        let mut doc = serde_json::Map::new();
        if let Some(lp) = &self.lp {
            doc.insert(
                "loop".to_owned(),
                json!({"id": lp.id, "name": lp.name, "status": lp.status}),
            );
        }
        doc.insert("schedule".to_owned(), serde_json::to_value(&self.schedule)?);
        doc.insert("times".to_owned(), serde_json::to_value(&self.times)?);
        Ok(out.json(&Value::Object(doc))?)
    }

    fn human(&self, _: &Context, out: &mut Printer) -> Result<()> {
        if let Some(lp) = &self.lp {
            out.line(&format!("loop:     {}", loop_state(lp, self.now)))?;
        }
        print_times(out, &self.schedule, &self.times, self.now)
    }
}

/// The loop's name, id and what its status means for its fire times.
fn loop_state(lp: &Loop, now: Timestamp) -> String {
    let state = match lp.status {
        LoopStatus::Active if is_expired(lp, now) => {
            "active, but past its expiry: it will not fire again".to_owned()
        }
        LoopStatus::Active if lp.next_run_at.is_none() => {
            "active, with no next run: it will not fire again".to_owned()
        }
        LoopStatus::Active => "active".to_owned(),
        LoopStatus::Paused => {
            let why = lp
                .paused_reason
                .as_deref()
                .map(|r| format!(" ({r})"))
                .unwrap_or_default();
            format!("paused{why}: it fires at these times once resumed")
        }
        LoopStatus::Stopped => {
            "stopped: it will not fire (`loops resume` puts it back on its schedule)".to_owned()
        }
        status => format!("{status}: it will not fire"),
    };
    format!("{} ({}), {state}", lp.name, lp.id)
}

/// The schedule in words and the fire times, one a line, for `next` and
/// `create --dry-run`.
pub(crate) fn print_times(
    out: &mut Printer,
    schedule: &Schedule,
    times: &[Timestamp],
    now: Timestamp,
) -> Result<()> {
    for (key, value) in time_lines(schedule, times, now) {
        let key = if key.is_empty() {
            String::new()
        } else {
            format!("{key}:")
        };
        out.line(&format!("{key:<10}{value}"))?;
    }
    Ok(())
}

/// What [`print_times`] prints, as `(key, value)` lines for a card to lay
/// out its own way (`status`): `schedule` in words, then `next` and its
/// times, each further line with an empty key.
pub(crate) fn time_lines(
    schedule: &Schedule,
    times: &[Timestamp],
    now: Timestamp,
) -> Vec<(&'static str, String)> {
    let mut lines = vec![("schedule", human::schedule_in_words(schedule))];
    if matches!(schedule, Schedule::Dynamic { .. }) && !times.is_empty() {
        lines.push((
            "",
            "(the earliest times: each run starts the wait when it ends)".to_owned(),
        ));
    }
    let zone = human::schedule_zone(schedule);
    if times.is_empty() {
        lines.push(("next", "none".to_owned()));
    }
    let mut key = "next";
    for t in times {
        lines.push((key, human::fire_time(*t, zone, now)));
        key = "";
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::iterations;

    #[test]
    fn iterations_are_one_to_a_thousand() {
        assert_eq!(iterations("5").unwrap(), 5);
        assert_eq!(iterations("1000").unwrap(), 1000);
        for bad in ["0", "1001", "-1", "x", ""] {
            assert!(iterations(bad).is_err(), "{bad}");
        }
    }
}
