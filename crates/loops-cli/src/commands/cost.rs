//! `loops cost [--since 30d] [--by loop|provider|day|label]` (issue 27):
//! what agent runs said they cost, and the tokens they used, totalled per
//! loop, provider, local day or label, with a grand total.
//!
//! The store hands over the runs that reported a cost or a usage since the
//! instant (`Store::for_each_run_cost_since`, over its partial indexes);
//! the grouping is done here, where the loops are read once each for their
//! provider and labels and the local day is known. Amounts add up exactly
//! (`Usd` counts billionths), and token counts saturate.
//!
//! A loop removed since keeps its runs: it shows under the name its runs
//! recorded, with the provider `unknown` and no labels.

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap};
use std::ops::ControlFlow;

use anyhow::Result;
use chrono::Local;
use loops_core::{Loop, LoopId, Target, Timestamp, Usd};
use loops_store::RunCost;
use serde::Serialize;

use super::now;
use crate::args::report::{CostArgs, GroupBy};
use crate::context::Context;
use crate::exit::Outcome;
use crate::human;
use crate::render::{Printer, Table};
use crate::request::{self, Document, Request, Warnings};
use crate::resolve;

/// The label group of a loop without labels.
const NO_LABEL: &str = "(none)";

/// The provider of a loop removed since its runs.
const UNKNOWN_PROVIDER: &str = "unknown";

// The name of `--by`'s value in the output.
impl GroupBy {
    /// The JSON key and the table header of a group's name.
    fn key(self) -> (&'static str, &'static str) {
        match self {
            GroupBy::Loop => ("loopName", "LOOP"),
            GroupBy::Provider => ("provider", "PROVIDER"),
            GroupBy::Day => ("day", "DAY"),
            GroupBy::Label => ("label", "LABEL"),
        }
    }
}

/// `cost`.
pub(crate) fn run(ctx: &Context, args: &CostArgs, out: &mut Printer) -> Result<Outcome> {
    request::serve(ctx, out, |_| {
        Ok(Cost {
            since_ms: resolve::duration(&args.since, "--since")?,
            by: GroupBy::parse(&args.by)?,
        })
    })
}

/// The typed request of `cost`: the runs of the last `since_ms`, grouped
/// `by`.
struct Cost {
    since_ms: u64,
    by: GroupBy,
}

/// What some runs cost and used.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
struct Totals {
    /// Runs that reported a cost or a usage.
    runs: u64,
    cost_usd: Usd,
    input_tokens: u64,
    output_tokens: u64,
    cache_read_tokens: u64,
    cache_write_tokens: u64,
    /// Runs that reported tokens but no cost: their cost is not in
    /// `cost_usd`.
    unpriced_runs: u64,
}

impl Totals {
    fn add(&mut self, run: &RunCost) {
        self.runs += 1;
        match run.cost_usd {
            Some(cost) => self.cost_usd = self.cost_usd.saturating_add(cost),
            None => self.unpriced_runs += 1,
        }
        let u = run.usage.unwrap_or_default();
        let plus = |total: &mut u64, n: u64| *total = total.saturating_add(n);
        plus(&mut self.input_tokens, u.input_tokens);
        plus(&mut self.output_tokens, u.output_tokens);
        plus(&mut self.cache_read_tokens, u.cache_read_tokens);
        plus(&mut self.cache_write_tokens, u.cache_write_tokens);
    }
}

/// One group of the report; `--json` prints its name under the key its
/// kind gives it ([`GroupBy::key`]), after the loop's id with `--by loop`.
#[derive(Debug)]
struct Group {
    /// The loop's id, with `--by loop`.
    loop_id: Option<LoopId>,
    /// The loop's name, the provider, the day or the label.
    name: String,
    totals: Totals,
}

/// What `cost` returns.
#[derive(Debug)]
struct Report {
    since: Timestamp,
    by: GroupBy,
    groups: Vec<Group>,
    total: Totals,
}

/// What the report needs of a loop: its provider and labels.
struct LoopInfo {
    name: String,
    provider: String,
    labels: Vec<String>,
}

impl LoopInfo {
    fn of(lp: Option<Loop>) -> Option<LoopInfo> {
        lp.map(|lp| LoopInfo {
            provider: match &lp.target {
                Target::Agent(a) => a.provider.to_string(),
                Target::Command(_) => "(command)".to_owned(),
                Target::Workflow(_) => "(workflow)".to_owned(),
            },
            labels: lp.policy.labels,
            name: lp.name,
        })
    }
}

impl Request for Cost {
    type Document = Report;

