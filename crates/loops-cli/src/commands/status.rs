//! `loops status <loop>` (issue 28): one loop at a glance, as
//! `systemctl status` shows a unit. `loops show` prints the same card on a
//! terminal.
//!
//! The card is a header line (a `●` in the loop's colour, its name, id and
//! description) and `Key: value` lines with the keys aligned on their
//! colon: the state and why (a pause's reason, the circuit breaker), the
//! schedule in words with its zone, the next 3 fire times (`next`'s
//! lines), what it runs, its labels and policies, its last 5 runs with
//! their exit codes, then the last 10 lines of the latest run's output
//! (its log file, else its stored stdout and stderr). On a terminal every
//! line fits the width, long values cut with `…`; piped, nothing is cut.
//! Stored text is escaped for the terminal.
//!
//! `--json` prints the loop as `show --json` does, plus `nextRuns` (UTC
//! ISO), `recentRuns` (run objects as `runs --json` prints them, output
//! redacted), `outputRunId` and `outputTail` (the lines of the tail). "Now" is [`human::display_now`], which tests freeze.

use anyhow::Result;
use loops_core::{CatchUp, Loop, LoopRun, LoopStatus, RunId, Schedule, Target, Timestamp};
use loops_store::{RunFilter, Store};
use serde_json::{Value, json};

use super::{logs, manage, next};
use crate::args::LoopRef;
use crate::context::Context;
use crate::exit::Outcome;
use crate::hint;
use crate::human;
use crate::redact::{self, Output};
use crate::render::{self, Column, Printer, Table};
use crate::request::{self, Document, Request, Warnings};

/// How many fire times the card lists.
const NEXT_TIMES: usize = 3;

/// How many runs the card lists.
const RECENT_RUNS: u32 = 5;

/// How many lines of the latest run's output the card shows.
const TAIL_LINES: usize = 10;

/// The width of the keys, colon included, right-aligned.
const KEY_WIDTH: usize = 10;

/// `status`.
pub(crate) fn run(ctx: &Context, args: &LoopRef, out: &mut Printer) -> Result<Outcome> {
    request::serve(ctx, out, |_| {
        Ok(Status {
            target: args.target.clone(),
        })
    })
}

/// The typed request of `status`: one loop, by id or name.
struct Status {
    target: String,
}

/// What `status` returns: the loop and what the card says of it.
struct Card {
    lp: Loop,
    /// Its status as `list` shows it (`done` for a once-loop that ran).
    shown: &'static str,
    next: Vec<Timestamp>,
    /// The newest runs, newest start first.
    runs: Vec<LoopRun>,
    /// The end of the latest run's output.
    tail: Option<OutputTail>,
    now: Timestamp,
    /// For the hint when no daemon runs the loop.
    store: Store,
}

/// The last lines of a run's output.
struct OutputTail {
    run: RunId,
    lines: Vec<String>,
}

impl Request for Status {
    type Document = Card;

    fn run(self, ctx: &Context, _: &mut Warnings) -> Result<Card> {
        let store = ctx.open_store()?;
        let lp = manage::shown_loop(&store, &self.target)?;
        let now = human::display_now();
        let next = next::loop_times(&lp, now, NEXT_TIMES)?;
        let mut runs = store.list_runs(&RunFilter {
            loop_id: Some(lp.id),
            status: None,
            limit: Some(RECENT_RUNS),
            offset: None,
        })?;
        let shown = manage::shown_status(&lp, runs.first());
        runs.sort_by_key(|run| std::cmp::Reverse(start(run)));
        let tail = match runs.first() {
            Some(run) => Some(OutputTail {
                run: run.id,
                lines: render::last_lines(&logs::output_text(ctx, run)?, TAIL_LINES),
            }),
            None => None,
        };
        Ok(Card {
            lp,
            shown,
            next,
            runs,
            tail,
            now,
            store,
        })
    }
}

/// When a run started, else when its row was written.
fn start(run: &LoopRun) -> Timestamp {
    run.started_at.unwrap_or(run.created_at)
}

