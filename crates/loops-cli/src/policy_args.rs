//! The operating-policy flags of `create` and `edit` (issue 17): labels,
//! expiry after runs, the circuit breaker, the retry backoff and skip exit
//! codes, and their resolution into a [`LoopPolicy`]. Values stay strings
//! for clap and are checked here, so a bad one exits 1 with a message
//! naming the flag.

use std::str::FromStr;

use anyhow::{Result, anyhow};
use clap::Args;
use loops_core::{Backoff, LoopPolicy, validate_label};

use crate::resolve;

// The policy flags of `create` and `edit`: every one off by default, as in
// 0.3.1. (A plain comment: a doc comment would become the help's summary
// of every command that flattens the struct.)
#[derive(Debug, Default, Args)]
pub(crate) struct PolicyOptions {
    /// A label for `list --label` and `runs --label` (repeatable, or
    /// comma-separated): up to 64 characters of A-Z a-z 0-9 . _ : = / -
    /// [default: none].
    #[arg(long = "label", value_name = "LABEL", help_heading = "Labels")]
    pub(crate) labels: Vec<String>,

    /// Expire the loop after N successful runs in a row; a final failure
    /// starts the count again, skipped runs do not count [default: never].
    #[arg(long, value_name = "N", help_heading = "Policy")]
    pub(crate) expires_after_runs: Option<String>,

    /// Pause the loop after N final failures in a row (after retries);
    /// `loops resume` re-arms it [default: never].
    #[arg(long, value_name = "N", help_heading = "Policy")]
    pub(crate) pause_after_failures: Option<String>,

    /// How retries wait: fixed (--retry-delay each time) or exponential
    /// (--retry-delay × 2^(attempt−1) × a random 0.5–1.5) [default: fixed].
    #[arg(long, value_name = "POLICY", help_heading = "Policy")]
    pub(crate) backoff: Option<String>,

    /// The longest an exponential retry waits [default: 6h].
    #[arg(long, value_name = "DURATION", help_heading = "Policy")]
    pub(crate) max_retry_delay: Option<String>,

    /// Record a run that exits with CODE as skipped: no failure, no retry,
    /// not counted (repeatable) [default: none].
    #[arg(long = "skip-exit-code", value_name = "CODE", help_heading = "Policy")]
    pub(crate) skip_exit_codes: Vec<String>,
}

impl PolicyOptions {
    /// Whether any policy flag was given.
    pub(crate) fn given(&self) -> bool {
        !self.labels.is_empty()
            || !self.skip_exit_codes.is_empty()
            || [
                &self.expires_after_runs,
                &self.pause_after_failures,
                &self.backoff,
                &self.max_retry_delay,
            ]
            .iter()
            .any(|o| o.is_some())
    }
}

/// The policy of a new loop from `create`'s flags.
pub(crate) fn policy(opts: &PolicyOptions) -> Result<LoopPolicy> {
    let mut policy = LoopPolicy::default();
    apply(opts, &mut policy, false)?;
    Ok(policy)
}

/// Applies the flags given to `policy`. With `edit`, `off` removes a count
/// (`--expires-after-runs off`), `--label ''` and `--skip-exit-code ''`
/// clear their lists, and a given list replaces the stored one.
pub(crate) fn apply(opts: &PolicyOptions, policy: &mut LoopPolicy, edit: bool) -> Result<()> {
    if !opts.labels.is_empty() {
        policy.labels = labels(&opts.labels)?;
    }
    let count = |v: &str, flag: &str| -> Result<Option<u32>> {
        if edit && v.trim() == "off" {
            return Ok(None);
        }
        resolve::positive_int(v, flag).map(Some)
    };
    if let Some(v) = &opts.expires_after_runs {
        policy.expires_after_runs = count(v, "--expires-after-runs")?;
    }
    if let Some(v) = &opts.pause_after_failures {
        policy.pause_after_failures = count(v, "--pause-after-failures")?;
    }
    if let Some(v) = &opts.backoff {
        policy.backoff = Backoff::from_str(v.trim())
            .map_err(|_| anyhow!("--backoff must be fixed or exponential"))?;
    }
    if let Some(v) = &opts.max_retry_delay {
        policy.max_retry_delay_ms = Some(resolve::positive_duration(v, "--max-retry-delay")?);
    }
    if !opts.skip_exit_codes.is_empty() {
        policy.skip_exit_codes = skip_exit_codes(&opts.skip_exit_codes)?;
    }
    Ok(())
}

/// Labels from repeated and comma-separated values, checked, in order,
/// without duplicates; empty values are dropped (so `--label ''` clears).
pub(crate) fn labels(values: &[String]) -> Result<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    for label in values.iter().flat_map(|v| v.split(',')).map(str::trim) {
        if label.is_empty() {
            continue;
        }
        validate_label(label)?;
        if !out.iter().any(|l| l == label) {
            out.push(label.to_owned());
        }
    }
    Ok(out)
}

/// `--skip-exit-code` values: 1 to 255 each, comma-separated allowed.
fn skip_exit_codes(values: &[String]) -> Result<Vec<i32>> {
    let mut out = Vec::new();
    for v in values.iter().flat_map(|v| v.split(',')).map(str::trim) {
        if v.is_empty() {
            continue;
        }
        let code = v
            .parse::<i32>()
            .ok()
            .filter(|c| (1..=255).contains(c))
            .ok_or_else(|| {
                anyhow!("--skip-exit-code must be an exit code from 1 to 255, not {v:?}")
            })?;
        if !out.contains(&code) {
            out.push(code);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_split_dedupe_and_check() {
        let got = labels(&["a,b".into(), "b".into(), "team=x/y".into()]).unwrap();
        assert_eq!(got, ["a", "b", "team=x/y"]);
        let err = labels(&["bad label".into()]).unwrap_err().to_string();
        assert!(err.contains("invalid label \"bad label\""), "{err}");
        assert!(labels(&["x".repeat(65)]).is_err());
        assert!(labels(&[String::new()]).unwrap().is_empty());
    }

    #[test]
    fn skip_codes_are_exit_codes() {
        assert_eq!(skip_exit_codes(&["75,3".into()]).unwrap(), [75, 3]);
        for bad in ["0", "256", "x", "-1"] {
            assert!(skip_exit_codes(&[bad.into()]).is_err(), "{bad}");
        }
    }
}

/// `loops labels set|add|remove|clear`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum LabelsCommand {
    /// Replace a loop's labels with the ones given.
    #[command(after_help = crate::help::LABELS)]
    Set(LabelsArgs),
    /// Add labels to a loop, keeping the ones it has.
    #[command(after_help = crate::help::LABELS)]
    Add(LabelsArgs),
    /// Remove labels from a loop; labels it does not have are ignored.
    #[command(after_help = crate::help::LABELS)]
    Remove(LabelsArgs),
    /// Remove every label of a loop.
    #[command(after_help = crate::help::LABELS)]
    Clear(crate::args::LoopRef),
}

// A loop and labels (a plain comment, as above).
#[derive(Debug, Args)]
pub(crate) struct LabelsArgs {
    /// Loop id, or name (refused when several loops have it).
    #[arg(value_name = "LOOP")]
    pub(crate) target: String,

    /// Labels (repeatable, or comma-separated): up to 64 characters of
    /// A-Z a-z 0-9 . _ : = / -.
    #[arg(value_name = "LABEL", required = true)]
    pub(crate) labels: Vec<String>,
}