    fn run(self, ctx: &Context, _: &mut Warnings) -> Result<Report> {
        let since = now().add_ms(-i64::try_from(self.since_ms).unwrap_or(i64::MAX));
        let store = ctx.open_store()?;
        let mut runs = Vec::new();
        store.for_each_run_cost_since(since, |run| {
            runs.push(run);
            ControlFlow::Continue(())
        })?;
        // Each loop is read once, and only when the grouping needs it.
        let mut loops: HashMap<LoopId, Option<LoopInfo>> = HashMap::new();
        if self.by != GroupBy::Day {
            for run in &runs {
                if let Entry::Vacant(slot) = loops.entry(run.loop_id) {
                    slot.insert(LoopInfo::of(store.get_loop(&run.loop_id)?));
                }
            }
        }
        Ok(report(since, self.by, &runs, |id| {
            loops.get(id).and_then(Option::as_ref)
        }))
    }
}

/// Groups `runs` `by`, largest cost first (by day: oldest day first); `info`
/// gives a loop's provider and labels, `None` for a loop removed since.
fn report<'a>(
    since: Timestamp,
    by: GroupBy,
    runs: &[RunCost],
    info: impl Fn(&LoopId) -> Option<&'a LoopInfo>,
) -> Report {
    // Keyed by the group's name, or by the loop's id with --by loop (two
    // loops may share a name). The value: the name, the id, the totals and
    // the newest run's instant (which names a removed loop).
    let mut groups: BTreeMap<String, (String, Option<LoopId>, Totals, Timestamp)> = BTreeMap::new();
    let mut total = Totals::default();
    for run in runs {
        total.add(run);
        let loop_info = info(&run.loop_id);
        let keys: Vec<(String, String, Option<LoopId>)> = match by {
            GroupBy::Loop => {
                let name = loop_info.map_or(&run.loop_name, |i| &i.name);
                vec![(run.loop_id.to_string(), name.clone(), Some(run.loop_id))]
            }
            GroupBy::Provider => {
                let p = loop_info.map_or(UNKNOWN_PROVIDER, |i| i.provider.as_str());
                vec![(p.to_owned(), p.to_owned(), None)]
            }
            GroupBy::Day => {
                let day = local_day(run.finished_at);
                vec![(day.clone(), day, None)]
            }
            GroupBy::Label => match loop_info.map(|i| i.labels.as_slice()) {
                Some(labels) if !labels.is_empty() => labels
                    .iter()
                    .map(|l| (l.clone(), l.clone(), None))
                    .collect(),
                _ => vec![(NO_LABEL.to_owned(), NO_LABEL.to_owned(), None)],
            },
        };
        for (key, name, loop_id) in keys {
            let entry = groups
                .entry(key)
                .or_insert_with(|| (name.clone(), loop_id, Totals::default(), run.finished_at));
            entry.2.add(run);
            // A removed loop is named as its newest run recorded it.
            if run.finished_at > entry.3 {
                entry.0 = name;
                entry.3 = run.finished_at;
            }
        }
    }
    let mut groups: Vec<Group> = groups
        .into_values()
        .map(|(name, loop_id, totals, _)| Group {
            loop_id,
            name,
            totals,
        })
        .collect();
    if by != GroupBy::Day {
        // Stable: equal costs keep the order of their keys.
        groups.sort_by_key(|g| std::cmp::Reverse(g.totals.cost_usd));
    }
    Report {
        since,
        by,
        groups,
        total,
    }
}

/// The local calendar day of `t`: `2026-01-05`.
fn local_day(t: Timestamp) -> String {
    t.to_datetime()
        .with_timezone(&Local)
        .format("%Y-%m-%d")
        .to_string()
}

impl Document for Report {
    fn json(&self, out: &mut Printer) -> Result<()> {
        let (key, _) = self.by.key();
        let mut groups = Vec::with_capacity(self.groups.len());
        for g in &self.groups {
            // The group's name first, then its totals.
            let mut object = serde_json::Map::new();
            if let Some(id) = &g.loop_id {
                object.insert("loopId".to_owned(), id.as_str().into());
            }
            object.insert(key.to_owned(), g.name.as_str().into());
            if let serde_json::Value::Object(totals) = serde_json::to_value(g.totals)? {
                object.extend(totals);
            }
            groups.push(serde_json::Value::Object(object));
        }
        Ok(out.json(&serde_json::json!({
            "since": self.since,
            "by": self.by,
            "groups": groups,
            "total": self.total,
        }))?)
    }