impl Document for Card {
    /// The loop as `show --json` prints it, plus `nextRuns`, `recentRuns`,
    /// `outputRunId` and `outputTail`.
    fn json(&self, out: &mut Printer) -> Result<()> {
        let mut doc = serde_json::to_value(redact::loop_json(&self.lp))?;
        if let Value::Object(fields) = &mut doc {
            fields.insert("nextRuns".to_owned(), serde_json::to_value(&self.next)?);
            let runs = self.runs.iter();
            let runs: Vec<Value> = runs
                .map(|r| redact::run_json(r, Output::Redacted))
                .collect();
            fields.insert("recentRuns".to_owned(), Value::Array(runs));
            let (id, lines) = match &self.tail {
                Some(tail) => (json!(tail.run), json!(tail.lines)),
                None => (Value::Null, json!([])),
            };
            fields.insert("outputRunId".to_owned(), id);
            fields.insert("outputTail".to_owned(), lines);
        }
        Ok(out.json(&doc)?)
    }

    fn human(&self, ctx: &Context, out: &mut Printer) -> Result<()> {
        let lp = &self.lp;
        let mut header = format!("{} ({})", lp.name, lp.id);
        if let Some(description) = lp.description.as_deref().filter(|d| !d.is_empty()) {
            header.push_str(&format!(" - {description}"));
        }
        out.marked_line("●", render::status_style(self.shown), &header)?;
        let mut card = Lines::default();
        card.key("State", self.state());
        if let Some(breaker) = breaker(lp) {
            card.key("Breaker", breaker);
        }
        let lines = if lp.policy.trigger_only {
            vec![
                ("schedule", human::loop_schedule(lp)),
                ("next", "on its next trigger".to_owned()),
            ]
        } else {
            next::time_lines(&lp.schedule, &self.next, self.now)
        };
        for (key, value) in lines {
            match key {
                "schedule" => {
                    card.key("Schedule", value);
                    if let Some(zone) = zone(&lp.schedule) {
                        card.key("Zone", zone);
                    }
                }
                "next" => card.key("Next", value),
                _ => card.more(value),
            }
        }
        card.key("Target", target(lp));
        let labels = match lp.policy.labels.as_slice() {
            [] => "none".to_owned(),
            labels => labels.join(", "),
        };
        card.key("Labels", labels);
        for (key, value) in crate::commands::trigger::status_lines(&self.store, lp)? {
            card.key(key, value);
        }
        // Issue 30: where it runs and its pool, only when set.
        if !lp.policy.runs_on.is_empty() {
            card.key("Runs on", crate::placement::runs_on_line(&self.store, lp));
        }
        // Its limit, and whether a due run waits for room (the real clock).
        let mut pool = super::pools::status_lines(&self.store, lp, super::now())?.into_iter();
        if let Some(first) = pool.next() {
            card.key("Pool", first);
            pool.for_each(|line| card.more(line));
        }
        let width = out.layout().width();
        let room = width.map(|w| w.saturating_sub(KEY_WIDTH + 1));
        let mut policies = wrap(&policies(lp), room).into_iter();
        card.key("Policies", policies.next().unwrap_or_default());
        for line in policies {
            card.more(line);
        }
        for line in &card.0 {
            out.fitted_line(line)?;
        }
        if self.runs.is_empty() {
            out.fitted_line(&format!("{:>KEY_WIDTH$} none yet", "Runs:"))?;
        } else {
            out.fitted_line(&format!("{:>KEY_WIDTH$}", "Runs:"))?;
            out.indented_table(&self.runs_table(ctx), KEY_WIDTH + 1)?;
        }
        if let Some(tail) = &self.tail {
            let what = match tail.lines.len() {
                0 => "none".to_owned(),
                1 => format!("the last line of run {}", tail.run),
                n => format!("the last {n} lines of run {}", tail.run),
            };
            out.fitted_line(&format!("{:>KEY_WIDTH$} {what}", "Output:"))?;
            if !tail.lines.is_empty() {
                out.line("")?;
                for line in &tail.lines {
                    out.fitted_line(&render::expand_tabs(line))?;
                }
            }
        }
        if self.lp.status == LoopStatus::Active {
            // The real clock: a lease is live or not whatever the display
            // says.
            hint::no_daemon(ctx, &self.store, super::now());
        }
        Ok(())
    }
}

