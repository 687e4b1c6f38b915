//! The command lines of the reports over recorded runs (issue 27):
//! `health`, the failing loops by failure class and fingerprint, and
//! `cost`, what agent runs cost and used. As in the parent module, values
//! stay strings until `resolve` checks them.

use anyhow::{Result, bail};
use clap::Args;
use serde::Serialize;

// The defaults of `--since`, for `loops mcp` too.
pub(crate) const DEFAULT_HEALTH_SINCE: &str = "7d";
pub(crate) const DEFAULT_COST_SINCE: &str = "30d";
// `loops cost --by`'s default.
pub(crate) const DEFAULT_COST_BY: &str = "loop";

/// `loops health --help`, after the flags.
pub(super) const HEALTH_AFTER_HELP: &str = "\
Each row is one failure of one loop: its runs that failed, timed out or were abandoned with the same
class (rate_limit, auth, timeout, ...; see the README) and fingerprint, which is the same for the
same loop, class, status, exit code and error. Skipped runs are not failures. The sample is the
newest run's error: its first line, at most 200 characters, with tokens masked. --json prints
[{loopId, loopName, failureClass, failureFingerprint, count, firstSeen, lastSeen, sample}].

Examples:
  loops health                  # the last 7 days
  loops health --since 1d
  loops --json health | jq -r '.[] | select(.failureClass == \"auth\") | .loopName'";

/// `loops cost --help`, after the flags.
pub(super) const COST_AFTER_HELP: &str = "\
Totals of what agents said their runs cost and the tokens they used (claude and opencode state
a cost, codex and codewith only tokens), over the runs that finished since --since; a run whose
agent said neither does not count. --by label counts a loop with two labels under both, and a
loop without labels under (none); the total counts each run once. --by provider names a removed
loop's provider unknown. --json prints {since, by, groups: [{<key>, runs, costUsd, inputTokens,
outputTokens, cacheReadTokens, cacheWriteTokens, unpricedRuns}], total: {...}}.

Examples:
  loops cost                    # per loop, the last 30 days
  loops cost --by day --since 7d
  loops cost --by provider
  loops --json cost --by label | jq '.total.costUsd'";

#[derive(Debug, Args)]
pub(crate) struct HealthArgs {
    /// Count the runs that finished within this DURATION (30m, 12h, 7d).
    #[arg(long, value_name = "DURATION", default_value = DEFAULT_HEALTH_SINCE)]
    pub(crate) since: String,
}

#[derive(Debug, Args)]
pub(crate) struct CostArgs {
    /// Count the runs that finished within this DURATION (12h, 7d, 30d).
    #[arg(long, value_name = "DURATION", default_value = DEFAULT_COST_SINCE)]
    pub(crate) since: String,

    /// Total per loop, provider (the loop's agent), day (local calendar
    /// day the run finished) or label.
    #[arg(
        long,
        value_name = "GROUP",
        default_value = DEFAULT_COST_BY,
        add = crate::complete::one_of(GroupBy::ALL)
    )]
    pub(crate) by: String,
}

/// What `cost --by` groups the runs by (`commands::cost` names it in the
/// output).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum GroupBy {
    Loop,
    Provider,
    Day,
    Label,
}

impl GroupBy {
    /// Every group, as `--by` lists them (shell completion offers them).
    pub(crate) const ALL: &'static [GroupBy] = &[
        GroupBy::Loop,
        GroupBy::Provider,
        GroupBy::Day,
        GroupBy::Label,
    ];

    /// The group `--by` names.
    pub(crate) fn parse(value: &str) -> Result<GroupBy> {
        match GroupBy::ALL.iter().find(|by| by.name() == value.trim()) {
            Some(by) => Ok(*by),
            None => bail!("invalid --by {value:?}: use loop, provider, day or label"),
        }
    }

    /// The `--by` spelling.
    pub(crate) fn name(self) -> &'static str {
        match self {
            GroupBy::Loop => "loop",
            GroupBy::Provider => "provider",
            GroupBy::Day => "day",
            GroupBy::Label => "label",
        }
    }
}

impl std::fmt::Display for GroupBy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