    fn human(&self, ctx: &Context, out: &mut Printer) -> Result<()> {
        if self.groups.is_empty() {
            ctx.hint(&format!(
                "no run reported a cost or tokens since {}",
                human::local(self.since)
            ));
            return Ok(());
        }
        let (_, header) = self.by.key();
        let mut table = Table::with_headers(&[
            header,
            "RUNS",
            "COST",
            "INPUT",
            "OUTPUT",
            "CACHE READ",
            "CACHE WRITE",
        ]);
        let row = |name: &str, t: &Totals| {
            vec![
                name.to_owned(),
                t.runs.to_string(),
                t.cost_usd.to_string(),
                t.input_tokens.to_string(),
                t.output_tokens.to_string(),
                t.cache_read_tokens.to_string(),
                t.cache_write_tokens.to_string(),
            ]
        };
        for g in &self.groups {
            table.row(row(&g.name, &g.totals));
        }
        table.row(row("TOTAL", &self.total));
        out.table(&table, |_| Vec::new())?;
        if self.by == GroupBy::Label && self.groups.len() > 1 {
            ctx.hint(
                "a loop with several labels counts under each; the total counts each run once",
            );
        }
        if self.total.unpriced_runs > 0 {
            let n = self.total.unpriced_runs;
            let noun = if n == 1 { "run" } else { "runs" };
            ctx.hint(&format!(
                "{n} {noun} reported tokens but no cost (codex and codewith do not say); \
                 the cost shown leaves them out"
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use loops_core::TokenUsage;

    use super::*;

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn run(id: u8, name: &str, finished: &str, cost: Option<f64>, tokens: u64) -> RunCost {
        RunCost {
            loop_id: LoopId::from_bytes([id; 6]),
            loop_name: name.to_owned(),
            finished_at: at(finished),
            cost_usd: cost.and_then(Usd::from_dollars),
            usage: (tokens > 0).then_some(TokenUsage {
                input_tokens: tokens,
                output_tokens: 1,
                cache_read_tokens: 2,
                cache_write_tokens: 3,
            }),
        }
    }

    fn info(provider: &str, labels: &[&str]) -> LoopInfo {
        LoopInfo {
            name: "current".to_owned(),
            provider: provider.to_owned(),
            labels: labels.iter().map(|l| (*l).to_owned()).collect(),
        }
    }

    fn names(report: &Report) -> Vec<(&str, u64, f64)> {
        report
            .groups
            .iter()
            .map(|g| (g.name.as_str(), g.totals.runs, g.totals.cost_usd.dollars()))
            .collect()
    }

    #[test]
    fn runs_are_totalled_per_group_and_once_in_the_total() {
        let runs = [
            run(1, "a", "2026-01-05T10:00:00Z", Some(0.25), 10),
            run(1, "a", "2026-01-06T10:00:00Z", Some(0.5), 0),
            run(2, "b", "2026-01-06T11:00:00Z", None, 7),
            run(3, "gone", "2026-01-04T11:00:00Z", Some(2.0), 0),
            run(3, "gone-renamed", "2026-01-04T12:00:00Z", Some(1.0), 0),
        ];
        let a = info("claude", &["team", "nightly"]);
        let b = info("codex", &[]);
        let lookup = |id: &LoopId| match id.as_str() {
            "010101010101" => Some(&a),
            "020202020202" => Some(&b),
            _ => None,
        };
        let since = at("2026-01-01T00:00:00Z");
        let by_loop = report(since, GroupBy::Loop, &runs, lookup);
        assert_eq!(
            names(&by_loop),
            [
                ("gone-renamed", 2, 3.0),
                ("current", 2, 0.75),
                ("current", 1, 0.0)
            ]
        );
        assert_eq!(by_loop.total.runs, 5);
        assert_eq!(by_loop.total.cost_usd, Usd::from_dollars(3.75).unwrap());
        assert_eq!(by_loop.total.unpriced_runs, 1);
        assert_eq!(by_loop.total.input_tokens, 17);
        assert_eq!(by_loop.total.cache_write_tokens, 6);
        let by_provider = report(since, GroupBy::Provider, &runs, lookup);
        assert_eq!(
            names(&by_provider),
            [("unknown", 2, 3.0), ("claude", 2, 0.75), ("codex", 1, 0.0)]
        );
        let by_label = report(since, GroupBy::Label, &runs, lookup);
        assert_eq!(
            names(&by_label),
            [("(none)", 3, 3.0), ("nightly", 2, 0.75), ("team", 2, 0.75)]
        );
        // Each run once in the total, whatever its labels.
        assert_eq!(by_label.total, by_loop.total);
    }

    #[test]
    fn days_are_local_calendar_days_oldest_first() {
        // The host's zone decides; whatever it is, the runs of one
        // instant share a day and the days come in order.
        let runs = [
            run(1, "a", "2026-01-06T10:00:00Z", Some(0.5), 0),
            run(1, "a", "2026-01-04T10:00:00Z", Some(0.25), 0),
            run(1, "a", "2026-01-06T10:00:00Z", Some(0.5), 0),
        ];
        let by_day = report(at("2026-01-01T00:00:00Z"), GroupBy::Day, &runs, |_| None);
        let days: Vec<&str> = by_day.groups.iter().map(|g| g.name.as_str()).collect();
        assert_eq!(
            days,
            [
                local_day(at("2026-01-04T10:00:00Z")).as_str(),
                local_day(at("2026-01-06T10:00:00Z")).as_str()
            ]
        );
        assert_eq!(by_day.groups[1].totals.runs, 2);
    }

    #[test]
    fn by_takes_four_groups() {
        assert_eq!(GroupBy::parse(" day ").unwrap(), GroupBy::Day);
        let err = GroupBy::parse("week").unwrap_err().to_string();
        assert_eq!(
            err,
            "invalid --by \"week\": use loop, provider, day or label"
        );
    }
}