impl Card {
    /// The state, and why: a pause's reason, what a stopped or finished
    /// loop is waiting for, a run going on.
    fn state(&self) -> String {
        let lp = &self.lp;
        let running = self
            .runs
            .iter()
            .find(|r| r.status == loops_core::RunStatus::Running);
        match lp.status {
            LoopStatus::Active => match running {
                Some(run) => format!(
                    "active, running run {} since {}",
                    run.id,
                    human::when(start(run), self.now)
                ),
                None if loops_core::is_expired(lp, self.now) => {
                    "active, but past its expiry: it will not fire again".to_owned()
                }
                None => "active".to_owned(),
            },
            LoopStatus::Paused => match lp.paused_reason.as_deref() {
                Some(reason) => format!("paused: {}", one_line(reason)),
                None => "paused by a user; `loops resume` resumes it".to_owned(),
            },
            LoopStatus::Stopped if self.shown == "done" => {
                "done: a once-loop that ran; `loops resume` schedules it again".to_owned()
            }
            LoopStatus::Stopped => {
                "stopped; `loops resume` puts it back on its schedule".to_owned()
            }
            LoopStatus::Expired => match lp.expires_at {
                Some(at) if at <= self.now => format!("expired at {}", human::local(at)),
                _ => "expired".to_owned(),
            },
        }
    }

    /// The last runs, one a line: id, status, start, duration and exit
    /// code. Below the width, the duration goes first, then the start is
    /// cut; the id and the status never.
    fn runs_table(&self, ctx: &Context) -> Table {
        let mut table = Table::new(vec![
            Column::keep("RUN"),
            Column::keep("STATUS"),
            Column::keep("EXIT"),
            Column::keep("DURATION").optional(0),
            Column::shrink("STARTED"),
            Column::shrink("ERROR").optional(1),
        ]);
        for run in &self.runs {
            let status = run.status.as_str();
            table.styled_row(vec![
                (run.id.to_string(), anstyle::Style::new()),
                (status.to_owned(), render::status_style(status)),
                (
                    run.exit_code
                        .map_or_else(|| "-".to_owned(), |c| format!("exit {c}")),
                    anstyle::Style::new(),
                ),
                (
                    run.duration_ms
                        .map_or_else(|| "-".to_owned(), human::duration),
                    anstyle::Style::new(),
                ),
                (human::when(start(run), self.now), anstyle::Style::new()),
                (
                    run.error
                        .as_deref()
                        .map(|e| human::first_line(&ctx.error_text(e), usize::MAX))
                        .unwrap_or_default(),
                    render::status_style("failed"),
                ),
            ]);
        }
        table
    }
}

/// The card's `Key: value` lines, keys right-aligned on their colon.
#[derive(Default)]
struct Lines(Vec<String>);

impl Lines {
    fn key(&mut self, key: &str, value: String) {
        let key = format!("{key}:");
        self.0
            .push(format!("{key:>KEY_WIDTH$} {}", one_line(&value)));
    }

    /// A further line of the value above.
    fn more(&mut self, value: String) {
        self.0
            .push(format!("{:KEY_WIDTH$} {}", "", one_line(&value)));
    }
}

/// `text` on one line: its line breaks and other controls escaped.
fn one_line(text: &str) -> String {
    render::escape_controls(text, &[]).into_owned()
}

/// The circuit breaker, when the loop has one: its count toward
/// `pauseAfterFailures`, or that it tripped.
fn breaker(lp: &Loop) -> Option<String> {
    let limit = lp.policy.pause_after_failures?;
    let count = lp.consecutive_failures.unwrap_or(0);
    let tripped = lp.status == LoopStatus::Paused && count >= limit;
    Some(if tripped {
        format!("tripped after {count} final failures in a row; `loops resume` re-arms it")
    } else {
        format!("{count} of {limit} final failures in a row; at {limit} the loop pauses")
    })
}

/// The zone a cron schedule fires in: its own, or, with none recorded,
/// the daemon's local time.
fn zone(schedule: &Schedule) -> Option<String> {
    let Schedule::Cron { timezone, .. } = schedule else {
        return None;
    };
    Some(match timezone {
        Some(zone) => format!("{zone} (the times below are local, with its wall time)"),
        None => format!(
            "none recorded: the daemon's local time ({} here)",
            crate::zone::local_time_in_words(std::env::var("TZ").ok().as_deref())
        ),
    })
}

/// What the loop runs, briefly: never its environment nor its prompt.
fn target(lp: &Loop) -> String {
    match &lp.target {
        Target::Command(c) => {
            let mut words = vec![c.command.clone()];
            words.extend(c.args.iter().flatten().map(|a| render::shell_word(a)));
            let mut text = format!("command {}", words.join(" "));
            if let Some(cwd) = &c.cwd {
                text.push_str(&format!(" (in {cwd})"));
            }
            text
        }
        Target::Agent(a) => {
            let mut text = format!("agent {}", a.provider);
            if let Some(file) = &a.prompt_file {
                text.push_str(&format!(", prompt file {file}"));
            }
            if let Some(cwd) = &a.cwd {
                text.push_str(&format!(" (in {cwd})"));
            }
            text
        }
        Target::Workflow(w) => format!("workflow {}", w.workflow_id),
    }
}

/// The loop's retry, catch-up, overlap and lease settings and its
/// policies (issue 17), in words.
fn policies(lp: &Loop) -> Vec<String> {
    let p = &lp.policy;
    let mut items = Vec::new();
    let attempts = if lp.max_attempts == 1 {
        "no retries".to_owned()
    } else {
        let mut retry = format!(
            "{} attempts {} apart",
            lp.max_attempts,
            human::period(lp.retry_delay_ms)
        );
        if p.backoff != loops_core::Backoff::Fixed {
            retry.push_str(&format!(
                " ({} backoff up to {})",
                p.backoff,
                human::period(p.max_retry_delay())
            ));
        }
        retry
    };
    items.push(attempts);
    items.push(match lp.catch_up {
        CatchUp::All => format!("catch-up all (at most {})", lp.catch_up_limit),
        other => format!("catch-up {other}"),
    });
    items.push(format!("overlap {}", lp.overlap));
    items.push(format!("lease {}", human::period(lp.lease_ms)));
    if let Some(at) = lp.expires_at {
        items.push(format!("expires {}", human::local(at)));
    }
    if let Some(n) = p.expires_after_runs {
        let so_far = lp.consecutive_successes.unwrap_or(0);
        items.push(format!(
            "expires after {n} successes in a row ({so_far} so far)"
        ));
    }
    if let Some(n) = p.pause_after_failures {
        items.push(format!("pauses after {n} failures in a row"));
    }
    if !p.skip_exit_codes.is_empty() {
        let codes: Vec<String> = p.skip_exit_codes.iter().map(i32::to_string).collect();
        items.push(format!("exit {} = skipped", codes.join("/")));
    }
    if let Some(cap) = p.max_cost_per_day {
        items.push(format!("at most {cap} a day"));
    }
    if lp.hooks.on_failure.is_some() {
        items.push("on-failure hook".to_owned());
    }
    if lp.hooks.on_success.is_some() {
        items.push("on-success hook".to_owned());
    }
    items
}

/// `items` joined with `, `, broken into lines of at most `width` cells
/// between items (an item wider than that gets a line of its own); one
/// line without a width.
fn wrap(items: &[String], width: Option<usize>) -> Vec<String> {
    let Some(width) = width else {
        return vec![items.join(", ")];
    };
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for (i, item) in items.iter().enumerate() {
        let item = if i + 1 < items.len() {
            format!("{item},")
        } else {
            item.clone()
        };
        let cells = |s: &str| unicode_width::UnicodeWidthStr::width(s);
        if !line.is_empty() && cells(&line) + 1 + cells(&item) > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(&item);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::wrap;

    #[test]
    fn policies_wrap_between_items() {
        let items: Vec<String> = ["3 attempts 1m apart", "catch-up latest", "overlap skip"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        assert_eq!(
            wrap(&items, None),
            ["3 attempts 1m apart, catch-up latest, overlap skip"]
        );
        assert_eq!(
            wrap(&items, Some(40)),
            ["3 attempts 1m apart, catch-up latest,", "overlap skip"]
        );
        assert_eq!(wrap(&items, Some(5)).len(), 3);
    }
}
